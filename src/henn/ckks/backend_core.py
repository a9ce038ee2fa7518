"""The opened library context under every CKKS backend: its capabilities, the parameters and primes in
use, and the argument checks the public methods (and the Evaluator) run before any library call.
The conventions every backend shares are in henn.ckks.backend."""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Iterable
from typing import ClassVar

import numpy as np

from henn.ckks.params import MAX_SPECIAL_PRIME_BITS, Parameters, ParametersLiteral
from henn.ckks.primes import ntt_primes
from henn.ckks.values import Ciphertext, Plaintext
from henn.errors import InputError, LevelError, UnsupportedOperation

Values = float | complex | np.ndarray | list


class BackendCore(ABC):
    """One library context for one `Parameters` set: what it can do, the primes it uses, its checks."""

    name: ClassVar[str]
    # capabilities the runtime asks for (never the backend's name)
    encrypts: ClassVar[bool] = True  # False: values are cleartext slot vectors, no key material
    releases_gil: ClassVar[bool] = True  # its calls may run on several Python threads at once
    bootstraps: ClassVar[bool] = False  # Evaluator.bootstrap works (lattigo, openfhe; plain simulates it)
    real_slot_ring: ClassVar[bool] = False  # opens ring="conjugate_invariant" parameters (N real slots)
    symmetric_encryption: ClassVar[bool] = True  # encrypt() takes the SecretKey as well (_encrypt_symmetric)
    # compact ciphertext payloads it writes and reads (serialization.ENCODINGS, _serialize_ciphertext); the
    # first is what serialize() writes by default. Empty: ciphertexts travel as the library's bytes.
    wire_encodings: ClassVar[tuple[str, ...]] = ()
    # _deserialize reads its payload from a memoryview into the caller's bytes (no copy of a 1 GiB key set)
    payload_views: ClassVar[bool] = False
    # i in every slot is a monomial (X^(N/2)) of its slot order (Lattigo orders slots by powers of 5): a
    # Gaussian integer times a ciphertext is exact (Evaluator.multiply_integer, complex packing of squares).
    # SEAL orders them by powers of 3, where no monomial is i in every slot.
    exact_imaginary_unit: ClassVar[bool] = False
    # the special primes it takes: their size and most count (precision-driven selection sizes to them)
    special_prime_bits: ClassVar[int] = MAX_SPECIAL_PRIME_BITS
    max_special_primes: ClassVar[int] = 64
    special_prime_size_fixed: ClassVar[bool] = False  # True: every special prime has special_prime_bits
    # what the library made of the bootstrap parameters (primes, depth, keys), where it reports it
    bootstrap_info: dict | None = None
    # polynomials each element of a Galois or bootstrapping key holds in memory: 2 (b and a), or 1 where
    # keys are seeded and every key switch regenerates the a halves it reads (Lattigo, by default)
    key_polys: int = 2
    # the primes in use, set by _open (declared here: an empty tuple assigned in __init__ would narrow them)
    q_primes: tuple[int, ...] = ()
    p_primes: tuple[int, ...] = ()

    def __init__(self, params: Parameters):
        if not isinstance(params, Parameters):
            raise InputError(
                "Backend needs a Parameters object: use Parameters.from_literal, presets.get or select_parameters"
            )
        if params.real_slots and not self.real_slot_ring:
            from henn.ckks.backends import with_capability

            raise UnsupportedOperation(
                f"the {self.name} backend has no real-slot (conjugate-invariant) ring; backends that have: "
                f"{', '.join(with_capability('real_slot_ring'))}: use one of those, or ring='standard' parameters"
            )
        self.params = params
        self._open(params)
        if len(self.q_primes) != len(params.log_q):
            raise AssertionError(f"{self.name} backend reported {len(self.q_primes)} primes")
        self.actual_params = params.with_primes(self.q_primes, self.p_primes) if params.q is None else params
        self._log_q_prefix = np.cumsum([math.log2(q) for q in self.q_primes])

    # ---- what a backend module implements ------------------------------------------------
    # ---- opening the library ----------------------------------------------------------------
    @classmethod
    @abstractmethod
    def version(cls) -> str: ...

    @classmethod
    def available(cls) -> tuple[bool, str]:
        """(True, version) when the library can be used here, else (False, how to install it)."""
        try:
            return True, cls.version()
        except Exception as exc:  # noqa: BLE001 - availability probe reports any failure
            return False, str(exc)

    @classmethod
    @abstractmethod
    def recommend(cls, depth: int, slots: int | None, log_scale: int | None) -> ParametersLiteral:
        """Parameters the library itself recommends for this depth (library mode)."""

    @classmethod
    def chain_primes(cls, sizes: Iterable[int], log_n: int, ring: str = "standard") -> list[int]:
        """The primes the library makes for parameters of these bit sizes (q, then p) with none pinned, or
        ValueError where it cannot make them all: precision-driven selection proposes only such chains."""
        return ntt_primes(sizes, log_n, ring=ring)

    @abstractmethod
    def _open(self, params: Parameters) -> None:
        """Create the library context; set self.q_primes / self.p_primes to the primes in use."""

    def close(self) -> None:
        """Release library resources early (optional; garbage collection does it too)."""

    def memory_available(self) -> int:
        """Bytes free where this backend keeps keys and ciphertexts: host memory, or a device's own memory
        (gpu on CUDA); the memory model's check compares the program's need with this."""
        import psutil

        return int(psutil.virtual_memory().available)

    def expect_footprint(self, need: int, available: int) -> None:
        """Told before key generation: an evaluation will hold about `need` bytes (keys and ciphertexts)
        of the `available` ones. A backend whose allocator trades memory for speed may tune itself to it
        (lattigo: Go's collector); by default nothing changes."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def cannot_bootstrap(self) -> UnsupportedOperation:
        from henn.ckks.backends import with_capability

        have = ", ".join(with_capability("bootstraps")) or "none installed"
        return UnsupportedOperation(
            f"the {self.name} backend cannot bootstrap; backends that can: {have}: "
            "open one of those, or compile for depth without bootstraps"
        )

    # ---- metadata ----------------------------------------------------------------------
    @property
    def slots(self) -> int:
        return self.params.slots

    @property
    def max_level(self) -> int:
        return self.params.max_level

    def prime(self, level: int) -> int:
        """The ciphertext prime q_level that a rescale at this level divides by."""
        return self.q_primes[self._check_level(level)]

    def log_q_at(self, level: int) -> float:
        """log2 of the ciphertext modulus Q_level = q_0 * ... * q_level."""
        return float(self._log_q_prefix[self._check_level(level)])

    def normalize_step(self, step: int) -> int:
        if isinstance(step, (bool, np.bool_)) or not isinstance(step, (int, np.integer)):
            raise InputError(f"rotation step must be an integer, got {step!r}")
        return int(step) % self.slots

    # ---- checks shared with the evaluator ---------------------------------------------------
    def _own(self, obj, cls):
        if not isinstance(obj, cls):
            raise InputError(f"expected a {cls.__name__}, got {type(obj).__name__}")
        if obj.backend != self.name:
            raise InputError(
                f"this {cls.__name__} belongs to the {obj.backend!r} backend, not {self.name!r}: "
                "values and keys cannot move between backends (decrypt and re-encrypt)"
            )
        return obj

    def _check_level(self, level: int) -> int:
        if (
            isinstance(level, (bool, np.bool_))
            or not isinstance(level, (int, np.integer))
            or not 0 <= level <= self.max_level
        ):
            raise LevelError(f"level {level!r} outside 0..{self.max_level} of these parameters")
        return int(level)

    @staticmethod
    def _check_scale(scale: float) -> float:
        given = scale
        try:
            real = not isinstance(scale, (bool, np.bool_)) and isinstance(scale, (int, float, np.integer, np.floating))
            scale = float(scale) if real else math.nan
        except OverflowError:
            scale = math.inf
        if not math.isfinite(scale) or scale < 1.0:
            raise InputError(f"scale {given!r} must be a finite number >= 1 (typically 2^30 .. 2^50)")
        return scale

    def check_real(self, op: str, values: np.ndarray | complex) -> None:
        """The real-slot ring holds no imaginary parts: refuse them rather than drop them silently."""
        if self.params.real_slots and np.any(np.imag(values) != 0):
            raise InputError(
                f"cannot {op} complex values: these parameters use the conjugate-invariant ring, "
                "whose slots are real; give real values or use ring='standard' parameters"
            )

    def _as_slot_vector(self, values: Values) -> np.ndarray:
        if isinstance(values, (Plaintext, Ciphertext)):
            raise InputError("expected numbers to encode, got an already encoded/encrypted value")
        try:
            arr = np.asarray(values)
        except (TypeError, ValueError) as exc:
            raise InputError(f"cannot read values to encode: {exc}") from None
        if arr.dtype == object or not (np.issubdtype(arr.dtype, np.number) or arr.dtype == bool):
            raise InputError(f"values must be real or complex numbers, got dtype {arr.dtype}")
        if arr.ndim == 0:
            arr = np.full(self.slots, arr.item(), np.complex128)
        elif arr.ndim != 1:
            raise InputError(f"expected a scalar or a 1-D vector, got shape {arr.shape}: flatten or pack it first")
        elif not 1 <= arr.size <= self.slots:
            raise InputError(
                f"vector of length {arr.size} does not fit {self.slots} slots: give 1..{self.slots} "
                "values or choose a larger ring (log_n)"
            )
        arr = arr.astype(np.complex128, copy=False)
        if not np.all(np.isfinite(arr)):
            raise InputError("values contain NaN or infinity: clean the input before encoding")
        self.check_real("encode", arr)
        if arr.size < self.slots:
            arr = np.concatenate([arr, np.zeros(self.slots - arr.size, np.complex128)])
        return arr
