"""Microsoft SEAL through the PyPI binding `seal-python` (pybind11).

Notes on this library, as the binding exposes it:
- seal-python holds the GIL for the whole of every call: Python threads give no speed-up here
  (run several processes instead). SEAL's C++ evaluator is thread-safe, so sharing is safe.
- SEAL's CKKSEncoder only encodes at the top of the modulus chain; a plaintext for a lower
  level is encoded there and mod-switched down (dropping RNS limbs is exact).
- Rotations use SEAL's Galois generator 3: the key of left rotation k is the element
  3^k mod 2N, conjugation is 2N - 1 (`create_galois_keys` takes steps, 0 meaning conjugation).
- SEAL refuses to output a "transparent" ciphertext (all parts but c0 zero, e.g. x - x or x * 0)
  by throwing *after* finishing the in-place operation. Such results are correct trivial
  encryptions of publicly computable values, so this backend keeps them.
- SEAL compares scales exactly; henn allows a relative difference of 1e-9 and keeps the scale
  in Python, so operands are re-tagged with the scale henn checked before SEAL sees them.
- SEAL has no hoisted rotations (the default loop is used) and no bootstrapping.
"""

from __future__ import annotations

import importlib.metadata
import logging
import math
import os
import struct
from functools import lru_cache

import numpy as np

from henn.ckks import security
from henn.ckks.backend import Backend
from henn.ckks.params import MAX_PRIME_BITS, ParametersLiteral
from henn.ckks.selection import check_depth
from henn.errors import BackendError, InputError, ParameterError, SerializationError

try:  # the binding is optional: available() reports how to install it
    import seal
except ImportError:  # pragma: no cover - depends on the environment
    seal = None

log = logging.getLogger(__name__)

INSTALL_HINT = "pip install seal-python==4.4.0"
SEAL_MAX_LOG_N = 15  # SEAL's 128-bit tables (CoeffModulus.MaxBitCount) stop at N = 32768
_SCALE_RTOL = 1e-9
_SEAL_HEADER = struct.Struct("<HBBBBHQ")  # SEALHeader: magic, header size, version major/minor, compr mode, -, size
_SEAL_MAGIC = 0xA15E


class _SecretKeyRaw:
    """A SEAL secret key with the KeyGenerator that owns it (every key must come from it)."""

    __slots__ = ("keygen", "key", "_decryptor", "_encryptor")

    def __init__(self, keygen):
        self.keygen, self.key, self._decryptor, self._encryptor = keygen, keygen.secret_key(), None, None

    def decryptor(self, context):
        if self._decryptor is None:
            self._decryptor = seal.Decryptor(context, self.key)
        return self._decryptor

    def encryptor(self, context):
        if self._encryptor is None:
            self._encryptor = seal.Encryptor(context, self.key)
        return self._encryptor


class _PublicKeyRaw:
    """A SEAL public key with its (lazily built, cached) Encryptor."""

    __slots__ = ("key", "_encryptor")

    def __init__(self, key):
        self.key, self._encryptor = key, None

    def encryptor(self, context):
        if self._encryptor is None:
            self._encryptor = seal.Encryptor(context, self.key)
        return self._encryptor


def _require_seal():
    if seal is None:
        raise BackendError(f"the seal backend needs the seal-python binding: {INSTALL_HINT}")


@lru_cache(maxsize=1)
def _library_version() -> str:
    _require_seal()
    binding = importlib.metadata.version("seal-python")
    # SEAL writes its own major/minor version into every serialization header
    parms = seal.EncryptionParameters(seal.scheme_type.ckks)
    head = parms.to_bytes(seal.compr_mode_type.none)
    return f"seal-python {binding} (SEAL {head[3]}.{head[4]})"


def galois_element(step: int, n: int) -> int:
    """SEAL's Galois element of a left rotation by `step` (0: conjugation) at ring degree n."""
    return 2 * n - 1 if step == 0 else pow(3, step, 2 * n)


def _check_seal_header(kind: str, payload: bytes) -> None:
    """SEAL's own 16-byte header (magic, header size, version, compression mode, total size):
    uncompressed data of exactly the payload's length, so that SEAL neither decompresses nor
    reads past what was received."""
    if len(payload) < _SEAL_HEADER.size:
        raise SerializationError(
            f"{kind} payload of {len(payload)} bytes is shorter than SEAL's header: the data is corrupted"
        )
    magic, header_size, _, _, compression, _, size = _SEAL_HEADER.unpack_from(payload)
    if magic != _SEAL_MAGIC or header_size != _SEAL_HEADER.size:
        raise SerializationError(f"{kind} payload does not start with SEAL's header: the data is corrupted")
    if compression != 0:
        raise SerializationError(
            f"{kind} payload is compressed (SEAL mode {compression}); henn writes and reads "
            "uncompressed SEAL data only: serialize it with Backend.serialize()"
        )
    if size != len(payload):
        raise SerializationError(
            f"{kind} payload is {len(payload)} bytes but SEAL's header announces {size}: the data is corrupted"
        )


class SealBackend(Backend):
    name = "seal"
    special_prime_bits, max_special_primes = MAX_PRIME_BITS, 1  # one special prime of <= 60 bits
    releases_gil = False  # seal-python holds the GIL for every call

    # ---- library, parameters -------------------------------------------------------------
    @classmethod
    def version(cls) -> str:
        return _library_version()

    @classmethod
    def available(cls) -> tuple[bool, str]:
        if seal is None:
            return False, INSTALL_HINT
        try:
            return True, cls.version()
        except Exception as exc:  # noqa: BLE001 - availability probe reports any failure
            return False, f"seal-python is installed but unusable ({exc}): {INSTALL_HINT}"

    @classmethod
    def recommend(cls, depth: int, slots: int | None, log_scale: int | None) -> ParametersLiteral:
        """SEAL's documented CKKS strategy (examples/4_ckks_basics): [60] + [scale]*depth + [60]
        on the smallest ring whose 128-bit bound (CoeffModulus.MaxBitCount) admits the total."""
        _require_seal()
        check_depth(depth)
        if log_scale is None:
            log_scale, first = 40, 60
        else:
            log_scale = int(log_scale)
            if not 20 <= log_scale <= MAX_PRIME_BITS - 1:
                raise ParameterError(f"log_scale {log_scale} out of range 20..{MAX_PRIME_BITS - 1} for SEAL")
            first = min(MAX_PRIME_BITS, log_scale + 20)
        log_q = (first,) + (log_scale,) * depth
        total = sum(log_q) + 60
        log_n = 10
        while slots is not None and (1 << (log_n - 1)) < slots:
            log_n += 1
        while log_n <= SEAL_MAX_LOG_N and seal.CoeffModulus.MaxBitCount(1 << log_n, seal.sec_level_type.tc128) < total:
            log_n += 1
        if log_n > SEAL_MAX_LOG_N:
            raise ParameterError(
                f"depth {depth} at a {log_scale}-bit scale needs {total} modulus bits, more than "
                f"SEAL admits at 128-bit security up to N = 2^{SEAL_MAX_LOG_N} "
                f"({seal.CoeffModulus.MaxBitCount(1 << SEAL_MAX_LOG_N)} bits): reduce depth, the "
                "scale, or the slot count"
            )
        if not security.is_secure(log_n, total):
            raise ParameterError(
                f"SEAL's recommendation N = 2^{log_n}, {total} bits fails henn's 128-bit table; "
                "report this: the two security tables disagree"
            )
        return ParametersLiteral(log_n, log_q, (60,), log_scale)

    def _open(self, params) -> None:
        _require_seal()
        if len(params.log_p) != 1 or params.log_p[0] > MAX_PRIME_BITS:
            raise ParameterError(
                f"SEAL supports one special prime of at most {MAX_PRIME_BITS} bits, got "
                f"log_p={list(params.log_p)}: use log_p=(60,)"
            )
        if params.log_n > SEAL_MAX_LOG_N and not params.insecure:
            raise ParameterError(
                f"SEAL's 128-bit security tables stop at N = 2^{SEAL_MAX_LOG_N}; N = 2^{params.log_n} "
                f"is refused: use log_n <= {SEAL_MAX_LOG_N} with the seal backend, or another backend"
            )
        n = params.n
        parms = seal.EncryptionParameters(seal.scheme_type.ckks)
        parms.set_poly_modulus_degree(n)
        try:
            parms.set_coeff_modulus(self._moduli(params))
            sec = seal.sec_level_type.none if params.insecure else seal.sec_level_type.tc128
            context = seal.SEALContext(parms, True, sec)
        except (ValueError, RuntimeError) as exc:
            raise ParameterError(
                f"SEAL rejected the parameters ({exc}): check the prime sizes against N = "
                f"2^{params.log_n}, or let SEAL choose the primes (q=None)"
            ) from None
        if not context.parameters_set():
            raise ParameterError(
                f"SEAL rejected the parameters: {context.parameter_error_message()} "
                f"({context.parameter_error_name()}); {params.describe()}; choose other "
                "parameters (e.g. select_parameters(depth, backend='seal'))"
            )
        primes = tuple(m.value() for m in context.key_context_data().parms().coeff_modulus())
        nq = len(params.log_q)
        self.q_primes, self.p_primes = primes[:nq], primes[nq:]
        # henn level == SEAL chain index; check that each level's chain is q0..q_level
        pids: dict[int, list[int]] = {}  # SEAL's parms_id of each level
        data = context.first_context_data()
        while data is not None:
            level = data.chain_index()
            chain = tuple(m.value() for m in data.parms().coeff_modulus())
            if not 0 <= level < nq or chain != self.q_primes[: level + 1]:
                raise BackendError(
                    f"SEAL modulus chain at index {level} is {chain}, not q0..q{level}: "
                    "this seal-python build is incompatible; report it"
                )
            pids[level] = data.parms_id()
            data = data.next_context_data()
        if len(pids) != nq:  # each level in 0..nq-1 (checked above)
            raise BackendError("SEAL did not expand the modulus chain to every level; report it")
        self._pid = [pids[lv] for lv in range(nq)]
        self._level_of = {tuple(pid): lv for lv, pid in enumerate(self._pid)}
        self._key_pid = tuple(context.key_context_data().parms_id())
        self._ctx = context
        self._encoder = seal.CKKSEncoder(context)
        self._ev = seal.Evaluator(context)
        log.debug("SEAL context opened: %s, primes q=%s p=%s", params.describe(), self.q_primes, self.p_primes)

    def _moduli(self, params) -> list:
        n = params.n
        if params.q is None and params.p is None:
            return seal.CoeffModulus.Create(n, list(params.log_q) + list(params.log_p))
        used = set(params.q or ()) | set(params.p or ())

        def fill(sizes):  # SEAL's own primes of these sizes, avoiding the pinned ones
            out = []
            for b in sizes:
                cands = [m.value() for m in seal.CoeffModulus.Create(n, [b] * (len(used) + 1))]
                pick = next(c for c in cands if c not in used)
                used.add(pick)
                out.append(pick)
            return out

        q = list(params.q) if params.q is not None else fill(params.log_q)
        p = list(params.p) if params.p is not None else fill(params.log_p)
        return [seal.Modulus(int(x)) for x in q + p]

    # ---- helpers -----------------------------------------------------------------------------
    def _level(self, obj) -> int:
        return self._level_of[tuple(obj.parms_id())]

    def _to_level(self, pt, level: int):
        if level != self.max_level:
            self._ev.mod_switch_to_inplace(pt, self._pid[level])
        return pt

    @staticmethod
    def _with_scale(obj, scale: float):
        """`obj` itself when SEAL already sees `scale`, else a copy tagged with it."""
        if obj.scale() == scale:
            return obj
        obj = type(obj)(obj)
        obj.scale(scale)
        return obj

    @staticmethod
    def _inplace(op, ct, *args):
        """Run SEAL's in-place `op` on `ct`, keeping a transparent (trivially encrypted) result."""
        try:
            op(ct, *args)
        except RuntimeError as exc:
            if "transparent" not in str(exc) or not ct.is_transparent():
                raise BackendError(
                    f"SEAL failed in {op.__name__}: {exc}; henn checks should have prevented this, please report it"
                ) from None
        except ValueError as exc:
            raise BackendError(
                f"SEAL rejected {op.__name__}: {exc}; henn checks should have prevented this, please report it"
            ) from None
        return ct

    def _apply(self, op, a, *args):
        return self._inplace(op, seal.Ciphertext(a), *args)

    # ---- keys --------------------------------------------------------------------------------
    def _gen_secret_key(self):
        return _SecretKeyRaw(seal.KeyGenerator(self._ctx))

    def _gen_public_key(self, sk):
        return _PublicKeyRaw(sk.keygen.create_public_key())

    def _export_secret(self, raw):
        return raw.key.to_string()

    def _import_secret(self, data):
        _check_seal_header("secret_key", data)
        sk = seal.SecretKey()
        fd = os.memfd_create("henn-secret-key")  # SEAL reads a secret key from a path only: one in memory
        try:
            os.write(fd, data)
            sk.load(self._ctx, f"/proc/self/fd/{fd}")
        except (RuntimeError, ValueError, OSError) as exc:
            raise SerializationError(
                f"SEAL cannot read the secret key ({type(exc).__name__}): the key file is "
                "damaged or of other parameters"
            ) from None
        finally:
            os.close(fd)
        return _SecretKeyRaw(seal.KeyGenerator(self._ctx, sk))

    def _gen_relin_key(self, sk):
        return sk.keygen.create_relin_keys()

    def _gen_galois_keys(self, sk, steps, conjugate):
        gk = seal.GaloisKeys()
        sk.keygen.create_galois_keys([int(s) for s in steps] + ([0] if conjugate else []), gk)
        return gk

    # ---- encoding, encryption --------------------------------------------------------------
    def _encode(self, values, level, scale):
        try:
            pt = self._encoder.encode_complex(np.ascontiguousarray(values, np.complex128), float(scale))
        except ValueError as exc:
            raise InputError(
                f"SEAL cannot encode at scale 2^{math.log2(scale):.1f}: {exc}; use a smaller scale or smaller values"
            ) from None
        return self._to_level(pt, level)

    def _encode_constant(self, c: complex, level: int, scale: float):
        try:
            if c.imag == 0:
                pt = self._encoder.encode(float(c.real), float(scale))
            else:
                pt = self._encoder.encode_complex(complex(c), float(scale))
        except ValueError as exc:
            raise InputError(
                f"SEAL cannot encode {c} at scale 2^{math.log2(scale):.1f}: {exc}; use a smaller scale or constant"
            ) from None
        return self._to_level(pt, level)

    def _decode(self, pt, level, scale):
        out = self._encoder.decode_complex(self._with_scale(pt, float(scale)))
        return np.asarray(out, dtype=np.complex128)

    def _encrypt(self, pt, pk):
        return pk.encryptor(self._ctx).encrypt(pt)

    def _encrypt_symmetric(self, pt, sk):
        return sk.encryptor(self._ctx).encrypt_symmetric(pt)

    def _decrypt(self, ct, sk):
        return sk.decryptor(self._ctx).decrypt(ct)

    # ---- arithmetic -------------------------------------------------------------------------
    def _add(self, a, b):
        return self._apply(self._ev.add_inplace, a, self._with_scale(b, a.scale()))

    def _sub(self, a, b):
        return self._apply(self._ev.sub_inplace, a, self._with_scale(b, a.scale()))

    def _add_plain(self, a, pt):
        return self._apply(self._ev.add_plain_inplace, a, self._with_scale(pt, a.scale()))

    def _sub_plain(self, a, pt):
        return self._apply(self._ev.sub_plain_inplace, a, self._with_scale(pt, a.scale()))

    def _negate(self, a):
        return self._apply(self._ev.negate_inplace, a)

    def _mul(self, a, b, rk):
        out = self._apply(self._ev.multiply_inplace, a, b)
        return out if rk is None else self._inplace(self._ev.relinearize_inplace, out, rk)

    def _mul_plain(self, a, pt):
        return self._apply(self._ev.multiply_plain_inplace, a, pt)

    def _square(self, a, rk):
        out = self._apply(self._ev.square_inplace, a)
        return out if rk is None else self._inplace(self._ev.relinearize_inplace, out, rk)

    def _relinearize(self, a, rk):
        return self._apply(self._ev.relinearize_inplace, a, rk)

    def _rescale(self, a):
        return self._apply(self._ev.rescale_to_next_inplace, a)

    def _drop_level(self, a, levels):
        return self._apply(self._ev.mod_switch_to_inplace, a, self._pid[self._level(a) - levels])

    def _rotate(self, a, step, gk):
        return self._apply(self._ev.rotate_vector_inplace, a, int(step), gk)

    def _conjugate(self, a, gk):
        return self._apply(self._ev.complex_conjugate_inplace, a, gk)

    def _add_scalar(self, a, c, level, scale):
        return self._add_plain(a, self._encode_constant(c, level, scale))

    def _mul_scalar(self, a, c, level, scale):
        return self._mul_plain(a, self._encode_constant(c, level, scale))

    # ---- serialization -----------------------------------------------------------------------
    def _raw_kinds(self, raw):
        if isinstance(raw, (_SecretKeyRaw, seal.SecretKey)):
            return frozenset({"secret_key"})
        if isinstance(raw, _PublicKeyRaw):
            return frozenset({"public_key"} if isinstance(raw.key, seal.PublicKey) else ())
        for cls, kind in (
            (seal.Ciphertext, "ciphertext"),
            (seal.Plaintext, "plaintext"),
            (seal.RelinKeys, "relin_key"),
            (seal.GaloisKeys, "galois_keys"),
        ):
            if isinstance(raw, cls):
                return frozenset({kind})
        return frozenset()

    def _serialize(self, kind, raw):
        none = seal.compr_mode_type.none  # the only mode this binding was built with
        if kind == "ciphertext":
            return raw.to_string(none)
        if kind == "plaintext":
            return raw.to_bytes(none)
        if kind == "public_key":
            return raw.key.to_string()
        return raw.to_string()  # relin_key, galois_keys

    def _deserialize(self, kind, payload, meta):
        _check_seal_header(kind, payload)
        try:
            if kind == "ciphertext":
                obj = seal.Ciphertext()
                obj.load_bytes(self._ctx, payload)
            elif kind == "plaintext":
                obj = seal.Plaintext()
                obj.load_bytes(self._ctx, payload)
            elif kind == "public_key":
                obj = self._ctx.from_public_str(payload)
            elif kind == "relin_key":
                obj = self._ctx.from_relin_str(payload)
            else:
                obj = self._ctx.from_galois_str(payload)
        except Exception as exc:  # noqa: BLE001 - SEAL signals bad data with assorted C++ exceptions
            raise SerializationError(
                f"SEAL could not load the {kind} payload ({exc}): the data is corrupted or "
                "was made by another SEAL version or parameters"
            ) from None
        if kind in ("ciphertext", "plaintext"):
            return self._check_loaded_value(kind, obj, meta)
        if tuple(obj.parms_id()) != self._key_pid:
            raise SerializationError(
                f"{kind} payload belongs to other parameters: serialize it with a backend opened on the same parameters"
            )
        if kind == "public_key":
            return _PublicKeyRaw(obj)
        if kind == "relin_key" and not obj.has_key(2):
            raise SerializationError("relin_key payload holds no relinearization key: the data is corrupted")
        if kind == "galois_keys":
            want = sorted(meta["steps"]) + ([0] if meta["conjugate"] else [])
            missing = [s for s in want if not obj.has_key(galois_element(s, self.params.n))]
            if missing:
                raise SerializationError(
                    f"galois_keys payload lacks the keys of steps {missing} (0 = conjugation) "
                    "that its header announces: the data is corrupted"
                )
        return obj

    def _check_loaded_value(self, kind, obj, meta):
        level = self._level_of.get(tuple(obj.parms_id()))
        if level is None or level != meta["level"]:
            raise SerializationError(
                f"{kind} payload sits at SEAL chain index {level}, header says level "
                f"{meta['level']}: the data is corrupted"
            )
        if not obj.is_ntt_form():
            raise SerializationError(f"{kind} payload is not in NTT form as CKKS requires: the data is corrupted")
        if kind == "ciphertext":
            if obj.contains_seed() or obj.size() != meta["degree"] + 1:
                raise SerializationError(
                    f"ciphertext payload has {obj.size()} parts, header says degree "
                    f"{meta['degree']}: the data is corrupted"
                )
        scale = meta["scale"]
        if abs(obj.scale() / scale - 1.0) > _SCALE_RTOL:
            raise SerializationError(
                f"{kind} payload has scale {obj.scale()!r}, header says {scale!r}: the data is corrupted"
            )
        obj.scale(scale)
        return obj


BACKEND = SealBackend
