"""OpenFHE (PyPI `openfhe` 1.6.1, CKKS) in a CPython 3.10 worker process (install.py, worker.py, connection.py).

Notes on this library, as this backend uses it:
- The binding exists for CPython 3.10 only; henn runs on 3.11, so OpenFHE's objects live in a worker process
  and this backend holds integer handles to them. One worker per backend; requests are small (handle ids, op
  names, numbers), bulk data only for encoded values and serialized objects; batched where henn batches
  (rotate_hoisted, rotate_sum, linear_combinations, dot_plain). A worker that dies, hangs past its deadline, or
  fails inside OpenFHE becomes a BackendError (SerializationError while loading data), never a hang.
- Primes: OpenFHE generates them from sizes (one size for every prime after the first) and cannot take pinned
  ones: library mode only (mapping.py). Special primes: OpenFHE's, 60 bits, recomputed here; henn's
  security module checks the exact log2(Q*P) before any key exists (OpenFHE runs with HEStd_NotSet).
- Scaling: FIXEDMANUAL by default (henn places every rescale); FIXEDAUTO and FLEXIBLEAUTO are selectable
  (`scaling_technique=`): henn's explicit rescales run through Compress and OpenFHE's automatic ones never
  trigger, as the worker resets OpenFHE's scale degree after each operation (worker.py). Data type COMPLEX:
  no decryption noise is added to complex slots (the REAL type adds Gaussian noise when decoding).
- Slots are ordered by powers of 5 (as in Lattigo): X^(N/2) is i in every slot, so Gaussian integers multiply
  exactly. Rotations with their Galois keys through EvalAutomorphism; several of one ciphertext hoisted with
  EvalFastRotation. OpenFHE keeps relinearization and rotation keys in global maps by key tag: the worker puts
  the key a request names there first.
- Decoding a plaintext made by encode() gives back the values it was encoded from (OpenFHE keeps them); one
  from decrypt() is decoded from its polynomial. Plaintexts have no OpenFHE serialization: their payload is
  those values, encoded again when loaded.
- No conjugate-invariant ring, no bootstrapping here (OpenFHE has CKKS bootstrapping; not wired to henn yet).
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
    exact_imaginary_unit = True  # slots ordered by powers of 5
    special_prime_bits = mapping.AUX_BITS

    def __init__(self, params, *, threads: int | None = None, timeout: float | None = None,
                 scaling_technique: str = "FIXEDMANUAL"):
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
        if params.bootstrap is not None:
            raise self.cannot_bootstrap()
        req = mapping.open_request(params, self._technique)
        self._conn = Connection(self._threads, self._timeout)
        try:
            req.pop("op")
            info, _ = self._conn.request("open", **req)
        except BackendError as exc:
            self.close()
            raise ParameterError(f"OpenFHE cannot use these parameters ({exc}); {params.describe()}") from None
        q = tuple(int(x) for x in info["q"])
        if len(q) != len(params.log_q):
            self.close()
            raise BackendError(f"OpenFHE made {len(q)} ciphertext primes for a chain of {len(params.log_q)}")
        self.q_primes = q
        self.p_primes = mapping.special_primes(list(q), int(info["dnum"]), params.n, int(info["aux_bits"]))
        log_qp = sum(math.log2(x) for x in q + self.p_primes)
        if not params.insecure and not security.is_secure(params.log_n, log_qp, params.secret):
            self.close()
            raise SecurityError(f"OpenFHE's primes give log2(QP) = {log_qp:.1f} at N = 2^{params.log_n}, above the "
                                f"128-bit bound of {security.MAX_LOG_QP_128.get(params.log_n)}: fewer or smaller "
                                "primes, or more digits (more special primes)")
        log.debug("OpenFHE context opened: %s, primes q=%s p=%s", params.describe(), q, self.p_primes)

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
            raise InputError(f"expected an object of this OpenFHE backend, got {raw!r}: values and keys cannot move "
                             "between backends (serialize and deserialize them)")
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

    def _export_secret(self, raw):
        _, (sk, pk) = self._c().request("export_sk", sk=self._id(raw, "sk"))
        return len(sk).to_bytes(8, "little") + sk + pk

    def _import_secret(self, data):
        n = int.from_bytes(data[:8], "little") if len(data) >= 8 else -1
        if not 0 < n < len(data) - 8:
            raise SerializationError("the secret key data is not this backend's (secret + public key): the key file "
                                     "is damaged")
        return self._new("import_sk", "sk", [data[8:8 + n], data[8 + n:]])

    # ---- encoding, encryption --------------------------------------------------------------------
    def _encode(self, values, level, scale):
        return self._new("encode", "pt", [_complex_bytes(values)], level=int(level), scale=float(scale))

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
        return self._c().new_many("rotate_hoisted", "ct", a=self._id(a, "ct"), steps=[int(s) for s in steps],
                                  gk=self._id(gk, "gk"))

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
        return self._c().new_many("linear_combinations", "ct", [w.tobytes()], cts=[self._id(c, "ct") for c in cts],
                                  scale=float(scale))

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
