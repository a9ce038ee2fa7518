"""Both ends of a deployed model, each from the model file alone (no compiler import):

    client = Client.load("model.client.henn")    # the client part (or the whole file); holds the secret key
    keys = client.generate_keys()                # public evaluation keys only
    server = Server.load("model.henn")           # the whole model file: the weights
    session = server.open_session(server.read_keys(client.key_blobs()))
    client.release_keys()                        # the evaluation keys are the server's now
    out = server.evaluate(session, client.encrypt(images))      # bytes in, bytes out
    logits = client.decrypt(out, len(images))
    client.save("client.key", passphrase=...)    # the secret key encrypted at rest (keyfile.py)
    client = Client.open("client.key", passphrase=...)

Everything between them is bytes in henn's serialization format (henn.ckks.serialization: one
versioned header per object), as it travels over the network (henn.deploy.app, henn.deploy.remote)."""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from henn.ckks import open_backend
from henn.ckks.values import BootstrapKeys, Ciphertext, EvaluationKeys, GaloisKeys, RelinKey
from henn.deploy import keyfile
from henn.deploy.artefact import Artefact
from henn.deploy.client_model import ClientModel
from henn.deploy.files import write_atomic
from henn.deploy.model_file import load_client_model, read_client_model
from henn.deploy.flood import check_bits, flood
from henn.errors import InputError, KeyFileError, SerializationError
from henn.runtime import client as runtime_client
from henn.runtime import server as runtime_server
from henn.runtime.encoded import EncodedWeights
from henn.runtime.inputs import check_images
from henn.runtime.parallel import Parallel
from henn.runtime.segments import SegmentServer

UPLOAD_KINDS = (RelinKey, GaloisKeys)  # what a server needs: no public key, never the secret key


class Client:
    """The client of a deployed model: keys, checks, encryption and decryption, from the model's client part
    (an Artefact, the whole file, gives its client part with its input checks: its holder has the weights)."""

    def __init__(
        self,
        model: ClientModel | Artefact,
        *,
        threads: int | None = None,
        flood_bits: int | None = None,
        seed: int | None = None,
    ):
        if isinstance(model, Artefact):
            model = model.client_part(share_checks=True)
        self.model, self.program = model, model.program
        self.backend = open_backend(model.backend, self.program.params)
        self.runtime = runtime_client.Client(self.program, self.backend, threads=threads)  # type: ignore[arg-type]
        self.flood_bits = check_bits(flood_bits)
        self._rng = np.random.default_rng(secrets.randbits(128) if seed is None else seed)

    @classmethod
    def load(cls, path: str | Path, **options) -> Client:
        """A client without keys of a model file: its client part (`GET /v1/model/file`) or the whole file."""
        return cls(load_client_model(path), **options)

    def generate_keys(self) -> EvaluationKeys:
        return self.runtime.generate_keys()

    def key_blobs(self) -> list[bytes]:
        """The evaluation keys a server needs, serialized (relinearization key, Galois keys, and the
        bootstrapping keys of a bootstrapping program: gigabytes at N = 2^16)."""
        keys = self._keys()
        if keys.galois is None:
            raise InputError(
                "the evaluation keys were released (release_keys()): make them again with regenerate_keys(), "
                "or read the file save_evaluation_keys() wrote"
            )
        return [self.backend.serialize(k) for k in (keys.relin, keys.galois, keys.bootstrap) if k is not None]

    def save_evaluation_keys(self, path: str | Path) -> int:
        """Write the evaluation keys (public: the body of a key upload, `henn evaluate --keys`); their size."""
        return write_atomic(path, self.key_blobs())

    def release_keys(self) -> None:
        """Drop the evaluation keys once uploaded or written (hundreds of MiB; GiB with bootstrapping keys);
        encryption and decryption go on. regenerate_keys() makes them again from the secret key."""
        self.runtime.release_keys()

    def regenerate_keys(self) -> EvaluationKeys:
        return self.runtime.regenerate_keys()

    @property
    def key_id(self) -> str | None:
        """The key set's id (public: every key and ciphertext carries it); None before generate_keys()."""
        return self.runtime.key_id

    # ---- the key file -----------------------------------------------------------------------
    def save(self, path: str | Path, *, passphrase: str | bytes) -> None:
        """Write the secret key and the model's client part to a new file (mode 0600), encrypted under
        `passphrase` (keyfile.py: Argon2id + AES-256-GCM). The evaluation keys are not in it: write them
        with save_evaluation_keys() (they are public) or make them again after open()."""
        secret, key_id = self.runtime.export_secret_key()
        facts = {
            "backend": self.model.backend,
            "params": self.backend.actual_params.fingerprint(),
            "key_id": key_id,
            "model_sha256": self.model.model_sha256,
        }
        keyfile.write_private(path, keyfile.lock(secret, self.model.to_bytes(), facts, passphrase))

    @classmethod
    def open(cls, path: str | Path, *, passphrase: str | bytes, **options) -> Client:
        """The client saved in `path` (save()): its secret key, ready to encrypt and decrypt; KeyFileError
        for a wrong passphrase or a changed file (nothing is kept of it)."""
        where = str(path)
        header, secret, model_bytes = keyfile.unlock(Path(path).read_bytes(), passphrase, where)
        try:
            model = read_client_model(model_bytes)
        except SerializationError as exc:
            raise KeyFileError(f"{where} holds a damaged model description ({exc})") from None
        if model.backend != header["backend"] or model.model_sha256 != header["model_sha256"]:
            raise KeyFileError(f"{where}: its header and its model description disagree: the file is damaged")
        client = cls(model, **options)
        try:
            if client.backend.actual_params.fingerprint() != header["params"]:
                raise KeyFileError(
                    f"{where} was saved with other encryption parameters (primes) than its model gives here"
                )
            client.runtime.import_secret_key(secret, header["key_id"])
        except SerializationError as exc:
            client.close()
            raise KeyFileError(f"{where} holds a secret key its backend cannot read ({exc})") from None
        except BaseException:
            client.close()
            raise
        return client

    def check(self, images) -> np.ndarray:
        """Images (B, *input_shape) as float64, refused (InputError) where the model file's input
        checks refuse them (shape, finiteness, activation ranges)."""
        x = check_images(images, self.program.input_shape)
        self.model.checks.run(x)
        return x

    def batches(self, n_images: int) -> list[range]:
        return self.runtime.batches(n_images)

    # ---- client-aided models (henn.segments): one round trip per segment ----------------------------
    @property
    def segments(self) -> int:
        """Server round trips per ciphertext set: 1, or a client-aided model's segment count."""
        return len(self.model.programs)

    def encrypt_segment(self, x: np.ndarray, k: int) -> list[bytes]:
        """Segment k's request: the serialized ciphertexts of x (checked images for k = 0, else what stage k - 1
        gave) in segment k's input packing."""
        return [self.backend.serialize(ct) for ct in self._view(k).encrypt(x)]

    def decrypt_segment(self, blobs: list[bytes], k: int, n_images: int) -> np.ndarray:
        """Segment k's outputs (n_images, *its output shape) from its response; the last segment's are the
        logits (flooded when flood_bits is set)."""
        cts = [self.backend.deserialize(b) for b in blobs]
        view = self._view(k)
        if len(cts) != view.program.output_cts or not all(isinstance(c, Ciphertext) for c in cts):
            raise InputError(
                f"the server answered {len(cts)} objects, segment {k} has {view.program.output_cts} output "
                "ciphertexts: is it serving another model?"
            )
        out = view.decrypt(cts, n_images)
        return flood(out, self.flood_bits, self._rng) if k == self.segments - 1 else out

    def _view(self, k: int) -> runtime_client.Client:
        if isinstance(k, bool) or not isinstance(k, int) or not 0 <= k < self.segments:
            raise InputError(f"segment {k!r}: the model has segments 0 to {self.segments - 1}")
        return self.runtime if k == 0 else self.runtime.for_program(self.model.programs[k])

    def encrypt(self, images: np.ndarray, *, checked: bool = False) -> list[bytes]:
        """One request: the serialized ciphertexts of one set of images (see batches())."""
        x = images if checked else self.check(images)
        return [self.backend.serialize(ct) for ct in self.runtime.encrypt(x)]

    def decrypt(self, blobs: list[bytes], n_images: int) -> np.ndarray:
        """Logits (n_images, *output_shape) from a response, flooded when flood_bits is set."""
        _whole(self.segments)
        cts = [self.backend.deserialize(b) for b in blobs]
        if len(cts) != self.program.output_cts or not all(isinstance(c, Ciphertext) for c in cts):
            raise InputError(
                f"the server answered {len(cts)} objects, the model has {self.program.output_cts} "
                "output ciphertexts: is it serving another model?"
            )
        return flood(self.runtime.decrypt(cts, n_images), self.flood_bits, self._rng)

    def _keys(self) -> EvaluationKeys:
        if self.runtime.keys is None:
            raise InputError("the client has no keys yet: call generate_keys() first")
        return self.runtime.keys

    def close(self) -> None:
        self.runtime.close()
        self.backend.close()


def _whole(segments: int) -> None:
    if segments > 1:
        raise InputError(
            f"this model has client-aided activations ({segments} segments, a round trip each): run it over HTTP "
            "(henn serve, henn predict, henn.connect) or in process, segment by segment"
        )


class Server:
    """The model's backend, opened once; a runtime Server per key set (open_session)."""

    def __init__(self, artefact: Artefact, *, threads: int | None = None, encode: bool = True):
        """encode: the weights now, shared by every session (henn.runtime.encoded), so that the first
        request pays no encoding; False: when the first session opens."""
        self.artefact, self.program, self.threads = artefact, artefact.program, threads
        self.backend = open_backend(artefact.backend, self.program.params)
        self.weights = [EncodedWeights(p, self.backend) for p in artefact.programs]
        self.seconds = {"encode": 0.0}
        # the backend's threads: the weights' encoding, and each request's parsing and answer (evaluate_timed)
        self.pool = Parallel.for_backend(self.backend, threads)
        if encode:
            self.seconds["encode"] = sum(w.prepare(self.pool) for w in self.weights)

    @classmethod
    def load(cls, path: str | Path, **options) -> Server:
        return cls(Artefact.load(path), **options)

    def read_keys(self, blobs: Iterable[bytes | memoryview]) -> EvaluationKeys:
        """Evaluation keys from serialized objects: one relinearization key (if the program needs it),
        one set of Galois keys and, for a bootstrapping program, its bootstrapping keys; nothing else."""
        keys = EvaluationKeys()
        slots = {RelinKey: "relin", GaloisKeys: "galois"}
        if self.program.bootstraps:
            slots[BootstrapKeys] = "bootstrap"
        for i, blob in enumerate(blobs):
            obj = self.backend.deserialize(blob)
            slot = slots.get(type(obj))
            if slot is None or getattr(keys, slot) is not None:
                what = "a second " + slot if slot else f"a {type(obj).__name__}"
                raise InputError(
                    f"key upload object {i} is {what}: upload one relinearization key, one set of Galois keys and "
                    "(bootstrapping programs) the bootstrapping keys (Client.key_blobs()), nothing else"
                )
            setattr(keys, slot, obj)
        if self.program.bootstraps and keys.bootstrap is None:
            raise InputError(
                "this model bootstraps: upload its bootstrapping keys too (Client.key_blobs() includes them)"
            )
        return keys

    def open_session(self, keys: EvaluationKeys) -> runtime_server.Server | SegmentServer:
        """A runtime Server for these keys (checked against the program), weights encoded; for a client-aided
        model one per segment (SegmentServer)."""
        server: runtime_server.Server | SegmentServer
        if self.artefact.segments:
            server = SegmentServer(
                self.artefact.programs, self.backend, keys, threads=self.threads, weights=self.weights
            )
        else:
            server = runtime_server.Server(
                self.program, self.backend, keys, threads=self.threads, weights=self.weights[0]
            )
        server.prepare()
        return server

    def evaluate(self, session, blobs: Iterable[bytes], segment: int | None = None) -> list[bytes]:
        """Serialized output ciphertexts of serialized inputs (an iterator: each blob can go once read);
        segment: which segment of a client-aided model (and only of one)."""
        return self.evaluate_timed(session, blobs, segment)[0]

    def evaluate_timed(self, session, blobs: Iterable[bytes], segment: int | None = None) -> tuple[list[bytes], float]:
        """evaluate() and the seconds of the evaluation itself (what an in-process run spends too)."""
        target = self.target(session, segment)
        out, seconds = self.evaluate_inputs(target, self.read_inputs(blobs))
        return self.write_outputs(out), seconds

    def target(self, session, segment: int | None = None):
        """What evaluates a request: the session, or segment `segment` of a client-aided model's session."""
        if segment is None:
            _whole(len(self.artefact.programs))
            return session
        if not self.artefact.segments:
            raise InputError("this model has no client-aided segments: send its inputs whole (POST .../infer)")
        return session.segment(segment)

    def read_inputs(self, blobs: Iterable[bytes | memoryview], threads: int | None = None) -> list:
        """A request's objects parsed and checked (any other kind than a ciphertext is refused when evaluated),
        as one set on `threads` threads (default: the backend's): a batch request holds hundreds of
        ciphertexts, each bit-unpacked and, when seeded, its c1 sampled again (0.2-1.5 s for MNIST's 784)."""
        if threads is None:
            return self.backend.deserialize_many(blobs, self.pool.workers, self.pool.map)
        return self.backend.deserialize_many(blobs, threads)

    @staticmethod
    def evaluate_inputs(target, cts: list[Ciphertext]) -> tuple[list[Ciphertext], float]:
        """The outputs of a target (Server.target) on parsed inputs (checked there; the list is consumed),
        and the seconds of the evaluation."""
        t0 = time.perf_counter()
        out = target.evaluate(cts, consume=True)
        return out, time.perf_counter() - t0

    def write_outputs(self, out: list[Ciphertext]) -> list[bytes]:
        return self.pool.map(self.backend.serialize, out)

    def close(self) -> None:
        self.pool.close()
        for w in self.weights:  # every plaintext goes before the backend that made it
            w.close()
        self.backend.close()
