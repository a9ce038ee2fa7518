"""The Python API: `henn.compile(model, input_shape)` -> CompiledModel, `.run(x)` -> logits.

    cm = henn.compile("src/henn/zoo/mnist-cnn_square.onnx", (1, 28, 28), backend="lattigo", mode="single")
    logits = cm.run(images)                  # encrypt, evaluate on the server side, decrypt
    cm.run(images, encrypted=False)          # the compiled program in cleartext (plain backend)
    cm.reference(images)                     # the imported model itself (NumPy)
    cm.timings, cm.params, cm.depth, cm.rotation_steps

Client and server live in this process: the client makes the keys and keeps the secret key; the
server gets the public evaluation keys only.
"""

from __future__ import annotations

import json
import logging
import math
import os
import time
from pathlib import Path

import numpy as np
import psutil
from tqdm import tqdm

from henn.ckks import open_backend
from henn.compiler.driver import Compiled, compile_model
from henn.errors import InputError
from henn.ir import interpret
from henn.passes import CompileOptions
from henn.runtime import Client, Server
from henn.runtime.memory import check_memory, machine_budget

log = logging.getLogger(__name__)

# "far outside" an activation's fitted range: beyond 1.5x its half-width from its centre, and beyond 1.25x the
# largest |pre-activation| seen on the training set when the model's .json metadata records it
ACTIVATION_RANGE_SLACK = 1.5
OBSERVED_SLACK = 1.25


def compile(model, input_shape=None, *, backend: str = "lattigo", mode: str = "single",  # noqa: A001
            activation_check: bool = True, params=None, log_scale: int | None = None,
            threads: int | None = None, batch_group: int | None = None, bootstrap: bool = False,
            calibration=None) -> CompiledModel:
    """Compile a torch.nn.Module or an .onnx file for CKKS inference on `backend`.

    mode: "single" (one image per ciphertext set, latency) or "batch" (throughput: G channels of one
    position for slots / G images per ciphertext; batch_group sets G, by default the smallest that
    fits henn.runtime.memory's share of the machine's memory: 1 for MNIST, 16-32 for CIFAR-10).
    params: explicit henn.ckks.Parameters (else chosen from the depth the model needs, 128-bit secure).
    activation_check: refuse inputs whose pre-activations fall far outside an activation's fitted
    range (checked on the client, in cleartext, before encrypting).
    bootstrap: place bootstraps where the model is deeper than the parameters allow (params with bootstrap
    parameters, default preset boot-n16; backends with bootstrapping: lattigo, plain); calibration: images
    (B, C, H, W) whose values set each bootstrap's range (also checked on every input before encrypting).
    """
    options = CompileOptions(mode=mode, backend=backend, log_scale=log_scale, params=params, batch_group=batch_group,
                             bootstrap=bootstrap, calibration=calibration, memory_budget=machine_budget())
    cm = CompiledModel(compile_model(model, input_shape, options), backend, activation_check, threads)
    cm.observed_preactivation = _observed_preactivation(model)
    return cm


def _observed_preactivation(model) -> list[float] | None:
    """Per activation layer, the largest |pre-activation| on the training set (zoo .json next to the .onnx)."""
    if not isinstance(model, (str, os.PathLike)):
        return None
    meta = Path(model).with_suffix(".json")
    try:
        values = json.loads(meta.read_text())["max_abs_preactivation"]["train"]
        return [float(v) for v in values]
    except (OSError, ValueError, KeyError, TypeError):
        return None


class CompiledModel:
    def __init__(self, compiled: Compiled, backend: str, activation_check: bool = True,
                 threads: int | None = None):
        self.compiled = compiled
        self.program = compiled.program
        self.backend_name = backend
        self.activation_check = activation_check
        self.threads = threads
        self.timings: dict[str, float] = {}
        self.observed_preactivation: list[float] | None = None
        self._sessions: dict[bool, tuple] = {}

    # ---- facts -------------------------------------------------------------------------------
    @property
    def params(self):
        return self.program.params

    @property
    def depth(self) -> int:
        return self.program.depth

    @property
    def rotation_steps(self) -> tuple[int, ...]:
        return self.program.rotation_steps

    @property
    def mode(self) -> str:
        return self.program.mode

    @property
    def input_shape(self) -> tuple[int, ...]:
        return self.program.input_shape

    def describe(self) -> str:
        boots = f", {self.program.bootstraps} bootstraps" if self.program.bootstraps else ""
        return (f"{self.mode} packing on {self.backend_name}: depth {self.depth}{boots}, {len(self.rotation_steps)} "
                f"rotation keys, {self.params.describe()}")

    # ---- running -----------------------------------------------------------------------------
    def reference(self, x) -> np.ndarray:
        """Logits of the imported (uncompiled) model in NumPy: the plaintext reference."""
        return interpret.run(self.compiled.reference, self.check_input(x, ranges=False))

    def run(self, x, encrypted: bool = True, *, progress: bool = False) -> np.ndarray:
        """Logits (B, classes) for images x (B, C, H, W). encrypted=False runs the same compiled program
        on the plain backend (no encryption). Timings of this call: `.timings`."""
        x = self.check_input(x, ranges=self.activation_check)
        client, server = self._session(encrypted)
        client.reset_timings()
        server.seconds["evaluate"] = 0.0
        boot0 = server.bootstrap_seconds()
        outs = []
        t0 = time.perf_counter()
        for r in tqdm(client.batches(len(x)), disable=not progress, unit="set" if self.mode == "batch" else "img",
                      desc="henn"):
            cts = server.evaluate(client.encrypt(x[r.start:r.stop]), consume=True)  # frees the input early
            outs.append(client.decrypt(cts, len(r)))
        self.timings = {"images": len(x), "encode": client.seconds["encode"], "encrypt": client.seconds["encrypt"],
                        "evaluate": server.seconds["evaluate"], "decrypt": client.seconds["decrypt"],
                        "total": time.perf_counter() - t0, "keygen": client.seconds["keygen"],
                        "prepare": server.seconds["prepare"], "encrypted": bool(encrypted),
                        "bootstrap": server.bootstrap_seconds() - boot0}
        out = np.concatenate(outs)
        return out.reshape(len(x), -1) if len(self.program.output_shape) == 1 else out

    def check_input(self, x, *, ranges: bool = True) -> np.ndarray:
        """Validate a batch (B, C, H, W): shape, finiteness and (optionally) activation ranges."""
        try:
            x = np.asarray(x, dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise InputError(f"images must be a numeric array (B, C, H, W): {exc}") from None
        want = tuple(self.input_shape)
        if x.ndim != len(want) + 1 or x.shape[1:] != want or len(x) == 0:
            raise InputError(f"expected images of shape (B, {', '.join(map(str, want))}), got {x.shape}: resize or "
                             "reshape the input (add a batch axis for one image)")
        bad = ~np.isfinite(x)
        if bad.any():
            idx = np.argwhere(bad)[0]
            raise InputError(f"image {idx[0]} contains NaN or infinity (at {tuple(int(i) for i in idx[1:])}): clean "
                             "the input")
        if ranges:
            self._check_ranges(x)
        if self.program.bootstraps:
            self._check_bootstrap_ranges(x)
        return x

    def _check_bootstrap_ranges(self, x: np.ndarray) -> None:
        """Each bootstrap refreshes values within its calibrated bound only: beyond it the modular
        reduction wraps them around (silently wrong logits), so such inputs are refused here."""

        def hook(node, inp, out):
            if node.op != "bootstrap":
                return
            peak = np.abs(inp.reshape(len(inp), -1)).max(axis=1)
            if np.any(peak > node.attrs["bound"]):
                i = int(np.argmax(peak > node.attrs["bound"]))
                raise InputError(f"image {i}: values before {node.name} reach {peak[i]:.3g}, beyond the bound "
                                 f"{node.attrs['bound']:.3g} calibrated for it; bootstrapping would wrap them "
                                 "around: feed inputs scaled like the calibration images, or recompile with "
                                 "calibration images that cover these")

        interpret.run(self.compiled.final, x, hook=hook)

    def _check_ranges(self, x: np.ndarray) -> None:
        polys = [n.name for n in self.compiled.checked.nodes if n.op == "poly"]
        seen = self.observed_preactivation if self.observed_preactivation and \
            len(self.observed_preactivation) == len(polys) else [0.0] * len(polys)
        observed = dict(zip(polys, seen))

        def hook(node, inp, out):
            rng = node.attrs.get("range") if node.op == "poly" else None
            if not rng:
                return
            lo, hi = rng
            mid = (lo + hi) / 2
            half = max((hi - lo) / 2 * ACTIVATION_RANGE_SLACK, observed[node.name] * OBSERVED_SLACK)
            dev = np.abs(inp.reshape(len(inp), -1) - mid).max(axis=1)
            if np.any(dev > half):
                i = int(np.argmax(dev > half))
                peak = float(inp[i].flat[np.argmax(np.abs(inp[i] - mid))])
                raise InputError(f"image {i}: pre-activations of layer {node.name!r} reach {peak:.3g}, far outside "
                                 f"the activation's fitted range [{lo:g}, {hi:g}] (accepted: {mid - half:g} .. "
                                 f"{mid + half:g}); the polynomial is meaningless there: feed inputs scaled like the "
                                 "training data (pixels in [0, 1]) or compile with activation_check=False")

        interpret.run(self.compiled.checked, x, hook=hook)

    def _session(self, encrypted: bool):
        if encrypted not in self._sessions:
            name = self.backend_name if encrypted else "plain"
            opts = {"noise": True} if (encrypted and name == "plain") else {}
            backend = open_backend(name, self.params, **opts)
            check_memory(self.program, backend, psutil.virtual_memory().available)
            client = Client(self.program, backend, threads=self.threads)
            keys = client.generate_keys()
            server = Server(self.program, backend, keys, threads=self.threads)
            server.prepare()
            self._sessions[encrypted] = (client, server, backend)
            log.info("%s session ready: keygen %.2f s, weights encoded in %.2f s", name, client.seconds["keygen"],
                     server.seconds["prepare"])
        client, server, _ = self._sessions[encrypted]
        return client, server

    def close(self) -> None:
        for client, server, backend in self._sessions.values():
            client.close()
            server.close()
            backend.close()
        self._sessions.clear()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    @property
    def n_classes(self) -> int:
        return math.prod(self.program.output_shape)
