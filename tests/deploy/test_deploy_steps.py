"""Key generation, encryption, the server's evaluation and decryption as separate processes over files
(`henn keygen`, `henn encrypt`, `henn evaluate`, `henn decrypt`), and a saved client reused against a
real `henn serve`."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
from deploy_support import REPO, SQUARE_ZOO, ServerProcess, compile_file, digits

import henn
from henn.deploy import Artefact, Client
from henn.errors import InputError

PASS = "correct horse battery staple"


def henn_cli(*args: str, passphrase: str | None = PASS) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"))
    env.pop("HENN_PASSPHRASE", None)
    if passphrase is not None:
        env["HENN_PASSPHRASE"] = passphrase
    cmd = [sys.executable, "-m", "henn.cli", *args]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    cm, path = compile_file(tmp_path_factory.mktemp("model") / "m.henn")
    part = path.with_name("m.client.henn")
    Artefact.load(path).client_part().save(part)
    return cm, path, part


def test_keygen_encrypt_evaluate_decrypt_as_separate_processes(model, tmp_path):
    cm, path, part = model
    x, labels = digits(3)
    np.save(tmp_path / "x.npy", x)
    key, evk = tmp_path / "c.key", tmp_path / "c.key.evk"
    (tmp_path / "pw").write_text(PASS + "\n")
    steps = [
        ("keygen", "--model", str(part), "--out", str(key), "--passphrase-file", str(tmp_path / "pw")),
        ("encrypt", "--client", str(key), "--images", str(tmp_path / "x.npy"), "--out", str(tmp_path / "req.bin")),
        ("evaluate", str(path), str(tmp_path / "req.bin"), "--keys", str(evk), "--out", str(tmp_path / "resp.bin")),
        ("decrypt", str(tmp_path / "resp.bin"), "--client", str(key), "--out", str(tmp_path / "logits.npy")),
    ]
    for step in steps:
        r = henn_cli(*step, passphrase=None if step[0] in ("keygen", "evaluate") else PASS)
        assert r.returncode == 0, r.stderr
    assert oct(key.stat().st_mode & 0o777) == "0o600"
    got = np.load(tmp_path / "logits.npy")
    np.testing.assert_allclose(got, cm.run(x, encrypted=False), atol=1e-6)
    assert (got.argmax(1) == labels).all()

    wrong = henn_cli("decrypt", str(tmp_path / "resp.bin"), "--client", str(key), passphrase=PASS + "?")
    assert wrong.returncode == 2 and "wrong passphrase" in wrong.stderr and "Traceback" not in wrong.stderr
    assert len(wrong.stderr.strip().splitlines()) == 1
    none = henn_cli("decrypt", str(tmp_path / "resp.bin"), "--client", str(key), passphrase=None)
    assert none.returncode == 2 and "--passphrase-file" in none.stderr
    again = henn_cli("keygen", "--model", str(part), "--out", str(key))
    assert again.returncode == 2 and "exists" in again.stderr
    other = henn_cli("keygen", "--model", str(part), "--out", str(tmp_path / "d.key"))
    assert other.returncode == 0, other.stderr
    mixed = henn_cli(
        "evaluate",
        str(path),
        str(tmp_path / "req.bin"),
        "--keys",
        str(tmp_path / "d.key.evk"),
        "--out",
        str(tmp_path / "r2.bin"),
    )
    assert mixed.returncode == 2 and "key set" in mixed.stderr


def test_a_saved_client_reconnects_to_a_server(model, tmp_path):
    cm, path, part = model
    x, _ = digits(2)
    client = Client.load(part)
    client.generate_keys()
    client.save(tmp_path / "c.key", passphrase=PASS)
    client.close()
    with ServerProcess(path, tmp_path / "store") as server:
        with henn.connect(server.url, progress=False, client=Client.open(tmp_path / "c.key", passphrase=PASS)) as r:
            got = r.predict(x)
            assert r.client.runtime.keys.galois is None  # released after the upload
            r.save(tmp_path / "again.key", passphrase=PASS)
        assert Client.open(tmp_path / "again.key", passphrase=PASS).key_id == client.key_id
        np.testing.assert_allclose(got, cm.run(x, encrypted=False), atol=1e-6)
        r = henn_cli("predict", "--server", server.url, "--images", "2", "--client", str(tmp_path / "c.key"))
        assert r.returncode == 0 and "accuracy 1.0000" in r.stdout, r.stderr
        _, other_path = compile_file(tmp_path / "sq.henn", model=SQUARE_ZOO)
        stranger = Client.load(other_path)
        stranger.generate_keys()
        with pytest.raises(InputError, match="another model"):
            henn.connect(server.url, progress=False, client=stranger)
