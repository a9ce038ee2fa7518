"""TenSEAL (OpenMined, Apache-2.0; PyPI `tenseal`, the optional extra `henn[tenseal]`) through its
user-facing CKKSVector API, so that the profiler measures TenSEAL as its users run it.

TenSEAL wraps its own copy of Microsoft SEAL (4.x). Where its API differs from henn's model:

- Keys live inside a TenSEAL context. `generate_secret_key` creates a new context (TenSEAL makes
  the secret, public and relinearization keys together there); the public and relinearization
  keys are handles on that context. Ciphertexts and keys of different `generate_keys` calls
  cannot be mixed (refused with InputError rather than decrypting garbage).
- Every multiplication is relinearized and rescaled at once (auto_relin, auto_rescale), and
  TenSEAL then resets the scale to its nominal value (~1e-6 relative error). henn's level and
  scale bookkeeping is kept exact by a "pending rescale" counter: the product is already one
  level down; henn's following `rescale` only consumes that counter. Consequences: a product
  must be rescaled before it is multiplied again (lazy rescaling cannot be expressed), a
  multiplication without relinearization, `relinearize` and a `rescale` not right after a
  multiplication raise UnsupportedOperation.
- `drop_level` is lazy: TenSEAL switches moduli itself when operands of different levels meet.
- There is no separate encoding (TenSEAL encodes inside encryption and the plaintext
  operations): plaintexts are kept as values until used; `deferred_encoding` tells the profiler
  so. Only real values are supported (CKKSVector encrypts real vectors); encryption happens at the
  top level only; `decrypt` also decodes.
- The CKKSVector API has no slot rotation or conjugation (only `sum`/`matmul` built on TenSEAL's
  own fixed set of power-of-two Galois keys), and TenSEAL cannot generate keys for chosen steps:
  Galois keys, rotations and conjugation raise UnsupportedOperation.
- TenSEAL takes prime *sizes* only and lets SEAL pick the primes, so `fixed` mode (pinned primes)
  cannot be honoured: opening such parameters raises UnsupportedOperation. SEAL's security check
  cannot be switched off through TenSEAL, so insecure_ presets are refused too.
- Serialized keys are TenSEAL contexts holding only that key (a few hundred bytes of
  parameters included); a plaintext cannot be serialized (it is not encoded).
"""

from __future__ import annotations

import struct

import numpy as np

from henn.ckks import security
from henn.ckks.backend import Backend
from henn.ckks.params import MAX_PRIME_BITS, ParametersLiteral
from henn.ckks.selection import check_depth
from henn.errors import BackendError, InputError, ParameterError, SerializationError, UnsupportedOperation

try:  # optional: available() says how to install it
    import tenseal as ts
    import tenseal.sealapi as sealapi
except ImportError:  # pragma: no cover - depends on the environment
    ts = sealapi = None

INSTALL_HINT = "pip install tenseal  (or: pip install 'henn[tenseal]')"
TENSEAL_MAX_LOG_N = 15  # SEAL's 128-bit tables stop at N = 32768


class _Context:
    """One TenSEAL context: its secret, public and relinearization keys."""

    __slots__ = ("data",)

    def __init__(self, data):
        self.data = data


class _Ct:
    """A CKKSVector and the number of rescales TenSEAL already did that henn has not yet asked for."""

    __slots__ = ("vec", "ctx", "pending")

    def __init__(self, vec, ctx: _Context, pending: int = 0):
        self.vec, self.ctx, self.pending = vec, ctx, pending


class _Plain:
    """Values waiting to be encoded by the TenSEAL operation that uses them."""

    __slots__ = ("values", "level", "scale")

    def __init__(self, values: np.ndarray, level: int | None, scale: float | None):  # None: decrypted values
        self.values, self.level, self.scale = values, level, scale


def _call(op: str, fn, *args):
    """A TenSEAL call; its ValueError/RuntimeError becomes a BackendError that says what to do."""
    try:
        return fn(*args)
    except (ValueError, RuntimeError, TypeError) as exc:
        raise BackendError(
            f"TenSEAL failed in {op}: {exc}. Its automatic rescaling resets the scale to the "
            "nominal 2^log_scale and cannot follow every scale henn plans (e.g. polynomial "
            "evaluation with adjusted scales); use fewer levels per step or another backend"
        ) from None


def _unsupported(what: str, why: str):
    raise UnsupportedOperation(f"the tenseal backend cannot {what}: {why}")


class TensealBackend(Backend):
    name = "tenseal"
    special_prime_bits, max_special_primes = MAX_PRIME_BITS, 1  # one special prime of <= 60 bits
    # what the profiler must know to report this library fairly (see the module docstring)
    deferred_encoding = True  # no separate encode step
    fused_rescale = True  # products come back rescaled: `rescale` costs nothing, multiply includes it
    lazy_drop_level = True  # drop_level does nothing until operands meet
    symmetric_encryption = False  # its vectors encrypt under the context's public key only

    def __init__(self, params, *, n_threads: int | None = None):
        if n_threads is not None and (not isinstance(n_threads, int) or n_threads < 1):
            raise InputError(f"n_threads must be a positive integer, got {n_threads!r}")
        self.n_threads = n_threads or 1
        self._last: _Context | None = None
        super().__init__(params)

    # ---- library, parameters -------------------------------------------------------------
    @classmethod
    def version(cls) -> str:
        if ts is None:
            raise BackendError(f"the tenseal backend needs the tenseal package: {INSTALL_HINT}")
        return f"tenseal {ts.__version__} (bundled SEAL)"

    @classmethod
    def available(cls) -> tuple[bool, str]:
        if ts is None:
            return False, INSTALL_HINT
        return super().available()

    @classmethod
    def recommend(cls, depth: int, slots: int | None, log_scale: int | None) -> ParametersLiteral:
        """TenSEAL has no parameter selection; its tutorials follow SEAL's rule: [60] + [scale]*depth
        + [60] on the smallest ring SEAL's 128-bit table (CoeffModulus.MaxBitCount) admits."""
        cls.version()
        check_depth(depth)
        log_scale = 40 if log_scale is None else int(log_scale)
        if not 20 <= log_scale <= MAX_PRIME_BITS - 1:
            raise ParameterError(f"log_scale {log_scale} out of range 20..{MAX_PRIME_BITS - 1} for TenSEAL")
        log_q = (min(MAX_PRIME_BITS, log_scale + 20),) + (log_scale,) * depth
        total = sum(log_q) + MAX_PRIME_BITS
        log_n = 10
        while slots is not None and (1 << (log_n - 1)) < slots:
            log_n += 1
        tc128 = sealapi.SEC_LEVEL_TYPE.TC128
        while log_n <= TENSEAL_MAX_LOG_N and sealapi.CoeffModulus.MaxBitCount(1 << log_n, tc128) < total:
            log_n += 1
        if log_n > TENSEAL_MAX_LOG_N or not security.is_secure(log_n, total):
            raise ParameterError(
                f"depth {depth} at a {log_scale}-bit scale needs {total} modulus bits, more than "
                f"TenSEAL (SEAL) admits up to N = 2^{TENSEAL_MAX_LOG_N}: reduce depth or the scale"
            )
        return ParametersLiteral(log_n, log_q, (MAX_PRIME_BITS,), log_scale)

    def _open(self, params) -> None:
        self.version()
        if params.insecure:
            _unsupported(
                "open insecure parameters",
                "TenSEAL always applies SEAL's 128-bit security check; use "
                "secure parameters (select_parameters) with this backend",
            )
        if len(params.log_p) != 1 or params.log_p[0] > MAX_PRIME_BITS:
            raise ParameterError(
                f"TenSEAL supports one special prime of at most {MAX_PRIME_BITS} bits, got "
                f"log_p={list(params.log_p)}: use log_p=(60,)"
            )
        sizes = list(params.log_q) + list(params.log_p)
        try:
            primes = tuple(m.value() for m in sealapi.CoeffModulus.Create(params.n, sizes))
        except (ValueError, RuntimeError) as exc:
            raise ParameterError(
                f"SEAL (in TenSEAL) rejected the prime sizes {sizes} at N = 2^{params.log_n}: {exc}"
            ) from None
        nq = len(params.log_q)
        if (params.q is not None and tuple(params.q) != primes[:nq]) or (
            params.p is not None and tuple(params.p) != primes[nq:]
        ):
            _unsupported(
                "use pinned primes (mode=fixed)",
                "TenSEAL accepts prime sizes only and lets SEAL choose the primes; profile it with mode=library",
            )
        self.q_primes, self.p_primes = primes[:nq], primes[nq:]
        self._sizes = sizes
        self._new_context()  # fails early, here, if TenSEAL refuses the parameters

    def _new_context(self) -> _Context:
        p = self.params
        try:
            data = ts._ts_cpp.TenSEALContext.new(
                ts.SCHEME_TYPE.CKKS.value, p.n, 0, self._sizes, ts.ENCRYPTION_TYPE.ASYMMETRIC.value, self.n_threads
            )
        except (ValueError, RuntimeError) as exc:
            raise ParameterError(
                f"TenSEAL refused {p.describe()}: {exc}; use select_parameters(depth, backend='tenseal')"
            ) from None
        data.global_scale = float(p.default_scale)
        data.auto_relin = data.auto_rescale = data.auto_mod_switch = True
        self._last = _Context(data)
        return self._last

    # ---- keys ------------------------------------------------------------------------------
    def _gen_secret_key(self):
        return self._new_context()  # TenSEAL makes secret, public and relinearization keys here

    def _gen_public_key(self, sk):
        return sk

    def _gen_relin_key(self, sk):
        if not sk.data.has_relin_keys():
            sk.data.generate_relin_keys()
        return sk

    def _gen_galois_keys(self, sk, steps, conjugate):
        _unsupported(
            "generate Galois keys for chosen steps",
            "TenSEAL only makes its own fixed power-of-two set "
            "and its CKKSVector API has no rotation; use the seal or lattigo backend for rotations",
        )

    # ---- encoding, encryption ------------------------------------------------------------
    def _encode(self, values, level, scale):
        if np.any(values.imag != 0):
            _unsupported("encode complex values", "TenSEAL's CKKSVector holds real values only")
        return _Plain(values.real.copy(), level, scale)

    def _decode(self, pt, level, scale):
        return pt.values.astype(np.complex128)

    def _encrypt(self, pt, pk):
        if pt.level != self.max_level:
            _unsupported(f"encrypt at level {pt.level}", "TenSEAL encrypts at the top of the modulus chain only")
        return _Ct(_call("encrypt", ts._ts_cpp.CKKSVector, pk.data, pt.values.tolist(), float(pt.scale)), pk)

    def _decrypt(self, ct, sk):
        if ct.ctx is not sk:
            raise InputError(
                "this ciphertext was encrypted under the keys of another generate_keys call: decrypt "
                "it with that call's secret key (TenSEAL keeps keys per context)"
            )
        values = _call("decrypt", ct.vec.decrypt, sk.data.secret_key())
        return _Plain(np.asarray(values, dtype=np.float64), None, None)

    # ---- arithmetic --------------------------------------------------------------------------
    @staticmethod
    def _same(op: str, a: _Ct, b: _Ct) -> None:
        if a.ctx is not b.ctx:
            raise InputError(f"cannot {op}: the operands were encrypted under different generate_keys calls")
        if a.pending != b.pending:
            _unsupported(
                f"{op} a product that was not rescaled with another value",
                "TenSEAL rescales every product at once: rescale it first",
            )

    def _add(self, a, b):
        self._same("add", a, b)
        return _Ct(_call("add", a.vec.add, b.vec), a.ctx, a.pending)

    def _sub(self, a, b):
        self._same("sub", a, b)
        return _Ct(_call("sub", a.vec.sub, b.vec), a.ctx, a.pending)

    def _add_plain(self, a, pt):
        return _Ct(_call("add_plain", a.vec.add_plain, pt.values.tolist()), a.ctx, a.pending)

    def _sub_plain(self, a, pt):
        return _Ct(_call("sub_plain", a.vec.sub_plain, pt.values.tolist()), a.ctx, a.pending)

    def _add_scalar(self, a, c, level, scale):
        return _Ct(_call("add_plain", a.vec.add_plain, self._real(c)), a.ctx, a.pending)

    def _negate(self, a):
        return _Ct(_call("neg", a.vec.neg), a.ctx, a.pending)

    def _product(self, a: _Ct, rk, op: str) -> None:
        if rk is None:
            _unsupported(f"{op} without relinearization", "TenSEAL relinearizes every product (auto_relin)")
        if a.pending:
            _unsupported(
                f"{op} a product before rescaling it",
                "TenSEAL rescales every product at once; henn's "
                "lazy rescaling cannot be expressed: rescale after each multiplication",
            )
        if rk is not a.ctx:
            raise InputError(f"cannot {op}: the relinearization key belongs to another generate_keys call")

    def _mul(self, a, b, rk):
        self._product(a, rk, "multiply")
        self._same("multiply", a, b)
        return _Ct(_call("mul", a.vec.mul, b.vec), a.ctx, 1)

    def _square(self, a, rk):
        self._product(a, rk, "square")
        return _Ct(_call("square", a.vec.square), a.ctx, 1)

    def _mul_plain(self, a, pt):
        self._product(a, a.ctx, "multiply by a plaintext")
        return _Ct(_call("mul_plain", a.vec.mul_plain, pt.values.tolist()), a.ctx, 1)

    def _mul_scalar(self, a, c, level, scale):
        self._product(a, a.ctx, "multiply by a scalar")
        return _Ct(_call("mul_plain", a.vec.mul_plain, self._real(c)), a.ctx, 1)

    def _relinearize(self, a, rk):
        _unsupported("relinearize", "TenSEAL relinearizes inside every multiplication")

    def _rescale(self, a):
        if not a.pending:
            _unsupported("rescale here", "TenSEAL rescales only automatically, right after a multiplication")
        return _Ct(a.vec, a.ctx, a.pending - 1)

    def _drop_level(self, a, levels):
        return a  # lazy: TenSEAL switches moduli itself when operands of different levels meet

    def _rotate(self, a, step, gk):
        _unsupported("rotate", "the CKKSVector API has no slot rotation")

    def _conjugate(self, a, gk):
        _unsupported("conjugate", "the CKKSVector API has no conjugation")

    @staticmethod
    def _real(c: complex) -> float:
        if c.imag:
            _unsupported("use a complex constant", "TenSEAL's CKKSVector holds real values only")
        return float(c.real)

    # ---- serialization -----------------------------------------------------------------------
    def _raw_kinds(self, raw):
        """A context holds the secret, public and relinearization keys together; serializing it as a
        public or relinearization key writes that key alone (never the secret one)."""
        if isinstance(raw, _Context):
            return frozenset({"public_key"} | ({"relin_key"} if raw.data.has_relin_keys() else set()))
        return frozenset({"ciphertext"} if isinstance(raw, _Ct) else {"plaintext"} if isinstance(raw, _Plain) else ())

    def _serialize(self, kind, raw):
        if kind == "ciphertext":
            return struct.pack("<B", raw.pending) + raw.vec.serialize()
        if kind == "plaintext":
            _unsupported("serialize a plaintext", "TenSEAL has no encoded plaintext object")
        public, relin = kind == "public_key", kind == "relin_key"
        return raw.data.serialize(public, False, False, relin)  # a context holding only that key

    def _deserialize(self, kind, payload, meta):
        try:
            if kind == "ciphertext":
                if self._last is None:
                    raise SerializationError("no keys yet: generate or load keys before loading ciphertexts")
                (pending,) = struct.unpack_from("<B", payload)
                if pending > 1:
                    raise SerializationError(
                        f"tenseal ciphertext announces {pending} pending rescales (at most 1): the data is corrupted"
                    )
                vec = ts._ts_cpp.CKKSVector(self._last.data, bytes(payload[1:]))
                if vec.size() != self.slots:
                    raise SerializationError(
                        f"tenseal ciphertext holds {vec.size()} values, not {self.slots}: the data is corrupted"
                    )
                return _Ct(vec, self._last, pending)
            if kind in ("public_key", "relin_key"):
                ctx = _Context(ts._ts_cpp.TenSEALContext.deserialize(bytes(payload), self.n_threads))
                self._last = ctx
                return ctx
        except (ValueError, RuntimeError, TypeError, struct.error) as exc:
            raise SerializationError(f"tenseal payload unreadable: {exc}") from None
        _unsupported(f"deserialize a {kind}", "see the notes at the top of henn/ckks/backends/tenseal.py")


BACKEND = TensealBackend
