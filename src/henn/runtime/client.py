"""The client: the only holder of the secret key. Generates keys, packs and encrypts images,
decrypts and unpacks logits. It hands the server public EvaluationKeys only."""

from __future__ import annotations

import copy
import math
import time

import numpy as np

from henn.ckks.values import Ciphertext, EvaluationKeys, SecretKey
from henn.program import Program
from henn.errors import InputError
from henn.runtime.inputs import check_images
from henn.runtime.parallel import Parallel


class Client:
    def __init__(self, program: Program, backend, *, threads: int | None = None):
        self.program, self.backend = program, backend
        self.pool = Parallel.for_backend(backend, threads)
        self._sk: SecretKey | None = None
        self.keys: EvaluationKeys | None = None  # set with _sk
        self.seconds = {"keygen": 0.0, "encode": 0.0, "encrypt": 0.0, "decrypt": 0.0}

    def generate_keys(self) -> EvaluationKeys:
        """Create the secret key (kept here) and return the public evaluation keys for the server."""
        t0 = time.perf_counter()
        self._sk = self.backend.generate_secret_key()
        self.keys = self._keys_of(self._sk)
        self.seconds["keygen"] = time.perf_counter() - t0
        return self.keys

    def regenerate_keys(self) -> EvaluationKeys:
        """The evaluation keys of the secret key held (after release_keys(), or in a client opened from its
        key file): new keys for the same key set, as good as the first ones."""
        sk, _ = self._need_keys()
        t0 = time.perf_counter()
        self.keys = self._keys_of(sk)
        self.seconds["keygen"] = time.perf_counter() - t0
        return self.keys

    def _keys_of(self, sk) -> EvaluationKeys:
        p = self.program
        return self.backend.keys_of(
            sk, rotations=p.rotation_steps, conjugate=p.complex_packed, relin=p.relin, bootstrap=p.bootstraps > 0
        )

    def release_keys(self) -> None:
        """Drop the evaluation keys (relinearization, Galois, bootstrapping: the server's, hundreds of MiB to
        GiB) once uploaded or written; the secret and public keys stay, encryption and decryption go on."""
        if self.keys is not None:
            self.keys = EvaluationKeys(public=self.keys.public)

    def export_secret_key(self) -> tuple[bytes, str]:
        """(the secret key's library bytes, its key-set id): for a passphrase-protected key file only
        (henn.deploy.keyfile); nothing else ever writes or sends them."""
        sk, _ = self._need_keys()
        return self.backend.export_secret_key(sk), sk.key_id

    def import_secret_key(self, data: bytes, key_id: str) -> None:
        """Hold the secret key of a key file (and a public key of it): encrypt and decrypt at once,
        regenerate_keys() for the evaluation keys."""
        self._sk = self.backend.import_secret_key(data, key_id)
        self.keys = EvaluationKeys(public=self.backend.generate_public_key(self._sk))

    @property
    def key_id(self) -> str | None:
        return None if self._sk is None else self._sk.key_id

    def for_program(self, program) -> Client:
        """This client (its keys, pool and timings) packing for another program on the same parameters and
        keys: a segment of a client-aided model (henn.segments). Make keys on this client, not on the view."""
        if program.params.fingerprint() != self.program.params.fingerprint():
            raise InputError("a client view needs a program on the same parameters (one key set)")
        view = copy.copy(self)
        view.program = program
        return view

    # ---- packing -----------------------------------------------------------------------------
    def batches(self, n_images: int) -> list[range]:
        """Images per ciphertext set: slots / G in batch mode (G channels per ciphertext); in single mode
        one, or the images a multiplexed program packs side by side."""
        per = self.program.images_per_set
        return [range(i, min(i + per, n_images)) for i in range(0, n_images, per)]

    def pack(self, images: np.ndarray) -> list[np.ndarray]:
        """Slot vectors of one ciphertext set (batch: up to slots / G images; single: one image, or up to
        the images a multiplexed program packs)."""
        x = np.asarray(images, dtype=np.float64).reshape(len(images), -1)
        slots, per = self.backend.slots, self.program.images_per_set
        if not 1 <= len(x) <= per:
            raise InputError(f"a ciphertext set holds 1 to {per} images, got {len(x)}: split them (Client.batches)")
        # a partial set repeats its images where images are missing: the server computes on every position,
        # and a bootstrap wraps the whole ciphertext around when any value leaves its calibrated range, which
        # an empty (zero) image need not respect (ResNet-20: 10.3 before a bootstrap calibrated to 9.19)
        return self.program.packing.pack(x[np.arange(per) % len(x)], slots)

    def encrypt(self, images: np.ndarray) -> list[Ciphertext]:
        """Ciphertexts of one set of images (B, *input_shape), checked as CompiledModel.run checks them."""
        sk, keys = self._need_keys()
        vecs = self.pack(check_images(images, self.program.input_shape))
        be, level = self.backend, self.program.input_level
        t0 = time.perf_counter()
        pts = self.pool.map(lambda v: be.encode(v, level=level), vecs)
        t1 = time.perf_counter()
        # under the secret key where the backend can: half the work of a public-key encryption
        key = sk if be.symmetric_encryption else keys.public
        cts = self.pool.map(lambda pt: be.encrypt(pt, key), pts)
        t2 = time.perf_counter()
        self.seconds["encode"] += t1 - t0
        self.seconds["encrypt"] += t2 - t1
        return cts

    def decrypt(self, cts: list[Ciphertext], n_images: int) -> np.ndarray:
        """Logits (n_images, *output_shape) of one ciphertext set."""
        sk, _ = self._need_keys()
        per = self.program.images_per_set
        if isinstance(n_images, bool) or not isinstance(n_images, (int, np.integer)) or not 1 <= n_images <= per:
            raise InputError(
                f"a ciphertext set holds 1 to {per} images, got n_images={n_images!r}: give the number "
                "of images that were encrypted together"
            )
        t0 = time.perf_counter()
        p = self.program
        vecs = self.pool.map(lambda ct: self.backend.decrypt_decode(ct, sk, as_complex=p.complex_packed), cts)
        self.seconds["decrypt"] += time.perf_counter() - t0
        logits = p.packing.unpack(vecs, p.output, p.params.slots, n_images)
        return p.output.finish(logits)

    def close(self) -> None:
        self.pool.close()

    def reset_timings(self) -> None:
        for k in ("encode", "encrypt", "decrypt"):
            self.seconds[k] = 0.0

    def _need_keys(self) -> tuple[SecretKey, EvaluationKeys]:
        """The secret key and the evaluation keys held (or InputError)."""
        if self._sk is None or self.keys is None:
            raise InputError("the client has no keys yet: call generate_keys() first")
        return self._sk, self.keys

    @property
    def n_inputs(self) -> int:
        return math.prod(self.program.input_shape)
