"""Result records: one measured (or failed) series of one check run, in the project's names.

Everything downstream of ReFrame (verdict, history, gate, reports) consumes these
records, never ReFrame's report directly. ``status`` keeps failures as results: a
crashed rank or a refused binary is a record with status ``error`` and a reason,
so a report still shows everything that did run.
"""
from __future__ import annotations

import json
import statistics
from dataclasses import asdict, dataclass, field
from typing import Any, Optional

from mpiregress.model import probe_record
from mpiregress.model.names import METRICS, PT2PT
from mpiregress.model.series import SeriesKey, freeze

STATUSES = ("pass", "fail", "error", "skip")


@dataclass
class Result:
    """One metric of one series measured by one check run (or its k repeats)."""

    system: str
    partition: str
    method: str
    benchmark: str                 # osu_latency, osu_bcast, linktest, fwq, ...
    parameters: dict[str, Any]     # ordered: placement/size, nprocs/nodes/distribution/algorithm/size, ...
    metric: str                    # a key of names.METRICS
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
    conditions: dict[str, Any] = field(default_factory=dict)  # oversubscribed, noise probe, resolved stack, ...

    def key(self) -> SeriesKey:
        return SeriesKey(self.system, self.partition, self.method, self.benchmark, freeze(self.parameters),
                         self.metric)

    @property
    def placement(self) -> str:
        return str(self.parameters.get("placement", ""))

    @property
    def size(self) -> Optional[int]:
        size = self.parameters.get("size")
        return size if isinstance(size, int) else None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# An A/B sample's place in its run, kept in its conditions: which side, pair and position, which build,
# which look of the sequential schedule and its budget, how long its step took and whether it hit its
# limit. With the series these make one measurement.
AB_FIELDS = ("ab_side", "ab_pair", "ab_position", "ab_manifest", "ab_look", "ab_max_pairs", "ab_seconds",
             "ab_timed_out", "ab_step_limit")


def power_conditions(judge: str, detectable: float, scale: str, how: str) -> dict[str, Any]:
    """``conditions["power"]`` of a result a family judged itself (the link matrix, the noise analysis): the fields
    of :class:`mpiregress.verdict.power.Power`, which reads them back; no target, the verdict sets the system's."""
    return {"judge": judge, "detectable": detectable, "scale": scale, "target": None, "how": how}


def pt2pt(system: str, partition: str, method: str, placement: str, metric: str, value: Optional[float],
          status: str = "pass", size: Optional[int] = None, **fields: Any) -> Result:
    """A point-to-point result: benchmark and message size follow from the metric (names.PT2PT)."""

    spec = PT2PT[metric]
    return Result(system=system, partition=partition, method=method, benchmark=spec.benchmark,
                  parameters={"placement": placement, "size": spec.size if size is None else size},
                  metric=metric, unit=fields.pop("unit", METRICS[metric].unit), value=value, status=status,
                  **fields)


def pt2pt_key(system: str, partition: str, method: str, placement: str, metric: str) -> SeriesKey:
    """The series of a point-to-point metric at its own message size."""
    spec = PT2PT[metric]
    return SeriesKey(system, partition, method, spec.benchmark, freeze({"placement": placement, "size": spec.size}),
                     metric)


def _upgrade(item: dict[str, Any]) -> dict[str, Any]:
    """A record written before series had parameters (placement, message_size) in today's shape."""
    if "parameters" in item or "placement" not in item:
        return item
    item = dict(item)
    item["parameters"] = {"placement": item.pop("placement"), "size": item.pop("message_size", None)}
    return item


def dump(results: list[Result]) -> str:
    return json.dumps([r.to_dict() for r in results], indent=2) + "\n"


def from_data(data: Any) -> list[Result]:
    """Result records from parsed JSON (a list of objects); TypeError when it is not that."""
    if not isinstance(data, list):
        raise TypeError(f"expected a list of results, found {type(data).__name__}")
    out = []
    for item in data:
        if not isinstance(item, dict):
            raise TypeError(f"expected a result object, found {type(item).__name__}")
        out.append(Result(**_upgrade(item)))
    return out


def load(text: str) -> list[Result]:
    return from_data(json.loads(text))


def aggregate(results: list[Result]) -> list[Result]:
    """Fold repeated measurements of one series (ReFrame ``--repeat``) into one record.

    The value becomes the median of the samples; any error among the repeats makes
    the record an error, because a crash is not averaged away. Judging against the
    baselines happens afterwards, once, in :mod:`mpiregress.verdict.band`.
    """
    groups: dict[SeriesKey, list[Result]] = {}
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
        merged.value = statistics.median(values) if values else None
        if sum("noise" in r.conditions for r in group) > 1:
            # every repeat probed its nodes: keep the worst of each node
            merged.conditions = {**merged.conditions, "noise": probe_record.merge([r.conditions for r in group])}
        if errors:
            merged.status, merged.reason = "error", f"{len(errors)} of {len(group)} repeats failed: {errors[0].reason}"
        elif values:
            merged.status, merged.reason = "pass", ""
        folded.append(merged)
    return folded
