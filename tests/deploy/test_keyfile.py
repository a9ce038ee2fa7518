"""A saved client: the secret key encrypted at rest (Argon2id + AES-256-GCM, header authenticated), a file
of mode 0600 never overwritten, reopened on every backend to decrypt what was encrypted before; a wrong
passphrase and every changed byte refused with the one KeyFileError; forged headers refused before the
KDF runs; evaluation keys released and made again."""

from __future__ import annotations

import json
import stat
import struct

import numpy as np
import pytest
from deploy_support import compile_file, digits

from henn.ckks import open_backend, presets
from henn.deploy import Artefact, Client, Server, keyfile
from henn.errors import InputError, KeyFileError

PASS = "correct horse battery staple"


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return compile_file(tmp_path_factory.mktemp("model") / "plain.henn")


@pytest.fixture(scope="module")
def models(model, tmp_path_factory):
    return {"plain": model, "lattigo": compile_file(tmp_path_factory.mktemp("model") / "l.henn", backend="lattigo")}


@pytest.mark.parametrize("backend", ["plain", "lattigo"])
def test_a_saved_client_decrypts_what_it_encrypted_before(models, tmp_path, backend):
    cm, path = models[backend]
    x, _ = digits(2)
    client, server = Client.load(path), Server.load(path)
    client.generate_keys()
    session = server.open_session(server.read_keys(client.key_blobs()))
    before = server.evaluate(session, client.encrypt(x[:1]))
    client.save(tmp_path / "c.key", passphrase=PASS)
    assert stat.S_IMODE((tmp_path / "c.key").stat().st_mode) == 0o600
    with pytest.raises(InputError, match="exists"):
        client.save(tmp_path / "c.key", passphrase=PASS)
    again = Client.open(tmp_path / "c.key", passphrase=PASS)
    assert again.key_id == client.key_id and again.model.model_sha256 == Artefact.load(path).digest
    assert again.model.checks.graph is not None  # opened from the whole file: its holder has the checks
    got = np.concatenate([again.decrypt(before, 1), again.decrypt(server.evaluate(session, again.encrypt(x[1:])), 1)])
    np.testing.assert_allclose(got, cm.run(x, encrypted=False), atol=1e-6 if backend == "plain" else 0.05)
    assert (got.argmax(1) == cm.run(x, encrypted=False).argmax(1)).all()
    assert len(again.regenerate_keys().galois.steps) == len(cm.rotation_steps)  # the same key set's keys


@pytest.mark.parametrize("backend", ["seal", "lattigo"])
def test_the_secret_key_survives_a_file_on_real_backends(tmp_path, backend):
    """A ciphertext of the first process's key, decrypted by the key read back from the file."""
    be = open_backend(backend, presets.get("insecure_short_d2"))
    sk, keys = be.generate_keys(relin=False)
    v = np.linspace(-1, 1, be.slots)
    ct = be.encrypt(be.encode(v), sk if be.symmetric_encryption else keys.public)
    secret = be.export_secret_key(sk)
    facts = {"backend": backend, "params": be.actual_params.fingerprint(), "key_id": sk.key_id, "model_sha256": ""}
    data = keyfile.lock(secret, b"", facts, PASS)
    assert secret[64:96] not in data  # encrypted, not copied
    header, got, model = keyfile.unlock(data, PASS)
    assert got == secret and model == b"" and header["kdf"]["name"] == "argon2id"
    sk2 = be.import_secret_key(got, header["key_id"])
    np.testing.assert_allclose(be.decrypt_decode(ct, sk2).real, v, atol=1e-4)


def test_a_wrong_passphrase_and_every_changed_byte_are_refused_alike(model, tmp_path):
    _, path = model
    client = Client.load(path)
    client.generate_keys()
    client.save(tmp_path / "c.key", passphrase=PASS)
    data = (tmp_path / "c.key").read_bytes()
    with pytest.raises(KeyFileError, match="wrong passphrase, or the file was changed"):
        keyfile.unlock(data, PASS + "!")
    _, head = keyfile.read_header(data)
    h = json.loads(data[14:head])
    salt_at = data.index(h["kdf"]["salt"].encode())
    # a byte of the key id (header), of the salt, of the body, of the tag
    for at in (data.index(h["key_id"].encode()) + 3, salt_at + 5, head + 40, len(data) - 3):
        forged = bytearray(data)
        if at < head:  # another hex digit: the header still parses, its authentication fails
            forged[at] = ord("0") if data[at] != ord("0") else ord("1")
        else:
            forged[at] ^= 0x80
        with pytest.raises(KeyFileError, match="wrong passphrase, or the file was changed"):
            keyfile.unlock(bytes(forged), PASS)
    for cut in (10, head, len(data) - 1):
        with pytest.raises(KeyFileError):
            keyfile.unlock(data[:cut], PASS)


def test_forged_kdf_parameters_are_refused_before_the_kdf_runs():
    facts = {"backend": "plain", "params": "p", "key_id": "0" * 32, "model_sha256": ""}
    data = keyfile.lock(b"secret", b"", facts, PASS)
    _, head = keyfile.read_header(data)
    h = json.loads(data[14:head])
    for field, value in (("memory_kib", 1 << 30), ("iterations", 10**6), ("lanes", 0), ("salt", "00")):
        h2 = dict(h, kdf=dict(h["kdf"], **{field: value}))
        text = json.dumps(h2).encode()
        forged = data[:8] + struct.pack("<HI", 1, len(text)) + text + data[head:]
        with pytest.raises(KeyFileError, match="malformed header"):
            keyfile.unlock(forged, PASS)
    with pytest.raises(KeyFileError, match="not a henn key file"):
        keyfile.unlock(b"PK\x03\x04" + data[4:], PASS)
    with pytest.raises(InputError, match="at least 8"):
        keyfile.lock(b"secret", b"", facts, "short")


def test_a_key_file_of_other_parameters_is_refused(model, tmp_path):
    _, path = model
    client = Client.load(path)
    client.generate_keys()
    secret, key_id = client.runtime.export_secret_key()
    facts = {"backend": "plain", "params": "another", "key_id": key_id, "model_sha256": client.model.model_sha256}
    keyfile.write_private(tmp_path / "c.key", keyfile.lock(secret, client.model.to_bytes(), facts, PASS))
    with pytest.raises(KeyFileError, match="other encryption parameters"):
        Client.open(tmp_path / "c.key", passphrase=PASS)
