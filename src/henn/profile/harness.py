"""The measuring machinery every suite shares: settings, timing, error, configurations, and the
sweep that turns any failure (a missing backend, an exception in an op) into a "failed" record.

Timing rule (`Settings`): `warmup` untimed calls, then timed calls until `repeats` are done or,
once `min_repeats` are done, their total passes `budget_s` seconds. Fast ops therefore get
`repeats` samples while an op of a deep parameter set stops at `min_repeats`, which keeps the
full depth sweep within its time budget. Latencies are wall-clock seconds of the public henn
call (argument checks included), peak memory is the RSS high-water mark over the timed calls.
"""

from __future__ import annotations

import gc
import logging
import multiprocessing
import statistics
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import asdict, dataclass, field

import numpy as np
from tqdm import tqdm

from henn.ckks import backends, presets, select_parameters
from henn.ckks.selection import MAX_DEPTH
from henn.ckks.precision import precision_bits, relative_error
from henn.errors import InputError
from henn.profile import results
from henn.profile.memory import PeakRss

log = logging.getLogger(__name__)


@dataclass
class Settings:
    repeats: int = 10  # timed calls at most
    min_repeats: int = 3  # timed calls at least
    warmup: int = 1  # untimed calls first
    budget_s: float = 0.5  # stop timing an op after min_repeats once this much was spent
    seed: int = 0  # inputs are seeded (encryption noise of real libraries is not)
    hoisted_steps: int = 8  # rotations sharing one decomposition (steps 1..hoisted_steps)
    options: dict = field(default_factory=dict)  # backend name -> constructor options

    def __post_init__(self):
        for name in ("repeats", "min_repeats", "hoisted_steps"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 1:
                raise InputError(f"--{name.replace('_', '-')} must be a positive integer, got {getattr(self, name)!r}")
        if not isinstance(self.warmup, int) or self.warmup < 0:
            raise InputError(f"--warmup must be a non-negative integer, got {self.warmup!r}")
        if self.min_repeats > self.repeats:
            self.min_repeats = self.repeats
        if not self.budget_s >= 0:
            raise InputError(f"--budget must be >= 0 seconds, got {self.budget_s!r}")

    def as_dict(self) -> dict:
        return asdict(self)


# ---- timing and error --------------------------------------------------------------------------
def summarize(samples: list[float], warmup: int) -> dict:
    """The schema's latency object: median and spread of timed samples (seconds)."""
    if not samples:
        raise ValueError("no timed samples")
    q1, _, q3 = statistics.quantiles(samples, n=4, method="inclusive") if len(samples) > 1 else samples * 3
    return {
        "median": statistics.median(samples),
        "min": min(samples),
        "max": max(samples),
        "q1": q1,
        "q3": q3,
        "mean": statistics.fmean(samples),
        "repeats": len(samples),
        "warmup": int(warmup),
    }


def time_call(
    fn: Callable[[], object], settings: Settings, *, warmup: int | None = None, min_repeats: int | None = None
) -> tuple[dict, dict]:
    """(latency, memory) of fn() under the settings' timing rule."""
    warmup = settings.warmup if warmup is None else warmup
    least = settings.min_repeats if min_repeats is None else min(min_repeats, settings.repeats)
    for _ in range(warmup):
        fn()
    samples: list[float] = []
    with PeakRss() as peak:
        while len(samples) < settings.repeats:
            t0 = time.perf_counter()
            fn()
            samples.append(time.perf_counter() - t0)
            if len(samples) >= least and sum(samples) >= settings.budget_s:
                break
    return summarize(samples, warmup), peak.as_dict()


def error_entry(kind: str, expected, got) -> dict:
    """The schema's error object: relative error in % (of max |expected|) and bits of precision."""
    expected, got = np.asarray(expected), np.asarray(got)
    return {
        "input": kind,
        "relative_pct": 100.0 * relative_error(expected, got),
        "bits": precision_bits(expected, got),
        "max_abs": float(np.max(np.abs(got - expected))),
    }


def throughput(slots: int, latency: dict | None, ops_per_call: int = 1) -> float | None:
    """Slot-operations per second: slots * ops_per_call / median latency."""
    if not latency or latency["median"] <= 0:
        return None
    return slots * ops_per_call / latency["median"]


# ---- configurations ----------------------------------------------------------------------------
@dataclass(frozen=True)
class Config:
    backend: str
    mode: str  # library | fixed | preset
    depth: int | None  # None with a preset (taken from it)
    preset: str | None = None

    def label(self) -> str:
        what = self.preset if self.preset else f"{self.mode} d{self.depth}"
        return f"{self.backend} {what}"


def configurations(
    backend_names: Iterable[str],
    modes: Iterable[str] = ("library", "fixed"),
    depths: Iterable[int] = (),
    preset_names: Iterable[str] = (),
) -> list[Config]:
    """Every (backend, mode, depth) plus every (backend, preset): the order of the sweep."""
    out = []
    for b in backend_names:
        out += [Config(b, m, int(d)) for m in modes for d in depths]
        out += [Config(b, "preset", None, p) for p in preset_names]
    return out


def parse_depths(text: str) -> list[int]:
    """'1-19', '1,2,5', '1-4,8' -> sorted depths."""
    depths: set[int] = set()
    try:
        for part in str(text).split(","):
            part = part.strip()
            if "-" in part:
                lo, hi = (int(v) for v in part.split("-", 1))
                if not 1 <= lo <= hi <= MAX_DEPTH:  # before the range is built
                    raise InputError(f"depths {part!r} must run upward within 1..{MAX_DEPTH}, e.g. 1-19")
                depths.update(range(lo, hi + 1))
            elif part:
                depths.add(int(part))
    except ValueError:
        raise InputError(f"cannot read depths {text!r}: write e.g. 1-19, 3,5,7 or 1-4,8") from None
    if not depths or min(depths) < 1 or max(depths) > MAX_DEPTH:
        raise InputError(f"depths {text!r} must be integers from 1 to {MAX_DEPTH}, e.g. 1-19")
    return sorted(depths)


def open_config(cfg: Config, settings: Settings):
    """(backend context, its parameters) for a configuration; raises what selection/opening raise."""
    if cfg.preset:
        params = presets.get(cfg.preset)
    else:
        assert cfg.depth is not None  # a configuration without a preset has a depth
        params = select_parameters(cfg.depth, backend=cfg.backend, mode=cfg.mode)
    be = backends.open_backend(cfg.backend, params, **settings.options.get(cfg.backend, {}))
    return be, be.actual_params


class Recorder:
    """Appends records for one configuration; `run(op, body)` turns an exception into a failed record."""

    def __init__(self, suite: str, cfg: Config, params=None):
        self.suite, self.cfg = suite, cfg
        self.depth = params.depth if (params is not None and cfg.depth is None) else cfg.depth
        self.params = results.params_dict(params) if params is not None else None
        self.records: list[dict] = []

    def base(self) -> dict:
        return {"mode": self.cfg.mode, "depth": self.depth, "params": self.params}

    def add(self, op: str, **fields) -> dict:
        rec = results.record(self.suite, self.cfg.backend, op, **{**self.base(), **fields})
        self.records.append(rec)
        return rec

    def fail(self, op: str, exc: BaseException | str, **fields) -> dict:
        rec = results.failed(self.suite, self.cfg.backend, op, exc, **{**self.base(), **fields})
        self.records.append(rec)
        log.info("%s: %s failed: %s", self.cfg.label(), op, rec["error_message"])
        return rec

    def run(self, op: str, body: Callable[[], dict], **fields) -> dict | None:
        """body() returns the record's measured fields; any exception becomes a failed record."""
        t0 = time.perf_counter()
        try:
            measured = body()
        except Exception as exc:  # noqa: BLE001 - every failure is data for the report
            return self.fail(op, exc, **fields)
        merged = {**fields, **measured}
        # everything this measurement cost (checks, warm-up, timed calls): for planning sweeps
        merged["extra"] = {**merged.get("extra", {}), "wall_s": round(time.perf_counter() - t0, 4)}
        return self.add(op, **merged)


SuiteBody = Callable[[object, Recorder, Settings], None]


def run_config(
    suite: str, cfg: Config, body: SuiteBody, settings: Settings, log_level: int | None = None
) -> list[dict]:
    """The records of one configuration: open its backend, run `body`, close. In the sweep this runs
    in a fresh process (log_level set) so that library memory pools and crashes stay there."""
    if log_level is not None:
        logging.basicConfig(level=log_level, format="%(levelname)s %(name)s: %(message)s")
    t0 = time.perf_counter()
    try:
        be, params = open_config(cfg, settings)
    except Exception as exc:  # noqa: BLE001
        return [Recorder(suite, cfg).fail("open", exc)]
    rec = Recorder(suite, cfg, params)
    try:
        body(be, rec, settings)
    except Exception as exc:  # noqa: BLE001 - a suite bug must not end the sweep
        rec.fail("suite", exc)
    finally:
        _close(be)
        del be
        gc.collect()
    log.info("%s done in %.1f s", cfg.label(), time.perf_counter() - t0)
    return rec.records


def sweep(
    suite: str,
    configs: list[Config],
    body: SuiteBody,
    settings: Settings,
    *,
    progress: bool | None = None,
    isolate: bool = True,
) -> tuple[list[dict], bool]:
    """Run `body(backend, recorder, settings)` for every configuration.

    Returns (records, interrupted). With `isolate` (default) each configuration runs in its own
    process (spawned; `body` must be picklable: a module-level function or a functools.partial of
    one; a script calling this needs the usual `if __name__ == "__main__":` guard of spawned
    multiprocessing): SEAL's memory pool never returns memory, so one process for 19 depths would grow to
    many GiB and inflate every later peak-memory figure, and a crash inside a library ends only
    that configuration. A configuration whose parameters cannot be chosen, whose backend cannot be
    opened or whose process dies yields a failed record and the sweep goes on; Ctrl-C stops it
    and returns what was measured so far.
    """
    out: list[dict] = []
    unusable = {name: info for name, (ok, info) in backends.available().items() if not ok}
    bar = tqdm(configs, desc=f"profile {suite}", unit="config", disable=(None if progress is None else not progress))
    pool = None
    try:
        for cfg in bar:
            bar.set_postfix_str(cfg.label())
            if cfg.backend in unusable or cfg.backend not in backends.names():
                why = unusable.get(cfg.backend) or f"unknown backend; known: {', '.join(backends.names())}"
                out.append(
                    Recorder(suite, cfg).fail(
                        "open", f"BackendError: backend {cfg.backend!r} is not usable here: {why}"
                    )
                )
                continue
            if not isolate:
                out.extend(run_config(suite, cfg, body, settings))
                continue
            if pool is None:
                pool = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"), max_tasks_per_child=1)
            try:
                out.extend(pool.submit(run_config, suite, cfg, body, settings, logging.getLogger().level).result())
            except BrokenProcessPool:
                pool.shutdown(wait=False)
                pool = None
                out.append(
                    Recorder(suite, cfg).fail(
                        "crash",
                        "BackendError: the process measuring this "
                        "configuration died (a crash inside the library or out of memory); its other records are "
                        "lost: re-run it alone with --no-isolate -v to see where",
                    )
                )
    except KeyboardInterrupt:
        log.warning("interrupted: keeping the %d records measured so far", len(out))
        _stop(pool)
        pool = None
        return out, True
    finally:
        bar.close()
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)
    return out, False


def _stop(pool) -> None:
    """End the worker of an interrupted sweep now (it may be inside a long library call)."""
    if pool is None:
        return
    for proc in list((getattr(pool, "_processes", None) or {}).values()):  # no public API for this
        proc.terminate()
    pool.shutdown(wait=True, cancel_futures=True)


def _close(be) -> None:
    try:
        be.close()
    except Exception as exc:  # noqa: BLE001
        log.warning("closing the %s backend failed: %s", getattr(be, "name", "?"), exc)
