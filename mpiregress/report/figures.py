"""The report's figures, as base64 PNG strings ready for ``<img src="data:image/png;base64,...">``.

Figures are drawn on bare ``matplotlib.figure.Figure`` objects (no pyplot state, no
display backend), so reports render the same in CI, in a test and on a laptop.
"""
from __future__ import annotations

import base64
import io
import statistics
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Mapping, Optional, Sequence

import numpy as np

if TYPE_CHECKING:
    from matplotlib.artist import Artist
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure
from PIL import Image

from mpiregress.history.store import RunPoint
from mpiregress.model.baselines import Baselines
from mpiregress.model.names import METHODS, METRICS, PLACEMENTS, PT2PT, format_value
from mpiregress.model.results import Result
from mpiregress.model.series import SeriesKey
from mpiregress.verdict.changepoint import ChangePoint
from mpiregress.verdict.history_gate import Verdict

METHOD_COLOURS = {"source": "#1f77b4", "spack": "#ff7f0e", "easybuild": "#2ca02c", "eessi": "#9467bd"}
VERDICT_EDGE = {"regression": "#d62728", "error": "#d62728", "noisy": "#bcbd22", "improvement": "#17becf"}
DPI = 80


def png_bytes(fig: Figure) -> bytes:
    """``fig`` drawn once at :data:`DPI` as a 256-colour PNG.

    No bbox_inches="tight": it draws the figure a second time only to measure it; each figure fixes
    its own margins (:func:`_margins`). A palette of 256 colours holds every colour these line and bar
    figures use (their antialiasing included) and makes the PNG a third of RGBA's size, for the same
    encoding time, on a page that embeds them all."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    fig.set_dpi(DPI)
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    rgb = Image.fromarray(np.asarray(canvas.buffer_rgba())[..., :3])
    buffer = io.BytesIO()
    rgb.quantize(256, method=Image.Quantize.FASTOCTREE).save(buffer, format="png")
    return buffer.getvalue()


def _png(fig: Figure) -> str:
    return base64.b64encode(png_bytes(fig)).decode("ascii")


def _margins(fig: Figure, rows: int, cols: int, top: float = 0.6, bottom: float = 0.9, left: float = 0.8,
             right: float = 0.2, hgap: float = 0.75, wgap: float = 0.8) -> None:
    """Place a ``rows`` x ``cols`` grid with fixed margins and gaps, in inches.

    tight_layout (and constrained layout) measure every tick label and title by drawing them, a pass
    that cost more than the drawing itself on a year of trends; the report's figures have known
    furniture (a title on top, rotated dates and a one-line legend below), so fixed inches fit them."""
    width, height = fig.get_size_inches()
    axis_h = max((height - top - bottom - (rows - 1) * hgap) / rows, 0.1)
    axis_w = max((width - left - right - (cols - 1) * wgap) / cols, 0.1)
    fig.subplots_adjust(left=left / width, right=1 - right / width, top=1 - top / height, bottom=bottom / height,
                        hspace=hgap / axis_h, wspace=wgap / axis_w)


def _title(ax: Axes, text: str) -> None:
    # A title at a fixed height: left to matplotlib, it measures the axis' tick labels (a draw) to
    # dodge ones that no figure here puts on top.
    ax.set_title(text, fontsize=10, y=1.0, pad=5)


def date_ticks(first: datetime, last: datetime) -> tuple[list[datetime], list[str]]:
    """Month starts between ``first`` and ``last``, every 1, 2, 3 or 6 months as the span needs, labelled
    "Apr" or "Jan 2026" (a year is named at January and at the first tick)."""
    months = (last.year - first.year) * 12 + last.month - first.month
    step = 1 if months <= 4 else 2 if months <= 8 else 3 if months <= 24 else 6
    ticks: list[datetime] = []
    year, month = first.year, first.month
    while (year, month) <= (last.year, last.month):
        when = datetime(year, month, 1, tzinfo=timezone.utc)
        if (month - 1) % step == 0 and first <= when <= last:
            ticks.append(when)
        year, month = (year + 1, 1) if month == 12 else (year, month + 1)
    labels = [t.strftime("%b %Y") if i == 0 or t.month == 1 else t.strftime("%b") for i, t in enumerate(ticks)]
    return ticks, labels


def _date_axis(ax: Axes, labels: bool = True, size: float = 7) -> None:
    # Ticks computed once here from the drawn range: matplotlib's date locator and formatter cost more
    # than the lines themselves on a page of panels, and short horizontal labels need no rotation.
    from matplotlib.dates import date2num, num2date
    low, high = ax.get_xlim()
    ticks, names = date_ticks(num2date(low), num2date(high))
    ax.set_xticks([date2num(t) for t in ticks], names if labels else [])
    ax.tick_params(axis="x", labelsize=size)


def _label(metric: str) -> str:
    m = METRICS[metric]
    better = "higher is better" if m.higher_is_better else "lower is better"
    spec = PT2PT.get(metric)
    measured = f", {spec.benchmark} {spec.size} B" if spec else ""
    return f"{metric} ({m.unit}){measured}; {better}"


def parse_time(text: str) -> datetime:
    """An ISO 8601 time as stored in results and the history (a trailing Z allowed)."""
    when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return when if when.tzinfo else when.replace(tzinfo=timezone.utc)


_time = parse_time


def _day(when: datetime) -> float:
    # Dates go to the axes as matplotlib's day numbers: with datetimes, every plot call runs the unit
    # machinery again, and on axes that share x it re-converts every line already drawn.
    from matplotlib.dates import date2num
    return float(date2num(when))


def _days(texts: Sequence[str]) -> list[float]:
    return [_day(_time(t)) for t in texts]


def gate_limits(verdicts: Sequence[Verdict]) -> dict[SeriesKey, tuple[float, str]]:
    """The limit each series of this run was judged against, and its basis: the history gate's, or the
    baseline's when history was too short (what :func:`trends` draws)."""
    return {v.key: (v.limit, v.basis) for v in verdicts if v.limit is not None and v.basis in ("history", "baseline")}


def bars(results: Sequence[Result], verdicts: Mapping[SeriesKey, Verdict], system: str, partition: str) -> str:
    """Grouped bars, placement x method, for point-to-point latency and bandwidth of one system/partition (seed 000)."""
    return _png(bars_figure(results, verdicts, system, partition))


def bars_figure(results: Sequence[Result], verdicts: Mapping[SeriesKey, Verdict], system: str,
                partition: str) -> Figure:
    """The figure of :func:`bars`, before it becomes a PNG (its legend names only what it shows)."""
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch
    fig = Figure(figsize=(13, 4.6))
    axes = fig.subplots(1, 2)
    _margins(fig, 1, 2, top=0.35, bottom=0.75)
    keys: dict[tuple[str, str, str], SeriesKey] = {}
    ran: set[str] = set()
    for ax, metric in zip(axes, PT2PT):
        values: dict[tuple[str, str], list[float]] = {}
        for r in results:
            key = r.key()
            placement = key.pt2pt_placement()
            if (r.system, r.partition, r.metric) == (system, partition, metric) and r.status in ("pass", "fail") \
                    and placement is not None:
                keys[(placement, r.method, metric)] = key
                values.setdefault((placement, r.method), []).extend(
                    r.samples or ([r.value] if r.value is not None else []))
        placements = [p for p in PLACEMENTS if any(k[0] == p for k in values)]
        methods = [m for m in METHODS if any(k[1] == m for k in values)]
        ran.update(methods)
        width = 0.8 / max(len(methods), 1)
        for j, method in enumerate(methods):
            for i, placement in enumerate(placements):
                samples = values.get((placement, method))
                if not samples:
                    continue
                centre = statistics.median(samples)
                x = i + (j - (len(methods) - 1) / 2) * width
                verdict = verdicts.get(keys[(placement, method, metric)])
                edge = VERDICT_EDGE.get(verdict.verdict) if verdict else None
                ax.bar(x, centre, width * 0.92, color=METHOD_COLOURS[method], edgecolor=edge or "none",
                       linewidth=2.5 if edge else 0, hatch="//" if verdict and verdict.gates else None)
                if len(samples) > 1:
                    ax.plot([x, x], [min(samples), max(samples)], color="black", linewidth=1)
                if verdict and verdict.reference is not None:
                    ax.plot([x - width * 0.45, x + width * 0.45], [verdict.reference] * 2, color="black",
                            linewidth=1.5, linestyle=":")
                ax.annotate(format_value(centre), (x, centre), ha="center", va="bottom", fontsize=7, rotation=90,
                            xytext=(0, 2), textcoords="offset points")
        ax.set_xticks(range(len(placements)), placements)
        ax.set_ylabel(_label(metric), fontsize=8)
        _title(ax, f"{system}/{partition}: {metric}")
        ax.margins(y=0.18)
        if not placements:
            ax.text(0.5, 0.5, "no measured values", ha="center", va="center", transform=ax.transAxes)
    # The legend names what the figure shows: the methods that ran, the marks that were drawn.
    shown = [verdicts.get(k) for k in keys.values()]
    said = {v.verdict for v in shown if v is not None}
    handles: list[Artist] = [Patch(color=METHOD_COLOURS[m], label=m) for m in METHODS if m in ran]
    if any(v is not None and v.reference is not None for v in shown):
        handles.append(Line2D([], [], color="black", linestyle=":", label="reference (history median or baseline)"))
    if said & {"regression", "error"}:
        handles.append(Patch(facecolor="white", edgecolor=VERDICT_EDGE["regression"], hatch="//",
                             label="regression / error"))
    if "improvement" in said:
        handles.append(Patch(facecolor="white", edgecolor=VERDICT_EDGE["improvement"],
                             label="improvement (stale reference)"))
    if "noisy" in said:
        handles.append(Patch(facecolor="white", edgecolor=VERDICT_EDGE["noisy"], label="noisy"))
    fig.legend(handles=handles, loc="lower center", ncol=8, fontsize=8, bbox_to_anchor=(0.5, 0.0))
    return fig


def trends(system: str, partition: str, metric: str, series: Mapping[SeriesKey, Sequence[RunPoint]],
           changes: Mapping[SeriesKey, Sequence[ChangePoint]], baselines: Optional[Baselines],
           current: Mapping[SeriesKey, float], now: Optional[datetime] = None,
           limits: Optional[Mapping[SeriesKey, tuple[float, str]]] = None, window: int = 10) -> str:
    """:func:`trends_figure` as a PNG."""
    return _png(trends_figure(system, partition, metric, series, changes, baselines, current, now, limits, window))


def trends_figure(system: str, partition: str, metric: str, series: Mapping[SeriesKey, Sequence[RunPoint]],
                  changes: Mapping[SeriesKey, Sequence[ChangePoint]], baselines: Optional[Baselines],
                  current: Mapping[SeriesKey, float], now: Optional[datetime] = None,
                  limits: Optional[Mapping[SeriesKey, tuple[float, str]]] = None, window: int = 10) -> Figure:
    """Run medians over time, one panel per placement (or per other series), with change points,
    baseline bands, this run and the limit that judged it.

    ``limits``: per series of this run, the gate's limit and its basis (history or baseline), drawn
    dash-dotted over the ``window`` runs whose median made the history level, up to this run's star.
    """
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D
    limits = limits or {}
    drawn: set[str] = set()       # what the legend must name: methods plotted, marks drawn
    mine = [k for k in [*series, *current] if (k.system, k.partition, k.metric) == (system, partition, metric)]
    order = {p: i for i, p in enumerate(PLACEMENTS)}
    panels = sorted({k.label() for k in mine}, key=lambda p: (order.get(p, len(order)), p))
    by_panel = {(k.label(), k.method): k for k in mine}
    cols = 2 if len(panels) > 1 else 1
    rows = max(1, (len(panels) + 1) // 2)
    fig = Figure(figsize=(13, 3.3 * rows + 0.6))
    _margins(fig, rows, cols, top=0.7, bottom=0.75, hgap=0.7)
    grid = fig.add_gridspec(rows, cols)
    # Only the panels drawn get axes: an empty one costs as much to make as a full one.
    axes = [fig.add_subplot(grid[i // cols, i % cols]) for i in range(max(len(panels), 1))]
    for ax, placement in zip(axes, panels):
        for method in METHODS:
            key = by_panel.get((placement, method))
            if key is None:
                continue
            colour = METHOD_COLOURS[method]
            runs = series.get(key, ())
            if runs:
                ax.plot(_days([r.time for r in runs]), [r.median for r in runs], marker="o", markersize=2.5,
                        linewidth=1, color=colour)
                drawn.add(method)
            ref = baselines.lookup(key) if baselines else None
            if ref is not None and (runs or key in current):     # no band for a method with nothing to judge
                ax.axhspan(min(ref.value, ref.limit()), max(ref.value, ref.limit()), color=colour, alpha=0.10)
                ax.axhline(ref.limit(), color=colour, linewidth=0.8, linestyle="--", alpha=0.7)
                drawn.add("baseline")
            for cp in changes.get(key, ()):
                t = _day(_time(cp.run_after.time))
                ax.axvline(t, color="#d62728" if cp.worse else "#2ca02c", linestyle="--", linewidth=1)
                ax.annotate(f"{cp.change:+.0%} {cp.commits[-7:]}", (t, 1.0), xycoords=("data", "axes fraction"),
                            fontsize=7, rotation=90, va="top", ha="right", color="#333333")
                drawn.add("worse" if cp.worse else "better")
            if key in current:
                when = now or (_time(runs[-1].time) + timedelta(days=7) if runs else datetime.now(timezone.utc))
                ax.plot([_day(when)], [current[key]], marker="*", markersize=11, color=colour,
                        markeredgecolor="black", linestyle="none")
                drawn.update({method, "current"})
                if key in limits:
                    limit, basis = limits[key]
                    start = _time(runs[-window:][0].time) if runs else when - timedelta(days=7)
                    ax.plot([_day(start), _day(when)], [limit, limit], color=colour, linewidth=1.8, linestyle="-.")
                    drawn.add(f"limit {basis}")
        _title(ax, placement)
        ax.set_ylabel(f"{metric} ({METRICS[metric].unit})", fontsize=8)
        _date_axis(ax)
    handles = [Line2D([], [], color=METHOD_COLOURS[m], marker="o", label=m) for m in METHODS if m in drawn]
    marks = [("baseline", Line2D([], [], color="grey", linestyle="--", label="baseline limit (band shaded)")),
             ("limit history", Line2D([], [], color="grey", linestyle="-.", linewidth=1.8,
                                      label="gate limit for this run (history)")),
             ("limit baseline", Line2D([], [], color="grey", linestyle="-.", linewidth=1.8,
                                       label="gate limit for this run (baseline)")),
             ("worse", Line2D([], [], color="#d62728", linestyle="--", label="change point, worse")),
             ("better", Line2D([], [], color="#2ca02c", linestyle="--", label="change point, better")),
             ("current", Line2D([], [], color="grey", marker="*", markersize=10, linestyle="none", label="this run"))]
    handles += [line for name, line in marks if name in drawn]
    fig.suptitle(f"{system}/{partition}: {_label(metric)}", fontsize=11)
    fig.legend(handles=handles, loc="lower center", ncol=8, fontsize=8, bbox_to_anchor=(0.5, 0.0))
    return fig


def quiet_trends(panels: Sequence[tuple[str, Sequence[SeriesKey]]], series: Mapping[SeriesKey, Sequence[RunPoint]],
                 changes: Mapping[SeriesKey, Sequence[ChangePoint]], current: Mapping[SeriesKey, float],
                 now: Optional[datetime] = None) -> str:
    """:func:`quiet_trends_figure` as a PNG."""
    return _png(quiet_trends_figure(panels, series, changes, current, now))


QUIET_SPAN = 0.10      # a quiet row spans its median ±10 %: a 5 % step fills half of it, run-to-run noise little


def quiet_trends_figure(panels: Sequence[tuple[str, Sequence[SeriesKey]]],
                        series: Mapping[SeriesKey, Sequence[RunPoint]],
                        changes: Mapping[SeriesKey, Sequence[ChangePoint]], current: Mapping[SeriesKey, float],
                        now: Optional[datetime] = None) -> Figure:
    """The quiet series as sparklines on one time axis: a row per (title, series), a line per method, each
    point the run median relative to the row's median (the row spans ±:data:`QUIET_SPAN`, clipped beyond),
    older change points as short verticals, this run as a dot. No bands or limits: a series that moved,
    failed or is named by a finding is drawn in full by :func:`trends_figure`.

    One axes for all rows: small multiples cost an axes, its ticks and their labels each, which made the
    page slow; rows of one axes cost a line per method."""
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D
    rows = max(1, len(panels))
    fig = Figure(figsize=(13, 0.34 * rows + 1.3))
    fig.subplots_adjust(left=3.0 / 13, right=1 - 1.1 / 13, top=1 - 0.45 / (0.34 * rows + 1.3),
                        bottom=0.8 / (0.34 * rows + 1.3))
    ax = fig.add_subplot()
    drawn: set[str] = set()
    # A line per method through every row (NaN between rows): four plot calls, however many rows.
    xs: dict[str, list[float]] = {}
    ys: dict[str, list[float]] = {}
    dots: dict[str, tuple[list[float], list[float]]] = {}
    marks: dict[bool, tuple[list[float], list[float], list[float]]] = {True: ([], [], []), False: ([], [], [])}
    scale = 0.42 / QUIET_SPAN
    for row, (title, keys) in enumerate(panels):
        base = rows - 1 - row                                 # the first panel on top
        values = [r.median for k in keys for r in series.get(k, ()) if r.median]
        centre = statistics.median(values) if values else None
        unit = METRICS[keys[0].metric].unit if keys and keys[0].metric in METRICS else ""
        ax.text(-0.01, base, title, transform=ax.get_yaxis_transform(), ha="right", va="center", fontsize=8)
        ax.text(1.01, base, format_value(centre) + f" {unit}" if centre else "no runs",
                transform=ax.get_yaxis_transform(), ha="left", va="center", fontsize=7, color="#555555")
        if not centre:
            continue
        for key in keys:
            runs = series.get(key, ())
            method = key.method if key.method in METHOD_COLOURS else "source"
            if runs:
                xs.setdefault(method, []).extend([*_days([r.time for r in runs]), float("nan")])
                ys.setdefault(method, []).extend(
                    [*(base + scale * max(-QUIET_SPAN, min(QUIET_SPAN, r.median / centre - 1)) for r in runs),
                     float("nan")])
                drawn.add(method)
            for cp in changes.get(key, ()):
                xv, low, high = marks[cp.worse]
                xv.append(_day(_time(cp.run_after.time)))
                low.append(base - 0.45)
                high.append(base + 0.45)
                drawn.add("change")
            if key in current:
                when = now or (_time(runs[-1].time) + timedelta(days=7) if runs else datetime.now(timezone.utc))
                dx, dy = dots.setdefault(method, ([], []))
                dx.append(_day(when))
                dy.append(base + scale * max(-QUIET_SPAN, min(QUIET_SPAN, current[key] / centre - 1)))
                drawn.add("current")
    ax.hlines(range(rows), 0, 1, transform=ax.get_yaxis_transform(), color="#dddddd", linewidth=0.6)
    for worse, (xv, low, high) in marks.items():
        if xv:
            ax.vlines(xv, low, high, color="#d62728" if worse else "#2ca02c", linewidth=0.8, linestyle="--")
    for method in METHODS:
        if method in xs:
            ax.plot(xs[method], ys[method], linewidth=0.8, color=METHOD_COLOURS[method])
        if method in dots:
            ax.plot(*dots[method], marker="o", markersize=3.5, linestyle="none", color=METHOD_COLOURS[method],
                    markeredgecolor="black", markeredgewidth=0.5)
    ax.set_ylim(-0.6, rows - 0.4)
    ax.set_yticks([])
    if xs:
        _date_axis(ax)
    handles = [Line2D([], [], color=METHOD_COLOURS[m], label=m) for m in METHODS if m in drawn]
    if "change" in drawn:
        handles.append(Line2D([], [], color="grey", linestyle="--", linewidth=0.8,
                              label="change point (red worse, green better)"))
    if "current" in drawn:
        handles.append(Line2D([], [], color="grey", marker="o", markersize=4, linestyle="none", label="this run"))
    fig.suptitle(f"Quiet series: run medians relative to each row's median (right), ±{QUIET_SPAN:.0%} per row, "
                 "clipped beyond", fontsize=10)
    fig.legend(handles=handles, loc="lower center", ncol=8, fontsize=8, bbox_to_anchor=(0.5, 0.0))
    return fig


SweepPoints = dict[tuple[str, str], dict[int, list[float]]]     # (placement, method) -> size -> samples
SweepMarks = dict[tuple[str, str], dict[int, str]]             # (placement, method) -> size -> worse|better


def sweep_points(results: Sequence[Result], system: str, partition: str, metric: str,
                 moved: Optional[Mapping[SeriesKey, str]] = None) -> tuple[SweepPoints, SweepMarks]:
    """The samples a sweep figure draws and the sizes it rings (see :func:`sweeps`)."""
    spec = PT2PT.get(metric)
    moved = moved or {}
    # A size sweep (the pt2pt-sweep family: parameter "sweep") draws its own points only; without one the
    # gated sizes of every result are drawn.
    swept = any("sweep" in r.parameters for r in results if (r.system, r.partition, r.metric) == (system, partition,
                                                                                                 metric))
    data: dict[tuple[str, str], dict[int, list[float]]] = {}
    marks: dict[tuple[str, str], dict[int, str]] = {}
    for r in results:
        if (r.system, r.partition, r.metric) == (system, partition, metric) and r.status in ("pass", "fail") \
                and spec and r.benchmark == spec.benchmark and r.size is not None \
                and ("sweep" in r.parameters or not swept):
            values = r.samples or ([r.value] if r.value is not None else [])
            if values:
                data.setdefault((r.placement, r.method), {}).setdefault(r.size, []).extend(values)
                if r.key() in moved:
                    marks.setdefault((r.placement, r.method), {})[r.size] = moved[r.key()]
    return data, marks


def sweep_levels(results: Sequence[Result], system: str, partition: str, metric: str,
                 reference: Mapping[SeriesKey, float]) -> dict[tuple[str, str], dict[int, float]]:
    """(placement, method) -> size -> history level of the swept series of ``results`` that have one."""
    levels: dict[tuple[str, str], dict[int, float]] = {}
    for r in results:
        level = reference.get(r.key())
        if level is not None and (r.system, r.partition, r.metric) == (system, partition, metric) \
                and r.size is not None and "sweep" in r.parameters:
            levels.setdefault((r.placement, r.method), {})[r.size] = level
    return levels


def sweeps(results: Sequence[Result], system: str, partition: str, metric: str,
           moved: Optional[Mapping[SeriesKey, str]] = None,
           reference: Optional[Mapping[SeriesKey, float]] = None) -> Optional[str]:
    """Point-to-point value vs message size per method, one panel per placement; None when there is no sweep.

    ``moved`` (report.sweep_marks.moved) maps a series to "worse" or "better": its size is marked on the
    curve (a red or green ring), so a shifted eager/rendezvous threshold shows where it happened.
    ``reference`` maps a series to its history level (the gate's median of the last accepted runs): drawn
    dashed under this run's curve, so the ring sits where the two curves part."""
    from matplotlib.figure import Figure
    spec = PT2PT.get(metric)
    data, marks = sweep_points(results, system, partition, metric, moved)
    levels = sweep_levels(results, system, partition, metric, reference or {})
    if not spec or not any(len(sizes) > 1 for sizes in data.values()):
        return None
    placements = [p for p in PLACEMENTS if any(k[0] == p and len(sizes) > 1 for k, sizes in data.items())]
    fig = Figure(figsize=(13, 3.6))
    axes = fig.subplots(1, len(placements), squeeze=False).ravel()
    _margins(fig, 1, len(placements), top=0.55, bottom=0.6)
    for ax, placement in zip(axes, placements):
        for method in METHODS:
            sizes = data.get((placement, method))
            if not sizes or len(sizes) < 2:
                continue
            xs = sorted(sizes)
            ax.plot(xs, [statistics.median(sizes[x]) for x in xs], marker=".", color=METHOD_COLOURS[method],
                    label=method)
            history = levels.get((placement, method), {})
            if len(history) > 1:
                hx = sorted(history)
                ax.plot(hx, [history[x] for x in hx], linestyle="--", linewidth=1, color=METHOD_COLOURS[method],
                        alpha=0.6, label=f"{method}, history")
            for size, how in sorted(marks.get((placement, method), {}).items()):
                ax.plot([size], [statistics.median(sizes[size])], marker="o", markersize=9, linestyle="none",
                        markerfacecolor="none", markeredgewidth=1.5,
                        markeredgecolor=VERDICT_EDGE["regression"] if how == "worse" else "#2ca02c")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.axvline(spec.size, color="grey", linestyle=":", linewidth=1)
        _title(ax, placement)
        ax.set_xlabel("message size (B)", fontsize=8)
        ax.set_ylabel(f"{metric} ({METRICS[metric].unit})", fontsize=8)
        ax.legend(fontsize=7)
    ringed = "rings: sizes that moved, red worse, green better" if marks else "no size moved"
    if levels:
        ringed += "; dashed: the history's level"
    fig.suptitle(f"{system}/{partition}: {metric} vs message size (dotted: the gated size; {ringed})", fontsize=11)
    return _png(fig)
