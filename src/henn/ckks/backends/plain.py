"""The reference backend: NumPy, no encryption, same semantics and same errors as the real
libraries (all checks live in Backend/Evaluator). With `noise=True` it adds Gaussian errors of
roughly CKKS's size (fresh encryption, key switching, rescale rounding) so that the compiler can
estimate precision without encrypting."""

from __future__ import annotations

import io
import json
import math
import tokenize

import numpy as np
from numpy.lib import format as npy_format

from henn.ckks.backend import Backend
from henn.ckks.primes import ntt_primes
from henn.ckks.selection import fixed_literal
from henn.errors import ParameterError, SerializationError

_NPY_HEADER_MAX = 1024  # bytes of .npy header a (slots,) complex128 vector needs, with room
# what NumPy's .npy reader raises on forged headers (literal parsing, tokenizing, sizes)
_NPY_ERRORS = (
    ValueError,
    SyntaxError,
    TypeError,
    OverflowError,
    MemoryError,
    RecursionError,
    EOFError,
    OSError,
    tokenize.TokenError,
)


_PLAIN_SECRET = b"henn-plain-secret-key"  # the plain backend has no key material: a marker stands for it


class _Key:
    """Stands in for key material; remembers what it was made for (kind: a serialization kind or
    "secret_key")."""

    def __init__(self, kind: str, steps=(), conjugate=False):
        self.kind, self.steps, self.conjugate = kind, tuple(steps), conjugate


class PlainBackend(Backend):
    name = "plain"
    encrypts = False
    bootstraps = True  # simulated: exact, or with the stated precision's error
    real_slot_ring = True  # simulated: N slots, real noise only
    exact_imaginary_unit = True  # simulated slots: c * x exactly

    def __init__(self, params, *, noise: bool = False, seed: int | None = 0):
        self.noise = noise
        self._rng = np.random.default_rng(seed)
        super().__init__(params)

    @classmethod
    def version(cls) -> str:
        return f"numpy {np.__version__}"

    @classmethod
    def recommend(cls, depth, slots, log_scale):
        return fixed_literal(depth, slots, log_scale)

    def _open(self, params):
        if params.q is not None:
            self.q_primes, self.p_primes = params.q, params.p
        else:
            try:
                primes = ntt_primes(params.log_q + params.log_p, params.log_n, ring=params.ring)
            except ValueError as exc:  # too few primes of a size = 1 mod 2N (4N)
                raise ParameterError(f"no prime chain for {params.describe()}: {exc}; use larger primes") from None
            self.q_primes, self.p_primes = tuple(primes[: len(params.log_q)]), tuple(primes[len(params.log_q) :])

    # ---- noise model: errors of the slot values, in absolute terms -----------------------
    def _noisy(self, v: np.ndarray, scale: float, sigma_coeff: float) -> np.ndarray:
        if not self.noise:
            return v
        # a coefficient error of std s becomes ~ s*sqrt(N/2) per slot after the canonical embedding (real
        # and imaginary parts); the real-slot ring of degree N sits in the standard ring of degree 2N and
        # its slots are real: measured 2 s*sqrt(N) (Lattigo, N = 2^13..2^15), real only
        if self.params.real_slots:
            return v + self._rng.normal(0, 2 * sigma_coeff * math.sqrt(self.params.n) / scale, v.shape)
        std = sigma_coeff * math.sqrt(self.params.n / 2) / scale
        return v + self._rng.normal(0, std, v.shape) + 1j * self._rng.normal(0, std, v.shape)

    # ---- keys ----------------------------------------------------------------------------
    def _gen_secret_key(self):
        return _Key("secret_key")

    def _gen_public_key(self, sk):
        return _Key("public_key")

    def _export_secret(self, raw):
        return _PLAIN_SECRET

    def _import_secret(self, data):
        if data != _PLAIN_SECRET:
            raise SerializationError("not a plain backend secret key: the key file is damaged or of another backend")
        return _Key("secret_key")

    def _gen_relin_key(self, sk):
        return _Key("relin_key")

    def _gen_galois_keys(self, sk, steps, conjugate):
        return _Key("galois_keys", steps, conjugate)

    # ---- encoding ------------------------------------------------------------------------
    def _encode(self, values, level, scale):
        # encoding rounds coefficients to integers: error ~ uniform(-1/2, 1/2) per coefficient
        return self._noisy(values.copy(), scale, math.sqrt(1 / 12))

    def _decode(self, pt, level, scale):
        return pt.copy()

    def _encrypt(self, pt, pk):
        return self._noisy(pt, self.params.default_scale, self._rounding_sigma())

    def _encrypt_symmetric(self, pt, sk):
        return self._encrypt(pt, sk)  # the same rounding-sized error (a little above the sampled one)

    def _decrypt(self, ct, sk):
        return ct.copy()

    # ---- arithmetic ----------------------------------------------------------------------
    def _add(self, a, b):
        return a + b

    def _sub(self, a, b):
        return a - b

    _add_plain = _add
    _sub_plain = _sub

    def _negate(self, a):
        return -a

    def _mul(self, a, b, rk):
        return self._keyswitch(a * b) if rk is not None else a * b

    def _mul_plain(self, a, pt):
        return a * pt

    def _square(self, a, rk):
        return self._mul(a, a, rk)

    def _relinearize(self, a, rk):
        return self._keyswitch(a)

    def _rescale(self, a):
        return self._noisy(a, self.params.default_scale, self._rounding_sigma())

    def _drop_level(self, a, levels):
        return a

    def _rotate(self, a, step, gk):
        return self._keyswitch(np.roll(a, -step))

    def _conjugate(self, a, gk):
        return self._keyswitch(np.conj(a))

    def _add_scalar(self, a, c, level, scale):
        return a + c

    def _mul_scalar(self, a, c, level, scale):
        return a * c

    def _gen_bootstrap_keys(self, sk):
        return _Key("bootstrap_keys"), 0

    def _bootstrap(self, a, divide, keys, parallel):
        """The refreshed values; with the noise model, a Gaussian error whose maximum over the slots
        is about the parameters' stated precision (relative to the range): std = 2^-bits / 6."""
        if not self.noise:
            return a.copy()
        boot = self.params.bootstrap
        assert boot is not None  # bootstrapping keys exist only under bootstrap parameters
        std = divide * 2.0**-boot.literal.precision_bits / 6
        return a + self._rng.normal(0, std, a.shape) + 1j * self._rng.normal(0, std, a.shape)

    def _keyswitch(self, v):
        # the division by P rounds as a rescale does; counted at the default scale, which overstates it for
        # the products a BSGS rotates before their rescale (at scale ~ Delta * q the rounding is negligible)
        return self._noisy(v, self.params.default_scale, self._rounding_sigma())

    def _rounding_sigma(self) -> float:
        """Coefficient std of one rounding of c0 + c1 * s to integers: sqrt(N / 12), a little above what
        Lattigo v6.2.0 and SEAL 4.4 add (measured sqrt(N / 18) to sqrt(N / 12), N = 2^13..2^15, both rings) in a
        fresh public-key encryption (they encrypt modulo QP and divide by P), a rescale after a product and a
        key switch; the RLWE error itself (sigma 3.2 times sqrt(2N/3)) is divided away by P."""
        return math.sqrt(self.params.n / 12)

    # ---- serialization ---------------------------------------------------------------------
    def _raw_kinds(self, raw):
        if isinstance(raw, _Key):
            return frozenset({raw.kind})
        if isinstance(raw, np.ndarray):
            return frozenset({"ciphertext", "plaintext"})
        return frozenset()

    def _serialize(self, kind, raw):
        if isinstance(raw, _Key):
            return json.dumps({"kind": raw.kind, "steps": sorted(raw.steps), "conjugate": raw.conjugate}).encode()
        buf = io.BytesIO()
        np.save(buf, raw, allow_pickle=False)
        return buf.getvalue()

    def _deserialize(self, kind, payload, meta):
        if kind in ("public_key", "relin_key", "galois_keys", "bootstrap_keys"):
            return self._load_key(kind, payload, meta)
        return self._load_vector(kind, payload)

    @staticmethod
    def _load_key(kind, payload, meta):
        """The key the payload describes, which must be exactly what the header announces."""
        try:
            d = json.loads(payload)
        except (ValueError, RecursionError):
            d = None
        steps, conjugate = sorted(meta.get("steps", ())), meta.get("conjugate", False)
        if d != {"kind": kind, "steps": steps, "conjugate": conjugate}:
            raise SerializationError(
                f"plain {kind} payload does not hold the key its header announces: the data is corrupted"
            )
        return _Key(kind, steps, conjugate)

    def _load_vector(self, kind, payload):
        """A (slots,) complex128 vector from .npy bytes: the .npy header is read and checked before
        any array is allocated, and every error of NumPy's reader becomes a SerializationError."""
        fp = io.BytesIO(payload)
        try:
            version = npy_format.read_magic(fp)
            read = npy_format.read_array_header_1_0 if version == (1, 0) else npy_format.read_array_header_2_0
            shape, fortran, dtype = read(fp, max_header_size=_NPY_HEADER_MAX)
        except _NPY_ERRORS as exc:
            raise SerializationError(
                f"plain {kind} payload is not a readable .npy array ({type(exc).__name__}: "
                f"{exc}): the data is corrupted"
            ) from None
        if shape != (self.slots,) or fortran or dtype != np.dtype("<c16"):
            raise SerializationError(
                f"plain {kind} payload holds a {dtype} array of shape {shape}, expected "
                f"complex128 of shape ({self.slots},): the data is corrupted"
            )
        body = payload[fp.tell() :]
        if len(body) != self.slots * 16:
            raise SerializationError(
                f"plain {kind} payload has {len(body)} data bytes, its .npy header announces "
                f"{self.slots * 16}: the data is corrupted"
            )
        return np.frombuffer(body, dtype=np.complex128).copy()


BACKEND = PlainBackend
