"""`henn profile primitives`: the CKKS operations of paper 001 (Figs. 1-15) on one backend context.

For every op: latency (timing rule of harness.Settings), throughput (slots per second), error
against NumPy on inputs of 1 (as paper 001) and on seeded uniform [-1, 1] inputs, and the peak
RSS over the timed calls. One "sizes" record per context gives the serialized bytes of a
ciphertext (fresh, and at level 0), a plaintext and the keys (secret keys cannot be serialized).

What is measured for key generation is chosen to keep the depth-19 sweep short: secret + public +
relinearization keys together, and Galois keys for ONE step (the per-step cost; a set of k steps
costs about k times that). The hoisted-rotation op needs keys for steps 1..hoisted_steps,
generated once, untimed.

Bootstrapping (parameters with bootstrap parameters, e.g. `--depths none --preset boot-n16`; other
parameter sets skip it unless --ops names it): key generation (one call: minutes at N = 2^16, with
the keys' size), and the bootstrap itself from level 1 on values in [-1, 1] (precision in bits,
latency, peak RSS with its keys) on two threads and on one (`threads` of the record). The report
plots them against the levels the bootstrap leaves (the preset's max_level).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np

from henn.ckks.values import EvaluationKeys
from henn.errors import UnsupportedOperation
from henn.profile.harness import Recorder, Settings, error_entry, throughput, time_call

log = logging.getLogger(__name__)

SCALAR = 0.75  # the constant of multiply_scalar
BOOTSTRAP_OPS = ("keygen_bootstrap", "bootstrap")
CORE_OPS = (
    "encode",
    "encrypt",
    "decrypt",
    "decode",
    "add",
    "multiply_relin",
    "rescale",
    "multiply_plain",
    "multiply_scalar",
    "rotate",
    "rotate_hoisted",
    "rotate_sum",
    "keygen_sk_pk_relin",
    "keygen_galois",
)  # every primitive but bootstrapping
OPS = CORE_OPS + BOOTSTRAP_OPS


class _Fixture:
    """Inputs, keys and ciphertexts of one context, made on first use; a failure to make one is
    remembered and re-raised for every op that needs it (so each of those records says why)."""

    def __init__(self, be, settings: Settings):
        self.be, self.settings = be, settings
        rng = np.random.default_rng(settings.seed)
        n = be.slots
        self.inputs = {"ones": (np.ones(n), np.ones(n)), "random": (rng.uniform(-1, 1, n), rng.uniform(-1, 1, n))}
        self.hoisted = list(range(1, settings.hoisted_steps + 1))
        self._cache: dict[str, object] = {}

    def get(self, name: str, make: Callable[[], object]):
        if name not in self._cache:
            try:
                self._cache[name] = make()
            except Exception as exc:  # noqa: BLE001 - remembered, re-raised per op
                self._cache[name] = exc
        value = self._cache[name]
        if isinstance(value, Exception):
            raise value
        return value

    def drop(self, name: str) -> None:
        self._cache.pop(name, None)

    # keys
    @property
    def sk(self):
        return self.get("sk", self.be.generate_secret_key)

    @property
    def pk(self):
        return self.get("pk", lambda: self.be.generate_public_key(self.sk))

    @property
    def rk(self):
        return self.get("rk", lambda: self.be.generate_relin_key(self.sk))

    @property
    def ev(self):
        return self.get("ev", lambda: self.be.evaluator(EvaluationKeys(self.pk, self.rk, None)))

    @property
    def ev_rot(self):
        def make():
            t0 = time.perf_counter()
            gk = self.be.generate_galois_keys(self.sk, self.hoisted)
            self.galois_set_s = time.perf_counter() - t0
            return self.be.evaluator(EvaluationKeys(self.pk, self.rk, gk))

        return self.get("ev_rot", make)

    @property
    def bk(self):
        return self.get("bk", lambda: self.be.generate_bootstrap_keys(self.sk))

    @property
    def ev_boot(self):
        return self.get("ev_boot", lambda: self.be.evaluator(EvaluationKeys(self.pk, self.rk, None, self.bk)))

    def ct_low(self, kind: str = "random"):
        """A ciphertext at level 1: where a bootstrap starts."""
        return self.get(f"ct-low-{kind}", lambda: self.be.encrypt(self.inputs[kind][0], self.pk, level=1))

    # encrypted inputs (random values: the timings)
    def ct(self, which: int = 0, kind: str = "random"):
        return self.get(f"ct{which}-{kind}", lambda: self.be.encrypt(self.inputs[kind][which], self.pk))

    def dec(self, ct) -> np.ndarray:
        return self.be.decrypt_decode(ct, self.sk)


_Prepare = Callable[[_Fixture], Callable[[], object]]  # -> the timed call
_Check = Callable[[_Fixture, str], tuple]  # (fixture, input kind) -> (expected, got)


@dataclass(frozen=True)
class _Op:
    name: str
    prepare: _Prepare
    check: _Check | None = None
    ops_per_call: int = 1
    warmup: int | None = None  # None: settings.warmup
    check_inputs: tuple[str, ...] = ("ones", "random")
    counts_throughput: bool = True
    min_repeats: int | None = None  # None: settings.min_repeats


def _product(fx: _Fixture):
    return fx.get("product", lambda: fx.ev.multiply(fx.ct(0), fx.ct(1)))


def _plain_operand(fx: _Fixture, kind: str = "random"):
    """y encoded at ct's level with scale q_level (rescale restores the scale exactly)."""
    be = fx.be
    return fx.get(f"pt1-{kind}", lambda: be.encode(fx.inputs[kind][1], scale=float(be.prime(be.max_level))))


def _roundtrip(fx, kind):
    x = fx.inputs[kind][0]
    return x, fx.dec(fx.be.encrypt(x, fx.pk))


def _binary(fn, expect):
    """check of a ct-ct op: fn(ev, ct_x, ct_y) -> ct; expect(x, y) -> values."""

    def check(fx, kind):
        x, y = fx.inputs[kind]
        return expect(x, y), fx.dec(fn(fx, fx.ct(0, kind), fx.ct(1, kind)))

    return check


def _keygen_galois(fx: _Fixture):
    def call():
        fx._cache["gk1"] = fx.be.generate_galois_keys(fx.sk, [1])

    return call


def _keygen_bootstrap(fx: _Fixture):
    def call():
        fx.drop("ev_boot")
        fx._cache["bk"] = fx.be.generate_bootstrap_keys(fx.sk)

    return call


def _bootstrap(parallel: bool) -> tuple[_Prepare, _Check]:
    def prepare(fx: _Fixture):
        ev, ct = fx.ev_boot, fx.ct_low()
        return lambda: ev.bootstrap(ct, parallel=parallel)

    def check(fx, kind):
        return fx.inputs[kind][0], fx.dec(fx.ev_boot.bootstrap(fx.ct_low(kind), parallel=parallel))

    return prepare, check


def _bootstrap_extra(fx: _Fixture) -> dict:
    be, boot = fx.be, fx.be.params.bootstrap
    info = be.bootstrap_info or {}
    return {
        "levels_left": be.max_level,
        "bootstrap_depth": boot.depth,
        "log_slots": boot.log_slots,
        "bootstrap_log_qp": info.get("log_qp", be.params.bootstrap_log_qp),
        "bootstrap_key_bytes": fx.bk.nbytes,
        "galois_keys": info.get("galois_keys"),
    }


def _hoisted_check(fx, kind):
    x = fx.inputs[kind][0]
    rots = fx.ev_rot.rotate_hoisted(fx.ct(0, kind), fx.hoisted)
    return (np.concatenate([np.roll(x, -s) for s in fx.hoisted]), np.concatenate([fx.dec(rots[s]) for s in fx.hoisted]))


def _rotate_sum(ev, ct, steps):
    """sum_s rotate(ct, s): a baby-step giant-step product's giant steps (Evaluator.rotate_sum)."""
    acc = ev.rotate_sum()
    for s in steps:
        acc.add(ct, s)
    return acc.result()


def _rotate_sum_check(fx, kind):
    x = fx.inputs[kind][0]
    return sum(np.roll(x, -s) for s in fx.hoisted), fx.dec(_rotate_sum(fx.ev_rot, fx.ct(0, kind), fx.hoisted))


def _ops(settings: Settings) -> list[_Op]:
    mul_check = _binary(lambda fx, a, b: fx.ev.rescale(fx.ev.multiply(a, b)), lambda x, y: x * y)
    return [
        _Op(
            "encode",
            lambda fx: lambda: fx.be.encode(fx.inputs["random"][0]),
            lambda fx, k: (fx.inputs[k][0], fx.be.decode(fx.be.encode(fx.inputs[k][0]))),
        ),
        _Op(
            "encrypt",
            lambda fx: (lambda pt: lambda: fx.be.encrypt(pt, fx.pk))(fx.be.encode(fx.inputs["random"][0])),
            _roundtrip,
        ),
        _Op("decrypt", lambda fx: (lambda ct: lambda: fx.be.decrypt(ct, fx.sk))(fx.ct(0)), _roundtrip),
        _Op("decode", lambda fx: (lambda pt: lambda: fx.be.decode(pt))(fx.be.decrypt(fx.ct(0), fx.sk))),
        _Op(
            "add",
            lambda fx: lambda: fx.ev.add(fx.ct(0), fx.ct(1)),
            _binary(lambda fx, a, b: fx.ev.add(a, b), lambda x, y: x + y),
        ),
        _Op("multiply_relin", lambda fx: lambda: fx.ev.multiply(fx.ct(0), fx.ct(1)), mul_check),
        _Op("rescale", lambda fx: (lambda p: lambda: fx.ev.rescale(p))(_product(fx)), mul_check),
        _Op(
            "multiply_plain",
            lambda fx: lambda: fx.ev.multiply(fx.ct(0), _plain_operand(fx)),
            lambda fx, k: (
                fx.inputs[k][0] * fx.inputs[k][1],
                fx.dec(fx.ev.rescale(fx.ev.multiply(fx.ct(0, k), _plain_operand(fx, k)))),
            ),
        ),
        _Op(
            "multiply_scalar",
            lambda fx: lambda: fx.ev.multiply(fx.ct(0), SCALAR),
            lambda fx, k: (SCALAR * fx.inputs[k][0], fx.dec(fx.ev.rescale(fx.ev.multiply(fx.ct(0, k), SCALAR)))),
        ),
        _Op(
            "rotate",
            lambda fx: (lambda ev: lambda: ev.rotate(fx.ct(0), 1))(fx.ev_rot),
            lambda fx, k: (np.roll(fx.inputs[k][0], -1), fx.dec(fx.ev_rot.rotate(fx.ct(0, k), 1))),
        ),
        _Op(
            "rotate_hoisted",
            lambda fx: (lambda ev: lambda: ev.rotate_hoisted(fx.ct(0), fx.hoisted))(fx.ev_rot),
            _hoisted_check,
            ops_per_call=settings.hoisted_steps,
            check_inputs=("random",),
        ),
        _Op(
            "rotate_sum",
            lambda fx: (lambda ev: lambda: _rotate_sum(ev, fx.ct(0), fx.hoisted))(fx.ev_rot),
            _rotate_sum_check,
            ops_per_call=settings.hoisted_steps,
            check_inputs=("random",),
        ),
        # keys: the setup already ran the code once, so no warm-up (saves seconds at depth 19)
        _Op(
            "keygen_sk_pk_relin", lambda fx: lambda: fx.be.generate_keys(relin=True), warmup=0, counts_throughput=False
        ),
        _Op("keygen_galois", _keygen_galois, warmup=0, counts_throughput=False),
        # bootstrapping: key generation takes minutes at N = 2^16, so one call
        _Op("keygen_bootstrap", _keygen_bootstrap, warmup=0, counts_throughput=False, min_repeats=1),
        _Op("bootstrap", *_bootstrap(True), check_inputs=("random",)),
    ]


def _bootstrap_sequential() -> _Op:
    return _Op("bootstrap", *_bootstrap(False), check_inputs=("random",), min_repeats=1)


def _measure(op: _Op, fx: _Fixture, settings: Settings) -> dict:
    if op.name in ("encode", "decode") and getattr(fx.be, "deferred_encoding", False):
        raise UnsupportedOperation(
            f"the {fx.be.name} backend has no separate encoding step (its library encodes "
            "inside encrypt and the plaintext operations): nothing to time"
        )
    fused = getattr(fx.be, "fused_rescale", False)
    if op.name == "rescale" and fused:
        raise UnsupportedOperation(
            f"the {fx.be.name} backend rescales inside every multiplication: its multiply latencies include the rescale"
        )
    call = op.prepare(fx)
    check = op.check
    kinds = op.check_inputs if check else ()
    errors = [error_entry(kind, *check(fx, kind)) for kind in kinds] if check else []
    # the error checks ran the op already (untimed, on other inputs): they count as warm-up calls
    warmup = settings.warmup if op.warmup is None else op.warmup
    latency, memory = time_call(call, settings, warmup=max(0, warmup - len(kinds)), min_repeats=op.min_repeats)
    latency["warmup"] = max(warmup, len(kinds))
    extra: dict[str, Any] = {"ops_per_call": op.ops_per_call}
    if fused and op.name.startswith("multiply"):
        extra["includes_rescale"] = True
    if op.name in ("rotate", "rotate_hoisted", "rotate_sum"):
        extra["galois_keygen_s"] = {"steps": len(fx.hoisted), "seconds": getattr(fx, "galois_set_s", None)}
    if op.name == "rotate_hoisted":
        extra["steps"] = list(fx.hoisted)
        extra["native_hoisting"] = type(fx.be)._rotate_hoisted is not _base("_rotate_hoisted")
    if op.name == "rotate_sum":
        extra["steps"] = list(fx.hoisted)
        extra["native_sum"] = type(fx.be)._rotate_sum is not _base("_rotate_sum")
    if op.name == "keygen_galois":
        extra["steps"] = [1]
    if op.name in BOOTSTRAP_OPS:
        extra.update(_bootstrap_extra(fx))
    tp = throughput(fx.be.slots, latency, op.ops_per_call) if op.counts_throughput else None
    return {"latency": latency, "throughput": tp, "error": errors, "memory": memory, "extra": extra}


def _base(method: str):
    """The base Backend's (generic, looping) implementation of `method`."""
    from henn.ckks.backend import Backend

    return getattr(Backend, method)


def _level0(fx: _Fixture):
    if getattr(fx.be, "lazy_drop_level", False):
        raise UnsupportedOperation(f"the {fx.be.name} backend drops levels lazily: no level-0 ciphertext to measure")
    return fx.ev.drop_to_level(fx.ct(0), 0)


def _sizes(fx: _Fixture) -> dict:
    be = fx.be
    items: dict[str, Callable[[], bytes]] = {
        "ciphertext_bytes": lambda: be.serialize(fx.ct(0)),
        "ciphertext_level0_bytes": lambda: be.serialize(_level0(fx)),
        "plaintext_bytes": lambda: be.serialize(be.encode(fx.inputs["random"][0])),
        "public_key_bytes": lambda: be.serialize(fx.pk),
        "relin_key_bytes": lambda: be.serialize(fx.rk),
        "galois_key_bytes_per_step": lambda: be.serialize(fx.get("gk1", lambda: be.generate_galois_keys(fx.sk, [1]))),
    }
    sizes, problems = {}, {}
    for name, make in items.items():
        try:
            sizes[name] = len(make())
        except Exception as exc:  # noqa: BLE001 - reported in extra, the others still count
            problems[name] = f"{type(exc).__name__}: {exc}"
    if not sizes:
        raise RuntimeError("no object could be serialized: " + "; ".join(f"{k}: {v}" for k, v in problems.items()))
    return {"sizes": sizes, "extra": {"failed": problems} if problems else {}}


def run(be, rec: Recorder, settings: Settings, ops: tuple[str, ...] | None = None) -> None:
    """Measure every primitive (or those named in `ops`) on the open backend `be`."""
    fx = _Fixture(be, settings)
    wanted = set(OPS if ops is None else ops)
    if ops is None and be.params.bootstrap is None:
        wanted -= set(BOOTSTRAP_OPS)  # a sweep of ordinary parameter sets: nothing to bootstrap
    for op in _ops(settings):
        if op.name not in wanted:
            continue
        if op.name in ("keygen_sk_pk_relin", "keygen_bootstrap"):
            fx.drop("ev_rot")  # free the hoisted-rotation keys before the key-generation peaks
        if op.name == "bootstrap":  # thread scaling: the two EvalMod halves at once, then one thread
            rec.run(op.name, partial(_measure, op, fx, settings), threads=2)
            op = _bootstrap_sequential()
            rec.run(op.name, partial(_measure, op, fx, settings), threads=1)
            continue
        rec.run(op.name, partial(_measure, op, fx, settings))
    if "sizes" in wanted or ops is None:
        rec.run("sizes", lambda: _sizes(fx))
