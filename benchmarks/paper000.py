"""Paper 000 (SEAL vs OpenFHE on MNIST and CIFAR-10 CNNs) reproduced on SEAL, OpenFHE and Lattigo.

Three parts, each written to benchmarks/results/paper000_<part>.json (docs/openfhe.md shows them beside the
published numbers, which are in PUBLISHED below):

- `cnn`: paper 000's networks (the zoo's mnist-cnn_* and cifar-cnn_* models), one image at a time (single
  mode), on every backend and thread count, at one parameter set for all three libraries: the one henn picks
  for OpenFHE at the network's depth (OpenFHE makes its own primes of those sizes; SEAL and Lattigo take
  primes of the same sizes; SEAL one special prime, as it supports no more). Each configuration runs in a
  fresh process: compile, key generation and weight encoding, one untimed image, then --images timed ones
  (latency: median; per layer: the program's steps),
  the logits against the plaintext model, the peak RSS of the process and its children (OpenFHE's worker)
  with its timeline (paper 000 Figs. 3-4), and on OpenFHE the requests to the worker per image and the pipe's
  share of the latency (requests x the round trip of an empty request + bytes / the pipe's bandwidth).
  Threads: henn's runtime threads on SEAL and Lattigo, OpenFHE's OpenMP threads in its worker.
- `rescaling`: OpenFHE's FIXEDMANUAL against FLEXIBLEAUTO (paper 000 Tables 8-9) on the MNIST networks; henn
  places every rescale itself in both (backends/openfhe/__init__.py says how FLEXIBLEAUTO runs under henn).
- `primitives`: paper 000 Table 7's operations (add, multiply, relinearize, rescale, rotate) and Table 8's
  multiplication in both scaling modes, at its parameters (N = 2^14, scale 2^30, levels 5 and 7).

    flock /tmp/henn-heavy.lock .venv/bin/python benchmarks/paper000.py --parts cnn rescaling primitives \\
        --models mnist --threads 1 2 --images 5
    HENN_PLAINTEXT_CACHE=2 flock /tmp/henn-heavy.lock .venv/bin/python benchmarks/paper000.py --parts cnn \\
        --models cifar --activations swish-rg7-deg4 --threads 2 --images 1 --timeout 1800 --tag _cifar
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from _common import summarize, time_op, write_json

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results"
ACTIVATIONS = ("square", "swish-rg5-deg2", "swish-rg7-deg4")
BACKENDS = ("seal", "openfhe", "lattigo")
TIMELINE_POINTS = 200  # the RSS timeline kept per configuration, evenly thinned

# paper 000 (Xeon E7-8880 v3, SEAL 4.0.0, OpenFHE 1.0.0): latency in seconds of one image (Table 6, OpenFHE
# in FIXEDMANUAL), by threads; Table 9 (OpenFHE FIXEDMANUAL vs FLEXIBLEAUTO); Table 7 (ms); Table 8 (s)
PUBLISHED: dict[str, Any] = {
    "machine": "4x Intel Xeon E7-8880 v3 (18 cores each, 2.3 GHz), 3 TB; SEAL 4.0.0, OpenFHE 1.0.0; N = 2^14, "
    "scale 2^30; MNIST levels 5 / 5 / 7, CIFAR-10 8 / 11 / 11 (square / deg2 / deg4)",
    "table6": {
        "mnist": {
            "square": {
                "seal": {1: 11.15, 18: 1.20, 36: 1.24, 72: 0.64},
                "openfhe": {1: 23.07, 18: 4.28, 36: 6.55, 72: 9.38},
            },
            "swish-rg5-deg2": {
                "seal": {1: 11.08, 18: 1.20, 36: 1.24, 72: 0.65},
                "openfhe": {1: 22.91, 18: 4.10, 36: 6.63, 72: 8.81},
            },
            "swish-rg7-deg4": {
                "seal": {1: 15.01, 18: 1.64, 36: 1.74, 72: 0.74},
                "openfhe": {1: 29.40, 18: 5.40, 36: 8.17, 72: 13.77},
            },
        },
        "cifar": {
            "square": {
                "seal": {1: 201.1, 18: 20.1, 36: 23.6, 72: 9.6},
                "openfhe": {1: 374.76, 18: 68.01, 36: 85.94, 72: 125.19},
            },
            "swish-rg5-deg2": {
                "seal": {1: 200.2, 18: 20.2, 36: 23.6, 72: 9.6},
                "openfhe": {1: 374.37, 18: 65.52, 36: 88.77, 72: 145.83},
            },
            "swish-rg7-deg4": {
                "seal": {1: 249.5, 18: 28.1, 36: 32.3, 72: 13.3},
                "openfhe": {1: 477.46, 18: 82.66, 36: 101.20, 72: 181.65},
            },
        },
    },
    "table9_openfhe_mnist": {
        "square": {"FIXEDMANUAL": 23.07, "FLEXIBLEAUTO": 132.28},
        "swish-rg5-deg2": {"FIXEDMANUAL": 22.91, "FLEXIBLEAUTO": 134.36},
        "swish-rg7-deg4": {"FIXEDMANUAL": 29.40, "FLEXIBLEAUTO": 116.75},
    },
    "table7_ms": {
        5: {
            "add": (0.465, 4.059),
            "multiply": (6.181, 15.298),
            "rotate": (31.450, 455.506),
            "rescale": (6.763, 28.802),
            "relinearize": (0.030, 0.023),
        },
        7: {
            "add": (0.379, 1.922),
            "multiply": (5.344, 6.644),
            "rotate": (36.095, 102.314),
            "rescale": (5.794, 96.606),
            "relinearize": (0.004, 0.076),
        },
    },  # (SEAL, OpenFHE)
    # Table 8's columns are both printed FLEXIBLEAUTO; the text says the first is FIXEDMANUAL
    "table8_s": {5: {"FIXEDMANUAL": 0.308, "FLEXIBLEAUTO": 0.795}, 7: {"FIXEDMANUAL": 0.404, "FLEXIBLEAUTO": 0.670}},
}


# ---- one configuration, in its own process ---------------------------------------------------------
def _images(model: str, n: int):
    from henn import datasets

    if model == "mnist":
        images, labels = datasets.load_embedded_mnist()
        return images[:n], labels[:n]
    images, labels = datasets.load_cifar10(datasets.default_data_dir() or REPO.parent / "shared" / "datasets", "test")
    return images[:n], labels[:n]


def _thin(timeline: dict) -> dict:
    t, r = timeline["t_s"], timeline["rss_bytes"]
    step = max(1, len(t) // TIMELINE_POINTS)
    return {"t_s": t[::step], "rss_mib": [round(x / 2**20, 1) for x in r[::step]]}


class _PipeMeter:
    """Counts the OpenFHE worker's requests and the bytes they carry (wraps Connection.request)."""

    def __init__(self):
        from henn.ckks.backends.openfhe import connection

        self.requests, self.bytes, self.seconds = 0, 0, 0.0
        real = connection.Connection.request

        def request(conn, op, blobs=(), **kw):
            t0 = time.perf_counter()
            result, out = real(conn, op, blobs, **kw)
            self.seconds += time.perf_counter() - t0
            self.requests += 1
            self.bytes += sum(len(b) for b in blobs) + sum(len(b) for b in out)
            return result, out

        # for the rest of this one-configuration process
        mock.patch.object(connection.Connection, "request", request).start()

    def reset(self):
        self.requests, self.bytes, self.seconds = 0, 0, 0.0


def _pipe_costs(conn) -> dict:
    """The round trip of an empty request (JSON, both Pythons, the pipe's system calls) and the pipe's
    bandwidth (16 MiB carried to a request that ignores it)."""
    for _ in range(20):
        conn.request("hello")
    t0 = time.perf_counter()
    for _ in range(500):
        conn.request("hello")
    rtt = (time.perf_counter() - t0) / 500
    blob = bytes(16 << 20)
    t0 = time.perf_counter()
    for _ in range(5):
        conn.request("hello", [blob])
    per_byte = max((time.perf_counter() - t0) / 5 - rtt, 0.0) / len(blob)
    return {"round_trip_s": rtt, "bytes_per_s": 1 / per_byte if per_byte else None, "_per_byte": per_byte}


def one(cfg: dict) -> dict:
    import henn
    from henn import api
    from henn.ckks import params as params_mod
    from henn.profile.memory import RssSampler

    meter = _PipeMeter() if cfg["backend"] == "openfhe" else None
    if cfg.get("technique"):
        real_open = api.open_backend

        def open_backend(name: str, params: Any, **options: Any) -> Any:
            if name == "openfhe":
                options = {**options, "scaling_technique": cfg["technique"]}
            return real_open(name, params, **options)

        api.open_backend = open_backend
    zoo = Path(henn.__file__).parent / "zoo" / f"{cfg['model']}-cnn_{cfg['activation']}.onnx"
    shape = (1, 28, 28) if cfg["model"] == "mnist" else (3, 32, 32)
    x, labels = _images(cfg["model"], cfg["images"] + 1)
    log_p = tuple(cfg["log_p"])[:1] if cfg["backend"] == "seal" else tuple(cfg["log_p"])  # SEAL: one special prime
    params = params_mod.Parameters.from_literal(
        params_mod.ParametersLiteral(cfg["log_n"], tuple(cfg["log_q"]), log_p, cfg["log_scale"])
    )
    t0 = time.perf_counter()
    with RssSampler(0.05) as sampler:
        cm = henn.compile(str(zoo), shape, backend=cfg["backend"], mode="single", params=params, threads=cfg["threads"])
        compile_s = time.perf_counter() - t0
        try:
            cm.run(x[:1])  # keys, weights, one image: untimed
            first = dict(cm.timings)
            server = cm._sessions[True][1]
            latencies, layers, outs = [], [], []
            if meter:
                meter.reset()
            for i in range(1, len(x)):
                before = dict(server.executor.step_seconds)
                t1 = time.perf_counter()
                outs.append(cm.run(x[i : i + 1]))
                latencies.append(time.perf_counter() - t1)
                layers.append({k: v - before.get(k, 0.0) for k, v in server.executor.step_seconds.items()})
            pipe = None
            if meter:
                requests, nbytes = meter.requests / len(latencies), meter.bytes / len(latencies)
                costs = _pipe_costs(cm._sessions[True][2]._conn)
                overhead = requests * costs["round_trip_s"] + nbytes * costs.pop("_per_byte")
                pipe = {
                    "requests_per_image": requests,
                    "bytes_per_image": nbytes,
                    **costs,
                    "overhead_s_per_image": overhead,
                    "overhead_share": overhead / float(np.median(latencies)),
                }
            ref = cm.reference(x[1:])
        finally:
            cm.close()
    out = np.concatenate(outs)
    steps = {s.name: s.kind.value for s in cm.program.steps}
    per_layer = {name: float(np.median([lay.get(name, 0.0) for lay in layers])) for name in steps}
    return {
        **cfg,
        "status": "ok",
        "params": cm.params.describe(),
        "depth": cm.depth,
        "compile_s": compile_s,
        "keygen_s": first.get("keygen"),
        "prepare_s": first.get("prepare"),
        "latency_s": summarize(latencies),
        "evaluate_s_last": cm.timings.get("evaluate"),
        "per_layer_s": [{"step": n, "kind": k, "median_s": per_layer[n]} for n, k in steps.items()],
        "max_logit_error": float(np.abs(out - ref).max()),
        "agree": int((out.argmax(1) == ref.argmax(1)).sum()),
        "correct": int((out.argmax(1) == labels[1:]).sum()),
        "peak_rss_mib": round(sampler.peak() / 2**20, 1),
        "rss_timeline": _thin(sampler.timeline()),
        "pipe": pipe,
    }


# ---- the primitive table ---------------------------------------------------------------------------
def _time_ops(be, repeats: int) -> dict[str, float]:
    """Median milliseconds of Table 7's operations on fresh inputs at the top level."""
    sk, keys = be.generate_keys(rotations=[1])
    ev = be.evaluator(keys)
    rng = np.random.default_rng(0)
    a = be.encrypt(rng.uniform(-1, 1, be.slots), keys.public)
    b = be.encrypt(rng.uniform(-1, 1, be.slots), keys.public)
    prod = ev.multiply(a, b, relinearize=False)
    ops = {
        "add": lambda: ev.add(a, b),
        "multiply": lambda: ev.multiply(a, b, relinearize=False),
        "relinearize": lambda: ev.relinearize(prod),
        "rescale": lambda: ev.rescale(prod),
        "rotate": lambda: ev.rotate(a, 1),
        "multiply_relin_rescale": lambda: ev.rescale(ev.multiply(a, b)),
    }
    return {op: 1e3 * time_op(fn, repeats, warmup=1)["median"] for op, fn in ops.items()}


def primitives(backends, techniques, repeats: int) -> list[dict]:
    from henn.ckks import ParametersLiteral, open_backend
    from henn.ckks.params import Parameters

    rows = []
    for level in (5, 7):
        params = Parameters.from_literal(ParametersLiteral(14, (60,) + (30,) * level, (60,), 30))
        for name in backends:
            for tech in techniques if name == "openfhe" else (None,):
                opts = {"scaling_technique": tech} if tech else {}
                with open_backend(name, params, **opts) as be:
                    for op, ms in _time_ops(be, repeats).items():
                        rows.append(
                            {
                                "level": level,
                                "backend": name,
                                "technique": tech,
                                "op": op,
                                "median_ms": ms,
                                "repeats": repeats,
                            }
                        )
    return rows


# ---- Markdown tables of the results (docs/openfhe.md) ---------------------------------------------------
def _load(part: str, tag: str) -> dict | None:
    path = RESULTS / f"paper000_{part}{tag}.json"
    return json.loads(path.read_text()) if path.exists() else None


def _cnn_tables(cnn: dict) -> list[str]:
    """Latency per network and backend, the OpenFHE pipe's share of it, and the time per layer."""
    lines = [
        "| network | activation | backend | threads | s / image (median) | paper 000, 1 thread | "
        "max logit error | agree | peak RSS MiB | keygen + weights s |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in cnn["rows"]:
        pub = PUBLISHED["table6"][r["model"]][r["activation"]].get(r["backend"], {}).get(1)
        if r["status"] != "ok":
            lines.append(
                f"| {r['model']} | {r['activation']} | {r['backend']} | {r['threads']} | "
                f"{r['status']} | {pub or '-'} | | | | |"
            )
            continue
        setup = (r["keygen_s"] or 0) + (r["prepare_s"] or 0)
        lines.append(
            f"| {r['model']} | {r['activation']} | {r['backend']} | {r['threads']} | "
            f"{r['latency_s']['median']:.3f} | {pub or '-'} | {r['max_logit_error']:.1e} | "
            f"{r['agree']}/{r['latency_s']['samples']} | {r['peak_rss_mib']:.0f} | {setup:.1f} |"
        )
    pipes = [r for r in cnn["rows"] if r.get("pipe")]
    if pipes:
        lines += [
            "",
            "| network | activation | threads | requests / image | MiB / image | round trip us | "
            "pipe s / image | share of the latency |",
            "| --- | --- | --- | --- | --- | --- | --- | --- |",
        ]
        for r in pipes:
            pp = r["pipe"]
            lines.append(
                f"| {r['model']} | {r['activation']} | {r['threads']} | {pp['requests_per_image']:.0f} | "
                f"{pp['bytes_per_image'] / 2**20:.2f} | {1e6 * pp['round_trip_s']:.0f} | "
                f"{pp['overhead_s_per_image']:.4f} | {100 * pp['overhead_share']:.1f}% |"
            )
    lines += [
        "",
        "| network | activation | step | kind | " + " | ".join(BACKENDS) + " |",
        "| --- | --- | --- | --- | " + " | ".join("---" for _ in BACKENDS) + " |",
    ]
    top = max(r["threads"] for r in cnn["rows"])
    seen: dict[tuple[str, str, str, str], dict[str, float]] = {}
    for r in cnn["rows"]:
        if r["status"] == "ok" and r["threads"] == top:
            for layer in r["per_layer_s"]:
                key = (r["model"], r["activation"], layer["step"], layer["kind"])
                seen.setdefault(key, {})[r["backend"]] = layer["median_s"]
    for (model, act, step, kind), by in seen.items():
        cells = " | ".join(f"{by[b]:.3f}" if b in by else "-" for b in BACKENDS)
        lines.append(f"| {model} | {act} | {step} | {kind} | {cells} |")
    return lines


def _rescaling_table(resc: dict) -> list[str]:
    lines = [
        "",
        "| activation | threads | technique | s / image | paper 000 (1 thread) | max logit error |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for r in resc["rows"]:
        pub = PUBLISHED["table9_openfhe_mnist"].get(r["activation"], {}).get(r["technique"])
        lat = f"{r['latency_s']['median']:.3f}" if r["status"] == "ok" else r["status"]
        err = f"{r['max_logit_error']:.1e}" if r["status"] == "ok" else ""
        lines.append(f"| {r['activation']} | {r['threads']} | {r['technique']} | {lat} | {pub} | {err} |")
    return lines


def _primitives_table(prim: dict) -> list[str]:
    lines = [
        "",
        "| level | op | seal ms | openfhe ms (FIXEDMANUAL) | openfhe ms (FLEXIBLEAUTO) | lattigo ms | "
        "paper 000 SEAL / OpenFHE ms |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    cell = {(r["level"], r["op"], r["backend"], r["technique"]): r["median_ms"] for r in prim["rows"]}
    for level in (5, 7):
        for op in ("add", "multiply", "relinearize", "rescale", "rotate", "multiply_relin_rescale"):
            vals = [
                cell.get((level, op, b, t))
                for b, t in (("seal", None), ("openfhe", "FIXEDMANUAL"), ("openfhe", "FLEXIBLEAUTO"), ("lattigo", None))
            ]
            pub = PUBLISHED["table7_ms"][level].get(op) if op != "multiply_relin_rescale" else None
            text = " | ".join("-" if v is None else f"{v:.2f}" for v in vals)
            lines.append(f"| {level} | {op} | {text} | {'-' if pub is None else f'{pub[0]} / {pub[1]}'} |")
    return lines


def tables(tag: str = "") -> str:
    lines: list[str] = []
    cnn = _load("cnn", tag)
    if cnn:
        lines += _cnn_tables(cnn)
    resc = _load("rescaling", tag)
    if resc:
        lines += _rescaling_table(resc)
    prim = _load("primitives", tag)
    if prim:
        lines += _primitives_table(prim)
    return "\n".join(lines) + "\n"


# ---- the driver --------------------------------------------------------------------------------------
def _params_for(model: str, activation: str) -> dict:
    """The parameters henn picks for OpenFHE at this network's depth: the one set all three libraries use."""
    import henn

    zoo = Path(henn.__file__).parent / "zoo" / f"{model}-cnn_{activation}.onnx"
    shape = (1, 28, 28) if model == "mnist" else (3, 32, 32)
    cm = henn.compile(str(zoo), shape, backend="openfhe", mode="single")
    p = cm.params
    return {"log_n": p.log_n, "log_q": list(p.log_q), "log_p": list(p.log_p), "log_scale": p.log_scale}


def _run(cfg: dict, timeout: float, max_gib: float) -> dict:
    """One configuration in a fresh process, stopped past `timeout` seconds or `max_gib` GiB of RSS (with its
    children: OpenFHE's worker) so that a shared machine never runs out of memory."""
    import psutil

    from henn.profile.memory import tree_rss

    cmd = [sys.executable, __file__, "--one", json.dumps(cfg)]
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, text=True, cwd=REPO)
        t0, peak, why = time.monotonic(), 0, None
        while proc.poll() is None:
            try:
                peak = max(peak, tree_rss(psutil.Process(proc.pid)))
            except psutil.Error:
                pass
            if peak > max_gib * 2**30:
                why = f"stopped at {peak / 2**30:.1f} GiB of RSS (--max-gib {max_gib:g})"
            elif time.monotonic() - t0 > timeout:
                why = f"stopped after {timeout:.0f} s (--timeout)"
            if why:
                for child in psutil.Process(proc.pid).children(recursive=True):
                    child.kill()
                proc.kill()
                proc.wait()
                return {**cfg, "status": "stopped", "message": why}
            time.sleep(0.2)
        out.seek(0)
        err.seek(0)
        lines = [ln for ln in out.read().splitlines() if ln.startswith("{")]
        if proc.returncode != 0 or not lines:
            return {**cfg, "status": "failed", "message": err.read()[-1500:]}
    return json.loads(lines[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--one", help=argparse.SUPPRESS)
    ap.add_argument("--parts", nargs="+", choices=("cnn", "rescaling", "primitives"), default=["cnn"])
    ap.add_argument("--models", nargs="+", choices=("mnist", "cifar"), default=["mnist"])
    ap.add_argument("--activations", nargs="+", choices=ACTIVATIONS, default=list(ACTIVATIONS))
    ap.add_argument("--backends", nargs="+", choices=BACKENDS, default=list(BACKENDS))
    ap.add_argument("--threads", nargs="+", type=int, default=[1, 2])
    ap.add_argument("--images", type=int, default=5, help="timed images per configuration (after one untimed)")
    ap.add_argument("--repeats", type=int, default=20, help="timed calls per primitive")
    ap.add_argument("--timeout", type=float, default=1200.0, help="seconds per configuration")
    ap.add_argument("--max-gib", type=float, default=10.0, help="RSS per configuration (with its worker) at most")
    ap.add_argument("--tag", default="", help="suffix of the result files (paper000_<part><tag>.json)")
    ap.add_argument("--table", action="store_true", help="print the results as Markdown tables (docs/openfhe.md)")
    args = ap.parse_args()
    if args.table:
        sys.stdout.write(tables(args.tag))
        return
    if args.one:
        sys.stdout.write(json.dumps(one(json.loads(args.one))) + "\n")
        return
    command = " ".join(["benchmarks/paper000.py", *sys.argv[1:]])
    for part in args.parts:
        if part == "primitives":
            rows = primitives(args.backends, ("FIXEDMANUAL", "FLEXIBLEAUTO"), args.repeats)
            write_json(
                RESULTS / f"paper000_primitives{args.tag}.json",
                {"command": command, "rows": rows, "published": PUBLISHED},
            )
            continue
        rows = []
        out = RESULTS / f"paper000_{part}{args.tag}.json"
        for model in args.models:
            for act in args.activations:
                params = _params_for(model, act)
                if part == "cnn":
                    cfgs = [{"backend": b, "threads": t} for b in args.backends for t in args.threads]
                else:
                    cfgs = [
                        {"backend": "openfhe", "threads": t, "technique": tech}
                        for t in args.threads
                        for tech in ("FIXEDMANUAL", "FLEXIBLEAUTO")
                    ]
                for c in cfgs:
                    cfg = {"model": model, "activation": act, "images": args.images, **params, **c}
                    t0 = time.perf_counter()
                    rows.append(_run(cfg, args.timeout, args.max_gib))
                    r = rows[-1]
                    lat = r.get("latency_s", {}).get("median")
                    took = f"{'' if lat is None else f'{lat:.2f} s/image'} ({time.perf_counter() - t0:.0f} s)"
                    sys.stderr.write(f"{model} {act} {c}: {r['status']} {took}\n")
                    write_json(
                        out,
                        {
                            "command": command,
                            "rows": rows,
                            "published": PUBLISHED,
                            "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY", "passive (henn's default)"),
                        },
                    )
        sys.stderr.write(f"-> {out}\n")


if __name__ == "__main__":
    main()
