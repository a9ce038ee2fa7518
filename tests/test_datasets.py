"""henn.datasets on the real shared data, plus error handling on broken copies."""

from __future__ import annotations

import gzip
import shutil

import numpy as np
import pytest

from henn import datasets
from henn.errors import InputError

DATA = datasets.default_data_dir()
needs_data = pytest.mark.skipif(DATA is None, reason="no dataset folder (set HENN_DATA_DIR)")


@pytest.fixture(scope="module")
def mnist_train():
    return datasets.load_mnist(DATA, "train")


@needs_data
def test_mnist_train(mnist_train):
    x, y = mnist_train
    assert x.shape == (60000, 1, 28, 28) and x.dtype == np.float32
    assert y.dtype == np.int64 and y[:5].tolist() == [5, 0, 4, 1, 9]
    assert x.min() == 0.0 and x.max() == 1.0


@needs_data
def test_mnist_test():
    x, y = datasets.load_mnist(DATA, "test")
    assert x.shape == (10000, 1, 28, 28) and y[:5].tolist() == [7, 2, 1, 0, 4]


@needs_data
def test_cifar10_test():
    x, y = datasets.load_cifar10(DATA, "test")
    assert x.shape == (1000, 3, 32, 32) and x.dtype == np.float32
    assert 0.0 <= x.min() and x.max() <= 1.0
    assert np.bincount(y).tolist() == [103, 89, 100, 103, 90, 86, 112, 102, 106, 109]


@needs_data
def test_cifar10_train():
    x, y = datasets.load_cifar10(DATA, "train")
    assert x.shape == (50000, 3, 32, 32)
    assert np.bincount(y).tolist() == [5000] * 10
    assert np.bincount(y[:10000]).tolist() == [1005, 974, 1032, 1016, 999, 937, 1030, 1001, 1025, 981]


def test_embedded_mnist():
    x, y = datasets.load_embedded_mnist()
    assert x.shape == (5000, 1, 28, 28) and x.dtype == np.float32
    assert 0.0 <= x.min() and x.max() <= 1.0
    assert np.bincount(y).tolist() == [500] * 10


@needs_data
def test_holdout_mask_finds_all_5000(mnist_train):
    x, y = mnist_train
    mask = datasets.embedded_holdout_mask(x)
    assert mask.dtype == bool and mask.shape == (60000,) and mask.sum() == 5000
    # The matched training labels agree with the embedded labels (as multisets per image).
    ex, ey = datasets.load_embedded_mnist()
    by_pixels = {img.tobytes(): lbl for img, lbl in zip((ex * 255).round().astype(np.uint8), ey)}
    matched = (x[mask] * 255).round().astype(np.uint8)
    assert all(by_pixels[img.tobytes()] == lbl for img, lbl in zip(matched, y[mask]))


def test_default_data_dir_env(monkeypatch, tmp_path):
    monkeypatch.setenv("HENN_DATA_DIR", str(tmp_path))
    assert datasets.default_data_dir() == tmp_path


def test_missing_file_names_it(tmp_path):
    with pytest.raises(InputError, match=r"train-images-idx3-ubyte\.gz.*missing.*HENN_DATA_DIR"):
        datasets.load_mnist(tmp_path, "train")
    with pytest.raises(InputError, match=r"data_batch_1\.bin.*missing.*--data-dir"):
        datasets.load_cifar10(tmp_path, "train")


def test_unknown_split(tmp_path):
    with pytest.raises(InputError, match="unknown split"):
        datasets.load_mnist(tmp_path, "validation")


@needs_data
def test_truncated_gzip(tmp_path):
    assert DATA is not None
    (tmp_path / "mnist").mkdir()
    src = DATA / "mnist" / "t10k-images-idx3-ubyte.gz"
    (tmp_path / "mnist" / src.name).write_bytes(src.read_bytes()[:50000])
    shutil.copy(DATA / "mnist" / "t10k-labels-idx1-ubyte.gz", tmp_path / "mnist")
    with pytest.raises(InputError, match=r"t10k-images-idx3-ubyte\.gz.*truncated"):
        datasets.load_mnist(tmp_path, "test")


def _write_idx(path, magic, dims, payload):
    header = magic.to_bytes(4, "big") + b"".join(d.to_bytes(4, "big") for d in dims)
    with gzip.open(path, "wb") as f:
        f.write(header + payload)


def test_short_idx_payload_and_bad_magic(tmp_path):
    (tmp_path / "mnist").mkdir()
    images = tmp_path / "mnist" / "t10k-images-idx3-ubyte.gz"
    labels = tmp_path / "mnist" / "t10k-labels-idx1-ubyte.gz"
    _write_idx(images, 0x803, (2, 28, 28), bytes(28 * 28))  # header says 2, holds 1
    _write_idx(labels, 0x801, (2,), bytes(2))
    with pytest.raises(InputError, match="header says 1568"):
        datasets.load_mnist(tmp_path, "test")
    _write_idx(images, 0x801, (2, 28, 28), bytes(2 * 28 * 28))  # labels magic on images
    with pytest.raises(InputError, match="magic number"):
        datasets.load_mnist(tmp_path, "test")
    _write_idx(images, 0x803, (2, 28, 28), bytes(2 * 28 * 28))
    x, y = datasets.load_mnist(tmp_path, "test")
    assert x.shape == (2, 1, 28, 28) and y.tolist() == [0, 0]


def test_truncated_cifar(tmp_path):
    (tmp_path / "cifar10").mkdir()
    (tmp_path / "cifar10" / "test_batch_first1000.bin").write_bytes(bytes(3073 * 2 + 100))
    with pytest.raises(InputError, match=r"test_batch_first1000\.bin.*not a multiple"):
        datasets.load_cifar10(tmp_path, "test")


def test_holdout_mask_rejects_wrong_shape():
    with pytest.raises(InputError, match="784"):
        datasets.embedded_holdout_mask(np.zeros((3, 1, 32, 32), np.float32))
