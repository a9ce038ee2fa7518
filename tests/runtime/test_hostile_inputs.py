"""Hostile and unlucky inputs to the client and the server: everything is checked before it is
encrypted or evaluated (another client's ciphertexts, another scale or level, keys of another
backend or key set, secret material among the keys, badly shaped or overflowing images)."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest

import precision_table
import henn
from henn.ckks import ParametersLiteral, open_backend, presets
from henn.ckks.backends import usable_class
from henn.ckks.values import EvaluationKeys, PublicKey
from henn.compiler.driver import compile_model
from henn.errors import BackendError, InputError, MissingKeyError
from henn.frontend.onnx_build import build_cnn
from henn.ir import interpret
from henn.passes import CompileOptions
from henn.runtime import Client, Server
from henn.runtime.parallel import Parallel, default_threads

LAYERS = [("conv", 2, 3, 2, 0), ("poly", "square"), ("flatten",), ("gemm", 3)]
SHAPE = (1, 7, 7)


def _params():
    name = "insecure_hostile_n11_d3"
    if name not in presets.names():
        presets.register(name, ParametersLiteral(11, (50,) + (36,) * 3, (50,), 36))
    return presets.get(name)


@pytest.fixture(scope="module")
def compiled():
    return compile_model(build_cnn(LAYERS, SHAPE, seed=2), None, CompileOptions(mode="single", params=_params()))


@pytest.fixture(scope="module", params=["plain", "seal", "lattigo", "openfhe"])
def parties(request, compiled):
    """(program, backend, client A, client B, server holding A's keys)."""
    try:
        be = usable_class(request.param)(compiled.program.params)
    except BackendError as exc:
        pytest.fail(str(exc), pytrace=False)
    a, b = Client(compiled.program, be), Client(compiled.program, be)
    server = Server(compiled.program, be, a.generate_keys())
    b.generate_keys()
    yield compiled.program, be, a, b, server
    server.close()


def images(n=1, seed=0):
    return np.random.default_rng(seed).uniform(0, 1, (n,) + SHAPE)


# ---- the server's input ----------------------------------------------------------------------------
def test_server_refuses_another_clients_ciphertexts(parties, compiled):
    """Regression: the server evaluated them and returned garbage (logit error ~1e7)."""
    program, be, a, b, server = parties
    x = images()
    with pytest.raises(InputError, match="key set"):
        server.evaluate(b.encrypt(x))
    outs = server.evaluate(a.encrypt(x))
    assert all(ct.key_id == a.keys.key_id for ct in outs)  # the results stay in the client's key set
    with pytest.raises(InputError, match="key set"):
        b.decrypt(outs, 1)
    out = a.decrypt(outs, 1).reshape(1, -1)
    precision_table.within(f"{be.name}-e2e", "client_key_sets", interpret.run(compiled.reference, x), out, 1e-3)


def test_server_refuses_another_scale_level_or_count(parties):
    """Regression: a ciphertext at another scale than the program's was evaluated into garbage."""
    program, be, a, _, server = parties
    vec = a.pack(images())[0]
    level, pk = program.input_level, a.keys.public
    for scale, match in ((program.params.default_scale * 2, "scale"), (program.params.default_scale / 4, "scale")):
        with pytest.raises(InputError, match=match):
            server.evaluate([be.encrypt(vec, pk, level=level, scale=scale)])
    with pytest.raises(InputError, match="level"):
        server.evaluate([be.encrypt(vec, pk, level=level - 1)])
    good = a.encrypt(images())
    for bad, match in (
        (good * 2, "list of 1 ciphertexts"),
        ([], "list of 1"),
        (good[0], "got a Ciphertext"),
        ([be.encode(vec, level=level)], "not a Ciphertext"),
        ((x for x in good), "generator"),
    ):
        with pytest.raises(InputError, match=match):
            server.evaluate(bad, consume=True)
    foreign = dataclasses.replace(good[0], backend="lattigo" if be.name != "lattigo" else "plain")
    with pytest.raises(InputError, match="backend"):
        server.evaluate([foreign])
    assert good[0] is not None  # a refused list is not consumed


def test_server_checks_the_keys_it_is_given(parties):
    program, be, a, b, _ = parties
    keys = a.keys
    with pytest.raises(InputError, match="never a secret key"):
        Server(program, be, a._sk)
    sk_as_public = dataclasses.replace(keys, public=PublicKey(a._sk.raw, be.name, a._sk.key_id))
    with pytest.raises(InputError, match="secret key material"):
        Server(program, be, sk_as_public)
    with pytest.raises(InputError, match="key set"):
        Server(program, be, dataclasses.replace(keys, relin=b.keys.relin))
    with pytest.raises(InputError, match="key-set identity"):
        Server(program, be, dataclasses.replace(keys, public=dataclasses.replace(keys.public, key_id=None)))
    with pytest.raises(MissingKeyError, match="relinearization"):
        Server(program, be, dataclasses.replace(keys, relin=None))
    other = open_backend("plain" if be.name != "plain" else "seal", program.params)
    with pytest.raises(InputError, match="backend"):
        Server(program, be, other.generate_keys(rotations=program.rotation_steps)[1])
    wider = open_backend(be.name, presets.get("insecure_short_d4"))
    with pytest.raises(InputError, match="other parameters"):
        Server(program, wider, wider.generate_keys(rotations=program.rotation_steps)[1])
    assert isinstance(keys, EvaluationKeys) and keys.key_id == a._sk.key_id


# ---- the client's input ----------------------------------------------------------------------------
def test_client_encrypt_checks_images_as_run_does(parties):
    _, _, a, _, _ = parties
    for bad, match in (
        (np.zeros((1, 1, 7, 8)), r"shape \(B, 1, 7, 7\)"),
        (np.zeros(SHAPE), "shape"),
        (np.zeros((0,) + SHAPE), "shape"),
        ("pixels", "numeric"),
        (np.full((1,) + SHAPE, np.nan), "NaN"),
        (np.full((1,) + SHAPE, 1e400, dtype=object), "NaN or infinity"),
        (np.full((1,) + SHAPE, 10**400, dtype=object), "numeric"),
    ):
        with pytest.raises(InputError, match=match):
            a.encrypt(bad)
    with pytest.raises(InputError, match="1 to 1 images"):
        a.decrypt(a.encrypt(images()), 2)
    with pytest.raises(InputError, match="n_images"):
        a.decrypt(a.encrypt(images()), True)


def test_torch_tensor_with_grad_is_accepted_detached(parties):
    torch = pytest.importorskip("torch")
    _, be, a, _, server = parties
    x = images()
    t = torch.tensor(x, dtype=torch.float32, requires_grad=True)
    got = a.decrypt(server.evaluate(a.encrypt(t)), 1)
    want = a.decrypt(server.evaluate(a.encrypt(x.astype(np.float32))), 1)
    precision_table.within(f"{be.name}-e2e", "torch_input", want, got, 1e-3)
    assert t.requires_grad and t.grad is None


def test_thread_counts_are_checked(monkeypatch):
    be = open_backend("plain", _params())
    bads: tuple[Any, ...] = (0, -1, 1.5, "2", True, 10**6)
    for bad in bads:
        with pytest.raises(InputError, match="threads"):
            Parallel.for_backend(be, bad)
    for env in ("abc", "0", "-3", "2.5"):
        monkeypatch.setenv("HENN_THREADS", env)
        with pytest.raises(InputError, match="HENN_THREADS"):
            default_threads()
    with pytest.raises(InputError, match="threads"):
        henn.compile(build_cnn(LAYERS, SHAPE, seed=2), backend="plain", params=_params(), threads=0)
    monkeypatch.setenv("HENN_THREADS", " 3 ")
    assert default_threads() == 3 and Parallel.for_backend(be).workers == 3
