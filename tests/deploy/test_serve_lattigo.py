"""End to end with real keys: the MNIST zoo model on Lattigo at its default (128-bit) parameters,
served by a real `henn serve` process on 127.0.0.1 and used through henn.connect. The predictions
equal the in-process run's, and a restart of the server mid-session keeps the session (its ~0.26 GB
of evaluation keys, the Galois keys seeded, come back from the store)."""

from __future__ import annotations

from deploy_support import compile_file, digits, served_through_a_restart

import precision_table


def test_encrypted_mnist_through_a_server_process_survives_a_restart(tmp_path):
    cm, path = compile_file(tmp_path / "lattigo.henn", backend="lattigo")
    x, labels = digits(3)
    with cm:
        local = cm.run(x)
    got, stats, _ = served_through_a_restart(path, tmp_path / "store", x)
    assert (got.argmax(1) == local.argmax(1)).all() and (got.argmax(1) == labels).all()
    precision_table.within("lattigo-e2e", "served_vs_local", local, got, 0.05)  # two encryptions
    precision_table.within("lattigo-e2e", "served_vs_plaintext", cm.run(x, encrypted=False), got, 0.05)
    assert stats["key_bytes"] > 200 << 20 and stats["requests"] == 3
