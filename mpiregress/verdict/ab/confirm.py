"""Confirm before failing, on the schedule (where there is no A): plan, outcome, cost.

The weekly run has no A build to pair with, so it is judged by the history gate,
whose false alarms come mostly from the allocation (a slow node pair, a busy
day). A series the gate calls a regression is therefore measured again, in a
fresh allocation that excludes the first run's nodes (Slurm ``--exclude``), and
only a regression that reproduces there gates. One that does not reproduce is
"transient on node X": the nodes it ran on the first time are named, so the
node/noise/link checks can look at them.

Pure functions: :func:`remeasure_plan` says what to run, :func:`outcome` what the
second verdict means, :func:`cost` what it cost. The runner submits the plan.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping, Optional, Sequence

from mpiregress.model.series import SeriesKey
from mpiregress.verdict.history_gate import Verdict

REPRODUCED = "regression"
TRANSIENT = "transient"


@dataclass(frozen=True)
class RemeasurePlan:
    """What the confirmation allocation runs."""

    series: tuple[SeriesKey, ...]      # the gate's series keys to measure again
    exclude: tuple[str, ...]                 # nodes of the first run: the new allocation avoids them
    samples: int                             # k per series, as the first run took
    first_nodes: Mapping[SeriesKey, tuple[str, ...]]

    def slurm_options(self) -> list[str]:
        """sbatch/salloc options for the fresh allocation."""
        return [f"--exclude={','.join(self.exclude)}"] if self.exclude else []

    @property
    def steps(self) -> int:
        """Benchmark executions the confirmation adds."""
        return len(self.series) * self.samples


def remeasure_plan(verdicts: Sequence[Verdict], first_nodes: Mapping[SeriesKey, Sequence[str]],
                   samples: int, partition_nodes: Optional[Sequence[str]] = None) -> RemeasurePlan:
    """The series the gate called regressions, to be measured again away from their first nodes.

    ``partition_nodes``: when given, nodes are excluded only while enough remain
    for the widest series (2 nodes for cross_node); otherwise the plan keeps the
    nodes and says so through an empty exclude list (a partition of two nodes
    cannot avoid them).
    """
    failing = [v.key for v in verdicts if v.verdict == "regression"]
    nodes: dict[SeriesKey, tuple[str, ...]] = {key: tuple(first_nodes.get(key, ())) for key in failing}
    exclude = sorted({n for ns in nodes.values() for n in ns})
    if partition_nodes is not None:
        needed = max((len(set(ns)) for ns in nodes.values()), default=1)
        if len(set(partition_nodes) - set(exclude)) < needed:
            exclude = []
    return RemeasurePlan(series=tuple(failing), exclude=tuple(exclude), samples=samples, first_nodes=nodes)


@dataclass(frozen=True)
class Confirmation:
    """What the second measurement says about one series."""

    key: SeriesKey
    outcome: str          # regression (reproduced, gates) | transient (does not gate) | error
    sentence: str

    @property
    def gates(self) -> bool:
        return self.outcome in (REPRODUCED, "error")


def outcome(first: Verdict, second: Optional[Verdict], plan: RemeasurePlan) -> Confirmation:
    """Only a reproduced regression gates; one that vanished elsewhere is transient on its first nodes."""
    first_nodes = ", ".join(plan.first_nodes.get(first.key, ())) or "nodes not recorded"
    name = first.name()
    if second is None or second.verdict == "error":
        why = "was not measured again" if second is None else f"could not be measured again ({second.reason})"
        return Confirmation(first.key, "error", f"{name} failed the gate on {first_nodes} and {why}, so it "
                            f"cannot be confirmed")
    moved = "on other nodes" if plan.exclude else "on the same nodes (the partition has no others)"
    if second.verdict == "regression":
        return Confirmation(first.key, REPRODUCED, f"{name} is a regression, reproduced {moved}: "
                            f"{_effect(first)} then {_effect(second)}")
    return Confirmation(first.key, TRANSIENT, f"{name} was transient on {first_nodes}: {_effect(first)} there, "
                        f"{_effect(second)} {moved} ({second.verdict})")


def _effect(v: Verdict) -> str:
    return "?" if v.effect is None else f"{v.effect:+.1%}"


def confirm(first: Sequence[Verdict], second: Iterable[Verdict], plan: RemeasurePlan) -> list[Confirmation]:
    """Outcome of every re-measured series."""
    again = {v.key: v for v in second}
    return [outcome(v, again.get(v.key), plan) for v in first if v.key in plan.series]


@dataclass(frozen=True)
class Cost:
    """What confirmation cost, in benchmark executions and relative to the run it confirms."""

    first_steps: int
    extra_steps: int
    allocations: int

    @property
    def relative(self) -> float:
        return self.extra_steps / self.first_steps if self.first_steps else 0.0

    def sentence(self) -> str:
        if not self.extra_steps:
            return "no series needed confirming: no extra cluster time"
        return (f"confirming took {self.extra_steps} more benchmark executions in {self.allocations} more "
                f"allocation(s), {self.relative:.1%} on top of the run's {self.first_steps}")


def cost(plan: RemeasurePlan, series_in_run: int, samples: int) -> Cost:
    """Extra steps of the confirmation against the scheduled run's own."""
    return Cost(first_steps=series_in_run * samples, extra_steps=plan.steps, allocations=1 if plan.series else 0)
