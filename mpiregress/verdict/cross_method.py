"""Cross-method consistency: builds of one toolchain should perform alike.

All four build methods compile the same OSU 7.2 with the same GCC and OpenMPI
(toolchains/), so on the same series apart from the method (system, partition,
benchmark, parameters, metric) their values
should agree within run-to-run noise. A method behind the best method by more than
that noise points at the build or its runtime environment (a different MPI
component, a binding the module sets), whatever a per-method baseline says. This is
how the May 2025 study's worst case shows without any baseline: Iris same-NUMA
bandwidth, EESSI 4926 and source 4911 MB/s vs EasyBuild 17483 MB/s.

Two checks:
* :func:`check`: the measured values of one run, method against best method;
* :func:`baseline_gaps`: the baselines' bands against what the best method achieves:
  a band that admits values far (25 %+) below what another build reaches on the same
  placement cannot catch a regression of that build ("far too lenient", seed 000
  §3.3), and a band that no build meets is stale.

The threshold is ``max(z x sqrt(2) x noise, min_gap)``: the difference of two
values each with relative noise ``noise`` has sqrt(2) times that noise. ``noise``
is the series' run-to-run noise from the history when there is one (gate.series_noise),
else the system's ``run_noise`` (systems/<name>.yaml), else DEFAULT_NOISE (deliberately
generous for a cluster's exclusive nodes: 5 %).
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Iterable, Mapping, Optional, Sequence

from mpiregress.builds.common import stack_problems
from mpiregress.errors import InputError
from mpiregress.model import systems
from mpiregress.model.baselines import Baselines
from mpiregress.model.manifest import Manifest
from mpiregress.model.names import METRICS
from mpiregress.model.names import format_value as fv
from mpiregress.model.results import Result
from mpiregress.model.series import Params, SeriesKey
from mpiregress.model.toolchain import Toolchain

GroupKey = tuple[str, str, str, Params, str]   # SeriesKey.without() : system, partition, benchmark, parameters, metric

DEFAULT_NOISE = 0.05   # relative, any metric
Z = 3.0
MIN_GAP = 0.10   # below this two builds are "the same" whatever the noise says
# A baseline is "far too lenient" when its band admits values this much worse than the best
# build achieves: an ordinary 15 % band on a build 5 % behind the best is not worth a finding.
LENIENT_GAP = 0.25
# Methods whose manifest lists the whole dependency graph: a component missing there is missing.
COMPLETE_STACKS = ("spack", "easybuild")


@dataclass(frozen=True)
class Finding:
    """A method (or a baseline band) behind the best method of its group."""

    kind: str                 # behind (measured) | lenient (baseline band) | strict (baseline nobody meets)
    system: str
    partition: str
    benchmark: str
    parameters: Params
    metric: str
    method: str
    value: float              # the method's value, or the band's limit for baseline findings
    best_method: str
    best_value: float
    gap: float                # relative shortfall vs the best, positive = worse
    threshold: float
    unit: str
    reference: Optional[float] = None
    stack: str = ""           # how the methods' MPI stacks differ ("spack: UCX 1.17.0 without verbs"), if they do
    build: str = ""           # how the two builds differ (builds.differences: flags, MCA parameters), if they do

    @property
    def placement(self) -> str:
        return str(dict(self.parameters).get("placement", ""))

    @property
    def label(self) -> str:
        """The series apart from system, partition, method and metric (see SeriesKey.label)."""
        return SeriesKey(self.system, self.partition, self.method, self.benchmark, self.parameters,
                         self.metric).label()

    def sentence(self, partition: Optional[str] = None) -> str:
        """The finding in one sentence (``partition``: what to call the partition, e.g. 'broadwell, skylake')."""
        where = f"{self.system}/{partition or self.partition} {self.label} {self.metric}"
        if self.kind == "behind":
            because = f"; the builds' MPI stacks differ: {self.stack}" if self.stack else ""
            because += f"; the builds differ: {self.build}" if self.build else ""
            return (f"{where}: {self.method} {fv(self.value)} {self.unit} is {self.gap:.0%} behind "
                    f"{self.best_method} {fv(self.best_value)} {self.unit} (noise allows {self.threshold:.0%})"
                    f"{because}")
        if self.kind == "lenient":
            return (f"{where}: the {self.method} baseline ({fv(self.reference or 0.0)} {self.unit}) admits values "
                    f"{METRICS[self.metric].admits()} "
                    f"{fv(self.value)} {self.unit}, {self.gap:.0%} worse than {self.best_method} achieves "
                    f"({fv(self.best_value)} {self.unit}): too lenient to catch a regression of {self.method}")
        return (f"{where}: the {self.method} baseline band ends at {fv(self.value)} {self.unit} but even the best "
                f"build, {self.best_method}, measures {fv(self.best_value)} {self.unit}: the baseline is stale or "
                f"unrealistic, not every build broken")


@dataclass(frozen=True)
class GroupedFinding(Finding):
    """One fact found on several partitions of a system (Iris broadwell and skylake alike): the same method
    behind the same best method (or the same baseline band) on the same measurement. A :class:`Finding`
    whose ``partition`` names them all ("broadwell, skylake"); its numbers are the worst member's."""

    members: tuple[Finding, ...] = ()

    @property
    def partitions(self) -> tuple[str, ...]:
        return tuple(m.partition for m in self.members)

    def sentence(self, partition: Optional[str] = None) -> str:
        said = Finding.sentence(self, partition)
        if all(_numbers(m) == _numbers(self.members[0]) for m in self.members):
            return said
        each = "; ".join(f"{m.partition}: {_numbers_said(m)}" for m in self.members)
        return f"{said} (the worst partition's figures; {each})"


def _numbers(f: Finding) -> tuple[float, float, float, Optional[float], str]:
    return (round(f.value, 6), round(f.best_value, 6), round(f.gap, 4), f.reference, f.stack)


def _numbers_said(f: Finding) -> str:
    if f.kind == "behind":
        return f"{f.method} {fv(f.value)} vs {f.best_method} {fv(f.best_value)} {f.unit}, {f.gap:.0%}"
    return f"limit {fv(f.value)} vs {f.best_method} {fv(f.best_value)} {f.unit}, {f.gap:.0%}"


def _fact(f: Finding) -> tuple:
    """A finding apart from its partition: what makes copies on several partitions one fact."""
    return (f.kind, f.system, f.benchmark, f.parameters, f.metric, f.method, f.best_method)


def group(findings: Sequence[Finding]) -> list[Finding]:
    """One finding per fact: findings that differ only in their partition become one :class:`GroupedFinding`
    naming the partitions, where the first of them stood (the order is kept, worst first)."""
    by_fact: dict[tuple, list[Finding]] = {}
    for f in findings:
        by_fact.setdefault(_fact(f), []).append(f)
    out: list[Finding] = []
    for members in by_fact.values():      # dicts keep the order of first appearance
        if len(members) == 1:
            out.append(members[0])
            continue
        worst = max(members, key=lambda m: m.gap)
        out.append(GroupedFinding(worst.kind, worst.system, ", ".join(m.partition for m in members),
                                  worst.benchmark, worst.parameters, worst.metric, worst.method, worst.value,
                                  worst.best_method, worst.best_value, worst.gap, worst.threshold, worst.unit,
                                  worst.reference, worst.stack, members=tuple(members)))
    return out


def agreement(values: Mapping[GroupKey, Mapping[str, float]]) -> str:
    """What to say when no method is behind: 'agree' only when two or more methods measured the same thing."""
    methods = sorted({m for by_method in values.values() for m in by_method})
    shared = sum(len(by_method) > 1 for by_method in values.values())
    if shared:
        return (f"The build methods that ran ({', '.join(methods)}) agree within the noise on the {shared} "
                f"measurement(s) two or more of them made.")
    if len(methods) == 1:
        return f"Only one build method ran ({methods[0]}): there is nothing to compare it with."
    if methods:
        return (f"The build methods that ran ({', '.join(methods)}) never measured the same thing: there is "
                f"nothing to compare.")
    return "No build method measured anything: there is nothing to compare."


def _shortfall(metric: str, value: float, best: float) -> float:
    """How much worse ``value`` is than ``best``, relative to ``best`` (positive = worse)."""
    if METRICS[metric].higher_is_better:
        return (best - value) / best
    return (value - best) / best


def _best(metric: str, values: Mapping[str, float]) -> tuple[str, float]:
    chooser = max if METRICS[metric].higher_is_better else min
    method = chooser(values, key=values.__getitem__)
    return method, values[method]


def method_values(results: Iterable[Result]) -> dict[GroupKey, dict[str, float]]:
    """Median measured value per method, grouped by the series apart from the method."""
    samples: dict[GroupKey, dict[str, list[float]]] = {}
    for r in results:
        if r.status not in ("pass", "fail"):
            continue
        values = r.samples or ([r.value] if r.value is not None else [])
        if values:
            group = r.key().without()
            samples.setdefault(group, {}).setdefault(r.method, []).extend(float(v) for v in values)
    return {g: {m: statistics.median(v) for m, v in by_method.items()} for g, by_method in samples.items()}


def history_values(last_runs: Mapping[SeriesKey, Sequence[float]]) -> dict[GroupKey, dict[str, float]]:
    """Median per method of each series' latest accepted run (``last_runs``: series -> its samples), grouped
    like :func:`method_values`: the cross-method picture before the change being judged."""
    out: dict[GroupKey, dict[str, float]] = {}
    for key, samples in last_runs.items():
        if samples:
            out.setdefault(key.without(), {})[key.method] = statistics.median(samples)
    return out


def _threshold(group: GroupKey, methods: Sequence[str], noise: Mapping[SeriesKey, float], z: float,
               min_gap: float) -> float:
    system, partition, benchmark, params, metric = group
    keys = [SeriesKey(system, partition, m, benchmark, params, metric) for m in methods]
    known = [noise[k] for k in keys if noise.get(k) is not None]
    level = max(known) if known else default_noise(system, metric)
    return max(z * math.sqrt(2) * level, min_gap)


def default_noise(system: str, metric: str) -> float:
    """A series' run-to-run noise where no history measured it: the system's ``run_noise``
    (systems/<name>.yaml) if it says, else DEFAULT_NOISE."""
    try:
        said = systems.get(system).run_noise
    except InputError:           # a system without a file (a test's, an old history's): the default
        said = {}
    return said.get(metric, DEFAULT_NOISE)


def stack_differences(manifests: Iterable[Manifest], toolchain: Toolchain) -> dict[str, str]:
    """{method: "spack: UCX 1.17.0 without verbs; PMIx 5.0.3 (toolchain: 4.2.6)"} for each build
    whose recorded MPI stack (manifest ``stack``) is not the toolchain's."""

    out: dict[str, str] = {}
    for m in manifests:
        problems = stack_problems(m.stack, toolchain, complete=m.method in COMPLETE_STACKS)
        if problems:
            out[m.method] = f"{m.method}: {'; '.join(problems)}"
    return out


def check(values: Mapping[GroupKey, Mapping[str, float]], noise: Optional[Mapping[SeriesKey, float]] = None,
          z: float = Z, min_gap: float = MIN_GAP, stacks: Optional[Mapping[str, str]] = None,
          builds: Optional[Mapping[frozenset[str], str]] = None) -> list[Finding]:
    """Every method behind the best method of its group by more than the noise, worst first.

    ``stacks`` (:func:`stack_differences`) names the stack differences of the two builds compared;
    ``builds`` (``builds.differences.between``) how the two builds differ otherwise (flags, MCA).
    """
    noise, stacks, builds = noise or {}, stacks or {}, builds or {}
    findings = []
    for group, by_method in sorted(values.items()):
        if len(by_method) < 2:
            continue
        system, partition, benchmark, params, metric = group
        best_method, best_value = _best(metric, by_method)
        for method, value in sorted(by_method.items()):
            if method == best_method:
                continue
            gap = _shortfall(metric, value, best_value)
            threshold = _threshold(group, (method, best_method), noise, z, min_gap)
            if gap > threshold:
                stack = "; ".join(stacks[m] for m in (method, best_method) if m in stacks)
                findings.append(Finding("behind", system, partition, benchmark, params, metric, method, value,
                                        best_method, best_value, gap, threshold, METRICS[metric].unit, stack=stack,
                                        build=builds.get(frozenset((method, best_method)), "")))
    return sorted(findings, key=lambda f: -f.gap)


def baseline_gaps(baselines: Iterable[Baselines], values: Mapping[GroupKey, Mapping[str, float]],
                  noise: Optional[Mapping[SeriesKey, float]] = None, z: float = Z,
                  min_gap: float = LENIENT_GAP) -> list[Finding]:
    """Baseline bands that admit far worse than the best build achieves, or that no build meets.

    A band whose provenance says it is ``wide_on_purpose`` (the local one-host Slurm's 10x bands)
    is never "lenient": it was made to catch a broken path, not a drift.
    """
    noise = noise or {}
    findings = []
    for book in baselines:
        for key in sorted(book.keys()):
            ref = book.lookup(key)
            assert ref is not None
            group = key.without()
            method, metric = key.method, key.metric
            measured = values.get(group)
            if not measured:
                continue
            best_method, best_value = _best(metric, measured)
            limit = ref.limit()
            gap = _shortfall(metric, limit, best_value)
            threshold = _threshold(group, (method, best_method), noise, z, min_gap)
            wide = bool(book.provenance.get(ref.provenance, {}).get("wide_on_purpose"))
            if gap > threshold and not wide:
                findings.append(Finding("lenient", group[0], group[1], group[2], group[3], metric, method, limit,
                                        best_method, best_value, gap, threshold, ref.unit, reference=ref.value))
            elif all(METRICS[metric].worse(v, limit) for v in measured.values()):
                findings.append(Finding("strict", group[0], group[1], group[2], group[3], metric, method, limit,
                                        best_method, best_value, _shortfall(metric, best_value, limit), threshold,
                                        ref.unit, reference=ref.value))
    return sorted(findings, key=lambda f: (f.kind, -f.gap))
