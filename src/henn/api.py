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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from henn import ranges
from henn.approximation import TARGET
from henn.ckks import open_backend
from henn.ckks.params import Parameters
from henn.client_aided import ClientAidedModel, compile_client_aided
from henn.compiler.driver import Compiled, compile_model
from henn.errors import InputError
from henn.ir import interpret
from henn.ir.ops import Op
from henn.kernels import composite_max
from henn.passes import CompileOptions
from henn.program import REFRESHING, refreshed_level
from henn.ranges import check_bootstraps
from henn.runtime import Client, Server
from henn.runtime.inputs import check_images
from henn.runtime.memory import check_memory, machine_budget, return_freed_memory
from henn.runtime.parallel import check_threads

log = logging.getLogger(__name__)
ACTIVATION_MODES = ("approximate", "client")


def compile(  # noqa: A001
    model,
    input_shape=None,
    *,
    backend: str = "lattigo",
    mode: str = "single",
    activation_check: bool | str = True,
    calibration=None,
    params=None,
    log_scale: int | None = None,
    threads: int | None = None,
    batch_group: int | None = None,
    bootstrap: bool = False,
    selection: str | None = None,
    precision_bits: float | None = None,
    images_per_set: int = 1,
    complex_packing: bool = False,
    activation_degree: int | dict[str, int] | None = None,
    activation_bits: float | dict[str, float] | None = None,
    activations: str = "approximate",
) -> CompiledModel | ClientAidedModel:
    """Compile a torch.nn.Module or an .onnx file for CKKS inference on `backend`.

    Args:
        model: a torch.nn.Module, or the path of an .onnx file (a zoo model's .json next to it gives its activations
            their ranges).
        input_shape: one input's shape (C, H, W); an .onnx file's own by default, required for a torch model.
        backend: the CKKS library that runs the program (henn.ckks.backends).
        mode: "single" (one image per ciphertext set, latency) or "batch" (throughput: G channels of one position for
            slots / G images per ciphertext).
        activation_check: True/"error" refuses inputs whose pre-activations fall far outside an activation's input
            range, "warn" logs them, False/"off" skips the check (done on the client, in cleartext, before encrypting;
            see henn.ranges).
        calibration: sample inputs (B, C, H, W) like the training data, giving each activation its range (the model's
            .json metadata does so for zoo models; an activation without a fitted range, the square, needs it) and each
            bootstrap its range.
        params: explicit henn.ckks.Parameters (else chosen from the depth the model needs, 128-bit secure).
        log_scale: the scale's bits when parameters are chosen (default: henn.ckks.select_parameters').
        threads: worker threads of the client and server sessions (on openfhe, its worker's OpenMP threads).
        batch_group: batch mode's G, by default the smallest that fits henn.runtime.memory's share of the machine's
            memory: 1 for MNIST, 16-32 for CIFAR-10.
        bootstrap: place bootstraps where the model is deeper than the parameters allow (params with bootstrap
            parameters, default preset boot-n16, on gpu boot-n16-gpu; backends: lattigo, openfhe with its own sets, gpu,
            plain).
        selection: how parameters are chosen when params is None: "precision" (the smallest 128-bit secure set,
            real-slot ring where the backend has it, whose noise-model error on the calibration images keeps their
            predictions; the default when calibration is given without bootstrap or log_scale), "library" (the backend's
            own recommendation for the depth; the default otherwise) or "fixed".
        precision_bits: with "precision", the predicted max logit error must also stay below 2^-bits (default 4).
        images_per_set: single mode, several images side by side in multiplexed ciphertexts (throughput for networks
            whose feature maps leave slots free: ResNet-20's last stage fills an eighth of a ciphertext with one image,
            so 8 images share it at the cost of one).
        complex_packing: batch mode, two images per slot (real and imaginary parts; paper 003, extended to square
            activations by one conjugation each): twice the images per set on the standard ring. Needs square (or no)
            activations and batch_group 1; on lattigo the real-slot ring gives the same count.
        activation_degree: GELU, SiLU, Sigmoid, Tanh, ELU, Softplus, Mish, LeakyReLU and Hardswish are approximated by
            polynomials on the range their inputs take over the calibration images (needed for them), widened by a
            margin (henn.approximation); this sets their degree, one for all (an int) or per layer name (a dict); by
            default the lowest whose error is within 2^-8 of the activation's output range. describe() lists each
            approximation; run() refuses inputs that leave its range.
        activation_bits: ReLU and |x| are x (a + b s(x / R)) on [-R, R] (their calibrated range), s a composite of
            minimax sign polynomials within 2^-bits (henn.approximation.composite): the max error is about R 2^-bits;
            one for all or per layer name; by default (and for layers a dict does not name) the fewest bits that keep
            the calibration images' predictions, plus one (henn.passes.sign_bits: each bit costs levels and bootstraps).
        activations: "approximate" (polynomials on the server, above) or "client": client-aided activations
            (henn.client_aided: the server evaluates the linear segments, the client decrypts each segment's outputs,
            applies every activation and max pool exactly and encrypts the next segment's inputs; one round trip per
            segment, and the client learns every pre-activation of those layers: docs/deployment.md).

    Returns:
        The compiled model, ready to `run`: a ClientAidedModel with activations="client".

    Raises:
        InputError: an argument out of its range, or inputs (calibration) of the wrong shape.
        UnsupportedOperation: a layer or a combination of options henn cannot compile.
    """
    return _compile(_CompileArguments(**locals()))  # locals(): exactly the arguments above, by name


@dataclass
class _CompileArguments:
    """henn.compile's arguments (documented there), checked: the options the compiler gets and the ones the
    CompiledModel keeps."""

    model: Any
    input_shape: tuple[int, ...] | None
    backend: str
    mode: str
    activation_check: bool | str
    calibration: np.ndarray | None
    params: Parameters | None
    log_scale: int | None
    threads: int | None
    batch_group: int | None
    bootstrap: bool
    selection: str | None
    precision_bits: float | None
    images_per_set: int
    complex_packing: bool
    activation_degree: int | dict[str, int] | None
    activation_bits: float | dict[str, float] | None
    activations: str

    def __post_init__(self):
        if self.activations not in ACTIVATION_MODES:
            raise InputError(f"activations={self.activations!r}: use one of {', '.join(ACTIVATION_MODES)}")
        self.activation_check = ranges.check_mode(self.activation_check)

    def options(self) -> CompileOptions:
        """The compiler's options; batch mode's memory budget is this machine's (henn.runtime.memory)."""
        selection = self.selection
        if selection is None:  # calibration images alone: the smallest parameters that keep their predictions
            auto = self.calibration is not None and self.params is None and not self.bootstrap
            selection = "precision" if auto and self.log_scale is None else "library"
        return CompileOptions(
            mode=self.mode,
            backend=self.backend,
            log_scale=self.log_scale,
            params=self.params,
            batch_group=self.batch_group,
            bootstrap=self.bootstrap,
            calibration=self.calibration,
            memory_budget=machine_budget(),
            selection=selection,
            precision_bits=self.precision_bits,
            images_per_set=self.images_per_set,
            complex_packing=self.complex_packing,
            activation_degree=self.activation_degree,
            activation_bits=self.activation_bits,
        )


def _compile(args: _CompileArguments) -> CompiledModel | ClientAidedModel:
    """henn.compile on checked arguments: the compiled program in a CompiledModel (or ClientAidedModel),
    calibrated, with a warning for each approximation above its target and each activation left unchecked."""
    options = args.options()
    if args.activations == "client":
        return compile_client_aided(args.model, args.input_shape, options, args.threads)
    cm = CompiledModel(
        compile_model(args.model, args.input_shape, options), args.backend, args.activation_check, args.threads
    )
    cm.observed_preactivation = _observed_preactivation(args.model)
    if args.calibration is not None:
        cm.calibrate(args.calibration)
    rule = cm.compiled.final.meta.activation_degrees  # lower degrees that keep the predictions, by design
    by_rule = lambda a: rule is not None and rule.kept and a["degree"] <= rule.degree
    for a in cm.approximations():  # composite signs meet the bits they were asked for by construction
        if a["bits"] is None and a["relative_error"] > TARGET and not by_rule(a):
            log.warning(
                "layer %r: the degree-%d polynomial for %s on [%.3g, %.3g] is off by up to %.2g, %.2g of its "
                "output range (target %.2g)%s",
                a["layer"],
                a["degree"],
                a["kind"],
                *a["range"],
                a["max_error"],
                a["relative_error"],
                TARGET,
                "" if args.activation_degree else f": {a['kind']} is not smooth enough for a better fit",
            )
    unchecked = [name for name, iv in cm.activation_intervals().items() if iv is None]
    if unchecked and args.activation_check != "off":
        log.warning(
            "activation layers %s have no fitted range and no calibration data: their inputs are not "
            "range-checked; pass calibration=<inputs like the training data> to henn.compile",
            unchecked,
        )
    return cm


def _describe_approximation(a: dict) -> str:
    """describe()'s line for one entry of CompiledModel.approximations()."""
    bits = "" if a["bits"] is None else f", {a['bits']:g} bits"
    span = f"[{a['range'][0]:.4g}, {a['range'][1]:.4g}]"
    if "window" in a:
        return (
            f"layer {a['layer']!r}: {a['kind']} over {a['window'][0]}x{a['window'][1]} windows, {a['max_levels']} "
            f"max-levels of composed polynomials of degrees {a['degrees']}, inputs in {span}, max error "
            f"{a['max_error']:.2g}{bits}, {a['levels']} levels{_part_way(a)}"
        )
    form = (
        f"a degree-{a['degree']} polynomial"
        if len(a["degrees"]) == 1
        else (f"composed polynomials of degrees {a['degrees']}")
    )
    return (
        f"layer {a['layer']!r}: {a['kind']} approximated by {form} on {span}, max error {a['max_error']:.2g} there "
        f"({a['relative_error']:.2g} of its output range{bits}), {a['levels']} levels{_part_way(a)}"
    )


def _part_way(a: dict) -> str:
    return f" (with {a['refreshes']} bootstraps per ciphertext part way)" if a["refreshes"] else ""


def _observed_preactivation(model) -> list[float] | None:
    """Per activation layer, the largest |pre-activation| on the training set (zoo .json next to the .onnx)."""
    if not isinstance(model, (str, os.PathLike)):
        return None
    meta = Path(model).with_suffix(".json")
    try:
        return json.loads(meta.read_text())["max_abs_preactivation"]["train"]
    except (OSError, ValueError, KeyError, TypeError, RecursionError):
        return None


class CompiledModel:
    """A compiled model: its Program (henn.program) and the sessions that run it on one backend.

    `run(x)` encrypts each set of images on a client session, evaluates the ciphertexts on a server session
    holding only the evaluation keys, and decrypts the logits; `reference(x)` is the plaintext model it is
    checked against. Sessions (keys, encoded weights) are made on first use and kept until `close()` or the
    end of a `with` block. Build one with `henn.compile`.
    """

    def __init__(
        self, compiled: Compiled, backend: str, activation_check: bool | str = True, threads: int | None = None
    ):
        self.compiled = compiled
        self.program = compiled.program
        self.backend_name = backend
        self.activation_check = ranges.check_mode(activation_check)
        self.threads = None if threads is None else check_threads(threads)
        self.timings: dict[str, Any] = {}  # seconds per phase; "steps": seconds per step kind
        self.observed_preactivation: list[float] | None = None  # per activation layer, from the model's .json
        self.calibrated_preactivation: dict[str, float] = {}  # per activation layer, from calibrate()
        self._sessions: dict[bool, tuple] = {}

    # ---- facts -------------------------------------------------------------------------------
    @property
    def params(self):
        return self.program.params

    @property
    def precision(self):
        """henn.compiler.precision.PrecisionChoice of selection="precision" (else None)."""
        return self.compiled.precision

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
        """One line: the mode, parameters, depth, rotation keys, bootstraps and why these parameters."""
        p = self.program
        boots = f", {p.bootstrap_steps} bootstraps" if p.bootstrap_steps else ""
        inner = p.bootstraps - p.bootstrap_steps
        boots += f", {inner} activation(s) bootstrapping part way" if inner else ""
        why = "" if self.precision is None else f"; {self.precision.describe()}"
        mode = f"{self.mode} (complex)" if self.program.complex_packed else self.mode
        lines = [
            f"{mode} packing on {self.backend_name}: depth {self.depth}{boots}, {len(self.rotation_steps)} "
            f"rotation keys, {self.params.describe()}{why}"
        ]
        meta = self.compiled.final.meta
        rules = [meta.activation_degrees, meta.activation_bits]
        return "\n".join(lines + [r.describe() for r in rules if r] + self.describe_approximations())

    def describe_approximations(self) -> list[str]:
        """One line per approximated activation or max pool (see approximations())."""
        return [_describe_approximation(a) for a in self.approximations()]

    def approximations(self) -> list[dict]:
        """Each non-polynomial activation evaluated as a polynomial (henn.approximation): layer, kind, degree,
        the range it was fitted on (= the inputs run() accepts), its max error there (absolute, and relative to
        the activation's output range) and the levels it costs in the compiled program; degrees: those of the
        composed polynomials (ReLU's composite sign), degree: the whole polynomial's in x."""
        return [
            {
                "layer": n.name,
                "kind": n.attrs["approximates"],
                "degree": math.prod(n.attrs["degrees"]) + n.attrs["times_input"],
                "degrees": tuple(n.attrs["degrees"]),
                "range": tuple(n.attrs["range"]),
                "max_error": n.attrs["approximation_error"],
                "relative_error": n.attrs["approximation_relative_error"],
                "levels": n.attrs["levels"],
                "bits": n.attrs.get("bits"),
                "refreshes": self._refreshes(n.name),
            }
            for n in self.compiled.final.nodes
            if n.op == Op.POLY and "approximates" in n.attrs
        ] + [self._maxpool(n) for n in self.compiled.checked.nodes if n.op == Op.MAXPOOL]

    def _maxpool(self, n) -> dict:
        """A max pool's composite max (henn.passes.maxpool_form): its window, range (of its inputs, as calibrated),
        degrees, max error and levels (those of the compiled program)."""
        final = next(m for m in self.compiled.final.nodes if m.name == n.name)
        k = math.prod(n.attrs["kernel"])
        return {
            "layer": n.name,
            "kind": n.attrs["approximates"],
            "window": tuple(n.attrs["kernel"]),
            "degree": math.prod(n.attrs["degrees"]) + 1,
            "degrees": tuple(n.attrs["degrees"]),
            "range": tuple(n.attrs["range"]),
            "max_error": n.attrs["approximation_error"],
            "relative_error": n.attrs["approximation_relative_error"],
            "levels": final.attrs["levels"],
            "bits": n.attrs["bits"],
            "maxima": k - 1,
            "max_levels": composite_max.stages(k),
            "refreshes": self._refreshes(n.name),
        }

    def _refreshes(self, layer: str) -> int:
        """Bootstraps per ciphertext inside a layer's chain (henn.chain_schedule; 0: none)."""
        steps = [s for s in self.program.steps if s.name == layer and isinstance(s, REFRESHING) and s.refresh]
        return sum(refreshed_level(s, self.program.params.max_level)[1] for s in steps)

    # ---- running -----------------------------------------------------------------------------
    def reference(self, x) -> np.ndarray:
        """Logits of the imported (uncompiled) model in NumPy: the plaintext reference. Only shape and
        finiteness are checked: the plaintext has no fitted ranges or bootstraps to protect (it computes the
        answer an input refused encrypted would have had)."""
        return interpret.run(self.compiled.reference, check_images(x, self.input_shape))

    def run(self, x, encrypted: bool = True, *, progress: bool = False) -> np.ndarray:
        """Logits (B, classes) for images x (B, C, H, W). encrypted=False runs the same compiled program
        on the plain backend (no encryption). Timings of this call: `.timings`."""
        x = self.check_input(x, ranges=self.activation_check != "off")
        client, server = self._session(encrypted)
        client.reset_timings()
        server.seconds["evaluate"] = 0.0
        kinds0 = server.seconds_by_kind()
        outs, per_set = [], []
        t0 = time.perf_counter()
        for r in tqdm(
            client.batches(len(x)), disable=not progress, unit="set" if self.mode == "batch" else "img", desc="henn"
        ):
            before = server.seconds["evaluate"]
            cts = server.evaluate(client.encrypt(x[r.start : r.stop]), consume=True)  # frees the input early
            per_set.append(server.seconds["evaluate"] - before)
            outs.append(client.decrypt(cts, len(r)))
        steps = {k: t - kinds0.get(k, 0.0) for k, t in server.seconds_by_kind().items()}
        self.timings = {
            "images": len(x),
            "encode": client.seconds["encode"],
            "encrypt": client.seconds["encrypt"],
            "evaluate": server.seconds["evaluate"],
            "evaluate_per_set": per_set,
            "decrypt": client.seconds["decrypt"],
            "total": time.perf_counter() - t0,
            "keygen": client.seconds["keygen"],
            "prepare": server.seconds["prepare"],
            "bootstrap_factor_bytes": server.executor.kept_bootstrap_factor_bytes(),  # optional memory: the DFT's
            "encrypted": bool(encrypted),
            "steps": steps,
            "bootstrap": steps.get("bootstrap", 0.0),
        }
        out = np.concatenate(outs)
        return out.reshape(len(x), -1) if len(self.program.output_shape) == 1 else out

    def check_input(self, x, *, ranges: bool = True) -> np.ndarray:
        """Validate a batch (B, C, H, W): shape, finiteness and (optionally) activation ranges."""
        x = check_images(x, self.input_shape)
        if ranges:
            self._check_ranges(x)
        if self.program.bootstraps:  # always: a value beyond a bootstrap's bound would wrap around
            check_bootstraps(self.compiled.final, x)
        return x

    def calibrate(self, x) -> None:
        """Record each activation's largest |pre-activation| over sample inputs x (B, C, H, W) like the
        training data: the ranges run() accepts (henn.ranges) widen to 1.25x of it."""
        # not check_input: the bootstrap bounds came from these images, and leave out their outliers
        peaks = ranges.observed_peaks(self.compiled.checked, check_images(x, self.input_shape))
        for name, peak in peaks.items():
            self.calibrated_preactivation[name] = max(peak, self.calibrated_preactivation.get(name, 0.0))

    def activation_intervals(self) -> dict[str, tuple[float, float] | None]:
        """Per activation layer, (centre, half-width) of the pre-activations run() accepts (None: unchecked)."""
        seen = (
            ranges.clean_peaks(self.observed_preactivation, self.compiled.checked, "the model's .json")
            if self.observed_preactivation is not None
            else {}
        )
        for name, peak in self.calibrated_preactivation.items():
            seen[name] = max(peak, seen.get(name, 0.0))
        return ranges.accepted_intervals(self.compiled.checked, seen)

    def _check_ranges(self, x: np.ndarray) -> None:
        ranges.check(self.compiled.checked, x, self.activation_intervals(), self.activation_check)

    def _session(self, encrypted: bool):
        if encrypted not in self._sessions:
            name = self.backend_name if encrypted else "plain"
            opts: dict[str, Any] = {"noise": True} if (encrypted and name == "plain") else {}
            if encrypted and self.threads is not None and name == "openfhe":
                opts["threads"] = self.threads  # its worker's OpenMP threads: henn's own threads give it nothing
            backend = open_backend(name, self.params, **opts)
            available = backend.memory_available()
            backend.expect_footprint(check_memory(self.program, backend, available), available)
            client = Client(self.program, backend, threads=self.threads)
            keys = client.generate_keys()
            server = Server(self.program, backend, keys, threads=self.threads)
            server.prepare()
            self._sessions[encrypted] = (client, server, backend)
            log.info(
                "%s session ready: keygen %.2f s, weights encoded in %.2f s",
                name,
                client.seconds["keygen"],
                server.seconds["prepare"],
            )
        client, server, _ = self._sessions[encrypted]
        return client, server

    def close(self) -> None:
        """Drop every session's keys and encoded weights and close the backends (memory back to the system)."""
        sessions, self._sessions = list(self._sessions.values()), {}
        backends = []
        while sessions:  # drop every key and plaintext before the backends close and give their memory back
            client, server, backend = sessions.pop()
            client.close()
            server.close()
            backends.append(backend)
            del client, server, backend
        for backend in backends:
            backend.close()
        return_freed_memory()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    @property
    def n_classes(self) -> int:
        return math.prod(self.program.output_shape)
