"""Complex packing (henn.program, "Complex packing"): two images per slot, one in each part, with the
squares evaluated part by part (one conjugation each). Encrypted logits match the plaintext model for
the images in the real parts and those in the imaginary parts; what cannot be complex-packed is refused
at compile time with the fix."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, cast

import numpy as np
import pytest

import precision_table
import henn
from henn.ckks import ParametersLiteral, presets
from henn.ckks.backends import usable_class
from henn.errors import BackendError, InputError, MissingKeyError, SerializationError, UnsupportedOperation
from henn.frontend.onnx_build import build_cnn
from henn.program import Act, BatchPacking, Program, ProgramError
from henn.runtime.client import Client
from henn.runtime.server import Server

ZOO = Path(henn.__file__).parent / "zoo"
LAYERS = [
    ("conv", 2, 3, 2, 0),
    ("bn",),
    ("poly", "swish-rg5-deg2"),
    ("conv", 3, 2, 1, 0),
    ("bn",),
    ("poly", "square"),
    ("flatten",),
    ("gemm", 4),
]


def need(backend: str) -> None:
    try:
        usable_class(backend)
    except BackendError as exc:
        pytest.skip(str(exc))


def params(name: str, log_n: int, depth: int, log_scale: int):
    if name not in presets.names():
        presets.register(name, ParametersLiteral(log_n, (log_scale + 14,) + (log_scale,) * depth, (55,), log_scale))
    return presets.get(name)


def small_cnn():
    return build_cnn(LAYERS, (1, 8, 8), seed=3)


@pytest.mark.parametrize("backend", ["plain", "lattigo"])
def test_both_parts_match_plaintext(backend, rng):
    """A set of 2 x 1024 images at N = 2^11: the 1024 in the real parts and the 7 in the imaginary parts
    (the rest repeat them) give the plaintext logits."""
    need(backend)
    with henn.compile(
        small_cnn(), backend=backend, mode="batch", complex_packing=True, params=params("insecure_cpx_n11", 11, 5, 36)
    ) as cm:
        p = cm.program
        assert p.complex_packed and p.images_per_set == 2 * p.params.slots == 2048
        assert [s.form for s in p.steps if isinstance(s, Act)] == ["square", "square"]
        assert "complex" in cm.describe()
        x = rng.uniform(0, 1, (1031, 1, 8, 8))
        ref, enc = cm.reference(x), cm.run(x)
    err = np.abs(enc - ref).max(axis=1)
    assert err.max() < 1e-3 * max(1, np.abs(ref).max()), (err[:1024].max(), err[1024:].max())
    assert (enc.argmax(1) == ref.argmax(1)).all()


def test_real_digits_through_lattigo_match_real_packing():
    """The zoo's MNIST CNN (square) on 2,080 embedded digits, one set: the predictions of real packing (two sets)
    and of complex packing (one) are the plaintext model's; its first square is relinearized at once, the second
    lazily by the layer after it."""
    need("lattigo")
    from henn.datasets import load_embedded_mnist

    x = load_embedded_mnist()[0][:2080]
    pr = params("insecure_cpx_n12", 12, 5, 30)
    model = str(ZOO / "mnist-cnn_square.onnx")
    preds = {}
    for cp in (False, True):
        with henn.compile(model, backend="lattigo", mode="batch", params=pr, complex_packing=cp) as cm:
            assert [s.relin for s in cm.program.steps if isinstance(s, Act)] == [True, False]
            assert cm.program.images_per_set == (4096 if cp else 2048)
            ref, enc = cm.reference(x), cm.run(x)
        precision_table.within("lattigo-e2e", f"batch_cnn_complex_{cp}", ref, enc, 1e-2 * np.abs(ref).max())
        preds[cp] = enc.argmax(1)
        assert (preds[cp] == ref.argmax(1)).mean() >= 0.999
    assert (preds[True] == preds[False]).mean() >= 0.999


def test_seal_refuses_complex_squares_with_the_fix():
    need("seal")
    with pytest.raises(UnsupportedOperation, match="-i exactly.*lattigo"):
        henn.compile(
            small_cnn(),
            backend="seal",
            mode="batch",
            complex_packing=True,
            params=params("insecure_cpx_n11", 11, 5, 36),
        )


@pytest.mark.parametrize(
    "kw, match",
    [
        ({"mode": "single"}, "mode='batch'"),
        ({"mode": "batch", "batch_group": 4}, "batch_group"),
        ({"mode": "batch", "params": "n14-d5-real"}, "ring='standard'"),
    ],
)
def test_what_cannot_be_complex_packed_is_refused(kw, match):
    if "params" in kw:
        kw = {**kw, "params": presets.get(kw["params"])}
    with pytest.raises(InputError, match=match):
        henn.compile(small_cnn(), backend="plain", complex_packing=True, **kw)


def test_higher_degree_activations_are_refused():
    from henn.frontend.onnx_build import mnist_layers

    model = build_cnn(mnist_layers("swish-rg7-deg4"), seed=21)
    with pytest.raises(UnsupportedOperation, match="identity and square"):
        henn.compile(model, backend="plain", mode="batch", complex_packing=True)


def _program() -> Program:
    cm = henn.compile(
        small_cnn(), backend="plain", mode="batch", complex_packing=True, params=params("insecure_cpx_n11", 11, 5, 36)
    )
    return cm.program


def test_program_file_keeps_complex_packing_and_refuses_bad_flags():
    p = _program()
    back = Program.from_bytes(p.to_bytes())
    assert back.complex_packed and back.images_per_set == p.images_per_set
    packing = p.packing
    assert isinstance(packing, BatchPacking)
    bads: tuple[Any, ...] = ("yes", 1)
    for bad in bads:
        with pytest.raises(ProgramError, match="complex must be true or false"):
            dataclasses.replace(p, packing=dataclasses.replace(packing, complex=bad)).verify()
    real = presets.get("insecure_short_d4_real")
    with pytest.raises(ProgramError, match="ring='standard'"):
        dataclasses.replace(p, params=real).verify()
    cubic = [dataclasses.replace(s, form="cubic") if isinstance(s, Act) else s for s in p.steps]
    with pytest.raises(ProgramError, match="identity and square"):
        dataclasses.replace(p, steps=cubic).verify()
    blob = dataclasses.replace(p, packing=dataclasses.replace(packing, complex=cast(Any, "yes"))).to_bytes()
    with pytest.raises(SerializationError, match="complex must be"):
        Program.from_bytes(blob)


def test_server_refuses_keys_without_the_conjugation_key():
    p = _program()
    be = usable_class("plain")(p.params)
    sk, keys = be.generate_keys(conjugate=False, relin=True)
    with pytest.raises(MissingKeyError, match="conjugation key"):
        Server(p, be, keys)
    client = Client(p, be)
    galois = client.generate_keys().galois
    assert galois is not None and galois.conjugate


def test_a_complex_packed_model_file_serves_through_the_deployment_client(tmp_path, rng):
    """The model file carries the flag; the deployment client packs both parts and uploads the conjugation key
    with the others (their serialized form), and the server's logits are the in-process run's."""
    from henn.deploy import Artefact
    from henn.deploy import Client as FileClient
    from henn.deploy import Server as FileServer
    from henn.deploy.checks import InputChecks

    cm = henn.compile(
        small_cnn(),
        backend="plain",
        mode="batch",
        complex_packing=True,
        params=params("insecure_cpx_n11", 11, 5, 36),
        activation_check="off",
    )
    checks = InputChecks.from_compiled(cm.compiled.checked, cm.activation_intervals(), cm.activation_check)
    path = tmp_path / "cpx.henn"
    Artefact(cm.program, "plain", checks, model="cpx").save(path)
    real = Artefact(
        henn.compile(
            small_cnn(),
            backend="plain",
            mode="batch",
            activation_check="off",
            params=params("insecure_cpx_n11", 11, 5, 36),
        ).program,
        "plain",
        checks,
        model="r",
    )
    facts, real_facts = Artefact.load(path).describe(), real.describe()
    assert facts["complex_packing"] and not real_facts["complex_packing"] and facts["images_per_request"] == 2048
    assert facts["max_bytes"]["galois_keys"] > real_facts["max_bytes"]["galois_keys"]  # the conjugation key
    client, server = FileClient.load(path), FileServer.load(path)
    assert client.program.complex_packed and client.program.images_per_set == 2048
    client.generate_keys()
    session = server.open_session(server.read_keys(client.key_blobs()))
    x = rng.uniform(0, 1, (1030, 1, 8, 8))
    got = client.decrypt(server.evaluate(session, client.encrypt(x)), len(x))
    np.testing.assert_allclose(got, cm.run(x, encrypted=False), atol=1e-6)
