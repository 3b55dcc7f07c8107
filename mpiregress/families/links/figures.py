"""The seed's report figures: a heatmap with node labels and a histogram per pair kind (matplotlib Agg)."""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    pass

import numpy as np

from mpiregress.families.links.analysis import KINDS, METRICS, LinkAnalysis, node_matrix, rank_matrix
from mpiregress.families.pyplot import agg_pyplot

# Above this many ranks the heatmap shows the node x node matrix: a 10,000-rank
# image is wider than any screen and costs seconds to render for nothing.
MAX_RANK_HEATMAP = 2048
MAX_LABELS = 40


def _labels(ax, starts: list[int], names: list[str], size: int) -> None:
    step = max(1, -(-len(names) // MAX_LABELS))
    ticks = [s for s in starts[::step]]
    ax.set_xticks(ticks)
    ax.set_yticks(ticks)
    ax.set_xticklabels(names[::step], rotation=90, fontsize=6)
    ax.set_yticklabels(names[::step], fontsize=6)
    if len(starts) <= MAX_LABELS:
        for s in starts[1:]:
            ax.axhline(s - 0.5, color="white", linewidth=0.4)
            ax.axvline(s - 0.5, color="white", linewidth=0.4)
    ax.set_xlim(-0.5, size - 0.5)
    ax.set_ylim(size - 0.5, -0.5)


def heatmap(analysis: LinkAnalysis, path: Path) -> Path:
    """Latency and bandwidth matrices side by side; rank x rank with node labels, or node x node when large."""
    from matplotlib.colors import LogNorm
    plt = agg_pyplot()
    by_rank = analysis.run.nranks <= MAX_RANK_HEATMAP and bool(np.all(np.diff(analysis.rank_node) >= 0))
    fig, axes = plt.subplots(1, 2, figsize=(13, 6), constrained_layout=True)
    for ax, (metric, (unit, higher_better)) in zip(axes, METRICS.items()):
        if by_rank:
            matrix = rank_matrix(analysis, metric)
            starts = [int(np.flatnonzero(analysis.rank_node == i)[0]) for i in range(len(analysis.nodes))]
            what = "rank x rank"
        else:
            matrix = node_matrix(analysis, metric).astype(np.float32)
            starts = list(range(len(analysis.nodes)))
            what = "node x node (mean of rank pairs)"
        cmap = plt.get_cmap("viridis" if higher_better else "viridis_r").with_extremes(bad="black")
        # A log scale: one slow node is 10-1000x the rest, which a linear scale flattens into one colour.
        positive = matrix[np.isfinite(matrix) & (matrix > 0)]
        norm = LogNorm(vmin=float(positive.min()), vmax=float(max(positive.max(), positive.min() * 1.01))) \
            if positive.size else None
        image = ax.imshow(matrix, cmap=cmap, norm=norm, interpolation="nearest", aspect="equal")
        _labels(ax, starts, analysis.nodes, matrix.shape[0])
        ax.set_title(f"{metric} ({unit}, log scale), {what}", fontsize=9)
        fig.colorbar(image, ax=ax, shrink=0.8, label=unit)
    run = analysis.run
    fig.suptitle(f"linktest: {run.nranks} ranks on {len(analysis.nodes)} nodes, "
                 f"{'serial' if run.serial else 'parallel'}, {run.small_size} B / {run.large_size} B, "
                 f"{analysis.thresholds.statistic} of each pair's iterations", fontsize=10)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return Path(path)


def histogram(analysis: LinkAnalysis, path: Path) -> Path:
    """How many pairs at each latency and bandwidth, one colour per pair kind (log axes)."""
    plt = agg_pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5), constrained_layout=True)
    for ax, (metric, (unit, _)) in zip(axes, METRICS.items()):
        values = analysis.first[metric]
        finite = values[np.isfinite(values) & (values > 0)]
        if finite.size:
            bins = np.geomspace(finite.min(), max(finite.max(), finite.min() * 1.01), 60)
            for code in np.unique(analysis.kind):
                sel = values[(analysis.kind == code) & np.isfinite(values) & (values > 0)]
                ax.hist(sel, bins=bins, alpha=0.6, label=f"{KINDS[code]} ({sel.size})")
            ax.set_xscale("log")
            if finite.size > 1000:  # thousands of pairs: a log count shows the few slow ones
                ax.set_yscale("log")
            ax.legend(fontsize=8)
        ax.set_xlabel(f"{metric} ({unit}, {analysis.thresholds.statistic} of each pair's iterations)")
        ax.set_ylabel("pairs")
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return Path(path)
