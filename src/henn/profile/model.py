"""`henn profile model`: whole-network inference, thread scaling and memory over time.

On each backend context (library or fixed parameters of the given depth):

- inference: every zoo model (src/henn/zoo/mnist-cnn_*.onnx, or the files given) compiled with
  `henn.compile(model, input_shape, backend=, threads=)` (mode fixed: recompiled with the shared
  fixed parameters of the depth it needs) for each thread count, and run on one MNIST test image:
  the cold first run (key generation, weight encoding, inference) with its RSS sampled every
  ~10 ms (paper 000 Figs. 3-4), then warm runs for the latency; error = logits against the
  imported model in cleartext. While the compiler or the models are missing, these records say
  so (status "failed") and the rest still runs.
- thread_scaling: a fixed batch of independent tasks (multiply + relinearize, rescale, rotate)
  run from 1 and from 2 (or --threads) Python threads; the speed-up shows whether the library
  releases the GIL (Lattigo does, seal-python does not).
- memory_timeline: the RSS timeline of a primitive workload (key generation, encryption,
  a multiplication chain, rotations), so that every backend has a timeline even without models.
"""

from __future__ import annotations

import logging
import time
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path

import numpy as np

import henn
from henn.ckks import select_parameters
from henn.ckks.params import Parameters
from henn.errors import UnsupportedOperation
from henn.profile import results
from henn.profile.harness import Recorder, Settings, error_entry, summarize, throughput, time_call
from henn.profile.memory import RssSampler

log = logging.getLogger(__name__)

ZOO = Path(henn.__file__).parent / "zoo"
MNIST_SHAPE = (1, 28, 28)
SAMPLE_INTERVAL = 0.01
TASKS = 8  # independent tasks of the thread-scaling batch


def zoo_models(pattern: str = "mnist-cnn_*.onnx") -> list[Path]:
    return sorted(ZOO.glob(pattern))


def mnist_image(seed: int = 0) -> np.ndarray:
    """The first MNIST test image (float32, 1x28x28 in [0, 1]); seeded noise if no data is found."""
    try:
        from henn import datasets

        images, _ = datasets.load_mnist(datasets.default_data_dir(), "test")
        return images[0]
    except Exception as exc:  # noqa: BLE001 - any data problem: fall back, say so
        log.info("no MNIST test data (%s): profiling on a seeded random image", exc)
        return np.random.default_rng(seed).uniform(0, 1, MNIST_SHAPE).astype(np.float32)


# ---- thread scaling ----------------------------------------------------------------------------
def _keys_maybe_rotating(be, steps):
    """(sk, keys, rotates): keys for `steps`, or without Galois keys where the library has no
    rotation (TenSEAL) so that its workload still runs, minus the rotations (said in `extra`)."""
    try:
        sk, keys = be.generate_keys(rotations=steps)
        return sk, keys, True
    except UnsupportedOperation as exc:
        log.info("%s: workload without rotations (%s)", be.name, exc)
        sk, keys = be.generate_keys()
        return sk, keys, False


def _thread_scaling(be, rec: Recorder, settings: Settings, threads: tuple[int, ...]) -> None:
    sk, keys, rotates = _keys_maybe_rotating(be, [1])
    ev = be.evaluator(keys)
    rng = np.random.default_rng(settings.seed)
    cts = [
        (be.encrypt(rng.uniform(-1, 1, be.slots), keys.public), be.encrypt(rng.uniform(-1, 1, be.slots), keys.public))
        for _ in range(TASKS)
    ]
    what = "multiply_relin+rescale" + ("+rotate" if rotates else " (no rotation in this library)")

    def task(pair):
        a, b = pair
        out = ev.rescale(ev.multiply(a, b))
        return ev.rotate(out, 1) if rotates else out

    base = None
    for k in threads:

        def measure(k=k):
            nonlocal base
            with ThreadPoolExecutor(max_workers=k) as pool:  # started once, outside the timed calls

                def batch():
                    return [task(p) for p in cts] if k == 1 else list(pool.map(task, cts))

                latency, memory = time_call(batch, settings)
            base = latency["median"] if k == threads[0] else base
            speedup = base / latency["median"] if base else None
            return {
                "latency": latency,
                "memory": memory,
                "throughput": throughput(be.slots, latency, TASKS),
                "extra": {"tasks": TASKS, "task": what, "speedup": speedup, "baseline_threads": threads[0]},
            }

        rec.run("thread_scaling", measure, threads=k)


# ---- memory timeline of a primitive workload ---------------------------------------------------
def _workload_timeline(be, settings: Settings) -> dict:
    rng = np.random.default_rng(settings.seed)
    with RssSampler(SAMPLE_INTERVAL) as sampler:
        t0 = time.perf_counter()
        sk, keys, rotates = _keys_maybe_rotating(be, [1, 2, 4, 8])
        ev = be.evaluator(keys)
        x = rng.uniform(0.9, 1.1, be.slots)
        acc, y = be.encrypt(x, keys.public), be.encrypt(x, keys.public)
        for _ in range(be.max_level):
            acc = ev.rescale(ev.multiply(acc, ev.drop_to_level(y, acc.level)))
            acc = ev.rotate(acc, 1) if rotates else acc
        be.decrypt_decode(acc, sk)
        seconds = time.perf_counter() - t0
    tl = sampler.timeline()
    return {
        "latency": summarize([seconds], 0),
        "memory": {"peak_rss_bytes": sampler.peak(), "method": sampler.method, "timeline": tl},
        "extra": {
            "workload": "keygen(4 rotations)+encrypt+multiply/rescale/rotate chain+decrypt"
            if rotates
            else "keygen+encrypt+multiply/rescale chain+decrypt (no rotation in this library)"
        },
    }


# ---- compiled models ---------------------------------------------------------------------------
def _compiler():
    try:
        return henn.compile  # lazy: imports the compiler
    except (AttributeError, ImportError) as exc:
        raise UnsupportedOperation(
            f"henn.compile is not available in this installation ({exc}): install the "
            "compiler's dependencies (pip install -e .), then re-run `henn profile model`"
        ) from None


def _timings(compiled) -> dict | None:
    value = getattr(compiled, "timings", None)
    if isinstance(value, dict):
        return {str(k): (v if isinstance(v, (bool, int, float)) else str(v)) for k, v in value.items()}
    return None


def _compile(path: Path, backend: str, mode: str, threads: int | None):
    """henn.compile with the compiler's own parameters (mode library) or the shared fixed set of
    the depth it needs (mode fixed)."""
    compile_fn = _compiler()
    cm = compile_fn(str(path), MNIST_SHAPE, backend=backend, threads=threads)
    if mode == "fixed":
        fixed = select_parameters(cm.depth, backend=backend, mode="fixed", slots=cm.params.slots)
        cm = compile_fn(str(path), MNIST_SHAPE, backend=backend, threads=threads, params=fixed)
    return cm


def _inference(path: Path, backend: str, mode: str, image: np.ndarray, settings: Settings, threads: int | None) -> dict:
    """Compile, then one cold run (key generation, weight encoding, inference) under the RSS
    sampler (the timeline), then min_repeats timed warm runs (the latency)."""
    t0 = time.perf_counter()
    cm = _compile(path, backend, mode, threads)
    compile_s = time.perf_counter() - t0
    batch = image[None]
    try:
        with RssSampler(SAMPLE_INTERVAL) as sampler:
            t0 = time.perf_counter()
            cm.run(batch)
            first_s = time.perf_counter() - t0
        first = _timings(cm)
        samples, out = [], None
        for _ in range(max(1, settings.min_repeats)):
            t0 = time.perf_counter()
            out = cm.run(batch)
            samples.append(time.perf_counter() - t0)
        extra = {
            "model": path.name,
            "compile_s": compile_s,
            "first_run_s": first_s,
            "first_run_timings": first,
            "timings": _timings(cm),
            "prediction": int(np.argmax(np.asarray(out))),
        }
        errors = []
        reference = getattr(cm, "reference", None)
        if callable(reference):  # logits against the imported model in cleartext
            errors.append(error_entry("image", np.asarray(reference(batch)), np.asarray(out)))
    finally:
        close = getattr(cm, "close", None)
        if callable(close):
            close()
    result = {
        "latency": summarize(samples, 1),
        "error": errors,
        "extra": extra,
        "threads": threads,
        "memory": {"peak_rss_bytes": sampler.peak(), "method": sampler.method, "timeline": sampler.timeline()},
    }
    params = getattr(cm, "params", None)
    if isinstance(params, Parameters):  # the parameters the compiler chose for this network
        result.update(params=results.params_dict(params), depth=params.depth)
    return result


def run(
    be,
    rec: Recorder,
    settings: Settings,
    *,
    models: list[Path] | None = None,
    threads: tuple[int, ...] = (1, 2),
    parts: tuple[str, ...] = ("inference", "thread_scaling", "memory_timeline"),
) -> None:
    if "inference" in parts:
        paths = zoo_models() if models is None else [Path(m) for m in models]
        if not paths:
            rec.fail(
                "inference",
                f"no models: {ZOO}/mnist-cnn_*.onnx does not exist; export them with "
                "`henn train` or pass --models FILE.onnx",
            )
        else:
            image = mnist_image(settings.seed)
            mode = rec.cfg.mode if rec.cfg.mode in ("library", "fixed") else "library"
            for path in paths:
                for k in threads:  # the runtime's own thread option: paper 001 Figs. 26-30
                    rec.run(
                        "inference",
                        partial(_inference, Path(path), be.name, mode, image, settings, k),
                        threads=k,
                        extra={"model": Path(path).name},
                    )
    if "thread_scaling" in parts:
        try:
            _thread_scaling(be, rec, settings, tuple(threads))
        except Exception as exc:  # noqa: BLE001 - setup failed: record it
            rec.fail("thread_scaling", exc)
    if "memory_timeline" in parts:
        rec.run("memory_timeline", lambda: _workload_timeline(be, settings))
