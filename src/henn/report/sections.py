"""The report's sections, built from the records of any number of results files."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from henn.profile.primitives import BOOTSTRAP_OPS
from henn.profile.primitives import CORE_OPS as PRIMITIVE_OPS
from henn.report import figures
from henn.report.document import Section, Table, compact_bits, fmt

SIZE_KINDS = (
    "ciphertext_bytes",
    "ciphertext_level0_bytes",
    "plaintext_bytes",
    "public_key_bytes",
    "relin_key_bytes",
    "galois_key_bytes_per_step",
)
KERNEL_OPS = ("dot_product", "linear_transform", "polynomial", "activation")
GIB = 2**30
MB = 2**20


def _ok(records, suite=None, op=None):
    return [
        r
        for r in records
        if r["status"] == "ok" and (suite is None or r["suite"] == suite) and (op is None or r["op"] == op)
    ]


def _ops_present(records, order) -> list[str]:
    present = {r["op"] for r in records}
    return [op for op in order if op in present] + sorted(present - set(order))


def _err(rec, kind="random", field="bits"):
    for e in rec.get("error") or []:
        if e["input"] == kind:
            return e[field]
    return None


def _ms(rec):
    lat = rec.get("latency")
    return lat["median"] * 1e3 if lat else None


def _band_ms(rec):
    lat = rec.get("latency")
    return (lat["q1"] * 1e3, lat["q3"] * 1e3) if lat else None


def _configs(records):
    """(backend, mode) pairs in a stable order."""
    return sorted({(r["backend"], r["mode"] or "") for r in records})


# ---- runs ---------------------------------------------------------------------------------------
def runs_section(docs: list[tuple[str, dict]]) -> Section:
    sec = Section("Runs")
    rows: list[list[str]] = []
    backends: dict[str, dict] = {}
    for path, doc in docs:
        run = doc["run"]
        m = run["machine"]
        rows.append(
            [
                path,
                run["suite"],
                run["timestamp"],
                fmt(run.get("duration_s")),
                f"{m['cpu']} ({m['cores']} cores / {m['logical_cores']} threads, {m['ram_gib']} GiB)",
                run["versions"]["henn"],
                f"`{run['command']}`",
            ]
        )
        for name, info in run["versions"]["backends"].items():
            backends.setdefault(name, info)
    sec.tables.append(
        Table("Results files", ["file", "suite", "timestamp (UTC)", "duration (s)", "machine", "henn", "command"], rows)
    )
    sec.tables.append(
        Table(
            "Libraries",
            ["backend", "available", "version / how to install"],
            [[n, fmt(i["available"]), i["info"]] for n, i in sorted(backends.items())],
        )
    )
    return sec


def parameters_table(records) -> Table:
    seen: dict[tuple[str, str, int], dict] = {}
    for r in records:
        if r.get("params") and r["status"] == "ok":
            seen.setdefault((r["backend"], r["mode"] or "", r["depth"] or 0), r["params"])
    rows = [
        [
            b,
            m,
            str(d),
            str(p["log_n"]),
            fmt(p["log_qp"], 4),
            compact_bits(p["log_q"]),
            compact_bits(p["log_p"]),
            str(p["log_scale"]),
            "yes" if p.get("insecure") else "",
        ]
        for (b, m, d), p in sorted(seen.items())
    ]
    return Table(
        "Parameters used (bit sizes of the primes; log QP from the actual primes)",
        ["backend", "mode", "depth", "log N", "log QP", "log q", "log p", "log scale", "insecure"],
        rows,
    )


# ---- primitives ---------------------------------------------------------------------------------
def primitives_section(records) -> Section | None:
    recs = [r for r in records if r["suite"] == "primitives"]
    ok = _ok(recs)
    if not ok:  # nothing measured: the failures section says why
        return None
    ops = _ops_present(
        [r for r in ok if (r["op"] in PRIMITIVE_OPS or r.get("latency")) and r["op"] not in BOOTSTRAP_OPS],
        PRIMITIVE_OPS,
    )
    sec = Section(
        "Primitive operations",
        [
            "Each library at each multiplicative depth: with its own parameter choice (mode `library`, solid lines) "
            "and one shared parameter set with identical primes (mode `fixed`, dashed). Latency is the median of "
            "the timed calls (shaded: interquartile range); throughput is slots × operations per call / median "
            "latency; error is measured against NumPy on inputs of 1 (as paper 001) and on uniform [-1, 1] inputs."
        ],
    )
    err_ops = [op for op in ops if any(_err(r) is not None for r in ok if r["op"] == op)]
    _primitive_figures(sec, ok, ops, err_ops)
    sizes = _ok(recs, op="sizes")
    kinds = [k for k in SIZE_KINDS if any(k in (r["sizes"] or {}) for r in sizes)]
    labels = [_size_label(k) for k in kinds]
    pseudo = [{**r, "op": _size_label(k), "_v": r["sizes"][k] / MB} for r in sizes for k in kinds if k in r["sizes"]]
    sec.figure(
        "primitives_sizes",
        "Serialized sizes against depth (MiB, log scale).",
        figures.line_panels(
            pseudo,
            labels,
            panel_of=lambda r: r["op"],
            x_of=_depth,
            y_of=lambda r: r["_v"],
            ylabel="MiB",
            title="Ciphertext and key sizes",
        ),
    )
    mem_ops = [op for op in ("keygen_sk_pk_relin", "keygen_galois", "rotate_hoisted", "multiply_relin") if op in ops]
    sec.figure(
        "primitives_memory",
        "Peak memory: the resident set's high-water mark during the timed calls "
        "(MiB; each configuration runs in a fresh process, so this includes its keys and ciphertexts).",
        figures.line_panels(
            ok,
            mem_ops,
            panel_of=lambda r: r["op"],
            x_of=_depth,
            y_of=lambda r: (r["memory"] or {}).get("peak_rss_bytes", 0) / MB or None,
            ylabel="MiB",
            title="Peak resident memory",
        ),
    )
    sec.tables.append(parameters_table(recs))
    for backend, mode in _configs(ok):
        mine = [r for r in ok if r["backend"] == backend and (r["mode"] or "") == mode]
        sec.tables.append(_depth_table(f"{backend} ({mode}): median latency (ms)", mine, ops, _ms))
        sec.tables.append(_depth_table(f"{backend} ({mode}): bits of precision (random inputs)", mine, err_ops, _err))
    if sizes:
        sec.tables.append(
            Table(
                "Serialized sizes (MiB)",
                ["backend", "mode", "depth"] + labels,
                [
                    [r["backend"], r["mode"] or "", str(r["depth"])]
                    + [fmt((r["sizes"] or {}).get(k, 0) / MB) if k in (r["sizes"] or {}) else "–" for k in kinds]
                    for r in sorted(sizes, key=_order)
                ],
            )
        )
    return sec


def _depth(r):
    return r["depth"]


def _primitive_figures(sec: Section, ok, ops, err_ops) -> None:
    """Latency, throughput and precision against depth, one panel per operation."""
    sec.figure(
        "primitives_latency",
        "Latency against depth (ms, log scale), one panel per operation.",
        figures.line_panels(
            ok,
            ops,
            panel_of=lambda r: r["op"],
            x_of=_depth,
            y_of=_ms,
            band_of=_band_ms,
            ylabel="latency (ms)",
            title="Latency",
        ),
    )
    tp_ops = [op for op in ops if not op.startswith("keygen")]
    sec.figure(
        "primitives_throughput",
        "Throughput against depth (slot-operations per second, log scale).",
        figures.line_panels(
            ok,
            tp_ops,
            panel_of=lambda r: r["op"],
            x_of=_depth,
            y_of=lambda r: r["throughput"],
            ylabel="slot-ops / s",
            title="Throughput",
        ),
    )
    sec.figure(
        "primitives_error_bits",
        "Bits of precision against depth (-log2 of the max absolute error), uniform [-1, 1] inputs.",
        figures.line_panels(
            ok,
            err_ops,
            panel_of=lambda r: r["op"],
            x_of=_depth,
            y_of=_err,
            logy=False,
            ylabel="bits",
            title="Precision (random inputs)",
        ),
    )
    sec.figure(
        "primitives_error_pct",
        "Relative error (%) against depth on inputs of 1 (paper 001, Figs. 2, 7, 12).",
        figures.line_panels(
            ok,
            err_ops,
            panel_of=lambda r: r["op"],
            x_of=_depth,
            y_of=lambda r: _err(r, "ones", "relative_pct"),
            ylabel="error (%)",
            title="Relative error (inputs of 1)",
        ),
    )


def _size_label(kind: str) -> str:
    return kind.removesuffix("_bytes").replace("_", " ")


def _order(r):
    return (r["backend"], r["mode"] or "", r["depth"] or 0, r["size"] or 0)


def _depth_table(title, recs, ops, value) -> Table:
    by: defaultdict[int, dict[str, Any]] = defaultdict(dict)
    for r in recs:
        by[r["depth"]][r["op"]] = value(r)
    return Table(
        title,
        ["depth"] + list(ops),
        [[str(d)] + [fmt(by[d].get(op)) for op in ops] for d in sorted(by, key=lambda d: d or 0)],
    )


# ---- kernels ------------------------------------------------------------------------------------
def _kernel_series(r):
    return f"{figures.series_label(r)} d{r['depth']}"


def bootstrap_section(records) -> Section | None:
    """Bootstrapping (papers 001 and 004 report it): latency, precision, memory against the levels left."""
    ok = [r for r in _ok(records, "primitives") if r["op"] in BOOTSTRAP_OPS]
    boots = [r for r in ok if r["op"] == "bootstrap"]
    if not boots:
        return None
    sec = Section(
        "Bootstrapping",
        [
            "One bootstrap of a ciphertext at level 1 holding uniform [-1, 1] values in every slot, refreshed to the "
            "top of its parameters' chain: against the levels it leaves for the network (the preset's max_level). "
            "`2 thr` runs the real and imaginary halves of the modular reduction at once (henn's Lattigo bridge), "
            "`1 thr` one after the other. Peak memory is the process's resident high-water mark, keys included."
        ],
    )
    keygen = {
        (r["backend"], r["params"]["name"] if r.get("params") else ""): r for r in ok if r["op"] == "keygen_bootstrap"
    }

    def series(r):
        return f"{r['backend']} ({r['threads']} thr)"

    panels = ["latency (s)", "precision (bits)", "peak memory (GiB)"]
    values = {
        "latency (s)": lambda r: (r["latency"] or {}).get("median"),
        "precision (bits)": _err,
        "peak memory (GiB)": lambda r: (r["memory"] or {}).get("peak_rss_bytes", 0) / GIB or None,
    }
    pseudo = [{**r, "_panel": p, "_v": values[p](r)} for r in boots for p in panels]
    sec.figure(
        "bootstrap",
        "Bootstrapping against the levels it leaves.",
        figures.line_panels(
            pseudo,
            panels,
            panel_of=lambda r: r["_panel"],
            x_of=lambda r: r["extra"].get("levels_left"),
            y_of=lambda r: r["_v"],
            series_of=series,
            xlabel="levels left",
            logy=False,
            title="Bootstrapping",
        ),
    )
    sec.tables.append(_bootstrap_table(boots, keygen))
    return sec


def _bootstrap_table(boots, keygen) -> Table:
    rows = []
    for r in sorted(boots, key=lambda r: (r["backend"], r["extra"].get("levels_left") or 0, -(r["threads"] or 0))):
        name = r["params"]["name"] if r.get("params") else ""
        kg = keygen.get((r["backend"], name))
        rows.append(
            [
                r["backend"],
                name,
                fmt(r["extra"].get("levels_left")),
                f"2^{r['extra'].get('log_slots')}",
                fmt(r["threads"]),
                fmt((r["latency"] or {}).get("median"), 3),
                fmt(_err(r), 3),
                fmt(r["extra"].get("bootstrap_key_bytes", 0) / GIB, 3),
                fmt((r["memory"] or {}).get("peak_rss_bytes", 0) / GIB, 3),
                fmt((kg["latency"] or {}).get("median") if kg else None, 3),
            ]
        )
    return Table(
        "Bootstrapping",
        [
            "backend",
            "parameters",
            "levels left",
            "slots",
            "threads",
            "latency (s)",
            "precision (bits)",
            "keys (GiB)",
            "peak RSS (GiB)",
            "key generation (s)",
        ],
        rows,
    )


def kernels_section(records) -> Section | None:
    recs = [r for r in records if r["suite"] == "kernels"]
    ok = _ok(recs)
    if not ok:  # nothing measured: the failures section says why
        return None
    sec = Section(
        "Kernels",
        [
            "Dot product (multiply, then log2 n rotate-and-add steps), linear transformation y = M x (n × n, "
            "diagonal method with baby-step giant-step), the logistic function's least-squares polynomial on [-8, 8] "
            "(paper 001's polynomial test) and consecutive multiplications down the modulus chain."
        ],
    )
    _kernel_figures(sec, recs, ok)
    sec.tables.append(_kernel_table(ok))
    sec.tables.append(parameters_table(recs))
    return sec


def _size_x(r):
    return r["size"]


def _kernel_figures(sec: Section, recs, ok) -> None:
    """Latency and precision against problem size; precision after k multiplications."""
    kernels = [k for k in KERNEL_OPS if any(r["op"] == k for r in ok)]
    sec.figure(
        "kernels_latency",
        "Kernel latency against problem size (ms; n for the dot product and the "
        "linear transformation, degree for the polynomial).",
        figures.line_panels(
            ok,
            kernels,
            panel_of=lambda r: r["op"],
            x_of=_size_x,
            y_of=_ms,
            band_of=_band_ms,
            series_of=_kernel_series,
            xlabel="n / degree",
            ylabel="latency (ms)",
            logx=True,
            title="Kernel latency",
        ),
    )
    sec.figure(
        "kernels_error",
        "Kernel precision against problem size (bits, random inputs).",
        figures.line_panels(
            ok,
            kernels,
            panel_of=lambda r: r["op"],
            x_of=_size_x,
            y_of=_err,
            logy=False,
            series_of=_kernel_series,
            xlabel="n / degree",
            ylabel="bits",
            logx=True,
            title="Kernel precision",
        ),
    )
    chain = [{**r, "_input": e["input"], "_bits": e["bits"]} for r in _ok(recs, op="mul_chain") for e in r["error"]]
    sec.figure(
        "kernels_chain",
        "Consecutive multiplications: bits of precision after k multiplications (paper 001 Fig. 3).",
        figures.line_panels(
            chain,
            ["ones", "random"],
            panel_of=lambda r: r["_input"],
            x_of=_size_x,
            y_of=lambda r: r["_bits"],
            series_of=_kernel_series,
            logy=False,
            xlabel="multiplications",
            ylabel="bits",
            title="Error against depth",
        ),
    )


def _kernel_table(ok) -> Table:
    rows = []
    for r in sorted([r for r in ok if r["op"] != "mul_chain"], key=lambda r: (r["op"],) + _order(r)):
        x = r["extra"]
        keys = x.get("galois_keys")
        rows.append(
            [
                r["op"],
                r["backend"],
                r["mode"] or "",
                str(r["depth"]),
                f"{r['size_name']}={r['size']}",
                fmt(_ms(r)),
                fmt(_err(r)),
                fmt(_err(r, "ones")),
                fmt(keys),
                fmt(x.get("keygen_s") * 1e3 if x.get("keygen_s") is not None else None),
            ]
        )
    return Table(
        "Kernels",
        [
            "kernel",
            "backend",
            "mode",
            "depth",
            "size",
            "median (ms)",
            "bits (random)",
            "bits (ones)",
            "Galois keys",
            "keygen (ms)",
        ],
        rows,
    )


# ---- model --------------------------------------------------------------------------------------
def model_section(records) -> Section | None:
    recs = [r for r in records if r["suite"] == "model"]
    ok = _ok(recs)
    if not ok:  # nothing measured: the failures section says why
        return None
    sec = Section(
        "Models, threads and memory",
        [
            "Inference of the compiled zoo CNNs, a fixed batch of independent tasks (multiply + relinearize, "
            "rescale, rotate) from 1 and 2 Python threads (a speed-up needs a library that releases the GIL), "
            "and the resident memory sampled every ~10 ms by a separate process (paper 000 Figs. 3-4)."
        ],
    )
    sec.figure(
        "model_threads",
        "Thread scaling: speed-up over the smallest thread count (Python threads for the "
        "task batch, the runtime's threads option for inference).",
        figures.bars(_speedups(ok), ylabel="speed-up", title="Thread scaling"),
    )
    sec.figure("model_memory", "Resident memory over time during each run.", figures.timeline(ok))
    rows = [
        [
            r["op"],
            r["backend"],
            r["mode"] or "",
            str(r["depth"]),
            r["extra"].get("model") or "",
            fmt(r["threads"]),
            fmt(r["latency"]["median"] if r.get("latency") else None),
            fmt(r["extra"].get("first_run_s")),
            fmt(_err(r, "image")),
            fmt(r["throughput"]),
            fmt(((r["memory"] or {}).get("peak_rss_bytes") or 0) / MB or None),
        ]
        for r in sorted(ok, key=lambda r: (r["op"],) + _order(r) + (r["extra"].get("model") or "", r["threads"] or 0))
    ]
    sec.tables.append(
        Table(
            "Runs",
            [
                "op",
                "backend",
                "mode",
                "depth",
                "model",
                "threads",
                "median (s)",
                "cold first run (s)",
                "bits (logits)",
                "slot-ops/s",
                "peak RSS (MiB)",
            ],
            rows,
        )
    )
    return sec


def _speedups(ok) -> dict[str, dict[str, float]]:
    """label -> {"k thread(s)": speed-up over the smallest k} for thread scaling and inference records."""
    groups: defaultdict[str, dict[int, float]] = defaultdict(dict)
    for r in ok:
        if r["op"] in ("thread_scaling", "inference") and r["threads"] and r.get("latency"):
            what = r["extra"].get("model", "").removesuffix(".onnx") or "task batch"
            groups[f"{figures.series_label(r)}: {what}"][r["threads"]] = r["latency"]["median"]
    out = {}
    for label, by_threads in groups.items():
        if len(by_threads) > 1:
            base = by_threads[min(by_threads)]
            out[label] = {f"{k} thread(s)": base / v for k, v in sorted(by_threads.items())}
    return out


# ---- failures -----------------------------------------------------------------------------------
def failures_section(records) -> Section | None:
    failed = [r for r in records if r["status"] == "failed"]
    if not failed:
        return None
    groups = defaultdict(list)
    for r in failed:
        groups[(r["suite"], r["backend"], r["mode"] or "", r["op"], r["error_message"])].append(r)
    rows = []
    for (suite, backend, mode, op, msg), rs in sorted(groups.items(), key=lambda kv: kv[0][:4]):
        where = sorted(
            {
                (f"d{r['depth']}" if r["depth"] is not None else "-")
                + (f" {r['size_name']}={r['size']}" if r["size"] is not None else "")
                for r in rs
            }
        )
        rows.append([suite, backend, mode, op, ", ".join(where[:8]) + (" …" if len(where) > 8 else ""), msg])
    return Section(
        "Failed measurements",
        [f"{len(failed)} measurements failed; the others were unaffected."],
        tables=[Table("Failures", ["suite", "backend", "mode", "op", "where", "message"], rows)],
    )
