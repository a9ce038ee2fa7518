"""`henn profile kernels`: the end-to-end tests of paper 001 (Figs. 3, 16-21) on one backend context.

- dot_product (rotate-and-sum, log2 n rotations) for vector lengths n,
- linear_transform: y = M x, n x n, diagonal method with baby-step giant-step (henn.kernels.linear:
  the compiler's BSGS planner and the executor's evaluation, henn.kernels.bsgs),
- polynomial: the logistic function's least-squares approximation on [-8, 8], degrees 3..31,
- activation: the zoo's polynomial activations as inference evaluates them (henn.kernels.activation),
- mul_chain: consecutive multiplications (ct * ct, rescale) down the whole modulus chain, error
  after each one (paper 001 Fig. 3: error against depth); inputs 1 and uniform [0.9, 1.1] so that
  the product keeps its magnitude.

Each kernel instance generates exactly the Galois keys it needs (its key-generation time and count
go in `extra`), so memory never holds the union of every kernel's keys. A kernel whose depth the
parameters cannot give, or whose module is missing, becomes a failed record saying so.
"""

from __future__ import annotations

import logging
import time
from functools import partial
from typing import Any

import numpy as np

from henn.ckks.values import EvaluationKeys
from henn.errors import LevelError
from henn.profile.harness import Recorder, Settings, error_entry, summarize, time_call

log = logging.getLogger(__name__)

DOT_SIZES = (16, 64, 256, 1024)
LINEAR_SIZES = (16, 32, 64, 128)
POLY_DEGREES = (3, 7, 15, 31)
LOGISTIC_BOUND = 8.0  # the approximation interval [-8, 8] (paper 001's logistic test)
ACTIVATIONS = {2: "swish-rg5-deg2", 4: "swish-rg7-deg4"}  # by degree
KERNELS = ("dot_product", "linear_transform", "polynomial", "activation", "mul_chain")


def _kernels_module():
    """henn.kernels, imported late: while it is missing, each kernel records why."""
    import henn.kernels as k

    return k


class _Keys:
    def __init__(self, be, settings: Settings):
        self.be = be
        self.rng = np.random.default_rng(settings.seed)
        self.sk = be.generate_secret_key()
        self.pk = be.generate_public_key(self.sk)
        self.rk = be.generate_relin_key(self.sk)

    def evaluator(self, steps=()) -> tuple[Any, dict]:
        """An evaluator with Galois keys for exactly `steps`, and what making them cost."""
        steps = sorted(set(steps))
        t0 = time.perf_counter()
        gk = self.be.generate_galois_keys(self.sk, steps) if steps else None
        info = {"galois_keys": len(steps), "keygen_s": time.perf_counter() - t0}
        return self.be.evaluator(EvaluationKeys(self.pk, self.rk, gk)), info

    def dec(self, ct) -> np.ndarray:
        return self.be.decrypt_decode(ct, self.sk)


def _dot(keys: _Keys, n: int, settings: Settings) -> dict:
    k, be = _kernels_module(), keys.be
    ev, info = keys.evaluator(k.rotate_and_sum_steps(n, 1, be.slots))
    x, y = keys.rng.uniform(-1, 1, be.slots), keys.rng.uniform(-1, 1, n)
    errors = []
    for kind, (xv, yv) in {"ones": (np.ones(be.slots), np.ones(n)), "random": (x, y)}.items():
        got = keys.dec(k.dot_product(ev, be.encrypt(xv, keys.pk), yv, n))[0]
        errors.append(error_entry(kind, [float(xv[:n] @ yv)], [got]))
    ct = be.encrypt(x, keys.pk)
    latency, memory = time_call(lambda: k.dot_product(ev, ct, y, n), settings)
    info["rotations"] = k.rotsum.rotate_and_sum_count(n) if hasattr(k.rotsum, "rotate_and_sum_count") else None
    return {"latency": latency, "error": errors, "memory": memory, "extra": info}


def _linear(keys: _Keys, n: int, settings: Settings) -> dict:
    k, be = _kernels_module(), keys.be
    matrix = keys.rng.uniform(-1, 1, (n, n)) / np.sqrt(n)
    lt = k.LinearTransform(matrix, be.slots)
    ev, info = keys.evaluator(lt.rotations())
    x = keys.rng.uniform(-1, 1, n)
    t0 = time.perf_counter()
    lt.prepare(be, be.max_level)  # encoding the diagonals: once per level, reported apart
    info["prepare_s"] = time.perf_counter() - t0
    info.update({f"cost_{key}": v for key, v in lt.cost().items()})
    errors = []
    for kind, xv in {"ones": np.ones(n), "random": x}.items():
        out = ev.rescale(lt.evaluate(ev, be.encrypt(lt.pack_input(xv), keys.pk)))
        errors.append(error_entry(kind, matrix @ xv, lt.unpack_output(keys.dec(out))))
    ct = be.encrypt(lt.pack_input(x), keys.pk)
    latency, memory = time_call(lambda: ev.rescale(lt.evaluate(ev, ct)), settings)
    return {"latency": latency, "error": errors, "memory": memory, "extra": info}


def _polynomial(keys: _Keys, degree: int, settings: Settings) -> dict:
    k, be = _kernels_module(), keys.be
    coeffs = k.logistic_coefficients(degree, (-LOGISTIC_BOUND, LOGISTIC_BOUND))
    need = k.polynomial_depth(coeffs, bound=LOGISTIC_BOUND)
    if need > be.max_level:
        raise LevelError(
            f"the degree-{degree} polynomial needs depth {need} but the parameters give "
            f"{be.max_level}: profile kernels with --depths {need} or more"
        )
    ev, info = keys.evaluator()
    info["depth"] = need
    x = keys.rng.uniform(-LOGISTIC_BOUND, LOGISTIC_BOUND, be.slots)
    errors = []
    for kind, xv in {"ones": np.ones(be.slots), "random": x}.items():
        out = k.evaluate_polynomial(ev, be.encrypt(xv, keys.pk), coeffs, bound=LOGISTIC_BOUND)
        errors.append(error_entry(kind, np.polynomial.polynomial.polyval(xv, coeffs), keys.dec(out)))
    info["approximation_max_error"] = float(
        np.max(np.abs(np.polynomial.polynomial.polyval(x, coeffs) - 0.5 * (1 + np.tanh(x / 2))))
    )
    ct = be.encrypt(x, keys.pk)
    latency, memory = time_call(lambda: k.evaluate_polynomial(ev, ct, coeffs, bound=LOGISTIC_BOUND), settings)
    return {"latency": latency, "error": errors, "memory": memory, "extra": info}


def _activation(keys: _Keys, degree: int, settings: Settings) -> dict:
    """A zoo activation's core (form, shift, inner, tcoef) exactly as the executor runs it."""
    from henn.activations import get_activation
    from henn.ir.interpret import core
    from henn.passes.approximate_activations import decompose

    k, be = _kernels_module(), keys.be
    act = get_activation(ACTIVATIONS[degree])
    attrs = decompose(act.coefficients, act.name)
    if attrs["levels"] > be.max_level:
        raise LevelError(f"{act.name} needs depth {attrs['levels']} but the parameters give {be.max_level}")
    ev, info = keys.evaluator()
    info.update(activation=act.name, form=attrs["form"], depth=attrs["levels"])
    lo, hi = act.fitted_range or (-1.0, 1.0)
    x = keys.rng.uniform(lo, hi, be.slots)
    errors = []
    for kind, xv in {"ones": np.ones(be.slots), "random": x}.items():
        out = k.act_core(ev, be.encrypt(xv, keys.pk), attrs)
        errors.append(error_entry(kind, core(attrs["form"], attrs, xv), keys.dec(out)))
    ct = be.encrypt(x, keys.pk)
    latency, memory = time_call(lambda: k.act_core(ev, ct, attrs), settings)
    return {"latency": latency, "error": errors, "memory": memory, "extra": info}


def _chain(keys: _Keys, rec: Recorder) -> None:
    """One record per multiplication k = 1..max_level: the error after k of them, and its time."""
    be = keys.be
    ev, _ = keys.evaluator()
    inputs = {
        "ones": (np.ones(be.slots), np.ones(be.slots)),
        "random": (keys.rng.uniform(0.9, 1.1, be.slots), keys.rng.uniform(0.9, 1.1, be.slots)),
    }
    state = {kind: (be.encrypt(x, keys.pk), be.encrypt(y, keys.pk), x.copy()) for kind, (x, y) in inputs.items()}
    for step in range(1, be.max_level + 1):

        def one(step=step):
            errors, seconds = [], 0.0
            for kind, (acc, ct_y, expect) in state.items():
                t0 = time.perf_counter()
                acc = ev.rescale(ev.multiply(acc, ev.drop_to_level(ct_y, acc.level)))
                seconds += time.perf_counter() - t0
                expect = expect * inputs[kind][1]
                state[kind] = (acc, ct_y, expect)
                errors.append(error_entry(kind, expect, keys.dec(acc)))
            return {
                "latency": summarize([seconds / len(state)], 0),
                "error": errors,
                "extra": {"level": be.max_level - step},
            }

        if (rec.run("mul_chain", one, size=step, size_name="multiplications") or {}).get("status") != "ok":
            break


def run(
    be,
    rec: Recorder,
    settings: Settings,
    kernels: tuple[str, ...] | None = None,
    *,
    dot_sizes=DOT_SIZES,
    linear_sizes=LINEAR_SIZES,
    poly_degrees=POLY_DEGREES,
    activation_degrees=tuple(ACTIVATIONS),
) -> None:
    """Measure the kernels (all, or those named) on the open backend `be`."""
    wanted = set(KERNELS if kernels is None else kernels)
    try:
        keys = _Keys(be, settings)
    except Exception as exc:  # noqa: BLE001 - no keys: every kernel reports it
        for name in KERNELS:
            if name in wanted:
                rec.fail(name, exc)
        return
    table = (
        ("dot_product", "n", dot_sizes, _dot),
        ("linear_transform", "n", linear_sizes, _linear),
        ("polynomial", "degree", poly_degrees, _polynomial),
        ("activation", "degree", activation_degrees, _activation),
    )
    for name, size_name, sizes, fn in table:
        if name not in wanted:
            continue
        for size in sizes:
            if size_name == "n" and size > be.slots:
                rec.fail(
                    name,
                    f"InputError: n = {size} does not fit the {be.slots} slots of these parameters",
                    size=size,
                    size_name=size_name,
                )
                continue
            rec.run(name, partial(fn, keys, size, settings), size=size, size_name=size_name)
    if "mul_chain" in wanted:
        _chain(keys, rec)
