"""Lattigo v6.2.0 (Go) through a c-shared bridge (go/) called with ctypes (bridge.py).

Notes on this library, as the bridge uses it:
- Calls release the GIL, and since v6.2.0 Lattigo's Encoder/Evaluator/Encryptor/Decryptor are
  safe for concurrent use (ShallowCopy was removed; scratch buffers come from sync pools), so
  Python threads sharing one backend and one evaluator run in parallel.
- Primes: henn counts prime sizes exactly (bit length) and its security check adds them up.
  Lattigo's LogQ generator alternates above and below 2^k (giving (k+1)-bit primes), so this
  backend takes primes from Lattigo's NTT-friendly generator downstream only (2^k - j*2N + 1,
  as Lattigo does for its 61-bit primes): every prime has exactly the requested size.
- Rescale divides by exactly one prime q_level: Evaluator.Rescale divides by
  LevelsConsumedPerRescaling() primes, which is 1 for log_scale <= 64 (PREC64); the bridge
  refuses any other setting. Lattigo tracks the scale itself (128-bit float); henn's level and
  scale agree with it (`library_metadata` reports Lattigo's own values).
- Multiplying by a constant at scale q_level uses Lattigo's native constant product (it scales a
  non-integer constant by q_level); other scales, and integer constants (which Lattigo would
  scale by 1), multiply by the Gaussian integer round(c * scale) and set the scale.
- `linear_combination(s)` run in one bridge call (go/fused.go): the sum of round(w * scale) * ct
  accumulated on the RNS limbs in 128 bits, bit-identical to one constant product per term;
  the batched form spreads tiles over GOMAXPROCS goroutines.
- Rotations use Lattigo's Galois elements 5^k mod 2N (left rotation by k) and 2N - 1
  (conjugation); `rotate_hoisted` uses RotateHoistedNew (one decomposition for all steps).
- ring="conjugate_invariant" parameters open Lattigo's ring.ConjugateInvariant (N real slots on ring
  degree N, primes = 1 mod 4N). Lattigo has no conjugation there; real slots are their own
  conjugates, so conjugation is a copy and needs no key.
- Secret-key encryption is Lattigo's, with c1 the AES-256-CTR keystream of a fresh 32-byte seed
  (go/wire.go): such a ciphertext travels as c0 and the seed ("seeded_aes"; "seeded", c1 from
  Lattigo's BLAKE2b keyed PRNG, is still read); every other ciphertext as its coefficients bit-packed
  to each prime's width ("packed"); Lattigo's MarshalBinary ("full", 64-bit words) is still read,
  and written on request.
- The secret is uniform ternary (Xs = Ternary{P: 2/3}), the distribution of henn's security table.
- Bootstrapping (go/bootstrap.go): Lattigo's `circuits/ckks/bootstrapping` with the context's own
  parameters as the residual ones; the circuit's primes come from Lattigo, and the security module
  checks the exact log2(Q*P) it reports before any key exists. Keys are made at the level where the
  circuit uses them; with full slots the two EvalMod halves run on two goroutines.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
from ctypes import byref, c_double, c_int, c_int64, c_size_t, c_uint64, c_void_p

import numpy as np

from henn.ckks import security, serialization
from henn.ckks.backend import Backend
from henn.ckks.backends.lattigo import bridge
from henn.ckks.params import MAX_PRIME_BITS, MAX_SPECIAL_PRIME_BITS, ParametersLiteral
from henn.ckks.primes import ntt_primes
from henn.ckks.selection import check_depth, smallest_secure_log_n
from henn.errors import BackendError, ParameterError, SecurityError, SerializationError

log = logging.getLogger(__name__)

DEFAULT_LOG_SCALE = 45  # Lattigo's example parameters (schemes/ckks/example_parameters.go)
_KIND_NAMES = {
    **{v: k for k, v in serialization.KINDS.items()},
    6: "secret_key",
    7: "bootstrap_keys",
}  # go/exports_kind.go
_SCALE_RTOL = 1e-9
_ENCODING_CODES = {"full": 0, "packed": 1, "seeded": 2, "seeded_aes": 3}  # go/wire.go
_ENCODING_NAMES = {v: k for k, v in _ENCODING_CODES.items()}


def _doubles(a: np.ndarray):
    return a.ctypes.data_as(bridge.DOUBLES)


def _int64s(values) -> tuple:
    arr = (c_int64 * max(1, len(values)))(*[int(v) for v in values])
    return arr, len(values)


def _build():
    """The build module, imported on use: `python -m henn.ckks.backends.lattigo.build` must find it
    not yet imported (and importing this package must not build)."""
    from henn.ckks.backends.lattigo import build

    return build


def pinned_lattigo_version() -> str:
    """The Lattigo version go.mod pins (what a build will use)."""
    text = (_build().GO_DIR / "go.mod").read_text()
    m = re.search(r"github\.com/tuneinsight/lattigo/v6\s+(v\S+)", text)
    return m.group(1) if m else "unknown"


class LattigoBackend(Backend):
    name = "lattigo"
    bootstraps = True
    real_slot_ring = True  # ring.ConjugateInvariant
    exact_imaginary_unit = True  # slots ordered by powers of 5
    wire_encodings = ("seeded", "packed", "seeded_aes")  # "seeded": the seed's own expansion where seeded
    payload_views = True

    # ---- library, parameters -------------------------------------------------------------
    @classmethod
    def version(cls) -> str:
        build = _build()
        loaded = bridge.loaded()
        if loaded is None and build.LIBRARY.exists() and not (build.is_stale() and build.can_build()[0]):
            loaded = bridge.load(build.LIBRARY)
        if loaded is not None:
            return loaded.version()
        ok, why = build.can_build()
        if not ok:
            raise BackendError(f"the Lattigo bridge is not built and cannot be built here: {why}")
        state = "out of date" if build.LIBRARY.exists() else "not built yet"
        return f"lattigo {pinned_lattigo_version()} (bridge {state}: it is built on first use)"

    @classmethod
    def recommend(cls, depth: int, slots: int | None, log_scale: int | None) -> ParametersLiteral:
        """Lattigo's own style (its README and example_parameters.go: LogQ 55 + 45*k, two 55-61
        bit special primes, 128-bit security from the HE standard):

        - middle primes of the scale's size: 45 bits by default (Lattigo's examples), or log_scale;
        - first prime 10 bits above the scale (Lattigo's example keeps 2^9 of room for the
          message), at least 55 and at most 60 bits;
        - special primes of 61 bits (Lattigo's largest): as many as the ring holds without growing,
          up to half the chain (two key-switch digits). Lattigo's rule of thumb (about sqrt(#q)) is
          a floor, not a target: every extra special prime cuts the digits, so key switching gets
          faster and Galois keys smaller (CIFAR at N = 2^15: 6 primes, 2 digits instead of 6);
        - the smallest N that henn's security table (henn.ckks.security, the authority: Lattigo
          itself does not check the standard) admits for the total, and that holds `slots`.
        """
        check_depth(depth)
        log_scale = DEFAULT_LOG_SCALE if log_scale is None else int(log_scale)
        if not 20 <= log_scale <= MAX_PRIME_BITS - 1:
            raise ParameterError(f"log_scale {log_scale} out of range 20..{MAX_PRIME_BITS - 1} for Lattigo")
        first = min(MAX_PRIME_BITS, max(55, log_scale + 10))
        log_q = (first,) + (log_scale,) * depth
        log_n = smallest_secure_log_n(sum(log_q) + MAX_SPECIAL_PRIME_BITS, slots, depth)
        budget = security.max_log_qp(log_n) - sum(log_q)
        count = max(1, min(-(-len(log_q) // 2), budget // MAX_SPECIAL_PRIME_BITS))
        log_p = (MAX_SPECIAL_PRIME_BITS,) * count
        return ParametersLiteral(log_n, log_q, log_p, log_scale)

    @classmethod
    def chain_primes(cls, sizes, log_n: int, ring: str = "standard") -> list[int]:
        """The bridge's primes (go/context.go downstreamPrimes): Lattigo's NextDownstreamPrime, which stops
        half a bit below 2^k, where henn's generator would go on to 2^(k-1)."""
        return ntt_primes(sizes, log_n, ring=ring, half_bit=True)

    def _open(self, params) -> None:
        path = _build().ensure_built()
        self._bridge = bridge.load(path)
        if path.stat().st_mtime > self._bridge.loaded_mtime:
            log.warning(
                "the Lattigo bridge was rebuilt after this process loaded it; the old one stays in use "
                "until the process restarts (a Go runtime cannot be loaded twice)"
            )
        q, p = params.q, params.p  # Parameters pins both or neither
        nq, np_ = len(params.log_q), len(params.log_p)
        log_q, _ = _int64s(params.log_q)
        log_p, _ = _int64s(params.log_p)
        pin_q = None if q is None else (c_uint64 * nq)(*q)
        pin_p = None if q is None else (c_uint64 * np_)(*p)
        q_out, p_out, out = (c_uint64 * nq)(), (c_uint64 * np_)(), bridge.H()
        status, msg = self._bridge.call_status(
            "henn_context_new",
            params.log_n,
            params.log_scale,
            log_q,
            nq,
            log_p,
            np_,
            pin_q,
            pin_p,
            int(params.real_slots),
            byref(out),
            q_out,
            p_out,
        )
        if status != bridge.OK:
            raise ParameterError(
                f"Lattigo cannot use these parameters: {msg}; {params.describe()}; choose other "
                "parameters (e.g. select_parameters(depth, backend='lattigo'))"
            )
        self._ctx: bridge.Handle | None = bridge.Handle(self._bridge, out.value)
        self.q_primes, self.p_primes = tuple(q_out), tuple(p_out)
        self.key_polys = 1 if self._bridge.seeded_keys() else 2
        if params.bootstrap is not None:
            self.bootstrap_info = self._enable_bootstrapping(params)
        log.debug("Lattigo context opened: %s, primes q=%s p=%s", params.describe(), self.q_primes, self.p_primes)

    def _enable_bootstrapping(self, params) -> dict:
        """Derive Lattigo's bootstrapping parameters; check the exact modulus against the 128-bit bound."""
        text = json.dumps(params.bootstrap.to_bridge()).encode()
        out = c_void_p()
        status, msg = self._bridge.call_status("henn_enable_bootstrapping", self._c(), text, byref(out))
        if status != bridge.OK:
            raise ParameterError(
                f"Lattigo cannot bootstrap with these parameters: {msg}; "
                f"{params.bootstrap.describe()}: change the bootstrap literal"
            )
        info = json.loads(self._bridge.take_string(out))
        bound = security.MAX_LOG_QP_128.get(params.log_n)
        if not params.insecure and not security.is_secure(params.log_n, info["log_qp"], params.secret):
            raise SecurityError(
                f"the bootstrapping modulus is {info['log_qp']:.1f} bits at N = 2^{params.log_n}, "
                f"above the 128-bit bound of {bound}: fewer bootstrapping or residual levels, or "
                "fewer special primes (bootstrap log_p)"
            )
        if info["depth"] != params.bootstrap.depth:
            raise BackendError(
                f"Lattigo's bootstrapping circuit has depth {info['depth']}, henn expected "
                f"{params.bootstrap.depth}: the bridge and henn.ckks.bootstrap_params disagree"
            )
        log.debug(
            "bootstrapping enabled: logQP %.1f, depth %d, %d Galois keys",
            info["log_qp"],
            info["depth"],
            info["galois_keys"],
        )
        return info

    def close(self) -> None:
        """Release the Lattigo context; values made by it cannot be used with this backend after."""
        ctx, self._ctx = getattr(self, "_ctx", None), None
        if ctx is not None:
            ctx.release()
            # what the values of this backend held is garbage by now if their owners were dropped first
            self._bridge.call("henn_return_memory")

    def expect_footprint(self, need: int, available: int) -> None:
        """Go's collector gets the slack the evaluation leaves (bridge.gc_percent_for); GOGC set when the
        process started wins. The setting is the process's: the last backend told sets it."""
        if "GOGC" not in os.environ:
            self._bridge.call("henn_set_memory_policy", bridge.gc_percent_for(need, available), 0)

    # ---- helpers -------------------------------------------------------------------------------
    def _c(self) -> int:
        if self._ctx is None:
            raise BackendError(
                "this Lattigo backend is closed: open a new one (values and keys of the closed "
                "one can be moved over with serialize/deserialize only before closing)"
            )
        return self._ctx.value

    def _new(self, fn: str, *args) -> bridge.Handle:
        raw = [a.value if isinstance(a, bridge.Handle) else a for a in args]
        return self._bridge.new(fn, self._c(), *raw)

    def library_metadata(self, value) -> tuple[int, float, float, int]:
        """Lattigo's own (level, scale, log2 scale, degree) of a Ciphertext or Plaintext."""
        return self._metadata(value.raw)

    def _metadata(self, raw: bridge.Handle) -> tuple[int, float, float, int]:
        level, scale, log_scale, degree = c_int(), c_double(), c_double(), c_int()
        self._bridge.call("henn_metadata", raw.value, byref(level), byref(scale), byref(log_scale), byref(degree))
        return level.value, scale.value, log_scale.value, degree.value

    # ---- keys ----------------------------------------------------------------------------------
    def _gen_secret_key(self):
        return self._new("henn_keygen_secret")

    def _gen_public_key(self, sk):
        return self._new("henn_keygen_public", sk)

    def _export_secret(self, raw):
        ptr, n = c_void_p(), c_size_t()
        self._bridge.call("henn_secret_export", self._c(), raw.value, byref(ptr), byref(n))
        return self._bridge.take_bytes(ptr, n.value)

    def _import_secret(self, data):
        return self._new("henn_secret_import", data, len(data))

    def _gen_relin_key(self, sk):
        return self._new("henn_keygen_relin", sk)

    def _gen_galois_keys(self, sk, steps, conjugate):
        arr, n = _int64s(steps)
        return self._new("henn_keygen_galois", sk, arr, n, int(conjugate))

    def _gen_bootstrap_keys(self, sk):
        raw = self._new("henn_keygen_bootstrap", sk)
        n = c_int64()
        self._bridge.call("henn_bootstrap_key_bytes", self._c(), raw.value, byref(n))
        return raw, n.value

    def _bootstrap(self, a, divide, keys, parallel):
        return self._new("henn_bootstrap", a, keys, float(divide), int(parallel))

    def _keep_bootstrap_factors(self, keys, budget):
        need, held = c_int64(), c_int64()
        self._bridge.call("henn_bootstrap_keep_dft", self._c(), keys.value, int(budget), byref(need), byref(held))
        return need.value, held.value

    # ---- encoding, encryption --------------------------------------------------------------------
    def _encode(self, values, level, scale):
        return self._encode_periodic(values, level, scale)  # every slot: a period of all of them

    def _encode_periodic(self, values, level, scale):
        re_ = np.ascontiguousarray(values.real, dtype=np.float64)
        im_ = np.ascontiguousarray(values.imag, dtype=np.float64)
        return self._new("henn_encode", _doubles(re_), _doubles(im_), len(values), int(level), float(scale))

    def _decode(self, pt, level, scale):
        re_, im_ = np.empty(self.slots), np.empty(self.slots)
        self._bridge.call("henn_decode", self._c(), pt.value, _doubles(re_), _doubles(im_), self.slots)
        return re_ + 1j * im_

    def _encrypt(self, pt, pk):
        return self._new("henn_encrypt", pt, pk)

    def _encrypt_symmetric(self, pt, sk):
        return self._new("henn_encrypt_symmetric", pt, sk)

    def _decrypt(self, ct, sk):
        return self._new("henn_decrypt", ct, sk)

    # ---- arithmetic ----------------------------------------------------------------------------
    def _add(self, a, b):
        return self._new("henn_add", a, b)

    def _sub(self, a, b):
        return self._new("henn_sub", a, b)

    def _add_plain(self, a, pt):
        return self._new("henn_add_plain", a, pt)

    def _sub_plain(self, a, pt):
        return self._new("henn_sub_plain", a, pt)

    def _negate(self, a):
        return self._new("henn_negate", a)

    def _mul(self, a, b, rk):
        return self._new("henn_mul", a, b, 0 if rk is None else rk.value)

    def _mul_plain(self, a, pt):
        return self._new("henn_mul_plain", a, pt)

    def _square(self, a, rk):
        return self._new("henn_square", a, 0 if rk is None else rk.value)

    def _relinearize(self, a, rk):
        return self._new("henn_relinearize", a, rk)

    def _rescale(self, a):
        return self._new("henn_rescale", a)

    def _drop_level(self, a, levels):
        return self._new("henn_drop_level", a, int(levels))

    def _rotate(self, a, step, gk):
        return self._new("henn_rotate", a, int(step), gk)

    def _rotate_hoisted(self, a, steps, gk):
        arr, n = _int64s(steps)
        outs = (bridge.H * max(1, n))()
        self._bridge.call("henn_rotate_hoisted", self._c(), a.value, arr, n, gk.value, outs)
        return [bridge.Handle(self._bridge, outs[i]) for i in range(n)]

    def _rotate_sum(self, gk):
        if gk is None:  # unrotated parts only: nothing to key-switch
            return super()._rotate_sum(gk)
        return _KeySwitchSum(self, gk)

    def _conjugate(self, a, gk):
        return self._new("henn_conjugate", a, gk)

    def _add_scalar(self, a, c, level, scale):
        return self._new("henn_add_scalar", a, float(c.real), float(c.imag))

    def _mul_scalar(self, a, c, level, scale):
        return self._new("henn_mul_scalar", a, float(c.real), float(c.imag), float(scale))

    def _linear_combination(self, cts, weights, level, scale):
        hs, w = self._lc_args(cts, weights)
        return self._new("henn_linear_combination", hs, _doubles(w), len(cts), int(level), float(scale))

    def _dot_plain(self, cts, pts):
        n = len(cts)
        return self._new(
            "henn_dot_plain", (bridge.H * n)(*[c.value for c in cts]), (bridge.H * n)(*[p.value for p in pts]), n
        )

    def _dot_encode(self, cts, vectors, level, scale):
        n = len(cts)
        hs = (bridge.H * n)(*[c.value for c in cts])
        period = vectors.shape[1]  # the slots, or a power of two dividing them: the sparse packing of one period
        return self._new("henn_dot_encode", hs, _doubles(vectors), n, period, int(level), float(scale))

    def _dot_encode_parts(self, cts, baby, vec, bounds, vectors, level, scale):
        hs = (bridge.H * len(cts))(*[c.value for c in cts])
        parts = len(bounds) - 1
        outs = (bridge.H * parts)()
        nvals, period = vectors.shape
        self._bridge.call(
            "henn_dot_encode_parts",
            self._c(),
            hs,
            len(cts),
            _int64s(baby)[0],
            _int64s(vec)[0],
            len(baby),
            _int64s(bounds)[0],
            parts,
            _doubles(vectors),
            nvals,
            period,
            int(level),
            float(scale),
            outs,
        )
        return [bridge.Handle(self._bridge, outs[i]) for i in range(parts)]

    def _linear_combinations(self, cts, weight_matrix, level, scale):
        hs, w = self._lc_args(cts, weight_matrix)
        m = w.shape[0]
        outs = (bridge.H * max(1, m))()
        self._bridge.call(
            "henn_linear_combinations", self._c(), hs, len(cts), _doubles(w), m, int(level), float(scale), outs
        )
        return [bridge.Handle(self._bridge, outs[i]) for i in range(m)]

    @staticmethod
    def _lc_args(cts, weights):
        """The handles as a C array and the weights as contiguous doubles (one fused Go call)."""
        hs = (bridge.H * len(cts))(*[c.value for c in cts])
        return hs, np.ascontiguousarray(weights, dtype=np.float64)

    # ---- serialization ---------------------------------------------------------------------------
    def _raw_kinds(self, raw):
        if not isinstance(raw, bridge.Handle):
            return frozenset()
        code = c_int()
        self._bridge.call("henn_kind", raw.value, byref(code))
        name = _KIND_NAMES.get(code.value)
        return frozenset({name} if name else ())

    def _serialize(self, kind, raw):
        ptr, n = c_void_p(), c_size_t()
        self._bridge.call("henn_marshal", raw.value, byref(ptr), byref(n))
        return self._bridge.take_bytes(ptr, n.value)

    def _serialize_ciphertext(self, raw, encoding):
        ptr, n, used = c_void_p(), c_size_t(), c_int()
        self._bridge.call(
            "henn_marshal_ciphertext",
            self._c(),
            raw.value,
            _ENCODING_CODES[encoding],
            byref(ptr),
            byref(n),
            byref(used),
        )
        return self._bridge.take_bytes(ptr, n.value), _ENCODING_NAMES[used.value]

    def _wire_overhead(self):
        out = c_int()
        self._bridge.call("henn_wire_meta_size", byref(out))
        return out.value

    def _deserialize(self, kind, payload, meta):
        level = meta["level"] if kind in ("ciphertext", "plaintext") else 0
        degree = meta["degree"] if kind == "ciphertext" else 0
        encoding = meta.get("encoding")  # a compact payload's size was checked exactly by check_header
        fn, code = (
            ("henn_unmarshal_ciphertext", _ENCODING_CODES[encoding])
            if encoding
            else ("henn_unmarshal", serialization.KINDS[kind])
        )
        buf = np.frombuffer(payload, dtype=np.uint8)  # the payload in place (payload_views): Go copies nothing
        raw = self._new(fn, code, buf.ctypes.data, len(buf), level, degree)
        if kind in ("ciphertext", "plaintext"):
            _check_scale(kind, self._metadata(raw)[1], meta["scale"])
        if kind == "galois_keys":
            self._check_galois(raw, sorted(meta["steps"]), meta["conjugate"])
        return raw

    def _deserialize_ciphertexts(self, payloads, metas, threads):
        """One Go call for the set (go/wire_set.go): Go checks every size before it allocates, then reads
        the payloads in place on `threads` goroutines (MNIST's 784: docs/distributed.md)."""
        n = len(payloads)
        ints = c_int * n
        bufs = [np.frombuffer(p, dtype=np.uint8) for p in payloads]  # in place: nothing copied
        outs, scales = (bridge.H * n)(), (c_double * n)()
        self._bridge.call(
            "henn_unmarshal_ciphertexts",
            self._c(),
            n,
            ints(*[_ENCODING_CODES[m["encoding"]] for m in metas]),
            ints(*[m["level"] for m in metas]),
            ints(*[m["degree"] for m in metas]),
            (c_void_p * n)(*[b.ctypes.data for b in bufs]),
            (c_size_t * n)(*[len(b) for b in bufs]),
            int(threads),
            outs,
            scales,
        )
        raws = [bridge.Handle(self._bridge, h) for h in outs]  # owned before anything else can raise
        for got, m in zip(scales, metas):
            _check_scale("ciphertext", got, m["scale"])
        return raws

    def _check_galois(self, raw, steps: list[int], conjugate: bool) -> None:
        arr, n = _int64s(steps)
        missing, count = (c_int64 * (n + 1))(), c_int()
        try:
            self._bridge.call(
                "henn_galois_missing", self._c(), raw.value, arr, n, int(conjugate), missing, byref(count)
            )
        except BackendError as exc:
            raise SerializationError(f"galois_keys header is inconsistent ({exc}): the data is corrupted") from None
        if count.value:
            raise SerializationError(
                f"galois_keys payload lacks the keys of steps {list(missing[: count.value])} "
                "(0 = conjugation) that its header announces: the data is corrupted"
            )


BACKEND = LattigoBackend


def _check_scale(kind: str, got: float, want: float) -> None:
    """Refuse a payload whose library scale is not the one its header announces."""
    if not (math.isfinite(got) and abs(got / want - 1.0) <= _SCALE_RTOL):
        raise SerializationError(f"{kind} payload has scale {got!r}, its header says {want!r}: the data is corrupted")


class _KeySwitchSum:
    """A Go rotation sum (go/rotate_sum.go): the parts' key switches summed in the extended basis and brought
    down once, instead of once per rotation. Go locks it: parts may come from several threads."""

    def __init__(self, backend: LattigoBackend, gk):
        self._backend = backend
        self._handle = backend._new("henn_rotate_sum_new", gk)

    def add(self, a, step: int) -> None:
        be = self._backend
        be._bridge.call("henn_rotate_sum_add", be._c(), self._handle.value, a.value, int(step))

    def result(self):
        return self._backend._new("henn_rotate_sum_result", self._handle)
