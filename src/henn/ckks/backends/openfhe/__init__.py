"""OpenFHE (PyPI `openfhe` 1.6.1, CKKS) in a CPython 3.10 worker process (install.py, worker.py, connection.py).

Notes on this library, as this backend uses it:
- The binding exists for CPython 3.10 only; henn runs on 3.11, so OpenFHE's objects live in a worker process
  and this backend holds integer handles to them. One worker per backend; requests are small (handle ids, op
  names, numbers), bulk data only for encoded values and serialized objects; batched where henn batches
  (rotate_hoisted, rotate_sum, linear_combinations, dot_plain). A worker that dies, hangs past its deadline, or
  fails inside OpenFHE becomes a BackendError (SerializationError while loading data), never a hang.
- Primes: OpenFHE generates them from sizes (one size for every prime after the first); pinned ones (fixed
  mode) are written into a context's serialization and loaded (mapping.py). Special primes: OpenFHE's, 60 bits,
  recomputed here; henn's security module checks the exact log2(Q*P) before any key exists (OpenFHE runs with
  HEStd_NotSet).
- Scaling: FIXEDMANUAL by default (henn places every rescale); FIXEDAUTO, FLEXIBLEAUTO and FLEXIBLEAUTOEXT are
  selectable (`scaling_technique=`): henn's explicit rescales run through Compress and OpenFHE's automatic ones
  never trigger, as the worker resets OpenFHE's scale degree after each operation (worker.py). FLEXIBLEAUTOEXT's
  extra prime (about 19 bits, above the chain) is used the way OpenFHE uses it: a fresh encryption at the top
  level is made at Delta * q_ext and divided by q_ext at once, so henn sees the same chain and levels, and the
  extra prime counts in the security check. Data type COMPLEX:
  no decryption noise is added to complex slots (the REAL type adds Gaussian noise when decoding).
- Slots are ordered by powers of 5 (as in Lattigo): X^(N/2) is i in every slot, so Gaussian integers multiply
  exactly. Rotations with their Galois keys through EvalAutomorphism; several of one ciphertext hoisted with
  EvalFastRotation. OpenFHE keeps relinearization and rotation keys in global maps by key tag: the worker puts
  the key a request names there first.
- Decoding a plaintext made by encode() gives back the values it was encoded from (OpenFHE keeps them); one
  from decrypt() is decoded from its polynomial. Plaintexts have no OpenFHE serialization: their payload is
  those values, encoded again when loaded.
- No conjugate-invariant ring.
- Bootstrapping (parameters with bootstrap parameters; FIXEDMANUAL only): OpenFHE's EvalBootstrap. The context is
  made with the FHE and ADVANCEDSHE features, a uniform ternary secret (OpenFHE's UNIFORM_TERNARY, the one the
  security table is for) and a chain of max_level + GetBootstrapDepth(level budget) + 1 levels: the circuit's
  primes sit above henn's chain, and henn's levels are the bottom max_level + 1 primes. EvalBootstrapSetup runs at
  open without its precomputed DFT plaintexts (made at the first bootstrap: a client that only makes keys never
  needs them); generate_keys(bootstrap=True) runs EvalBootstrapKeyGen and makes a relinearization key, held
  together in the worker that made them (OpenFHE's global key maps are filled only for the duration of a
  bootstrap) and serialized like the other keys, never the secret key. The security module checks the whole
  modulus (every ciphertext prime of the chain + the special primes) before any key exists.
  Mapped from henn's literal: log_slots -> the bootstrap's slots (fewer: a vector repeating with that period);
  the number of CoeffsToSlots / SlotsToCoeffs factors (cts_log_scales, stc_log_scales) -> the level budget; the
  number of bootstrap special primes (log_p) -> digits of that many primes over the whole chain. OpenFHE's own
  choices, not mapped: the prime sizes (its scaling-mod size for every circuit level: henn's log_q[1]), the
  modular reduction (Chebyshev series of the scaled sine and double-angle steps for a uniform secret: K, degrees
  and evalmod_log_scale), no sparse-secret encapsulation (ephemeral_weight), its correction factor (9) in place of
  log_message_ratio; keys_at_usage_levels and stream_dft have no counterpart.
  Adapted to henn's semantics (worker.py, op_bootstrap): OpenFHE reads the input at its scale 2^p and returns the
  same message, one level above henn's top; the correction factor of each bootstrap grows by
  log2(bound * scale / 2^p), so that the modular reduction sees values / bound, and the extra level matches the
  output to henn's scale (default_scale / bound). It needs scaling primes of >= 50 bits (measured at N = 2^12:
  40-bit primes give no precision, 55-bit 8.5 bits, 59-bit 13), log_scale equal to them and a first prime at most
  2^9 above them: anything else is refused with the reason when the backend opens.
  Measured precision (insecure_boot_n12_openfhe: N = 2^12, 59-bit primes, every slot, level budget 3 + 3):
  12.15 +- 0.11 bits, lowest 11.94 over 30 runs (benchmarks/results/precision_spread.json, openfhe-boot_n12),
  1.5-2.5 s a bootstrap on two shared cores. At 128 bits (boot-n16-openfhe: N = 2^16, 1660-bit modulus, 2^6
  slots, budget 1 + 1, 3 levels left), measured 2026-11-26 on a 2-core AMD EPYC, 23.5 GiB
  (benchmarks/bootstrap_openfhe.py): 14.9 s and 12.2 bits a bootstrap, 12 s of key generation, 3.9 GiB of keys,
  6.4 GiB peak in the worker (docs/benchmarks.md); every slot at N = 2^16 needs more memory than that machine
  had free beside another benchmark.
- Threads: OpenMP inside the worker (`threads=` sets OMP_NUM_THREADS; default: OpenFHE's, all cores).
"""

from __future__ import annotations

import logging
import math

import numpy as np

from henn.ckks import security
from henn.ckks.backend import Backend
from henn.ckks.backends.openfhe import install, mapping
from henn.ckks.backends.openfhe.connection import KINDS, Connection, Handle
from henn.ckks.params import ParametersLiteral
from henn.ckks.selection import check_depth, smallest_secure_log_n
from henn.errors import BackendError, InputError, ParameterError, SecurityError, SerializationError

log = logging.getLogger(__name__)

INSTALL_HINT = "run `make openfhe` (python -m henn.ckks.backends.openfhe.install): CPython 3.10 + openfhe wheels"
_SHORT = {v: k for k, v in KINDS.items()}


def _complex_bytes(values: np.ndarray) -> bytes:
    return np.ascontiguousarray(values, dtype="<c16").tobytes()


class OpenFHEBackend(Backend):
    name = "openfhe"
    releases_gil = False  # one worker answers one request at a time: threads give no speed-up
    bootstraps = True  # parameters with bootstrap parameters: OpenFHE's EvalBootstrap (FIXEDMANUAL)
    exact_imaginary_unit = True  # slots ordered by powers of 5
    special_prime_bits = mapping.AUX_BITS
    special_prime_size_fixed = True  # OpenFHE's AUXMODSIZE: its special primes are never smaller

    def __init__(
        self,
        params,
        *,
        threads: int | None = None,
        timeout: float | None = None,
        scaling_technique: str = "FIXEDMANUAL",
    ):
        self._threads, self._timeout, self._technique = threads, timeout, scaling_technique
        self._conn: Connection | None = None
        super().__init__(params)

    # ---- library, parameters -------------------------------------------------------------
    @classmethod
    def version(cls) -> str:
        stamp = install.read_stamp()
        if stamp is None or not install.interpreter().exists():
            raise BackendError(f"the OpenFHE backend is not installed: {INSTALL_HINT}")
        v = stamp["versions"]
        return f"openfhe {v['openfhe']} (worker: CPython {v['python']}, numpy {v['numpy']})"

    @classmethod
    def recommend(cls, depth: int, slots: int | None, log_scale: int | None) -> ParametersLiteral:
        check_depth(depth)
        return mapping.recommend(depth, lambda log_qp: smallest_secure_log_n(log_qp, slots, depth), log_scale)

    def _open(self, params) -> None:
        req = mapping.open_request(params, self._technique)
        self._conn = Connection(self._threads, self._timeout)
        try:
            if params.bootstrap is not None:
                depth, _ = self._conn.request("boot_depth", budget=mapping.level_budget(params))
                req = mapping.with_bootstrap(req, params, int(depth))
            req.pop("op")
            info, _ = self._conn.request("open", **req)
        except (BackendError, ParameterError) as exc:
            self.close()
            raise ParameterError(f"OpenFHE cannot use these parameters ({exc}); {params.describe()}") from None
        q_all = tuple(int(x) for x in info["q"])
        q = q_all[: len(params.log_q)]
        expected = req["depth"] + 1 + mapping.extra_primes(self._technique)
        if len(q_all) != expected:
            self.close()
            raise BackendError(f"OpenFHE made {len(q_all)} ciphertext primes for a chain of {expected}")
        if params.q is not None and q != tuple(params.q):
            self.close()
            raise BackendError(f"OpenFHE's context holds the primes {q}, not the pinned {tuple(params.q)}")
        self.q_primes = q
        # every ciphertext prime of OpenFHE's context: henn's chain, then the bootstrapping circuit's or
        # FLEXIBLEAUTOEXT's extra prime above it (all of them count in the security check below)
        self.context_primes = q_all
        self.p_primes = mapping.special_primes(list(q_all), int(info["dnum"]), params.n, int(info["aux_bits"]))
        # the whole modulus the keys live under: with bootstrapping, the circuit's primes above henn's chain
        log_qp = sum(math.log2(x) for x in q_all + self.p_primes)
        if not params.insecure and not security.is_secure(params.log_n, log_qp, params.secret):
            self.close()
            what = " (with the bootstrapping circuit's primes)" if params.bootstrap is not None else ""
            raise SecurityError(
                f"OpenFHE's primes give log2(QP) = {log_qp:.1f}{what} at N = 2^{params.log_n}, above "
                f"the 128-bit bound of {security.MAX_LOG_QP_128.get(params.log_n)}: fewer or "
                "smaller primes, or more digits (more special primes)"
            )
        if params.bootstrap is not None:
            self.bootstrap_info = {
                "depth": req["depth"] - params.max_level,
                "output_level": params.max_level,
                "log_qp": log_qp,
                "q": q_all,
                "p": self.p_primes,
                "dnum": int(info["dnum"]),
                "level_budget": req["boot"]["budget"],
                "log_slots": params.bootstrap.log_slots,
                "correction_factor": int(info["boot_correction"]),
                "galois_keys": _bootstrap_key_bound(req["boot"]["budget"], params.bootstrap.log_slots),
            }
        log.debug("OpenFHE context opened: %s, primes q=%s p=%s", params.describe(), q_all, self.p_primes)

    def close(self) -> None:
        """Stop the worker; values and keys of this backend cannot be used after."""
        conn, self._conn = getattr(self, "_conn", None), None
        if conn is not None:
            conn.close()

    @property
    def worker_info(self) -> dict:
        """Versions the worker reported (OpenFHE, CPython, numpy)."""
        return dict(self._c().info)

    # ---- helpers -------------------------------------------------------------------------------
    def _c(self) -> Connection:
        if self._conn is None:
            raise BackendError("this OpenFHE backend is closed: open a new one")
        return self._conn

    def _id(self, raw, kind: str) -> int:
        """The worker id of `raw`, refused unless it is this worker's object of that kind."""
        if not isinstance(raw, Handle) or raw.conn is not self._conn:
            raise InputError(
                f"expected an object of this OpenFHE backend, got {raw!r}: values and keys cannot move "
                "between backends (serialize and deserialize them)"
            )
        if raw.kind != kind:
            raise InputError(f"expected an OpenFHE {KINDS[kind]}, got a {KINDS.get(raw.kind, raw.kind)}")
        return raw.id

    def _new(self, op: str, kind: str = "ct", blobs=(), **meta) -> Handle:
        return self._c().new(op, kind, blobs, **meta)

    # ---- keys ----------------------------------------------------------------------------------
    def _gen_secret_key(self):
        return self._new("keygen_sk", "sk")

    def _gen_public_key(self, sk):
        return self._new("keygen_pk", "pk", sk=self._id(sk, "sk"))

    def _gen_relin_key(self, sk):
        return self._new("keygen_rk", "rk", sk=self._id(sk, "sk"))

    def _gen_galois_keys(self, sk, steps, conjugate):
        return self._new("keygen_gk", "gk", sk=self._id(sk, "sk"), steps=[int(s) for s in steps], conj=conjugate)

    def _gen_bootstrap_keys(self, sk):
        """The keys and their size: each of its switching keys (rotations, conjugation, relinearization) holds
        2 polynomials over Q*P per digit, counted here rather than serialized (gigabytes at N = 2^16)."""
        (hid, count), _ = self._c().request("keygen_bk", sk=self._id(sk, "sk"))
        keys = Handle(self._c(), hid, "bk")
        info = self.bootstrap_info or {}
        limbs = len(info.get("q", self.q_primes)) + len(self.p_primes)
        return keys, int(count) * int(info.get("dnum", 1)) * 2 * limbs * self.params.n * 8

    def _bootstrap_ciphertext(self, a, divide, keys, parallel):
        """OpenFHE's EvalBootstrap of `a` at henn's scale and bound (worker.py: op_bootstrap, which says how);
        it runs on OpenFHE's own threads (`parallel` has no counterpart)."""
        return self._new(
            "bootstrap",
            a=self._id(a.raw, "ct"),
            keys=self._id(keys, "bk"),
            scale=float(a.scale),
            divide=float(divide),
            out_scale=self.params.default_scale / divide,
        )

    def _export_secret(self, raw):
        _, (sk, pk) = self._c().request("export_sk", sk=self._id(raw, "sk"))
        return len(sk).to_bytes(8, "little") + sk + pk

    def _import_secret(self, data):
        n = int.from_bytes(data[:8], "little") if len(data) >= 8 else -1
        if not 0 < n < len(data) - 8:
            raise SerializationError(
                "the secret key data is not this backend's (secret + public key): the key file is damaged"
            )
        return self._new("import_sk", "sk", [data[8 : 8 + n], data[8 + n :]])

    # ---- encoding, encryption --------------------------------------------------------------------
    def _encode(self, values, level, scale):
        values = np.asarray(values)
        if np.iscomplexobj(values) and values.imag.any():
            return self._new("encode", "pt", [_complex_bytes(values)], level=int(level), scale=float(scale))
        # real values (every weight): half the bytes through the pipe
        real = np.ascontiguousarray(values.real, dtype="<f8").tobytes()
        return self._new("encode", "pt", [real], level=int(level), scale=float(scale), real=True)

    def _decode(self, pt, level, scale):
        _, (data,) = self._c().request("decode", pt=self._id(pt, "pt"), scale=float(scale))
        return np.frombuffer(data, dtype="<c16").astype(np.complex128)

    def _encrypt(self, pt, pk):
        return self._new("encrypt", pt=self._id(pt, "pt"), key=self._id(pk, "pk"), symmetric=False)

    def _encrypt_symmetric(self, pt, sk):
        return self._new("encrypt", pt=self._id(pt, "pt"), key=self._id(sk, "sk"), symmetric=True)

    def _decrypt(self, ct, sk):
        return self._new("decrypt", "pt", ct=self._id(ct, "ct"), sk=self._id(sk, "sk"))

    # ---- arithmetic ------------------------------------------------------------------------------
    def _add(self, a, b):
        return self._new("add", a=self._id(a, "ct"), b=self._id(b, "ct"))

    def _sub(self, a, b):
        return self._new("sub", a=self._id(a, "ct"), b=self._id(b, "ct"))

    def _add_plain(self, a, pt):
        return self._new("add_plain", a=self._id(a, "ct"), pt=self._id(pt, "pt"))

    def _sub_plain(self, a, pt):
        return self._new("sub_plain", a=self._id(a, "ct"), pt=self._id(pt, "pt"))

    def _negate(self, a):
        return self._new("negate", a=self._id(a, "ct"))

    def _mul(self, a, b, rk):
        return self._new("mul", a=self._id(a, "ct"), b=self._id(b, "ct"), rk=None if rk is None else self._id(rk, "rk"))

    def _mul_plain(self, a, pt):
        return self._new("mul_plain", a=self._id(a, "ct"), pt=self._id(pt, "pt"))

    def _square(self, a, rk):
        return self._mul(a, a, rk)

    def _relinearize(self, a, rk):
        return self._new("relinearize", a=self._id(a, "ct"), rk=self._id(rk, "rk"))

    def _rescale(self, a):
        return self._new("rescale", a=self._id(a, "ct"))

    def _drop_level(self, a, levels):
        return self._new("drop_level", a=self._id(a, "ct"), levels=int(levels))

    def _rotate(self, a, step, gk):
        return self._new("rotate", a=self._id(a, "ct"), step=int(step), gk=self._id(gk, "gk"))

    def _rotate_hoisted(self, a, steps, gk):
        return self._c().new_many(
            "rotate_hoisted", "ct", a=self._id(a, "ct"), steps=[int(s) for s in steps], gk=self._id(gk, "gk")
        )

    def _rotate_sum(self, gk):
        return _RotationSum(self, gk)

    def _conjugate(self, a, gk):
        return self._new("conjugate", a=self._id(a, "ct"), gk=self._id(gk, "gk"))

    def _add_scalar(self, a, c, level, scale):
        return self._new("add_scalar", a=self._id(a, "ct"), re=float(c.real), im=float(c.imag), scale=float(scale))

    def _mul_scalar(self, a, c, level, scale):
        return self._new("mul_scalar", a=self._id(a, "ct"), re=float(c.real), im=float(c.imag), scale=float(scale))

    def _linear_combination(self, cts, weights, level, scale):
        return self._linear_combinations(cts, np.asarray(weights, dtype=np.float64)[None, :], level, scale)[0]

    def _linear_combinations(self, cts, weight_matrix, level, scale):
        w = np.ascontiguousarray(weight_matrix, dtype="<f8")
        if w.shape[0] == 0:
            return []
        return self._c().new_many(
            "linear_combinations", "ct", [w.tobytes()], cts=[self._id(c, "ct") for c in cts], scale=float(scale)
        )

    def _dot_plain(self, cts, pts):
        return self._new("dot_plain", cts=[self._id(c, "ct") for c in cts], pts=[self._id(p, "pt") for p in pts])

    # ---- serialization ---------------------------------------------------------------------------
    def _raw_kinds(self, raw):
        if not isinstance(raw, Handle) or raw.conn is not self._conn:
            return frozenset()
        return frozenset({KINDS[raw.kind]})

    def _serialize(self, kind, raw):
        _, (data,) = self._c().request("serialize", h=self._id(raw, _SHORT[kind]), what=_SHORT[kind])
        return data

    def _deserialize(self, kind, payload, meta):
        short = _SHORT[kind]
        extra = {}
        if kind in ("ciphertext", "plaintext"):
            extra["level"] = meta["level"]
        if kind == "ciphertext":
            extra["degree"] = meta["degree"]
        if kind == "galois_keys":
            extra.update(steps=sorted(meta["steps"]), conj=bool(meta["conjugate"]))
        return self._new("deserialize", short, [bytes(payload)], what=short, **extra)


BACKEND = OpenFHEBackend


def _bootstrap_key_bound(budget: list[int], log_slots: int) -> int:
    """At most how many rotation keys OpenFHE's bootstrapping makes: each of the budget's levels of a DFT of
    2^log_slots slots combines at most 2^(r+1) diagonals (r: its share of the log_slots bits), one key each
    without baby-step giant-step savings, plus the conjugation (an upper bound for the payload check: 52
    keys measured at N = 2^12, budget [3, 3], where this gives 196)."""
    return sum(b * 2 ** (-(-log_slots // b) + 1) for b in budget) + 4


class _RotationSum:
    """sum_i rotate(ct_i, step_i) sent as one request at the end (the worker hoists the rotations of one input);
    the parts are held here until then. Henn's RotationSum checks each part as it arrives."""

    def __init__(self, backend: OpenFHEBackend, gk):
        self._backend, self._gk = backend, gk
        self._parts: list[tuple[Handle, int]] = []

    def add(self, a, step: int) -> None:
        self._backend._id(a, "ct")
        self._parts.append((a, int(step)))  # list.append is atomic: parts may come from several threads

    def result(self):
        be = self._backend
        gk = None if self._gk is None else be._id(self._gk, "gk")
        parts = [[a.id, s] for a, s in self._parts]
        return be._new("rotate_sum", parts=parts, gk=gk)
