"""The run's summary: one row per series (partition, method, benchmark and parameters, metric).

Results arrive judged (``verdict.band.apply_baselines``); the run's verdict and exit code are
:mod:`mpiregress.verdict.compose`'s; this module only presents them.

A missing baseline is not a pass (nothing was judged), a skipped method that
was explicitly asked for is not a pass (a failed build must never read as one),
and a run where nothing at all was measured is not a pass.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Optional

from mpiregress.model.names import METHODS, METRICS, PLACEMENTS
from mpiregress.model.results import Result

VERDICT_OF_STATUS = {"pass": "pass", "fail": "regression", "error": "error", "skip": "skipped"}


def verdict_of(r: Result) -> str:
    """The run's verdict of a result: its status's, or ``noisy`` (a fail on a node noisier than usual)."""
    return "noisy" if r.conditions.get("verdict") == "noisy" else VERDICT_OF_STATUS[r.status]


def require_methods(results: list[Result], methods: Iterable[str]) -> list[str]:
    """Sentences for each explicitly requested method that produced no measurement at all."""
    problems = []
    for method in methods:
        mine = [r for r in results if r.method == method]
        if not any(r.value is not None for r in mine):
            why = next((r.reason for r in mine if r.reason), "no test case ran")
            problems.append(f"method {method} was asked for but produced no measurement: {why}")
    return problems


def _fmt(value: Optional[float]) -> str:
    if value is None:
        return "-"
    return f"{value:.2f}" if value < 100 else f"{value:.0f}"


def _baseline(r: Result) -> str:
    if r.reference is None:
        return "-"
    metric = METRICS[r.metric]
    sign = ">=" if metric.higher_is_better else "<="
    return f"{_fmt(r.reference)} ({sign} {_fmt(metric.limit(r.reference, r.tolerance))})"


def _order(r: Result) -> tuple:
    # Placements in their natural order (same_numa first), then by number or name.
    params = tuple((name, (0, PLACEMENTS.index(value), "") if name == "placement" and value in PLACEMENTS
                    else (1, value, "") if isinstance(value, int) else (2, 0, str(value)))
                   for name, value in r.parameters.items())
    family = "" if r.key().pt2pt_placement() is not None else r.benchmark
    return (r.system, r.partition, family, params, METHODS.index(r.method) if r.method in METHODS else 99,
            list(METRICS).index(r.metric) if r.metric in METRICS else 99)


def series_label(r: Result) -> str:
    """The series apart from partition, method and metric (see SeriesKey.label)."""
    return r.key().label()


@dataclass
class Row:
    partition: str
    series: str
    method: str
    metric: str
    value: str
    baseline: str
    verdict: str
    reason: str


def skipped(results: list[Result]) -> list[str]:
    """One line per distinct skip reason, naming the checks it covers (skips would drown the table)."""
    groups: dict[str, list[str]] = {}
    for r in sorted(results, key=_order):
        if r.status == "skip":
            groups.setdefault(r.reason, []).append(f"{r.method}/{series_label(r)}/{r.metric}")
    return [f"{reason} ({len(names)} check(s): {', '.join(names)})" for reason, names in groups.items()]


def rows(results: list[Result]) -> list[Row]:
    """Table rows of everything that was not skipped."""
    out = []
    for r in sorted(results, key=_order):
        if r.status == "skip":
            continue
        value = _fmt(r.value)
        if r.value is not None:
            value += f" {r.unit}"
            if len(r.samples) > 1:
                value += f" (median of {len(r.samples)})"
        if r.conditions.get("oversubscribed"):
            value += " (oversubscribed)"
        out.append(Row(f"{r.system}:{r.partition}", series_label(r), r.method, r.metric, value,
                       _baseline(r), verdict_of(r), r.reason))
    return out


HEADERS = ("partition", "series", "method", "metric", "value", "baseline (limit)", "verdict", "reason")


def text_table(results: list[Result], width: int = 70) -> str:
    """A plain-text table for the job log; long reasons are cut to ``width`` characters."""
    table = [HEADERS] + [(r.partition, r.series, r.method, r.metric, r.value, r.baseline, r.verdict,
                          r.reason if len(r.reason) <= width else r.reason[:width - 3] + "...")
                         for r in rows(results)]
    widths = [max(len(str(row[i])) for row in table) for i in range(len(HEADERS))]
    lines = ["  ".join(str(cell).ljust(w) for cell, w in zip(row, widths)).rstrip() for row in table]
    lines.insert(1, "  ".join("-" * w for w in widths))
    lines += [f"skipped: {line}" for line in skipped(results)]
    return "\n".join(lines)


def markdown(results: list[Result], title: str, problems: list[str], notes: Optional[list[str]] = None,
             top: str = "") -> str:
    """The summary as Markdown (for the MR and the artifacts): ``top`` is the verdict's own section
    (report.verdict_text), ``notes`` say how the run was made, then the table of every series."""
    counts: dict[str, int] = {}
    for r in results:
        counts[verdict_of(r)] = counts.get(verdict_of(r), 0) + 1
    lines = [f"# {title}", ""] + ([top.rstrip("\n"), ""] if top else [])
    lines += ["Per series against its baseline: " + (", ".join(f"{n} {v}" for v, n in sorted(counts.items()))
                                                      or "no test case"), ""]
    lines += [f"- {n}" for n in notes or []] + [f"- **{p}**" for p in problems]
    if problems or notes:
        lines.append("")
    lines.append("| " + " | ".join(HEADERS) + " |")
    lines.append("|" + "---|" * len(HEADERS))
    for row in rows(results):
        cells = [row.partition, row.series, row.method, row.metric, row.value, row.baseline,
                 f"**{row.verdict}**" if row.verdict in ("regression", "error") else row.verdict,
                 row.reason.replace("|", "\\|")]
        lines.append("| " + " | ".join(cells) + " |")
    if skipped(results):
        lines += ["", "Skipped:", ""] + [f"- {line}" for line in skipped(results)]
    return "\n".join(lines) + "\n"
