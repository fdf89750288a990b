"""Plotting helpers every report shares (compare's in report.py, the regions and hints suites,
replay, paging), and the plot of `locus trace stats --plot`.

matplotlib is imported only when a plot is drawn: it is slow to import, and commands that
draw nothing (or run with --no-plots) should not pay for it.
"""
from __future__ import annotations

from pathlib import Path

from .common import LabError


def pyplot():
    """matplotlib.pyplot on the Agg backend (files only: no display is needed or used)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def grouped_bars(ax, groups: list, series: list, ylabel: str, ref=None, log=False) -> None:
    """One group of bars per entry of `groups` (on the x axis); series are (label, function of
    the group -> value or None), one bar per series in every group (None: no bar)."""
    width = 0.8 / max(1, len(series))
    cmap = pyplot().get_cmap("tab20")
    for i, (label, get) in enumerate(series):
        xs, ys = [], []
        for g, group in enumerate(groups):
            v = get(group)
            if v is not None:
                xs.append(g - 0.4 + width * (i + 0.5))
                ys.append(v)
        ax.bar(xs, ys, width, label=label, color=cmap(i % cmap.N))
    if ref is not None:
        ax.axhline(ref, color="black", linewidth=0.8, linestyle="--")
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels(groups)
    ax.set_ylabel(ylabel)
    if log:
        # plain numbers on a log axis: "2" and "0.5" read better than "2x10^0"
        from matplotlib.ticker import NullFormatter, ScalarFormatter
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(ScalarFormatter())
        ax.yaxis.set_minor_formatter(NullFormatter())
    ax.grid(axis="y", alpha=0.3)


def save_with_legend(fig, axes: list, path, title: str, ncol: int | None = None,
                     fontsize=None) -> None:
    """Titles the first panel, puts the first panel's legend under the figure (every panel
    has the same series), saves the PNG and closes the figure. ncol None: up to 8 columns."""
    axes[0].set_title(title)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="upper center",
               ncol=min(len(labels), 8) if ncol is None else ncol,
               bbox_to_anchor=(0.5, 0.0), frameon=False, fontsize=fontsize)
    fig.tight_layout()
    fig.savefig(path, dpi=110, bbox_inches="tight")
    pyplot().close(fig)


# ---- heap profiles (the regions suite, replay) ---------------------------------------------

def read_profile(path: Path) -> list:
    """(allocations, live bytes, held bytes) rows of a --profile CSV."""
    out = []
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return out
    for line in lines[1:]:
        parts = line.split(",")
        if len(parts) == 3 and all(p.isdigit() for p in parts):
            out.append(tuple(int(p) for p in parts))
    return out


def draw_profiles(path: Path, panels: list, live_label: str) -> bool:
    """Seed 004 Fig. 5: per panel (name, [(label, rows of read_profile)]), the live curve
    (black, from the first curve: the program's requests are the same in every run) and one
    held curve per run, over allocation time, log scale. False when there is nothing to draw."""
    panels = [(name, curves) for name, curves in panels if curves]
    if not panels:
        return False
    plt = pyplot()
    fig, ax = plt.subplots(len(panels), 1, figsize=(11, 3.6 * len(panels)), squeeze=False)
    axes = [a[0] for a in ax]
    cmap = plt.get_cmap("tab20")
    def positive(data, column):  # a log scale: samples of nothing held are left out
        return [d[0] for d in data if d[column] > 0], \
            [d[column] / 1024 for d in data if d[column] > 0]

    for axis, (name, curves) in zip(axes, panels):
        axis.plot(*positive(curves[0][1], 1), color="black", linewidth=1.6, label=live_label)
        for i, (label, data) in enumerate(curves):
            axis.plot(*positive(data, 2), linewidth=0.8, color=cmap(i % cmap.N),
                      label=f"held: {label}")
        axis.set_yscale("log")
        axis.set_ylabel(f"{name}: KiB")
        axis.set_xlabel("allocation time (allocations)")
        axis.grid(alpha=0.3)
        axis.legend(fontsize=6, ncol=3, loc="upper left")
    axes[0].set_title("Memory held and memory live over allocation time (seed 004 Fig. 5)")
    fig.tight_layout()
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return True


# ---- locus trace stats --plot ---------------------------------------------------------------

def plot_trace(stats: dict, path: str) -> None:
    """A trace's memory profile and its size and lifetime histograms (trace.file_stats)."""
    plt = pyplot()
    fig, axes = plt.subplots(3, 1, figsize=(9, 10))
    prof = stats["profile"]
    axes[0].plot(prof["clock"], [b / 1024 for b in prof["live_bytes"]], linewidth=1)
    axes[0].set_xlabel("allocation time (allocations)")
    axes[0].set_ylabel("live bytes requested (KiB)")
    axes[0].set_title("Memory profile (seed 004 Fig. 5)")
    for ax, key, title in ((axes[1], "size_histogram", "Object sizes"),
                           (axes[2], "lifetime_histogram", "Lifetimes (allocations)")):
        hist = stats[key]
        ax.bar(range(len(hist)), [r["objects"] for r in hist])
        ax.set_xticks(range(len(hist)))
        ax.set_xticklabels([r["bucket"] for r in hist], rotation=45, ha="right", fontsize=7)
        ax.set_ylabel("objects")
        ax.set_title(title)
    fig.tight_layout()
    try:
        fig.savefig(path, dpi=110)
    except OSError as e:
        raise LabError(f"cannot write {path}: {e.strerror or e}") from None
    finally:
        plt.close(fig)
