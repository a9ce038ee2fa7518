"""`henn data fetch` against a local HTTP server on 127.0.0.1 serving copies of the shared dataset
files (no test reaches the internet): checked files land where henn.datasets reads them, damaged or
foreign ones are refused and nothing of them is kept."""

from __future__ import annotations

import functools
import gzip
import io
import shutil
import tarfile
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest

from henn import cli, datasets
from henn.data_fetch import DATASETS, fetch
from henn.errors import InputError

SHARED = datasets.default_data_dir()


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture
def mirror(tmp_path):
    """(folder served, base URL) of an HTTP server on 127.0.0.1."""
    root = tmp_path / "mirror"
    root.mkdir()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(root)))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield root, f"http://127.0.0.1:{httpd.server_address[1]}/"
    httpd.shutdown()
    httpd.server_close()


def _mnist_copies(root):
    assert SHARED is not None
    for item in DATASETS["mnist"].downloads:
        shutil.copyfile(SHARED / "mnist" / item.name, root / item.name)


def test_mnist_is_fetched_checked_and_readable(mirror, tmp_path, capsys):
    root, url = mirror
    _mnist_copies(root)
    out = tmp_path / "data"
    assert cli.main(["data", "fetch", "mnist", "--dir", str(out), "--mirror", url]) == 0
    assert "4 files checked" in capsys.readouterr().out
    images, labels = datasets.load_mnist(out, "test")
    want, _ = datasets.load_mnist(SHARED, "test")
    assert images.shape == (10000, 1, 28, 28) and np.array_equal(images, want)
    (root / "t10k-labels-idx1-ubyte.gz").unlink()  # present and checked: not downloaded again
    fetch("mnist", out, mirror=url, progress=False)


@pytest.mark.parametrize("damage", ["one byte", "truncated", "longer", "missing"])
def test_damaged_mnist_files_are_refused_and_not_kept(mirror, tmp_path, damage):
    root, url = mirror
    _mnist_copies(root)
    victim = root / "t10k-labels-idx1-ubyte.gz"
    data = bytearray(victim.read_bytes())
    if damage == "one byte":
        data[100] ^= 1
    elif damage == "truncated":
        data = data[:-10]
    elif damage == "longer":
        data += b"\0"
    victim.write_bytes(bytes(data))
    if damage == "missing":
        victim.unlink()
    out = tmp_path / "data"
    with pytest.raises(InputError, match="t10k-labels|cannot download"):
        fetch("mnist", out, mirror=url, progress=False)
    assert not (out / "mnist" / victim.name).exists() and not list((out / "mnist").glob("*.part"))


def _cifar_archive(root, members: dict[str, bytes | None]):
    """cifar-10-binary.tar.gz in the mirror with these members (None: a symlink)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", compresslevel=1) as tar:
        for name, data in members.items():
            info = tarfile.TarInfo("cifar-10-batches-bin/" + name)
            if data is None:
                info.type, info.linkname = tarfile.SYMTYPE, "/etc/passwd"
                tar.addfile(info)
            else:
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    (root / "cifar-10-binary.tar.gz").write_bytes(buf.getvalue())


def _cifar_members(batches=range(1, 6)):
    assert SHARED is not None
    names = [f"data_batch_{i}.bin" for i in batches] + ["batches.meta.txt"]
    return {n: (SHARED / "cifar10" / n).read_bytes() for n in names}


def test_cifar_members_are_checked_one_by_one(mirror, tmp_path):
    """The shared copies lack the official test_batch.bin (only its first 1000 images exist): an
    archive with a stand-in is refused on exactly that member, after the genuine ones passed."""
    root, url = mirror
    members = _cifar_members()
    assert SHARED is not None
    members["test_batch.bin"] = (SHARED / "cifar10" / "test_batch_first1000.bin").read_bytes() * 10
    _cifar_archive(root, members)
    out = tmp_path / "data"
    with pytest.raises(InputError, match="test_batch.bin: .* expected 30730000 bytes with 803d5f7f"):
        fetch("cifar10", out, mirror=url, progress=False)
    assert (out / "cifar10" / "data_batch_3.bin").read_bytes() == members["data_batch_3.bin"]
    assert not (out / "cifar10" / "test_batch.bin").exists()


@pytest.mark.parametrize("damage", ["tampered batch", "symlink", "missing member", "not an archive"])
def test_hostile_cifar_archives_are_refused(mirror, tmp_path, damage):
    root, url = mirror
    members = _cifar_members(batches=(1, 2))  # refused at batch 2: the rest would not be read
    if damage == "tampered batch":
        data = bytearray(members["data_batch_2.bin"])
        data[5000] ^= 0xFF
        members["data_batch_2.bin"] = bytes(data)
    elif damage == "symlink":
        members["data_batch_2.bin"] = None
    elif damage == "missing member":
        del members["data_batch_2.bin"]
    _cifar_archive(root, members)
    if damage == "not an archive":
        (root / "cifar-10-binary.tar.gz").write_bytes(gzip.compress(b"hello" * 1000))
    with pytest.raises(InputError, match="data_batch_2|not a readable|test_batch"):
        fetch("cifar10", tmp_path / "data", mirror=url, progress=False)
    assert not (tmp_path / "data" / "cifar10" / "data_batch_2.bin").exists()


def test_a_bad_mirror_or_dataset_is_refused(tmp_path):
    with pytest.raises(InputError, match="unknown dataset"):
        fetch("imagenet", tmp_path)
    with pytest.raises(InputError, match="http"):
        fetch("mnist", tmp_path, mirror="ftp://example.org/")
    with pytest.raises(InputError, match="cannot download"):
        fetch("mnist", tmp_path, mirror="http://127.0.0.1:9/", progress=False, timeout=2)
