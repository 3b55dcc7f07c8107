"""Which trend panels the report draws in full and which as small multiples.

A panel is one placement (or other series label) of one system/partition and metric, with a line
per build method. A year of weekly history has some twenty of them, and most are quiet: drawing
each in full (bands, limits, annotated change points, dated axes) made the page slow to build and
long to scroll. A panel is drawn in full when one of its series needs a look this week: it moved
(a regression, an improvement, or a new level among its last runs: ``sweep_marks.moved``), it
failed to run or was noisy, or a cross-method or baseline finding names it. The quiet ones share one
figure of small multiples, which still shows their shape and their older change points.
"""
from __future__ import annotations

from dataclasses import dataclass

from mpiregress.model.names import PLACEMENTS
from mpiregress.model.series import SeriesKey
from mpiregress.report import ReportData, sweep_marks
from mpiregress.verdict.cross_method import Finding

LOOK = ("regression", "improvement", "error", "noisy")    # verdicts that put a series' panel in full


@dataclass(frozen=True, order=True)
class Panel:
    """One panel: the series of a system/partition and metric with the same label, one line per method."""

    system: str
    partition: str
    metric: str
    label: str

    @classmethod
    def of(cls, key: SeriesKey) -> "Panel":
        return cls(key.system, key.partition, key.metric, key.label())

    def title(self) -> str:
        return f"{self.system}/{self.partition} {self.metric} {self.label}"


def _finding_keys(finding: Finding) -> list[SeriesKey]:
    members = getattr(finding, "members", None) or (finding,)      # a GroupedFinding names several partitions
    return [SeriesKey(f.system, f.partition, f.method, f.benchmark, f.parameters, f.metric) for f in members]


def notable(data: ReportData) -> dict[Panel, str]:
    """The panels drawn in full, each with the first reason found (for the page and for tests)."""
    why: dict[Panel, str] = {}
    for key, how in sweep_marks.moved(data.verdicts, data.changes, data.trends).items():
        why.setdefault(Panel.of(key), f"{key.method} moved ({how})")
    for v in data.verdicts:
        if v.verdict in LOOK:
            why.setdefault(Panel.of(v.key), f"{v.key.method}: {v.verdict}")
    for finding in [*data.findings, *data.baseline_findings]:
        for key in _finding_keys(finding):
            why.setdefault(Panel.of(key), f"{key.method}: {finding.kind}")
    return why


def _order(panel: Panel) -> tuple:
    rank = {p: i for i, p in enumerate(PLACEMENTS)}
    return (panel.system, panel.partition, panel.metric, rank.get(panel.label, len(rank)), panel.label)


def split(data: ReportData, keys: list[SeriesKey]) -> tuple[list[Panel], list[Panel]]:
    """The panels of ``keys`` (the series worth a trend), as (drawn in full, quiet), each in report order."""
    panels = {Panel.of(k) for k in keys}
    full = set(notable(data)) & panels
    return sorted(full, key=_order), sorted(panels - full, key=_order)
