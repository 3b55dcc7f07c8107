"""The HTML report: one self-contained file (inline styles, figures as base64 PNG)."""
from __future__ import annotations

import base64
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import jinja2
from markupsafe import Markup

from mpiregress.families.coll import analysis
from mpiregress.model.names import METRICS, PT2PT, format_value
from mpiregress.model.series import SeriesKey
from mpiregress.report import ReportData, figures, links, sweep_marks, this_week, trend_panels, verdict_text
from mpiregress.report import noise as noise_section
from mpiregress.report.template import TEMPLATE, VERDICT_TABLE
from mpiregress.verdict import changepoint
from mpiregress.verdict import cross_method as consistency


@dataclass(frozen=True)
class Figure:
    title: str
    png: str


def _environment() -> jinja2.Environment:
    # Autoescape: reasons and commit messages are data, never markup.
    env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True,
                             lstrip_blocks=True)
    env.filters["fv"] = format_value
    return env


def _trend_worthy(key: SeriesKey, data: ReportData, system: str, partition: str, metric: str) -> bool:
    """Trends are drawn for the point-to-point series, and for any other series that changed or needs a look:
    a weekly collective sweep has hundreds of series, and a page of flat lines helps no one."""
    if (key.system, key.partition, key.metric) != (system, partition, metric):
        return False
    if key.pt2pt_placement() is not None:
        return True
    return key in data.changes or any(v.key == key and v.verdict != "pass" for v in data.verdicts)


def render(data: ReportData, base: Optional[Path] = None) -> str:
    """The HTML page for ``data`` as text (``base``: the folder it is written to, for relative links)."""
    env = _environment()
    table = env.from_string(VERDICT_TABLE)
    by_key = {v.key: v for v in data.verdicts}
    bar_figures, sweep_figures, trend_figures = [], [], []
    current = {v.key: v.value for v in data.verdicts if v.value is not None}
    limits = figures.gate_limits(data.verdicts)
    times = sorted(r.time for r in data.results if r.time)
    now = figures.parse_time(times[-1]) if times else None
    moved = sweep_marks.moved(data.verdicts, data.changes, data.trends)
    levels = {v.key: v.reference for v in data.verdicts if v.basis == "history" and v.reference is not None}
    worthy = [k for k in data.trends if _trend_worthy(k, data, k.system, k.partition, k.metric)]
    full, quiet = trend_panels.split(data, worthy)
    why = trend_panels.notable(data)
    for system, partition in data.systems():
        # Only where point-to-point ran: a noise- or links-only run would get two empty panels.
        if any((r.system, r.partition) == (system, partition) and r.key().pt2pt_placement() is not None
               for r in data.results):
            bar_figures.append(Figure(f"{system}/{partition}", figures.bars(data.results, by_key, system, partition)))
        for metric in METRICS:
            sweep = figures.sweeps(data.results, system, partition, metric, moved, levels)
            if sweep:
                sweep_figures.append(Figure(f"{system}/{partition} {metric}", sweep))
            # In full: the panels of this system/partition and metric that need a look this week.
            mine = {p for p in full if (p.system, p.partition, p.metric) == (system, partition, metric)}
            series = {k: runs for k, runs in data.trends.items() if trend_panels.Panel.of(k) in mine}
            if series:
                judged = {k: v for k, v in current.items() if trend_panels.Panel.of(k) in mine}
                reasons = "; ".join(f"{p.label}: {why[p]}" for p in sorted(mine, key=full.index))
                trend_figures.append(Figure(f"{system}/{partition} {metric} ({reasons})", figures.trends(
                    system, partition, metric, series, data.changes, data.baselines.get(system), judged, now=now,
                    limits=limits, window=data.config.last_runs)))
    quiet_figure = None
    if quiet:
        keys: dict[trend_panels.Panel, list[SeriesKey]] = {}
        for k in worthy:
            keys.setdefault(trend_panels.Panel.of(k), []).append(k)
        quiet_figure = Figure(f"{len(quiet)} quiet panels", figures.quiet_trends(
            [(f"{p.title()} ({METRICS[p.metric].unit})" if p.metric in METRICS else p.title(), keys[p])
             for p in quiet], data.trends, data.changes, current, now=now))
    changes = sorted((cp for points in data.changes.values() for cp in points),
                     key=lambda c: c.run_after.time, reverse=True)
    sizes = " and ".join(f"{spec.size} B {spec.metric}" for spec in PT2PT.values())
    coll = data.collectives
    coll_figures = [(name, base64.b64encode(png).decode("ascii"))
                    for name, png in (coll.figures if coll else {}).items()]
    oversubscribed = any(r.conditions.get("oversubscribed") for r in data.results if r.benchmark.startswith("osu_"))
    return env.from_string(TEMPLATE).render(
        data=data, pv=data.pipeline_verdict,
        headline=verdict_text.headline(data.pipeline_verdict, ungated=data.ungated),
        power_summary=verdict_text.power_summary(data.pipeline_verdict),
        changes=changes, bar_figures=bar_figures, sweep_figures=sweep_figures,
        trend_figures=trend_figures, quiet_figure=quiet_figure, sizes=sizes, coll=coll, coll_figures=coll_figures,
        this_week=this_week.sentences(data), changepoint_method=changepoint.METHOD,
        noise_section=noise_section.render(data.results, Path(data.results_source or ".").parent),
        coll_note="some runs were oversubscribed (more ranks than cores): correct, not representative"
        if oversubscribed else "", rules_name=analysis.rules_name,
        verdict_table=lambda verdicts: Markup(table.render(verdicts=verdicts)),
        agreement=consistency.agreement(consistency.method_values(data.results),
                                        consistency.method_samples(data.results)),
        cross_power=consistency.power(consistency.method_values(data.results),
                                      consistency.method_samples(data.results)),
        # The link matrix's artifacts sit in the run folder, beside its results.json.
        link_matrix=links.section(Path(data.results_source).parent if data.results_source else None, base))


def write(data: ReportData, path: Path) -> Path:
    """Write the page, and beside it the coll/tuned rules files it offers for deployment."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render(data, path.parent))
    for dist, text in (data.collectives.rules.items() if data.collectives else ()):
        (path.parent / analysis.rules_name(dist)).write_text(text)
    return path
