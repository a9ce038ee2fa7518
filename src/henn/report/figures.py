"""matplotlib figures (Agg, PNG bytes) in the style of the papers' plots: one panel per operation,
one line per library (and parameter mode), against depth or problem size."""

from __future__ import annotations

import io
import math
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.ticker import MaxNLocator

MB = 2**20
_MARKERS = "osD^v<>ph*"
_STYLES = {"library": "-", "fixed": "--", "preset": ":"}


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    plt.close(fig)
    return buf.getvalue()


def _grid(n: int, ncols: int = 3, size=(4.2, 3.0)):
    ncols = max(1, min(ncols, n))
    nrows = math.ceil(n / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(size[0] * ncols, size[1] * nrows), squeeze=False)
    for ax in axes.flat[n:]:
        ax.set_visible(False)
    return fig, list(axes.flat[:n])


def series_label(rec: dict) -> str:
    return f"{rec['backend']} ({rec['mode']})" if rec.get("mode") else rec["backend"]


class _Colors:
    """One colour per backend, one marker per series: stable across every figure of a report."""

    def __init__(self):
        self.cycle = plt.rcParams["axes.prop_cycle"].by_key()["color"]
        self.colors: dict[str, str] = {}
        self.series: dict[str, int] = {}

    def style(self, rec: dict, key: str | None = None) -> dict:
        color = self.colors.setdefault(rec["backend"], self.cycle[len(self.colors) % len(self.cycle)])
        mark = self.series.setdefault(key or rec["backend"], len(self.series))
        return {
            "color": color,
            "linestyle": _STYLES.get(rec.get("mode") or "", "-"),
            "marker": _MARKERS[mark % len(_MARKERS)],
            "markersize": 4,
        }


COLORS = _Colors()


def line_panels(
    records: Iterable[dict],
    panels: Sequence[str],
    *,
    panel_of: Callable[[dict], str],
    x_of: Callable[[dict], float | None],
    y_of: Callable[[dict], float | None],
    series_of: Callable[[dict], str] = series_label,
    band_of=None,
    xlabel: str = "depth",
    ylabel: str = "",
    logy: bool = True,
    logx: bool = False,
    title: str = "",
    ncols: int = 3,
) -> bytes | None:
    """A grid of panels (one per `panels` entry); in each, one line per series of (x, y) points.
    band_of(rec) -> (low, high) draws a shaded spread (e.g. the interquartile range)."""
    data: dict[str, dict[str, list]] = {p: defaultdict(list) for p in panels}
    styles: dict[str, dict] = {}
    for rec in records:
        panel = panel_of(rec)
        if panel not in data:
            continue
        x, y = x_of(rec), y_of(rec)
        if x is None or y is None or (logy and y <= 0):
            continue
        key = series_of(rec)
        styles.setdefault(key, COLORS.style(rec, key))
        data[panel][key].append((x, y, band_of(rec) if band_of else None))
    used = [p for p in panels if data[p]]
    if not used:
        return None
    fig, axes = _grid(len(used), ncols)
    for ax, panel in zip(axes, used):
        for key, pts in sorted(data[panel].items()):
            pts.sort(key=lambda t: t[0])
            xs, ys = [p[0] for p in pts], [p[1] for p in pts]
            ax.plot(xs, ys, label=key, **styles[key])
            bands = [p[2] for p in pts]
            if band_of and all(b is not None for b in bands):
                ax.fill_between(
                    xs,
                    [b[0] for b in bands],
                    [b[1] for b in bands],
                    color=styles[key]["color"],
                    alpha=0.15,
                    linewidth=0,
                )
        ax.set_title(panel, fontsize=10)
        ax.set_xlabel(xlabel, fontsize=8)
        ax.set_ylabel(ylabel, fontsize=8)
        ax.tick_params(which="both", labelsize=7)
        ax.grid(True, alpha=0.3)
        if logy:
            ax.set_yscale("log")
        if logx:
            ax.set_xscale("log", base=2)
        else:
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    # fixed gaps (inches) sized for the panels' titles and tick labels: tight_layout would draw the figure once
    # more; savefig's tight box then trims the margins
    height = fig.get_figheight()
    fig.subplots_adjust(wspace=0.32, hspace=0.45, top=1 - 0.35 / height, bottom=0.5 / height)
    handles, labels = _legend(axes)
    # above the panels; the legend's title is the figure's title (savefig's tight box keeps both)
    fig.legend(
        handles,
        labels,
        loc="lower center",
        bbox_to_anchor=(0.5, 1.0),
        ncol=min(4, len(labels)),
        fontsize=8,
        title=title or None,
        title_fontsize=11,
        frameon=False,
    )
    return _png(fig)


def _legend(axes):
    seen: dict[str, object] = {}
    for ax in axes:
        for h, label in zip(*ax.get_legend_handles_labels()):
            seen.setdefault(label, h)
    return list(seen.values()), list(seen)


def timeline(records: list[dict], title: str = "resident memory over time") -> bytes | None:
    """RSS (MiB) against seconds: one panel per backend, one line per run with a memory timeline."""
    recs = [r for r in records if ((r.get("memory") or {}).get("timeline") or {}).get("t_s")]
    if not recs:
        return None
    backends = sorted({r["backend"] for r in recs})
    fig, axes = _grid(len(backends), ncols=2, size=(6.0, 3.4))
    for ax, backend in zip(axes, backends):
        for rec in (r for r in recs if r["backend"] == backend):
            tl = rec["memory"]["timeline"]
            what = (rec["extra"].get("model") or rec["op"]).removesuffix(".onnx")
            threads = f", {rec['threads']} thr" if rec.get("threads") else ""
            ax.plot(
                tl["t_s"],
                [b / MB for b in tl["rss_bytes"]],
                linewidth=1.2,
                label=f"{what} ({rec['mode']} d{rec['depth']}{threads})",
            )
        ax.set_title(backend, fontsize=10)
        ax.set_xlabel("time (s)", fontsize=8)
        ax.set_ylabel("RSS (MiB)", fontsize=8)
        ax.tick_params(which="both", labelsize=7)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=6)
    fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    return _png(fig)


def bars(groups: dict[str, dict[str, float]], *, ylabel: str, title: str, logy: bool = False) -> bytes | None:
    """Grouped bars: groups[group][bar] = value (e.g. backend -> threads -> speed-up)."""
    groups = {g: v for g, v in groups.items() if v}
    if not groups:
        return None
    bar_names = sorted({b for v in groups.values() for b in v}, key=lambda s: (len(s), s))
    width = 0.8 / len(bar_names)
    fig, ax = plt.subplots(figsize=(max(5, 1.6 * len(groups)), 3.4))
    for i, name in enumerate(bar_names):
        xs = [j + i * width for j in range(len(groups))]
        ax.bar(xs, [groups[g].get(name, 0) for g in groups], width, label=name)
    ax.set_xticks([j + width * (len(bar_names) - 1) / 2 for j in range(len(groups))])
    ax.set_xticklabels(list(groups), fontsize=7, rotation=25, ha="right")
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=11)
    if logy:
        ax.set_yscale("log")
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return _png(fig)
