"""Seeded evaluation keys on Lattigo (lattigo_patch/rlwe/seeded.go): each Galois key element keeps its b half
and the key a seed, in memory and on the wire, and the memory model counts them so. Rotations with them are
the conformance suite's (every rotation there runs on seeded keys); the Go tests check them bit for bit
against their own expansion at every level."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from henn.ckks import ParametersLiteral, presets
from henn.compiler.driver import compile_model
from henn.frontend.onnx_build import build_cnn, mnist_layers
from henn.passes import CompileOptions
from henn.runtime import memory

lattigo = pytest.importorskip("henn.ckks.backends.lattigo")


HERE = Path(__file__).resolve().parent


def _preset(name: str, literal: ParametersLiteral):
    if name not in presets.names():
        presets.register(name, literal)
    return presets.get(name)


def _params():
    return _preset("insecure_seeded_n11_d4", ParametersLiteral(11, (50, 36, 36, 36, 36), (50, 50), 36))


def _galois_payload(steps: list[int]) -> tuple[int, int]:
    """(key_polys, serialized bytes of Galois keys for `steps`) in this process."""
    be = lattigo.LattigoBackend(_params())
    sk = be.generate_secret_key()
    return be.key_polys, len(be.serialize(be.generate_galois_keys(sk, steps)))


def _element_bytes(params) -> int:
    """Bytes of one polynomial of every element of one key: digits x (Q + P primes) x N x 8."""
    q, p = len(params.log_q), len(params.log_p)
    return -(-q // p) * (q + p) * params.n * 8


def test_galois_keys_are_seeded_by_default():
    steps = [1, 2, 3, 5, 8]
    polys, size = _galois_payload(steps)
    assert polys == 1
    per_key = _element_bytes(_params())
    assert per_key * len(steps) <= size < 1.05 * per_key * len(steps)  # b halves, seeds and headers only


def test_full_keys_when_asked():
    """HENN_SEEDED_KEYS=0 (read by the bridge when it loads: a fresh process) makes the full keys of before."""
    code = (
        f"import json, sys; sys.path[:0] = [{str(HERE)!r}]; import test_seeded_keys as t; "
        "print(json.dumps(t._galois_payload([1, 2, 3, 5, 8])))"
    )
    env = dict(os.environ, HENN_SEEDED_KEYS="0")
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True, cwd=HERE.parents[1]
    )
    polys, size = json.loads(out.stdout.strip().splitlines()[-1])
    assert polys == 2
    assert 2 * 5 * _element_bytes(_params()) <= size < 1.05 * 2 * 5 * _element_bytes(_params())


def test_memory_model_counts_seeded_keys_as_they_are():
    """memory.key_bytes against the keys a compiled program really gets on Lattigo."""
    params = _preset("insecure_seeded_n12_d6", ParametersLiteral(12, (50,) + (36,) * 6, (50, 50), 36))
    model = build_cnn(mnist_layers("square"), (1, 28, 28), seed=3)
    program = compile_model(model, None, CompileOptions(mode="single", params=params)).program
    be = lattigo.LattigoBackend(program.params)
    sk = be.generate_secret_key()
    keys = be.keys_of(sk, program.rotation_steps, relin=program.relin)
    real = len(be.serialize(keys.galois)) + (len(be.serialize(keys.relin)) if program.relin else 0)
    predicted = memory.key_bytes(program, be)
    assert program.rotation_steps and 0.95 * real <= predicted <= 1.05 * real


def _chosen_keys(need: int) -> tuple[int, int]:
    """(key_polys, serialized bytes of Galois keys) after expect_footprint(need, 1 TiB), in this process."""
    be = lattigo.LattigoBackend(_params())
    be.expect_footprint(need, 2**40)
    sk = be.generate_secret_key()
    return be.key_polys, len(be.serialize(be.generate_galois_keys(sk, [1, 2, 3, 5, 8])))


@pytest.mark.parametrize("setting", ["", "0"])
def test_every_evaluation_gets_seeded_keys_unless_told(setting):
    """A context whose evaluation needs a small share of the memory (1 MiB of 1 TiB) and one that needs a large
    share (1/8) both make seeded Galois keys, on every CPU: with the a halves regenerated in cache and by VAES
    they are as fast as full keys where IFMA runs too (docs/benchmarks.md). HENN_SEEDED_KEYS=0 makes full ones.
    The memory model's key_polys follows what is made. A fresh process each: the settings are the process's."""
    code = (
        f"import json, sys; sys.path[:0] = [{str(HERE)!r}]; import test_seeded_keys as t; "
        "print(json.dumps([t._chosen_keys(2**20), t._chosen_keys(2**37)]))"
    )
    env = dict(os.environ, HENN_SEEDED_KEYS=setting, HENN_LATTIGO_NTT="")
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True, cwd=HERE.parents[1]
    )
    chosen = json.loads(out.stdout.strip().splitlines()[-1])
    per_key = 5 * _element_bytes(_params())
    for polys, size in chosen:
        assert polys == (2 if setting == "0" else 1)
        assert polys * per_key <= size < 1.05 * polys * per_key
