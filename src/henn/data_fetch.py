"""`henn data fetch`: the official MNIST and CIFAR-10 files, checked against known checksums, into
the layout henn.datasets reads (<dir>/mnist/*.gz, <dir>/cifar10/*.bin).

MNIST: the four official IDX .gz files, each checked by SHA-256 (and size) as it streams in.
CIFAR-10: the official binary archive (cifar-10-binary.tar.gz, at most 200 MiB); its members are
checked one by one as they are extracted: the five training batches and batches.meta.txt by SHA-256, test_batch.bin
by the official MD5 (the only published digest of it; see ../shared/datasets/README.md). Then
test_batch_first1000.bin (its first 1000 records, what henn.datasets reads) is written beside it.

Nothing is kept that failed its check, a file that passes is moved into place atomically, and a file
already present with the right digest is not downloaded again. `mirror` replaces the base URL (a
local copy, a closer mirror; the tests serve copies on 127.0.0.1)."""

from __future__ import annotations

import hashlib
import logging
import tarfile
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tqdm import tqdm

from henn.errors import InputError

log = logging.getLogger(__name__)
CHUNK = 1 << 20


@dataclass(frozen=True)
class Expected:
    name: str
    size: int  # exact, or the most accepted when digest is None
    digest: str | None  # hex; None: an archive whose members are each checked
    algorithm: str = "sha256"


@dataclass(frozen=True)
class Dataset:
    folder: str  # under the data folder
    base_url: str
    downloads: tuple[Expected, ...]
    members: tuple[Expected, ...] = ()  # of a tar.gz download, checked as extracted
    member_prefix: str = ""


DATASETS = {
    "mnist": Dataset(
        "mnist",
        "https://ossci-datasets.s3.amazonaws.com/mnist/",  # the PyTorch mirror of yann.lecun.com/exdb/mnist
        (
            Expected(
                "train-images-idx3-ubyte.gz",
                9912422,
                "440fcabf73cc546fa21475e81ea370265605f56be210a4024d2ca8f203523609",
            ),
            Expected(
                "train-labels-idx1-ubyte.gz", 28881, "3552534a0a558bbed6aed32b30c495cca23d567ec52cac8be1a0730e8010255c"
            ),
            Expected(
                "t10k-images-idx3-ubyte.gz", 1648877, "8d422c7b0a1c1c79245a5bcf07fe86e33eeafee792b84584aec276f5a2dbc4e6"
            ),
            Expected(
                "t10k-labels-idx1-ubyte.gz", 4542, "f7ae60f92e00ec6debd23a6088c31dbd2371eca3ffa0defaefb259924204aec6"
            ),
        ),
    ),
    "cifar10": Dataset(
        "cifar10",
        "https://www.cs.toronto.edu/~kriz/",
        (Expected("cifar-10-binary.tar.gz", 200 << 20, None),),  # ~162 MiB
        (
            Expected("data_batch_1.bin", 30730000, "cee916563c9f80d84e3cc88e17fdc0941787f1244f00a67874d45b261883ada5"),
            Expected("data_batch_2.bin", 30730000, "a591ca11fa1708a91ee40f54b3da4784ccd871ecf2137de63f51ada8b3fa57ed"),
            Expected("data_batch_3.bin", 30730000, "bbe8596564c0f86427f876058170b84dac6670ddf06d79402899d93ceea26f67"),
            Expected("data_batch_4.bin", 30730000, "014e562d6e23c72197cc727519169a60359f5eccd8945ad5a09d710285ff4e48"),
            Expected("data_batch_5.bin", 30730000, "755304fc0b379caeae8c14f0dac912fbc7d6cd469eb67a1029a08a39453a9add"),
            Expected("batches.meta.txt", 61, "558e74b5e208382e186da55784b4bac2cd52e558448e1b5800990fdb28ed8033"),
            Expected("test_batch.bin", 30730000, "803d5f7f4d78ea53de84dbe85f74fb6d", "md5"),
        ),
        "cifar-10-batches-bin/",
    ),
}
CIFAR_RECORD, CIFAR_FIRST = 3073, 1000


def fetch(
    name: str, folder: str | Path, *, mirror: str | None = None, progress: bool = True, timeout: float = 60.0
) -> list[Path]:
    """Download and check dataset `name` into folder/<its folder>; the files in place."""
    if name not in DATASETS:
        raise InputError(f"unknown dataset {name!r}: choose one of {', '.join(DATASETS)}")
    ds = DATASETS[name]
    base = (mirror or ds.base_url).rstrip("/") + "/"
    if not base.startswith(("http://", "https://", "file:")):
        raise InputError(f"--mirror {mirror!r}: give an http(s):// or file: URL")
    out = Path(folder) / ds.folder
    out.mkdir(parents=True, exist_ok=True)
    if ds.members and all(_matches(out / m.name, m) for m in ds.members):
        log.info("%s: every file present and checked", name)
        return _finish(ds, out)
    placed = []
    for item in ds.downloads:
        target = out / item.name if not ds.members else out / ".download" / item.name
        if not _matches(target, item):
            target.parent.mkdir(parents=True, exist_ok=True)
            _download(base + item.name, target, item, progress, timeout)
        placed.append(target)
    if ds.members:
        _extract(placed[0], out, ds)
        placed[0].unlink()
        placed[0].parent.rmdir()
    return _finish(ds, out)


def _finish(ds: Dataset, out: Path) -> list[Path]:
    if not ds.members:
        return [out / d.name for d in ds.downloads]
    first = out / "test_batch_first1000.bin"
    with open(out / "test_batch.bin", "rb") as f:
        _atomic(first, lambda w: w.write(f.read(CIFAR_RECORD * CIFAR_FIRST)))
    return [out / m.name for m in ds.members] + [first]


def _matches(path: Path, want: Expected) -> bool:
    if want.digest is None or not path.is_file() or path.stat().st_size != want.size:
        return False
    h = hashlib.new(want.algorithm)
    with open(path, "rb") as f:
        while block := f.read(CHUNK):
            h.update(block)
    return h.hexdigest() == want.digest


def _download(url: str, target: Path, want: Expected, progress: bool, timeout: float) -> None:
    log.info("downloading %s", url)
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            _atomic(target, lambda w: _copy_checked(r, w, want, progress))
    except urllib.error.URLError as exc:
        raise InputError(f"cannot download {url}: {exc.reason}; check the network or give --mirror URL") from None


def _copy_checked(src, dst, want: Expected, progress: bool) -> None:
    """Copy src to dst, refusing more bytes than expected, then a digest or size that differs."""
    h, seen = hashlib.new(want.algorithm), 0
    with tqdm(total=want.size, unit="B", unit_scale=True, desc=want.name, disable=not progress) as bar:
        while block := src.read(CHUNK):
            seen += len(block)
            if seen > want.size:
                raise InputError(f"{want.name}: more than the expected {want.size} bytes: not the official file")
            h.update(block)
            dst.write(block)
            bar.update(len(block))
    if want.digest is not None and (seen != want.size or h.hexdigest() != want.digest):
        raise InputError(
            f"{want.name}: {seen} bytes with {want.algorithm} {h.hexdigest()[:16]}..., expected "
            f"{want.size} bytes with {want.digest[:16]}...: the download is damaged or not the official "
            "file; nothing was kept"
        )


def _extract(archive: Path, out: Path, ds: Dataset) -> None:
    wanted = {ds.member_prefix + m.name: m for m in ds.members}
    found = set()
    try:
        with tarfile.open(archive, "r:gz") as tar:
            for info in tar:
                member = wanted.get(info.name)
                if member is None:
                    continue  # readme.html, ...: never extracted, so no path in the archive reaches the disk
                if not info.isfile():
                    raise InputError(f"{archive.name}: {info.name} is not a regular file")
                src = tar.extractfile(info)
                assert src is not None  # a regular file
                _atomic(out / member.name, lambda w, s=src, m=member: _copy_checked(s, w, m, False))
                found.add(info.name)
    except (tarfile.TarError, EOFError, OSError) as exc:
        raise InputError(f"{archive.name} is not a readable tar.gz archive ({exc}): the download is damaged") from None
    missing = sorted(set(wanted) - found)
    if missing:
        raise InputError(f"{archive.name} lacks {', '.join(missing)}: not the official archive")


def _atomic(target: Path, write: Callable) -> None:
    tmp = target.with_name(target.name + ".part")
    try:
        with open(tmp, "wb") as w:
            write(w)
        tmp.replace(target)
    finally:
        tmp.unlink(missing_ok=True)
