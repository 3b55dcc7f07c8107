"""Result records: one measured (or failed) metric of one check, in the project's names.

Everything downstream of ReFrame (summary, history, drift, reports) consumes
these records, never ReFrame's report directly. ``status`` keeps failures as
results: a crashed rank or a refused binary is a record with status ``error``
and a reason, so a report still shows everything that did run.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any, Optional

STATUSES = ("pass", "fail", "error", "skip")


@dataclass
class Result:
    """One metric of one (system, partition, method, placement) check run."""

    system: str
    partition: str
    method: str
    placement: str
    metric: str                    # latency | bandwidth
    benchmark: str                 # osu_latency | osu_bw
    message_size: int
    unit: str
    value: Optional[float]         # None when nothing was measured
    status: str                    # pass | fail (out of band) | error | skip
    reason: str = ""               # why fail/error/skip, one sentence
    reference: Optional[float] = None
    tolerance: Optional[float] = None
    target: str = ""               # archspec target of the build that ran
    node_targets: list[str] = field(default_factory=list)
    nodelist: list[str] = field(default_factory=list)
    binding: str = ""              # the CPU binding obtained, as Slurm reported it
    toolchain: str = ""
    check: str = ""                # ReFrame test name
    jobid: str = ""
    time: str = ""                 # ISO 8601, UTC
    commit: str = ""
    pipeline: str = ""
    samples: list[float] = field(default_factory=list)  # repeated measurements, when a run made several

    def key(self) -> tuple[str, str, str, str, str]:
        return (self.system, self.partition, self.method, self.placement, self.metric)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def dump(results: list[Result]) -> str:
    return json.dumps([r.to_dict() for r in results], indent=2) + "\n"


def from_data(data: Any) -> list[Result]:
    """Result records from parsed JSON (a list of objects); TypeError when it is not that."""
    if not isinstance(data, list):
        raise TypeError(f"expected a list of results, found {type(data).__name__}")
    return [Result(**item) for item in data]


def load(text: str) -> list[Result]:
    return from_data(json.loads(text))


def aggregate(results: list[Result]) -> list[Result]:
    """Fold repeated measurements of one series (ReFrame ``--repeat``) into one record.

    The value becomes the median of the samples and is judged against the
    reference again; any error among the repeats makes the record an error,
    because a crash is not averaged away.
    """
    import statistics

    from .names import METRICS

    groups: dict[tuple, list[Result]] = {}
    for r in results:
        groups.setdefault(r.key(), []).append(r)
    folded = []
    for group in groups.values():
        first = group[0]
        if len(group) == 1:
            if first.value is not None and not first.samples:
                first.samples = [first.value]
            folded.append(first)
            continue
        errors = [r for r in group if r.status == "error"]
        values = [r.value for r in group if r.value is not None]
        merged = Result(**{**first.to_dict(), "samples": values})
        merged.nodelist = sorted({n for r in group for n in r.nodelist})
        merged.jobid = ",".join(r.jobid for r in group if r.jobid)
        if errors:
            merged.status, merged.reason = "error", f"{len(errors)} of {len(group)} repeats failed: {errors[0].reason}"
            merged.value = statistics.median(values) if values else None
        elif values:
            merged.value = statistics.median(values)
            merged.status, merged.reason = "pass", ""
            if merged.reference is not None and merged.tolerance is not None:
                metric = METRICS[merged.metric]
                limit = metric.limit(merged.reference, merged.tolerance)
                if metric.worse(merged.value, limit):
                    merged.status = "fail"
                    merged.reason = f"median {merged.value:g} {merged.unit} is beyond the limit {limit:g} {merged.unit}"
        folded.append(merged)
    return folded
