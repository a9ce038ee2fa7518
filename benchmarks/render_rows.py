"""Rows of the tables benchmarks/render.py prints: one function per result shape, each taking the loaded
documents of its table and returning a header row, then one row per measurement."""

from __future__ import annotations

import re
from collections.abc import Callable

Rows = list[list[str]]


def _g(x: float | None, digits: int = 3) -> str:
    """x to `digits` significant figures, with thousands separators where it is large."""
    if x is None:
        return "–"
    if abs(x) >= 10**digits:
        return f"{x:,.0f}"
    return f"{float(f'{x:.{digits}g}'):,}".removesuffix(".0") if x else "0"


def _e(x: float | None) -> str:
    return "–" if x is None else f"{x:.1e}"


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.4g}%"


def _gib(mib: float | None) -> str:
    return "–" if mib is None else f"{mib / 1024:.1f} GiB"


def _ring(params: str) -> str:
    """'N=2^13 ... scale=2^24 ... ring=conjugate-invariant' -> 'N=2^13 real slots, 2^24'."""
    n = re.search(r"N=(2\^\d+)", params)
    scale = re.search(r"scale=(2\^\d+)", params)
    real = " real slots" if "conjugate" in params else ""
    return f"N={n.group(1) if n else '?'}{real}, scale {scale.group(1) if scale else '?'}"


def bootstrap(docs: list[dict]) -> Rows:
    rows = [["measure", "result"]]
    for d in docs:
        h, s, pair = d["halves"], d["sequential"], d.get("pair", {})
        rows += [
            [
                f"one bootstrap, 2 cores ({d['preset']}, {d['levels_left']} levels left)",
                f"**{_g(h['median'])} s** ({_g(h['min'])}-{_g(h['max'])}, median of {h['repeats']})",
            ],
            [
                # since the two-goroutine key switch (HENN_PARALLEL_KEYSWITCH), "sequential" runs EvalMod's halves
                # in turn, each key switch still on two goroutines; files before it have no such field
                "one bootstrap, EvalMod's halves in turn"
                if d.get("parallel_key_switch")
                else "one bootstrap, one goroutine",
                f"{_g(s['median'])} s",
            ],
            ["two ciphertexts at once, per bootstrap", f"{_g(pair.get('per_bootstrap_median'))} s"],
            [
                "precision: max / mean error over the slots",
                f"{h['max_error_bits']:.1f} / {h['mean_error_bits']:.1f} bits",
            ],
            ["peak RSS (keys, two bootstraps at once)", f"{d['peak_rss_gib']:.2f} GiB"],
            [
                "bootstrapping keys / resident after key generation",
                f"{d['bootstrap_key_gib']:.2f} / {d['rss_after_keygen_gib']:.2f} GiB",
            ],
            ["key generation", f"{_g(d['keygen_s'])} s"],
        ]
    return rows


def bootstrap_openfhe(docs: list[dict]) -> Rows:
    d = docs[0]
    return [
        ["preset", "log QP", "slots", "bootstrap", "precision", "key generation", "bootstrapping keys", "worker peak"],
        [
            d["preset"],
            _g(d["log_qp"], 4),
            slots.group(1) if (slots := re.search(r"slots=(\d+)", d["params"])) else "?",
            " / ".join(f"{x:.1f} s" for x in d["bootstrap_s"]),
            " / ".join(f"{x:.1f} bits" for x in d["precision_bits"]),
            f"{d['keygen_s']:.1f} s",
            f"{d['bootstrap_key_gib']:.2f} GiB",
            f"{d['worker_peak_gib']:.2f} GiB",
        ],
    ]


def infer(docs: list[dict]) -> Rows:
    """`henn infer --json` documents (no timestamp: the figure's entry dates them). Batch rates: a full
    set's images over its evaluation (the first set is full), and all images over their whole run."""
    rows = [
        [
            "model",
            "activation",
            "mode",
            "parameters (selection)",
            "packing",
            "images",
            "agree",
            "accuracy",
            "max logit err",
            "evaluate",
            "end to end",
            "peak RSS",
        ]
    ]
    for d in docs:
        per_set, sets = d.get("images_per_set", 1), d.get("evaluate_seconds_per_set")
        if d["mode"] == "batch":
            rate, over = (per_set / sets[0], "a full set") if sets else (1 / d["per_image_seconds"]["evaluate"], "all")
            ev, e2e = f"**{_g(rate, 4)} images/s** ({over})", f"{_g(1 / d['per_image_total_seconds'], 4)} images/s"
        else:
            ev, e2e = f"**{_g(d['per_image_seconds']['evaluate'])} s**", f"{_g(d['per_image_total_seconds'])} s"
        boots = f", bootstraps: {d['bootstraps']}" if d.get("bootstraps") else ""
        rows.append(
            [
                d["model"],
                d["activation"],
                d["mode"],
                f"{_ring(d['params'])} ({d.get('selection', '–')}){boots}",
                f"{'complex' if d.get('complex_packing') else 'real'}, {per_set:,} a set",
                f"{d['images']:,}",
                _pct(d["agreement"]),
                _pct(d["accuracy"]),
                _e(d["max_logit_error"]),
                ev,
                e2e,
                _gib(d.get("peak_rss_mib")),
            ]
        )
    return rows


_WEIGHTS = {
    "resnet20_e100": "100-epoch",
    "resnet20_distilled": "distilled (zoo)",
    "resnet20_relu": "ReLU reference",
    "resnet20_b1": "distilled (zoo)",
}


def resnet20(docs: list[dict]) -> Rows:
    rows = [
        [
            "weights",
            "test images",
            "per set",
            "refused",
            "agree",
            "correct",
            "evaluate / image",
            "bootstraps / BSGS",
            "keygen",
            "peak RSS",
            "max logit err",
        ]
    ]
    for d in docs:
        r = d["result"]
        name = next((v for k, v in _WEIGHTS.items() if d["_file"].startswith(k)), r["weights"])
        steps = r["evaluate_seconds_per_image_by_step"]
        first = r["first_image"]
        cache = ", no weight cache" if r.get("plaintext_cache_gib") == 0 else ""
        last = first + r["images_asked"] - 1
        rows.append(
            [
                name,
                f"{first}-{last}" if last > first else str(first),
                f"{r['images_per_set']}{cache}",
                str(len(r["images_refused"])),
                _pct(r["agreement"]),
                _pct(r["accuracy"]),
                f"**{_g(r['per_image_seconds']['evaluate'])} s**",
                f"{_g(steps.get('bootstrap'))} / {_g(steps.get('bsgs'))} s",
                f"{_g(r['keygen_seconds'])} s",
                _gib(r["peak_rss_mib"]),
                _e(r["max_logit_error"]),
            ]
        )
    return rows


def calibration(docs: list[dict]) -> Rows:
    rows = [
        [
            "calibration images",
            "margin",
            "validation refused (of 5000)",
            "test refused (of 1000)",
            "bits lost vs 200 x 1.25",
        ]
    ]
    for r in docs[0]["rows"]:
        rows.append(
            [
                str(r["calibration_images"]),
                str(r["margin"]),
                str(r["refused_val_5000"]),
                str(r["refused_test_1000"]),
                f"{r['bits_lost_vs_default']:.2f}",
            ]
        )
    return rows


def cnn(docs: list[dict]) -> Rows:
    rows = [
        [
            "activation",
            "backend",
            "mode",
            "images",
            "accuracy",
            "agree",
            "max logit err",
            "latency or set time",
            "images/s (evaluate only)",
            "peak RSS",
            "log N / depth / log QP",
        ]
    ]
    for r in docs[0]["results"]:
        if r.get("status") != "ok":
            continue
        if r["mode"] == "single":
            lat = f"{_g(r['latency_seconds']['total']['median'])} s an image"
        else:
            lat = f"{_g(r['batch_latency_seconds']['median'])} s a set of ≤ {r['images_per_set']:,}"
        rows.append(
            [
                r["activation"],
                r["backend"],
                r["mode"],
                f"{r['images']:,}",
                _pct(r["accuracy"]),
                _pct(r["agreement"]),
                _e(r["max_logit_error"]),
                lat,
                f"{_g(r['throughput_images_per_second'])} ({_g(r['evaluate_throughput_images_per_second'])})",
                _gib(r["peak_rss_mib"]),
                f"{r['log_n']} / {r['depth']} / {r['log_qp']:.0f}",
            ]
        )
    return rows


def peers(docs: list[dict]) -> Rows:
    """The peers' run (first document) beside henn's newest single-image run (second)."""
    run, newest = docs
    single = {(r["net"], r["system"]): r for r in run["results"] if r.get("mode") == "single"}
    later = {r["net"]: r for r in newest["results"] if r["system"] == "henn" and r.get("status") == "ok"}
    rows = [
        [
            "net",
            "peer",
            "peer: median (p90)",
            "henn, same run: median (p90)",
            "henn faster by",
            "henn, newest run",
            "max logit err henn / peer",
        ]
    ]
    for ratio in run["ratios"]:
        net, peer = ratio["net"], ratio["peer"]
        h, p = single[(net, "henn")], single[(net, peer)]
        new = later.get(net)
        rows.append(
            [
                net,
                peer,
                f"{_g(p['latency']['median'])} s ({_g(p['latency']['p90'])})",
                f"{_g(h['latency']['median'])} s ({_g(h['latency']['p90'])})",
                f"**{ratio['speedup']:.2f}x**",
                f"{_g(new['latency']['median'])} s" if new else "–",
                f"{_g(h['max_logit_error'], 2)} / {_g(p['max_logit_error'], 2)}",
            ]
        )
    return rows


def peers_batch(docs: list[dict]) -> Rows:
    rows = [["net", "images a set", "evaluation", "end to end", "accuracy on the set", "parameters"]]
    for r in docs[0]["results"]:
        if r.get("mode") == "batch" and r.get("status") == "ok":
            rows.append(
                [
                    r["net"],
                    f"{r['images_per_set']:,}",
                    f"**{_g(r['evaluate_images_per_second'], 4)} images/s**",
                    f"{_g(r['images_per_second'], 4)} images/s",
                    _pct(r["batch_accuracy"]),
                    _ring(r["params"]),
                ]
            )
    return rows


def serve_overhead(docs: list[dict]) -> Rows:
    rows = [["run", "images", "in process", "through the server", "overhead", "network's own share"]]
    for d in docs:
        for r in d["results"]:
            o = r["overhead"]
            if o.get("images"):
                rows.append(
                    [
                        d["_file"],
                        str(o["images"]),
                        f"{_g(o['in_process_s'])} s",
                        f"{_g(o['remote_s'])} s",
                        f"+{o['overhead_pct']:.1f}%",
                        f"{_g(o['network_s'])} s ({o['network_pct']:.1f}%)",
                    ]
                )
    return rows


def serve_load(docs: list[dict]) -> Rows:
    rows = [
        [
            "run",
            "mode",
            "clients",
            "requests",
            "requests/s",
            "latency p50 / p90 / p99",
            "429s retried",
            "server peak RSS",
        ]
    ]
    for d in docs:
        for r in d["results"]:
            for x in r["load"]:
                lat = x["latency_s"]
                rows.append(
                    [
                        d["_file"],
                        r["mode"],
                        str(x["clients"]),
                        f"{x['requests']:,}",
                        _g(x["requests_per_s"]),
                        f"{_g(lat['p50'])} / {_g(lat['p90'])} / {_g(lat['p99'])} s",
                        str(x["retried_429"]),
                        _gib(r["server_peak_rss_mib"]),
                    ]
                )
    return rows


def gpu(docs: list[dict]) -> Rows:
    """The newest figure of each kind, with the same call's figure without CUDA graphs beside where one ran."""

    def newest(section: str) -> dict:
        return [d[section] for d in docs if section in d][-1]

    ops, mnist, boot = newest("ops"), newest("mnist_paper000"), newest("bootstrap")
    latest = max(d["date"][:10] for d in docs)  # ResNet-20 rows: the newest day's runs (docs/gpu.md: the history)
    call = [d for d in docs if "ops" in d][-1]["date"][:13]
    plain = [d for d in docs if d["date"][:13] == call and "ops" in d and not _graphs(d)]
    ops0, boot0 = (plain[-1]["ops"], plain[-1].get("bootstrap", {})) if plain else ({}, {})

    def beside(now: float, before: float | None, unit: str) -> str:
        return f"**{_g(now)} {unit}**" + (f" (without CUDA graphs {_g(before)} {unit})" if before else "")

    return (
        [["measure", "result"]]
        + [
            [
                f"NTT, N = 2^{d['ntt']['log_n']} x {d['ntt']['limbs']} primes, forward / inverse "
                f"({d['date'][11:16]} run)",
                f"{_g(d['ntt']['forward']['median_us'])} / {_g(d['ntt']['inverse']['median_us'])} µs",
            ]
            for d in docs
            if "ntt" in d
        ]
        + [
            [
                f"key switch, {k} moduli",
                beside(v["median_ms"], ops0.get("key_switch", {}).get(k, {}).get("median_ms"), "ms"),
            ]
            for k, v in sorted(ops["key_switch"].items(), key=lambda i: -int(i[0]))
        ]
        + [
            [name, beside(ops[key]["median_ms"], ops0.get(key, {}).get("median_ms"), "ms")]
            for name, key in (
                ("rescale", "rescale"),
                ("rotation", "rotate"),
                ("8 hoisted rotations", "rotate_hoisted_8"),
            )
        ]
        + [
            [
                f"paper 000's MNIST CNN (swish-rg7-deg4), {_ring(m['params'])}{label}",
                f"**{_g(m['evaluate_median_s'])} s** an image, {m['predictions_equal']}/{m['images']} "
                f"predictions equal, max logit err {_e(m['max_logit_error'])}",
            ]
            for m, label in ((mnist, " (paper 000's)"), (newest("mnist"), " (henn's, for precision)"))
        ]
        + [
            [
                f"bootstrap, {_ring(boot['params'])}, every slot",
                beside(boot["bootstrap"]["median_ms"], boot0.get("bootstrap", {}).get("median_ms"), "ms")
                + f" ({_g(boot['precision_bits']['bootstrap'])} bits; first call {_g(boot['first_bootstrap_s'])} s, "
                f"keygen {_g(boot['keygen_s'])} s)",
            ]
        ]
        + [_boot_graph_row(d) for d in docs if "whole_graph" in d.get("boot_graph", {})]
        + [_resnet20_row(d) for d in docs if "timings" in d.get("resnet20", {}) and d["date"][:10] == latest]
    )


def _settings(doc: dict) -> str:
    """What a run's launches were: CUDA graphs of the chain alone or of whole bootstraps, and the element-wise
    arithmetic in torch or in henn's Triton kernels (runs from before `settings` existed say nothing)."""
    s = doc.get("settings")
    if not s:
        return ""
    graphs = {"0": "without CUDA graphs", "chain": "chain graphs", "bootstrap": "whole-bootstrap graphs"}
    return f"{graphs[s['graphs']]}, {_kernels(s)}"


def _kernels(settings: dict) -> str:
    return "Triton modular kernels" if settings["modular_kernels"] else "torch modular arithmetic"


def _boot_graph_row(doc: dict) -> list[str]:
    """One call's bootstrap as one CUDA graph against the chain's graphs alone, with its kernels' device time."""
    b = doc["boot_graph"]
    kernels = _kernels(doc["settings"])
    device = b["whole_profile"][0]
    same = "bit for bit equal" if all(b["equal"]) else "NOT EQUAL"
    return [
        f"bootstrap, {_ring(b['params'])}, one CUDA graph / chain graphs ({doc['date'][11:16]} run, {kernels})",
        f"**{_g(b['whole_graph']['median_ms'])}** / {_g(b['chain_graphs']['median_ms'])} ms; kernels "
        f"{_g(device['us_per_op'] / 1000)} ms of device time in {device['calls_per_op']:.0f} kernels; {same}, "
        f"{_g(min(b['precision_bits']))} bits",
    ]


def _graphs(doc: dict) -> bool:
    return bool(doc.get("cuda_graphs") or doc.get("ops", {}).get("cuda_graphs", {}).get("enabled"))


def _resnet20_row(doc: dict) -> list[str]:
    """ResNet-20 on the device: seconds an image, where they go, the encrypted session's set-up and the check."""
    r = doc["resnet20"]
    t = r["timings"]
    notes = [f"{doc['date'][11:16]} run"]
    if doc.get("settings"):
        notes.append(_settings(doc))
    elif "cuda_graphs" in doc or "ops" in doc:  # runs from before graphs existed say nothing
        notes.append("CUDA graphs" if _graphs(doc) else "without CUDA graphs")
    first, *rest = t["evaluate_per_set"]
    if doc.get("fresh_machine") or (rest and first > 1.5 * max(rest)):  # kernels met first compile in image 1
        notes.append("Triton compiling in the first image")
    return [
        f"ResNet-20 (AESPA), {_ring(r['params'])}, {r['bootstraps']} bootstraps an image ({', '.join(notes)})",
        f"**{' / '.join(_g(s) for s in t['evaluate_per_set'])} s** an image (BSGS {_g(t['steps']['bsgs'])} s, "
        f"bootstraps {_g(t['bootstrap'])} s in all); keygen {_g(r['keygen_s'])} s, weight encoding "
        f"{_g(r['prepare_s'])} s; {r['predictions_equal']}/{r['images']} predictions equal, max logit err "
        f"{_e(r['max_logit_error'])}; peak device {_g(r['peak_device_gib'])} GiB",
    ]


def _compile_sums(rows: dict, names: list[str]) -> tuple[float, int, int]:
    """(seconds, most runs of any one pass, diagonal builds) of the named compile_times rows together."""
    seconds = sum(rows[n]["seconds"] for n in names)
    most = max(c for n in names for p, c in rows[n]["passes"].items() if p not in ("diagonals", "lower"))
    return seconds, most, sum(rows[n]["passes"].get("diagonals", 0) for n in names)


def compile_times(docs: list[dict]) -> Rows:
    """Compile time before and after a compiler change, summed per kind of configuration, with the most
    runs of any one pass in a compile and whether every Program stayed the same."""
    before, after = docs[0]["before"]["rows"], docs[0]["after"]["rows"]
    kinds: dict[str, list[str]] = {}
    for name in after:
        if "error" not in after[name] and "error" not in before.get(name, {"error": 1}):
            kinds.setdefault(name.split("/", 1)[1], []).append(name)
    rows = [["configuration", "compiles", "before", "after", "most runs of a pass", "diagonal builds", "programs"]]
    for kind, names in kinds.items():
        (t0, most0, d0), (t1, most1, d1) = _compile_sums(before, names), _compile_sums(after, names)
        same = sum(before[n]["program"] == after[n]["program"] for n in names)
        rows.append(
            [
                kind,
                str(len(names)),
                f"{t0:.2f} s",
                f"**{t1:.2f} s**",
                f"{most0} -> {most1}",
                f"{d0} -> {d1}",
                f"{same} of {len(names)} identical",
            ]
        )
    return rows


def default_flags(docs: list[dict]) -> Rows:
    """benchmarks/default_flags.py: each speed setting's median set time against the default's."""
    rows = [["model", "setting", "evaluate / set", "vs default", "agree"]]
    for d in docs:
        model = d["model_args"][d["model_args"].index("--model") + 1]
        for name, seconds in sorted(d["median_set_seconds"].items(), key=lambda i: i[1]):
            ratio = d["ratio_to_default"][name]
            best = " (best)" if name == d["best"] else ""
            rows.append(
                [
                    model,
                    name.replace("_", " ") + best,
                    f"{_g(seconds)} s",
                    f"{ratio:.2f}x",
                    f"{d['agreement'][name]:.0%}",
                ]
            )
    return rows


ROWS: dict[str, Callable[[list[dict]], Rows]] = {
    f.__name__: f
    for f in (
        bootstrap,
        default_flags,
        bootstrap_openfhe,
        infer,
        resnet20,
        calibration,
        cnn,
        peers,
        peers_batch,
        serve_overhead,
        serve_load,
        gpu,
        compile_times,
    )
}
