"""The HTML report: one self-contained file (inline styles, figures as base64 PNG)."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import jinja2
from markupsafe import Markup

from ..gate import format_value
from ..names import METRICS
from . import ReportData, figures
from .template import TEMPLATE, VERDICT_TABLE


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


def render(data: ReportData) -> str:
    """The HTML page for ``data`` as text."""
    env = _environment()
    table = env.from_string(VERDICT_TABLE)
    by_key = {v.key: v for v in data.verdicts}
    bar_figures, sweep_figures, trend_figures = [], [], []
    current = {v.key: v.value for v in data.verdicts if v.value is not None}
    times = sorted(r.time for r in data.results if r.time)
    now = figures.parse_time(times[-1]) if times else None
    for system, partition in data.systems():
        if any((r.system, r.partition) == (system, partition) for r in data.results):
            bar_figures.append(Figure(f"{system}/{partition}", figures.bars(data.results, by_key, system, partition)))
        for metric in METRICS:
            sweep = figures.sweeps(data.results, system, partition, metric)
            if sweep:
                sweep_figures.append(Figure(f"{system}/{partition} {metric}", sweep))
            series = {k: runs for k, runs in data.trends.items() if k[:2] == (system, partition) and k[4] == metric}
            if series:
                mine = {k: v for k, v in current.items() if k[:2] == (system, partition) and k[4] == metric}
                trend_figures.append(Figure(f"{system}/{partition} {metric}", figures.trends(
                    system, partition, metric, series, data.changes, data.baselines.get(system), mine, now=now)))
    changes = sorted((cp for points in data.changes.values() for cp in points),
                     key=lambda c: c.run_after.time, reverse=True)
    sizes = " and ".join(f"{m.message_size} B {m.name}" for m in METRICS.values())
    return env.from_string(TEMPLATE).render(
        data=data, changes=changes, bar_figures=bar_figures, sweep_figures=sweep_figures,
        trend_figures=trend_figures, sizes=sizes,
        verdict_table=lambda verdicts: Markup(table.render(verdicts=verdicts)))


def write(data: ReportData, path: Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render(data))
    return path
