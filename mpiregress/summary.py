"""The run's verdict: one row per (partition, placement, method, metric), and the exit code.

A missing baseline is not a pass (nothing was judged), a skipped method that
was explicitly asked for is not a pass (a failed build must never read as one),
and a run where nothing at all was measured is not a pass.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Optional

from . import errors
from .baselines import Baselines
from .names import METRICS, METHODS, PLACEMENTS
from .results import Result

VERDICT_OF_STATUS = {"pass": "pass", "fail": "regression", "error": "error", "skip": "skipped"}


def apply_baselines(results: list[Result], refs: Optional[Baselines], allow_missing: bool = False) -> None:
    """Fill in reference and tolerance from the baselines; a measured value with no baseline becomes an error."""
    for r in results:
        ref = refs.lookup(r.partition, r.method, r.placement, r.metric) if refs else None
        if ref is not None:
            r.reference, r.tolerance = ref.value, ref.tolerance
        elif r.status == "pass" and not allow_missing:
            r.status = "error"
            where = refs.path if refs else "baselines"
            r.reason = (f"no baseline for {r.partition}.{r.method}.{r.placement}.{r.metric} in {where}: "
                        "measured but not judged (add one, e.g. with 'mpiregress baseline propose')")


def require_methods(results: list[Result], methods: Iterable[str]) -> list[str]:
    """Sentences for each explicitly requested method that produced no measurement at all."""
    problems = []
    for method in methods:
        mine = [r for r in results if r.method == method]
        if not any(r.value is not None for r in mine):
            why = next((r.reason for r in mine if r.reason), "no test case ran")
            problems.append(f"method {method} was asked for but produced no measurement: {why}")
    return problems


def exit_code(results: list[Result], problems: list[str]) -> int:
    """ERROR beats REGRESSION beats OK; nothing measured at all is SKIPPED (never OK)."""
    if problems or any(r.status == "error" for r in results):
        return errors.ERROR
    if any(r.status == "fail" for r in results):
        return errors.REGRESSION
    if not any(r.status == "pass" for r in results):
        return errors.SKIPPED
    return errors.OK


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
    return (r.system, r.partition, PLACEMENTS.index(r.placement), METHODS.index(r.method), list(METRICS).index(r.metric))


@dataclass
class Row:
    partition: str
    placement: str
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
            groups.setdefault(r.reason, []).append(f"{r.method}/{r.placement}/{r.metric}")
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
        out.append(Row(f"{r.system}:{r.partition}", r.placement, r.method, r.metric, value,
                       _baseline(r), VERDICT_OF_STATUS[r.status], r.reason))
    return out


HEADERS = ("partition", "placement", "method", "metric", "value", "baseline (limit)", "verdict", "reason")


def text_table(results: list[Result], width: int = 70) -> str:
    """A plain-text table for the job log; long reasons are cut to ``width`` characters."""
    table = [HEADERS] + [(r.partition, r.placement, r.method, r.metric, r.value, r.baseline, r.verdict,
                          r.reason if len(r.reason) <= width else r.reason[:width - 3] + "...")
                         for r in rows(results)]
    widths = [max(len(str(row[i])) for row in table) for i in range(len(HEADERS))]
    lines = ["  ".join(str(cell).ljust(w) for cell, w in zip(row, widths)).rstrip() for row in table]
    lines.insert(1, "  ".join("-" * w for w in widths))
    lines += [f"skipped: {line}" for line in skipped(results)]
    return "\n".join(lines)


def markdown(results: list[Result], title: str, problems: list[str]) -> str:
    """The summary as Markdown (for the MR and the artifacts)."""
    counts: dict[str, int] = {}
    for r in results:
        counts[VERDICT_OF_STATUS[r.status]] = counts.get(VERDICT_OF_STATUS[r.status], 0) + 1
    lines = [f"# {title}", "", ", ".join(f"{n} {v}" for v, n in sorted(counts.items())) or "no test case", ""]
    lines += [f"- **{p}**" for p in problems]
    if problems:
        lines.append("")
    lines.append("| " + " | ".join(HEADERS) + " |")
    lines.append("|" + "---|" * len(HEADERS))
    for row in rows(results):
        cells = [row.partition, row.placement, row.method, row.metric, row.value, row.baseline,
                 f"**{row.verdict}**" if row.verdict in ("regression", "error") else row.verdict,
                 row.reason.replace("|", "\\|")]
        lines.append("| " + " | ".join(cells) + " |")
    if skipped(results):
        lines += ["", "Skipped:", ""] + [f"- {line}" for line in skipped(results)]
    return "\n".join(lines) + "\n"
