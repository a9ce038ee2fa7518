"""The backend-neutral CKKS interface.

A `Backend` is one library context for one `Parameters` set. Its public methods check every
argument (lengths, NaN/inf, levels, scales, keys) and only then call the `_raw` primitives a
backend module implements, so that no input can reach a library in a state it would crash on.

Conventions shared by every backend:
- level: number of rescales still possible; fresh values sit at `max_level`, 0 is the last.
- scale: a float; products multiply scales, `rescale` divides by the prime q_level.
- rotate(ct, k): left rotation by k slots (k < 0 rotates right); keys are per normalized step.
- plaintext operands of a multiplication default to scale = q_level, so that the following
  rescale restores the ciphertext's scale exactly (depth-aware encoding).
"""

from __future__ import annotations

import math

import numpy as np

from henn.ckks.backend_core import Values
from henn.ckks.backend_keys import BackendKeys
from henn.ckks.backend_wire import BackendWire
from henn.ckks.values import Ciphertext, EvaluationKeys, Plaintext, PublicKey, SecretKey, check_same_key_set
from henn.errors import InputError, UnsupportedOperation

__all__ = ["Backend", "Values"]


class Backend(BackendKeys, BackendWire):
    """A CKKS backend: encoding and encryption here; key generation (BackendKeys), serialization
    (BackendWire), the library primitives a backend module implements (BackendPrimitives) and the
    capabilities and argument checks (BackendCore) in the classes it is made of."""

    def encode(
        self, values: Values, *, level: int | None = None, scale: float | None = None, periodic: bool = False
    ) -> Plaintext:
        """Encode a scalar (broadcast to every slot) or a vector of 1..slots real/complex values
        (zero-padded) at `level` (default max) and `scale` (default 2^log_scale). periodic=True: the values
        are one period of a vector repeating over every slot, their count a power of two dividing the slots;
        Lattigo encodes the sparse packing of that period, as Evaluator.dot_encode does, so that a vector
        encoded here and inside a dot product give the same plaintext."""
        level = self.max_level if level is None else self._check_level(level)
        scale = self._check_scale(self.params.default_scale if scale is None else scale)
        period = self.slots
        if periodic:
            period = int(np.size(values))
            if np.ndim(values) != 1 or not period or self.slots % period or period & (period - 1):
                raise InputError(
                    f"periodic encoding needs one period of a power of two dividing the {self.slots} slots, got "
                    f"shape {np.shape(values)}"
                )
        vec = self._as_slot_vector(values)
        if periodic:
            vec = np.tile(vec[:period], self.slots // period)
        bound = self.log_q_at(level) - 1
        peak = float(np.max(np.abs(vec))) if vec.size else 0.0
        if peak > 0 and math.log2(peak) + math.log2(scale) >= bound:
            raise InputError(
                f"values up to {peak:.3g} at scale 2^{math.log2(scale):.1f} overflow the modulus at "
                f"level {level} ({bound + 1:.0f} bits): scale the inputs down or encode at a "
                "higher level or smaller scale"
            )
        raw = self._encode_periodic(vec[:period], level, scale) if periodic else self._encode(vec, level, scale)
        return Plaintext(raw, level, scale, self.name)

    def decode(self, pt: Plaintext, *, as_complex: bool = False) -> np.ndarray:
        pt = self._own(pt, Plaintext)
        out = self._decode(pt.raw, pt.level, pt.scale)
        return out if as_complex else out.real.copy()

    def encrypt(
        self, x: Plaintext | Values, key: PublicKey | SecretKey, *, level: int | None = None, scale: float | None = None
    ) -> Ciphertext:
        """Encrypt under the public key, or under the secret key where the backend has
        `symmetric_encryption`: the same kind of ciphertext for about half the work (no public-key
        products), what a client that holds its secret key uses."""
        if isinstance(key, SecretKey):
            if not self.symmetric_encryption:
                raise UnsupportedOperation(
                    f"the {self.name} backend encrypts under the public key only: pass the PublicKey"
                )
            key = self._own(key, SecretKey)
        else:
            key = self._own(key, PublicKey)  # before encoding: no library call with a foreign key
        pt = x if isinstance(x, Plaintext) else self.encode(x, level=level, scale=scale)
        pt = self._own(pt, Plaintext)
        raw = self._encrypt_symmetric(pt.raw, key.raw) if isinstance(key, SecretKey) else self._encrypt(pt.raw, key.raw)
        return Ciphertext(raw, pt.level, pt.scale, self.name, key_id=key.key_id)

    def decrypt(self, ct: Ciphertext, sk: SecretKey) -> Plaintext:
        ct, sk = self._own(ct, Ciphertext), self._own(sk, SecretKey)
        check_same_key_set("decrypt", ct.key_id, sk.key_id, "this secret key")
        return Plaintext(self._decrypt(ct.raw, sk.raw), ct.level, ct.scale, self.name)

    def decrypt_decode(self, ct: Ciphertext, sk: SecretKey, *, as_complex: bool = False) -> np.ndarray:
        return self.decode(self.decrypt(ct, sk), as_complex=as_complex)

    def evaluator(self, keys: EvaluationKeys | None = None):
        from henn.ckks.evaluator import Evaluator

        return Evaluator(self, keys or EvaluationKeys())
