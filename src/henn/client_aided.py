"""`henn.compile(model, shape, activations="client")` -> ClientAidedModel: client-aided activations in one
process (henn.segments). The server evaluates each linear segment; the client decrypts its outputs, applies
the activations and max pools exactly and encrypts the next segment's inputs, round after round.

    cm = henn.compile(torch_cnn, (1, 28, 28), backend="lattigo", activations="client")
    logits = cm.run(images)          # cm.timings["rounds"]: server round trips per image set
    cm.run(images, encrypted=False)  # the same segments on the plain backend

The client learns every pre-activation of every client-aided layer (docs/deployment.md)."""

from __future__ import annotations

import logging
import time

import numpy as np

from henn.ckks import open_backend
from henn.compiler.segments import CompiledSegments, compile_segments
from henn.frontend import load_model
from henn.ir import interpret
from henn.passes import CompileOptions
from henn.runtime import Client
from henn.runtime.inputs import check_images
from henn.runtime.parallel import check_threads
from henn.runtime.segments import SegmentServer, through_segments

log = logging.getLogger(__name__)


def compile_client_aided(model, input_shape, options: CompileOptions, threads: int | None = None) -> ClientAidedModel:
    return ClientAidedModel(compile_segments(load_model(model, input_shape), options), options.backend, threads)


class ClientAidedModel:
    def __init__(self, compiled: CompiledSegments, backend: str, threads: int | None = None):
        self.compiled, self.programs, self.stages = compiled, compiled.programs, compiled.stages
        self.program = self.programs[0]
        self.backend_name = backend
        self.threads = None if threads is None else check_threads(threads)
        self.timings: dict = {}
        self._sessions: dict[bool, tuple] = {}

    @property
    def params(self):
        return self.program.params

    @property
    def input_shape(self) -> tuple[int, ...]:
        return self.program.input_shape

    @property
    def rotation_steps(self) -> tuple[int, ...]:
        return self.program.rotation_steps

    @property
    def rounds(self) -> int:
        """Server round trips per ciphertext set: one per segment."""
        return len(self.programs)

    def describe(self) -> str:
        depths = ", ".join(str(p.depth) for p in self.programs)
        lines = [
            f"{self.program.mode} packing on {self.backend_name}, client-aided: {self.rounds} segments (depths "
            f"{depths}), {len(self.rotation_steps)} rotation keys, {self.params.describe()}"
        ]
        return "\n".join(lines + [f"client stage {k}: {s.describe()}" for k, s in enumerate(self.stages)])

    def reference(self, x) -> np.ndarray:
        """Logits of the imported model in NumPy (the plaintext reference)."""
        return interpret.run(self.compiled.reference, check_images(x, self.input_shape))

    def run(self, x, encrypted: bool = True) -> np.ndarray:
        """Logits (B, classes) of images x (B, *input_shape); encrypted=False: the segments on the plain backend."""
        x = check_images(x, self.input_shape)
        client, server = self._session(encrypted)
        views = [client.for_program(p) for p in self.programs]
        client.reset_timings()
        evaluate0 = server.seconds["evaluate"]
        t0 = time.perf_counter()
        outs = [
            through_segments(
                x[r.start : r.stop],
                self.stages,
                lambda k, xs: views[k].encrypt(xs),
                lambda k, cts: server.evaluate(cts, consume=True, segment=k),
                lambda k, cts, n: views[k].decrypt(cts, n),
            )
            for r in client.batches(len(x))
        ]
        sets = len(outs)
        self.timings = {
            "images": len(x),
            "sets": sets,
            "rounds": sets * self.rounds,
            "encode": client.seconds["encode"],
            "encrypt": client.seconds["encrypt"],
            "decrypt": client.seconds["decrypt"],
            "evaluate": server.seconds["evaluate"] - evaluate0,
            "total": time.perf_counter() - t0,
            "keygen": client.seconds["keygen"],
            "prepare": server.seconds["prepare"],
            "encrypted": bool(encrypted),
        }
        out = np.concatenate(outs)
        return out.reshape(len(x), -1) if len(self.program.output_shape) == 1 else out

    def _session(self, encrypted: bool):
        if encrypted not in self._sessions:
            backend = open_backend(self.backend_name if encrypted else "plain", self.params)
            client = Client(self.program, backend, threads=self.threads)
            server = SegmentServer(self.programs, backend, client.generate_keys(), threads=self.threads)
            server.prepare()
            self._sessions[encrypted] = (client, server, backend)
        client, server, _ = self._sessions[encrypted]
        return client, server

    def close(self) -> None:
        sessions, self._sessions = list(self._sessions.values()), {}
        for client, server, backend in sessions:
            client.close()
            server.close()
            backend.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
