"""End to end with real keys on OpenFHE: the MNIST zoo model at its default (128-bit) parameters, served by a
real `henn serve` process on 127.0.0.1 and used through henn.connect. The server's OpenFHE worker holds only
the evaluation keys the client uploaded (the secret key stays in the client's worker); predictions equal the
in-process run's, and a restart of the server mid-session brings the session's keys back from the store."""

from __future__ import annotations

import pytest
from deploy_support import compile_file, digits, served_through_a_restart

import precision_table
from henn.ckks.backends import usable_class
from henn.errors import BackendError


def test_encrypted_mnist_through_a_server_process_on_openfhe(tmp_path):
    try:
        usable_class("openfhe")
    except BackendError as exc:
        pytest.fail(str(exc), pytrace=False)
    cm, path = compile_file(tmp_path / "openfhe.henn", backend="openfhe")
    x, labels = digits(3)
    with cm:
        assert not cm.params.insecure
        local = cm.run(x)
        plain = cm.run(x, encrypted=False)
    got, stats, info = served_through_a_restart(path, tmp_path / "store", x)
    assert info["backend"] == "openfhe"
    assert (got.argmax(1) == local.argmax(1)).all() and (got.argmax(1) == labels).all()
    precision_table.within("openfhe-e2e", "served_vs_local", local, got, 0.05)  # two encryptions
    precision_table.within("openfhe-e2e", "served_vs_plaintext", plain, got, 0.05)
    assert stats["key_bytes"] > 50 << 20 and stats["requests"] == 3
