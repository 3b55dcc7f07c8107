"""Figures of a collective sweep for the HTML report (matplotlib, headless).

- the best-algorithm map (seed 002, figures 8-9): message size x process count, colour =
  fastest forced algorithm; a dot marks points where the default is slower than that
  algorithm beyond the noise (the findings);
- default vs best: how much slower the default is at each point, in percent (colour
  clipped at +-100 %, the number printed in the cells beyond the noise is not).
Both take the cells of ``sweep.best_map`` for one collective and one distribution.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

if TYPE_CHECKING:
    from matplotlib.artist import Artist
    from matplotlib.axes import Axes


from mpiregress.errors import InputError
from mpiregress.families.coll.sweep import Cell, format_size
from mpiregress.families.pyplot import agg_pyplot


def _grid(cells: Sequence[Cell]) -> tuple[list[int], list[int], str]:
    if not cells:
        raise InputError("no best-algorithm cells to draw (the sweep measured nothing to compare)")
    kinds = {(c.point.collective, c.point.distribution) for c in cells}
    if len(kinds) > 1:
        raise InputError(f"one figure per collective and distribution; got {sorted(kinds)}")
    coll, dist = next(iter(kinds))
    sizes = sorted({c.point.size for c in cells})
    nprocs = sorted({c.point.nprocs for c in cells})
    return sizes, nprocs, f"{coll}, {dist}"


def _axes(ax: "Axes", sizes: list[int], nprocs: list[int]) -> None:
    ax.set_xticks(range(len(sizes)))
    ax.set_xticklabels([format_size(s).replace(" ", "") for s in sizes], rotation=90, fontsize=7)
    ax.set_yticks(range(len(nprocs)))
    ax.set_yticklabels([str(n) for n in nprocs], fontsize=8)
    ax.set_xlabel("message size")
    ax.set_ylabel("processes")


def best_map(cells: Sequence[Cell], path: Path, algorithms: Sequence[str], note: str = "") -> Path:
    """Draw the best-algorithm map into ``path`` (PNG); ``algorithms`` fixes the colour of each name;
    ``note`` (e.g. "oversubscribed above 2 ranks") goes under the title."""
    from matplotlib.colors import BoundaryNorm, ListedColormap
    from matplotlib.patches import Patch
    plt = agg_pyplot()
    sizes, nprocs, title = _grid(cells)
    names = list(algorithms)
    for c in cells:
        if c.best.algorithm not in names:
            names.append(c.best.algorithm)
    grid = [[float("nan")] * len(sizes) for _ in nprocs]
    for c in cells:
        grid[nprocs.index(c.point.nprocs)][sizes.index(c.point.size)] = names.index(c.best.algorithm)
    palette = plt.get_cmap("tab10" if len(names) <= 10 else "tab20")
    cmap = ListedColormap([palette(i) for i in range(len(names))])
    norm = BoundaryNorm([i - 0.5 for i in range(len(names) + 1)], cmap.N)
    fig, ax = plt.subplots(figsize=(max(6.0, 0.4 * len(sizes) + 2.5), max(3.0, 0.35 * len(nprocs) + 1.8)))
    ax.imshow(grid, cmap=cmap, norm=norm, aspect="auto", origin="lower", interpolation="nearest")
    losing = [c for c in cells if c.beyond_noise]
    if losing:
        ax.scatter([sizes.index(c.point.size) for c in losing], [nprocs.index(c.point.nprocs) for c in losing],
                   marker="o", s=14, c="black", label="default slower beyond the noise")
    _axes(ax, sizes, nprocs)
    used = sorted({c.best.algorithm for c in cells}, key=names.index)
    handles: list[Artist] = [Patch(color=cmap(names.index(n)), label=n) for n in used]
    if losing:
        handles.append(plt.Line2D([], [], marker="o", color="black", linestyle="", markersize=4,
                                  label="default slower beyond noise"))
    ax.legend(handles=handles, fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.set_title(f"Best forced algorithm: {title}" + (f"\n{note}" if note else ""), fontsize=10)
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def default_vs_best(cells: Sequence[Cell], path: Path, note: str = "") -> Path:
    """Draw how much slower (%) the default is than the best forced algorithm at each point."""
    from matplotlib.colors import TwoSlopeNorm
    plt = agg_pyplot()
    sizes, nprocs, title = _grid(cells)
    grid = [[float("nan")] * len(sizes) for _ in nprocs]
    for c in cells:
        if c.default_slower is not None:
            grid[nprocs.index(c.point.nprocs)][sizes.index(c.point.size)] = c.default_slower * 100
    values = [v for row in grid for v in row if not math.isnan(v)]
    # Clipped at 100 %: one outlier (an oversubscribed run, a preempted rank) must not wash out the map.
    top = min(100.0, max([abs(v) for v in values] + [10.0]))
    fig, ax = plt.subplots(figsize=(max(6.0, 0.4 * len(sizes) + 2.5), max(3.0, 0.35 * len(nprocs) + 1.8)))
    image = ax.imshow(grid, cmap="RdYlGn_r", norm=TwoSlopeNorm(vmin=-top, vcenter=0.0, vmax=top),
                      aspect="auto", origin="lower", interpolation="nearest")
    for c in cells:
        if c.beyond_noise and c.default_slower is not None:
            ax.text(sizes.index(c.point.size), nprocs.index(c.point.nprocs), f"{c.default_slower * 100:.0f}",
                    ha="center", va="center", fontsize=6)
    _axes(ax, sizes, nprocs)
    fig.colorbar(image, ax=ax, label="default slower than best (%)", extend="both" if top >= 100.0 else "neither")
    ax.set_title(f"Default vs best forced algorithm: {title}" + (f"\n{note}" if note else ""), fontsize=10)
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
