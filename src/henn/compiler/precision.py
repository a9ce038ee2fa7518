"""Precision-driven parameters (the `precision` rule of henn.passes.parameters): the smallest 128-bit
secure ring and scale whose predicted output error keeps the compiled program's predictions equal to
plaintext on calibration images.

The prediction runs the compiled program on the plain backend with its CKKS noise model (seeded)
and compares with the model as compiled (polynomial activations) in NumPy. Every CKKS error
(encoding, encryption, rescaling, key switching) is relative to the scale, so one simulation at the
largest scale a ring admits predicts the error at smaller ones (x 2 per bit less); the chosen scale
is then simulated itself, and its simulated error is the one reported. Special primes are 61-bit
(Lattigo's size), far above the scale, so key switching adds the little error the model assumes.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from henn.ckks import backends, open_backend, security
from henn.passes import parameters
from henn.ckks.params import Parameters
from henn.ckks.selection import MIN_SCALE_BITS, ChainPrimes, largest_scale, precision_literal
from henn.errors import InputError, ParameterError, ScaleError
from henn.ir import interpret
from henn.ir.meta import required
from henn.ir.graph import Graph
from henn.program import Program
from henn.runtime import Client, Server
from henn.runtime.inputs import check_images

log = logging.getLogger(__name__)

DEFAULT_PRECISION_BITS = 4.0  # predicted max logit error <= 1/16 unless the user asks for more
# and <= half the top-2 logit gap of the calibration images at this quantile. The predicted maximum over
# 32 images x classes is ~3 sigma of a logit's error, so an image with that gap flips with probability
# ~2e-5 and the 1% below it with a few percent at most: ~1e-3 flips per image. (The smallest gap of the 32
# simulated images / 8, before, asked 4-8x more precision of the zoo's MNIST nets: a ring twice as large.)
GAP_QUANTILE = 0.01
GAP_SHARE = 2
# calibration images the noise model runs on: those with the largest logits (see _loudest)
SIMULATED_IMAGES = 32
NOISE_SEED = 0


@dataclass(frozen=True)
class PrecisionChoice:
    """Why these parameters: the error the noise model predicts, the tolerance it had to meet."""

    params: Parameters
    predicted_error: float  # max |logit error| of the noise model over the simulated images
    tolerance: float  # min(2^-precision_bits, top-2 logit gap at GAP_QUANTILE / GAP_SHARE)
    precision_bits: float
    images: int  # calibration images simulated (the gap is taken over all of them)
    rejected: tuple[str, ...]  # smaller rings that failed, with their predicted errors

    def describe(self) -> str:
        return (
            f"chosen for precision: predicted max logit error {self.predicted_error:.2g} <= tolerance "
            f"{self.tolerance:.2g} (noise model on the {self.images} calibration images with the largest logits)"
        )


def logits(program: Program, images: np.ndarray, *, noise: bool) -> np.ndarray:
    """The program's outputs (B, classes) on the plain backend, with or without its noise model."""
    backend = open_backend("plain", program.params, noise=noise, seed=NOISE_SEED)
    client = Client(program, backend, threads=1)
    server = Server(program, backend, client.generate_keys(), threads=1)
    server.prepare()
    try:
        outs = [
            client.decrypt(server.evaluate(client.encrypt(images[r.start : r.stop]), consume=True), len(r))
            for r in client.batches(len(images))
        ]
    finally:
        server.close()
        client.close()
        backend.close()
    return np.concatenate(outs).reshape(len(images), -1)


def tolerance(exact: np.ndarray, precision_bits: float) -> float:
    """The error that keeps the calibration predictions: 1/GAP_SHARE of their top-2 logit gap at
    GAP_QUANTILE (the smallest gap of fewer than 100 images), and at most 2^-precision_bits."""
    if exact.shape[1] < 2:
        return 2.0**-precision_bits
    top2 = np.sort(exact, axis=1)[:, -2:]
    gap = float(np.quantile(top2[:, 1] - top2[:, 0], GAP_QUANTILE, method="lower"))
    return min(2.0**-precision_bits, gap / GAP_SHARE)


def _loudest(images: np.ndarray, exact: np.ndarray, n: int = SIMULATED_IMAGES) -> tuple[np.ndarray, np.ndarray]:
    """The n calibration images with the largest |logit|, in their order: a polynomial activation's error
    grows with its input, so they bound the error of other images better than the first n did (Orion's
    MLP: 100 test images reached 2.5x the error predicted on the first 32 calibration images)."""
    keep = np.sort(np.argsort(-np.max(np.abs(exact), axis=1), kind="stable")[:n])
    return images[keep], exact[keep]


@dataclass(frozen=True)
class _Chain:
    """What every candidate set shares: depth, q0's integer bits, ring, the library's special primes and
    prime generator."""

    depth: int
    integer_bits: int
    ring: str
    special: tuple[int, int]  # (bits, most)
    fixed_special: bool  # the library's special primes are `bits` each, never smaller (OpenFHE)
    primes: ChainPrimes  # the backend's Backend.chain_primes: only chains it can make are proposed

    def literal(self, log_n: int, scale: int):
        args = (self.depth, log_n, scale, self.integer_bits, self.ring, self.special, self.primes)
        return precision_literal(*args, fixed_special=self.fixed_special)

    def top(self, log_n: int) -> int | None:
        args = (self.depth, log_n, self.integer_bits, self.ring, self.special, self.primes)
        return largest_scale(*args, fixed_special=self.fixed_special)


def choose(
    compile_with,
    planned: Graph,
    checked: Graph,
    calibration,
    backend: str,
    precision_bits: float | None,
    standard_ring: bool = False,
):
    """(compiled, PrecisionChoice): `compile_with(params)` compiles for given parameters; `planned` is
    the graph with its levels planned (depth, slot need), `checked` the model with its polynomial
    activations (the exact outputs). standard_ring: never the real-slot ring (complex packing)."""
    bits = DEFAULT_PRECISION_BITS if precision_bits is None else float(precision_bits)
    every = check_images(calibration, tuple(checked.input_shape))
    chunks = [every[i : i + 256] for i in range(0, len(every), 256)]
    exact_all = np.concatenate([interpret.run(checked, c).reshape(len(c), -1) for c in chunks])
    tol = tolerance(exact_all, bits)  # the gaps of every calibration image; the noise simulated on the first few
    images, exact = _loudest(every, exact_all)
    depth, slots = required(planned.meta.depth, "depth"), required(planned.meta.min_slots, "min_slots")
    cls = backends.backend_class(backend)
    ring = parameters.precision_ring(backend, standard_ring)
    # q0 holds the outputs' integer part with 5 bits to spare (biases and noise of the last levels); a
    # value that still overflows the chain fails its encoding check in the simulation, rejecting the set
    integer_bits = max(4, math.ceil(math.log2(max(1.0, float(np.max(np.abs(exact))))))) + 5
    special = (cls.special_prime_bits, cls.max_special_primes)
    chain = _Chain(depth, integer_bits, ring, special, cls.special_prime_size_fixed, cls.chain_primes)
    sim = _Simulation(compile_with, images, exact)
    rejected: list[str] = []
    per_ring = 0 if ring == "conjugate_invariant" else 1  # slots = N or N/2
    for log_n in sorted(security.MAX_LOG_QP_128):
        if (1 << (log_n - per_ring)) < slots:
            continue
        found = _best_scale(sim, chain, log_n, tol, rejected)
        if found is not None:
            compiled, err = found
            choice = PrecisionChoice(compiled.program.params, err, tol, bits, len(images), tuple(rejected))
            log.info("parameters %s", choice.describe())
            return compiled, choice
    raise ParameterError(
        f"no 128-bit secure parameters keep the predicted logit error below {tol:.2g} for depth "
        f"{depth}: ask for less precision (precision_bits), or use a lower-degree activation; "
        f"tried: {'; '.join(rejected) or 'no ring holds the chain'}"
    )


def _best_scale(sim: _Simulation, chain: _Chain, log_n: int, tol: float, rejected: list[str]):
    """(compiled, simulated error) at the smallest scale on ring 2^log_n that meets `tol`, or None."""
    top = chain.top(log_n)
    if top is None:
        return None
    at_top = sim.run(chain.literal(log_n, top))
    if at_top is None or at_top[1] > tol:
        rejected.append(f"N=2^{log_n} scale 2^{top}: " + ("overflow" if at_top is None else f"{at_top[1]:.2g}"))
        return None
    # errors are relative to the scale: halve per bit; aim at half the tolerance, then check
    need = top - math.floor(math.log2(tol / 2 / max(at_top[1], 1e-300)))
    for scale in range(max(MIN_SCALE_BITS, min(need, top)), top):
        found = sim.run(chain.literal(log_n, scale))
        if found is not None and found[1] <= tol:
            return found
    return at_top


@dataclass(frozen=True)
class _Simulation:
    compile_with: Callable
    images: np.ndarray
    exact: np.ndarray

    def run(self, lit):
        """(compiled, max |logit error|) of the noise model for literal `lit`, or None when there is no
        such set or values overflow it."""
        if lit is None:
            return None
        compiled = self.compile_with(Parameters.from_literal(lit, name=f"precision-d{len(lit.log_q) - 1}"))
        try:
            noisy = logits(compiled.program, self.images, noise=True)
        except (InputError, ScaleError) as exc:  # the chain cannot hold the values at this scale
            log.debug("%s: %s", compiled.program.params.describe(), exc)
            return None
        err = float(np.max(np.abs(noisy - self.exact)))
        log.debug("%s: predicted error %.3g", compiled.program.params.describe(), err)
        return compiled, err
