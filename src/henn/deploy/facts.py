"""A model's facts for people and clients (GET /v1/model, `henn compile`, describe()), the same for a whole
model file (artefact.py) and its weight-free client part (client_model.py), which both import this."""

from __future__ import annotations

from henn.ckks import serialization
from henn.deploy.checks import InputChecks
from henn.program import PackedIO
from henn.segments import ClientStage

MODEL_FORMAT = "henn-model/1"  # a whole model file (henn.deploy.artefact)


def describe_model(
    p: PackedIO,
    backend: str,
    model: str,
    checks: InputChecks,
    options: dict,
    segments: tuple[PackedIO, ...] = (),
    stages: tuple[ClientStage, ...] = (),
) -> dict:
    """A model's facts for people and clients (GET /v1/model, `henn compile`, describe()): parameters,
    shapes, keys, sizes (bytes, upper bounds from henn.ckks.serialization), checks and compile options.
    `p` is a Program or a client part's ClientProgram (both have `bootstraps`); a client-aided model's later
    segments and client stages add `segments` (one entry per round trip: ciphertexts and request and response
    sizes) and `client_stages`."""
    params = p.params
    bootstraps: int = p.bootstraps  # type: ignore[attr-defined]
    shape = {"n": params.n, "q_count": len(params.log_q), "p_count": len(params.log_p)}
    bound = lambda kind, meta: serialization.max_payload(kind, meta, **shape) + 512  # + header and meta
    galois = bound("galois_keys", {"steps": list(p.rotation_steps), "conjugate": p.complex_packed})
    relin = bound("relin_key", {}) if p.relin else 0
    boot = 0
    # bootstrapping keys live over the bootstrapping modulus: residual primes, the circuit's, its own specials
    if bootstraps and params.bootstrap is not None:
        b = params.bootstrap
        boot = (
            serialization.max_payload(
                "bootstrap_keys",
                {},
                n=params.n,
                q_count=len(params.log_q) + b.depth,
                p_count=len(b.log_p(len(params.log_q))),
            )
            + 512
        )
    ct_in = bound("ciphertext", {"level": p.input_level, "degree": 1})
    ct_out = bound("ciphertext", {"level": params.max_level, "degree": 1})
    rounds = [
        {
            "input_ciphertexts": q.input_cts,
            "output_ciphertexts": q.output_cts,
            "input_level": q.input_level,
            "request": q.input_cts * bound("ciphertext", {"level": q.input_level, "degree": 1}),
            "response": q.output_cts * ct_out,
        }
        for q in ((p, *segments) if segments else ())
    ]
    return {
        "format": MODEL_FORMAT,
        "model": model,
        "backend": backend,
        "mode": p.mode,
        "params": params.literal().to_dict(),
        "params_name": params.name,
        "params_fingerprint": params.fingerprint(),
        "params_describe": params.describe(),
        "input_shape": list(p.input_shape),
        "output_shape": list(p.output_shape),
        "images_per_request": p.images_per_set,
        "complex_packing": p.complex_packed,
        "input_ciphertexts": p.input_cts,
        "output_ciphertexts": p.output_cts,
        "input_level": p.input_level,
        "rotation_steps": list(p.rotation_steps),
        "relin": p.relin,
        "bootstraps": bootstraps,
        "activation_check": checks.mode,
        "input_check": checks.mode,
        "input_bounds": None if checks.input_bounds is None else list(checks.input_bounds),
        "options": options,
        "segments": rounds,
        "client_stages": [st.describe() for st in stages],
        "max_bytes": {
            "keys": galois + relin + boot,
            "galois_keys": galois,
            "relin_key": relin,
            "bootstrap_keys": boot,
            "request": max([p.input_cts * ct_in] + [r["request"] for r in rounds]),  # of any round
            "response": max([p.output_cts * ct_out] + [r["response"] for r in rounds]),
        },
    }
