"""Single mode on two threads (giant steps and output ciphertexts of one image side by side) gives
exactly the logits of one thread: the same encrypted input, two servers, bit-identical results
(CKKS evaluation is deterministic and modular additions commute)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

import henn
from henn import datasets
from henn.ckks import open_backend
from henn.runtime import Client, Server

MODEL = Path(henn.__file__).parent / "zoo" / "mnist-cnn_swish-rg5-deg2.onnx"


def test_two_threads_give_the_logits_of_one_on_lattigo():
    images = datasets.load_embedded_mnist()[0]
    cm = henn.compile(str(MODEL), (1, 28, 28), backend="lattigo", mode="single", calibration=images[-8:])
    program = cm.program
    backend = open_backend("lattigo", program.params)
    client = Client(program, backend, threads=1)
    keys = client.generate_keys()
    cts = client.encrypt(images[:1])
    outs = {}
    for threads in (1, 2):
        server = Server(program, backend, keys, threads=threads)
        server.prepare()
        assert server.executor.pool.workers == threads
        outs[threads] = client.decrypt(server.evaluate(list(cts)), 1)
        server.close()
    backend.close()
    assert np.array_equal(outs[1], outs[2])
    assert outs[1].argmax() == cm.reference(images[:1]).argmax()
