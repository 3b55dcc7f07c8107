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
generous for a cluster's exclusive nodes: 5 %); where both builds have MIN_SAMPLES samples in
this run, their own spread widens it when larger. The threshold is the check's power: "a gap
>= X % would have been flagged" (:func:`agreement`, and every finding says it).

A gap is flagged only on MIN_SAMPLES samples per build or more: one value per build says
nothing of this run's noise (a quiet machine once put 79 % between two builds of one
OpenMPI on one sample each). A gap beyond the threshold on fewer samples is a ``short``
finding: evidence that says what a repeat (``--repeat 3``) would decide, never a flag.

Every method that measured a series is compared, with or without a baseline
(:func:`adopt_unbaselined`): a method with no baseline yet gets how it compares with the others
and a proposed baseline instead of an error that hides it (docs/pipeline.md, "A new build
method").
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Iterable, Mapping, Optional, Sequence

from mpiregress.builds.common import capability_problems, stack_problems
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
# Samples per build a gap needs before it is flagged: fewer say nothing of this run's own noise.
MIN_SAMPLES = 3
# A result with no baseline that cross-method compared instead (apply_baselines left it "error").
NO_BASELINE = "no baseline yet"


@dataclass(frozen=True)
class Finding:
    """A method (or a baseline band) behind the best method of its group."""

    # behind (measured) | short (a gap beyond the threshold on too few samples: evidence) |
    # lenient (baseline band) | strict (baseline nobody meets)
    kind: str
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
    samples: int = 0          # samples of the build with fewer (0: not known, e.g. history medians)

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
        because = f"; the builds' MPI stacks differ: {self.stack}" if self.stack else ""
        because += f"; the builds differ: {self.build}" if self.build else ""
        if self.kind == "behind":
            on = f", {self.samples} samples per build" if self.samples else ""
            return (f"{where}: {self.method} {fv(self.value)} {self.unit} is {self.gap:.0%} behind "
                    f"{self.best_method} {fv(self.best_value)} {self.unit} (noise allows {self.threshold:.0%}{on})"
                    f"{because}")
        if self.kind == "short":
            per = "one sample" if self.samples == 1 else f"{self.samples} samples"
            return (f"{where}: {self.method} {fv(self.value)} {self.unit} is {self.gap:.0%} behind "
                    f"{self.best_method} {fv(self.best_value)} {self.unit} on {per} per build: not judged, "
                    f"{MIN_SAMPLES} per build are needed (mpiregress run --repeat {MIN_SAMPLES}), and with them a "
                    f"gap >= {self.threshold:.0%} is flagged{because}")
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
                                  worst.reference, worst.stack, worst.build, worst.samples,
                                  members=tuple(members)))
    return out


def _thresholds(values: Mapping[GroupKey, Mapping[str, float]],
                samples: Optional[Mapping[GroupKey, Mapping[str, Sequence[float]]]],
                noise: Optional[Mapping[SeriesKey, float]], z: float, min_gap: float
                ) -> tuple[list[float], list[float]]:
    """(thresholds where enough samples judged, thresholds where too few did) of the groups two methods measured."""
    judged: list[float] = []
    short: list[float] = []
    for g, by_method in values.items():
        if len(by_method) < 2:
            continue
        n = _fewest(g, by_method, samples)
        (judged if n >= MIN_SAMPLES else short).append(_threshold(g, tuple(by_method), noise or {}, z, min_gap,
                                                                  samples, n))
    return judged, short


def _range(thresholds: Sequence[float]) -> str:
    low, high = min(thresholds), max(thresholds)
    return f"{low:.0%}" if round(low, 2) == round(high, 2) else f"{low:.0%}-{high:.0%}"


def _not_judged(short: Sequence[float]) -> str:
    return (f"had fewer than {MIN_SAMPLES} samples per build on {len(short)} measurement(s) two or more of them "
            f"made: not judged there (mpiregress run --repeat {MIN_SAMPLES} judges them)")


def agreement(values: Mapping[GroupKey, Mapping[str, float]],
              samples: Optional[Mapping[GroupKey, Mapping[str, Sequence[float]]]] = None,
              noise: Optional[Mapping[SeriesKey, float]] = None, z: float = Z, min_gap: float = MIN_GAP) -> str:
    """What to say when no method is behind: 'agree' only when two or more methods measured the same thing,
    with the check's power (the gap it would have flagged) and what it could not judge for want of samples."""
    methods = sorted({m for by_method in values.values() for m in by_method})
    judged, short = _thresholds(values, samples, noise, z, min_gap)
    if judged or short:
        said = [f"The build methods that ran ({', '.join(methods)})"]
        if judged:
            said.append(f" agree within the noise on the {len(judged)} measurement(s) two or more of them made — "
                        f"a gap >= {_range(judged)} would have been flagged")
        if short:
            said.append(f"{';' if judged else ''} {_not_judged(short)}")
        return "".join(said) + "."
    if len(methods) == 1:
        return f"Only one build method ran ({methods[0]}): there is nothing to compare it with."
    if methods:
        return (f"The build methods that ran ({', '.join(methods)}) never measured the same thing: there is "
                f"nothing to compare.")
    return "No build method measured anything: there is nothing to compare."


def power(values: Mapping[GroupKey, Mapping[str, float]],
          samples: Optional[Mapping[GroupKey, Mapping[str, Sequence[float]]]] = None,
          noise: Optional[Mapping[SeriesKey, float]] = None, z: float = Z, min_gap: float = MIN_GAP) -> str:
    """What the check could have seen, for the verdict ('' when no two methods measured one series):
    "compared easybuild, source, spack on 16 measurement(s) with enough samples: a gap >= 64% would have been
    flagged"."""
    judged, short = _thresholds(values, samples, noise, z, min_gap)
    if not judged and not short:
        return ""
    methods = ", ".join(sorted({m for by_method in values.values() if len(by_method) > 1 for m in by_method}))
    said = f"compared {methods}"
    if judged:
        said += (f" on {len(judged)} measurement(s) with enough samples: a gap >= {_range(judged)} would have "
                 f"been flagged")
    if short:
        said += f"{';' if judged else ''} {_not_judged(short)}"
    return said + "."


def _fewest(group: GroupKey, by_method: Mapping[str, float],
            samples: Optional[Mapping[GroupKey, Mapping[str, Sequence[float]]]]) -> int:
    """Samples of the build with the fewest in ``group`` (MIN_SAMPLES when not known: history medians)."""
    if samples is None or group not in samples:
        return MIN_SAMPLES
    return min(len(samples[group].get(m) or ()) or 1 for m in by_method)


def _shortfall(metric: str, value: float, best: float) -> float:
    """How much worse ``value`` is than ``best``, relative to ``best`` (positive = worse)."""
    if METRICS[metric].higher_is_better:
        return (best - value) / best
    return (value - best) / best


def _best(metric: str, values: Mapping[str, float]) -> tuple[str, float]:
    chooser = max if METRICS[metric].higher_is_better else min
    method = chooser(values, key=values.__getitem__)
    return method, values[method]


def compared(r: Result) -> bool:
    """Whether cross-method compares ``r``: a value judged by its band, or measured with no baseline yet."""
    if r.value is None:
        return False
    return r.status in ("pass", "fail") or (r.status == "error" and r.conditions.get("baseline") == "none")


def method_samples(results: Iterable[Result]) -> dict[GroupKey, dict[str, list[float]]]:
    """Every sample per method, grouped by the series apart from the method (results with no baseline too)."""
    samples: dict[GroupKey, dict[str, list[float]]] = {}
    for r in results:
        if not compared(r) or r.value is None:
            continue
        values = r.samples or [r.value]
        samples.setdefault(r.key().without(), {}).setdefault(r.method, []).extend(float(v) for v in values)
    return samples


def method_values(results: Iterable[Result]) -> dict[GroupKey, dict[str, float]]:
    """Median measured value per method, grouped by the series apart from the method."""
    return {g: {m: statistics.median(v) for m, v in by_method.items()}
            for g, by_method in method_samples(results).items()}


def history_values(last_runs: Mapping[SeriesKey, Sequence[float]]) -> dict[GroupKey, dict[str, float]]:
    """Median per method of each series' latest accepted run (``last_runs``: series -> its samples), grouped
    like :func:`method_values`: the cross-method picture before the change being judged."""
    out: dict[GroupKey, dict[str, float]] = {}
    for key, samples in last_runs.items():
        if samples:
            out.setdefault(key.without(), {})[key.method] = statistics.median(samples)
    return out


def _threshold(group: GroupKey, methods: Sequence[str], noise: Mapping[SeriesKey, float], z: float,
               min_gap: float, samples: Optional[Mapping[GroupKey, Mapping[str, Sequence[float]]]] = None,
               fewest: int = 0) -> float:
    """The smallest gap flagged between ``methods`` on ``group``: the power of the check there.

    The series' noise (history, else the system's run_noise); where every build has MIN_SAMPLES samples
    or more, this run's own spread of a build's median when larger (a loaded run is judged by its load).
    """
    system, partition, benchmark, params, metric = group
    keys = [SeriesKey(system, partition, m, benchmark, params, metric) for m in methods]
    known = [noise[k] for k in keys if noise.get(k) is not None]
    level = max(known) if known else default_noise(system, metric)
    if samples is not None and fewest >= MIN_SAMPLES:
        level = max([level] + [_median_spread(samples.get(group, {}).get(m) or ()) for m in methods])
    return max(z * math.sqrt(2) * level, min_gap)


def _median_spread(values: Sequence[float]) -> float:
    """Relative spread of the median of ``values``: 1.4826 x MAD / median, x 1.25 / sqrt(n) (0: too few)."""
    if len(values) < MIN_SAMPLES:
        return 0.0
    mid = statistics.median(values)
    if mid == 0:
        return 0.0
    mad = statistics.median(abs(v - mid) for v in values)
    return 1.4826 * mad / abs(mid) * 1.25 / math.sqrt(len(values))


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
    whose recorded MPI stack (manifest ``stack``) is not the toolchain's, or whose MPI lacks a feature the
    toolchain asks for (its own ompi_info: "its Open MPI 4.1.4 has no ucx")."""

    out: dict[str, str] = {}
    for m in manifests:
        problems = stack_problems(m.stack, toolchain, complete=m.method in COMPLETE_STACKS)
        problems += capability_problems(m.extra.get("mpi_capabilities") or {}, toolchain)
        if problems:
            out[m.method] = f"{m.method}: {'; '.join(problems)}"
    return out


def _problems(stacks: Mapping[str, str], method: str) -> list[str]:
    said = stacks.get(method, "")
    return [p for p in said.removeprefix(f"{method}: ").split("; ") if p] if said else []


def stack_between(stacks: Mapping[str, str], a: str, b: str) -> str:
    """How the MPI stacks of builds ``a`` and ``b`` really differ: only what one has and the other has not
    ('' when both differ from the toolchain alike: two identical stacks are no difference)."""
    pa, pb = _problems(stacks, a), _problems(stacks, b)
    only_a, only_b = [p for p in pa if p not in pb], [p for p in pb if p not in pa]
    return "; ".join(f"{m}: {'; '.join(ps)}" for m, ps in ((a, only_a), (b, only_b)) if ps)


def check(values: Mapping[GroupKey, Mapping[str, float]], noise: Optional[Mapping[SeriesKey, float]] = None,
          z: float = Z, min_gap: float = MIN_GAP, stacks: Optional[Mapping[str, str]] = None,
          builds: Optional[Mapping[frozenset[str], str]] = None,
          samples: Optional[Mapping[GroupKey, Mapping[str, Sequence[float]]]] = None) -> list[Finding]:
    """Every method behind the best method of its group by more than the noise, worst first.

    ``stacks`` (:func:`stack_differences`) names the stack differences of the two builds compared;
    ``builds`` (``builds.differences.between``) how the two builds differ otherwise (flags, MCA).
    ``samples`` (:func:`method_samples`): a gap on fewer than MIN_SAMPLES samples of either build is a
    ``short`` finding (evidence, not flagged); None: the values are medians of enough samples (history).
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
            pair = {method: by_method[method], best_method: best_value}
            fewest = _fewest(group, pair, samples)
            threshold = _threshold(group, (method, best_method), noise, z, min_gap, samples, fewest)
            if gap > threshold:
                kind = "behind" if fewest >= MIN_SAMPLES else "short"
                findings.append(Finding(kind, system, partition, benchmark, params, metric, method, value,
                                        best_method, best_value, gap, threshold, METRICS[metric].unit,
                                        stack=stack_between(stacks, method, best_method),
                                        build=builds.get(frozenset((method, best_method)), ""),
                                        samples=fewest if samples is not None else 0))
    return sorted(findings, key=lambda f: -f.gap)


def adopt_unbaselined(results: Sequence[Result], noise: Optional[Mapping[SeriesKey, float]] = None,
                      z: float = Z, min_gap: float = MIN_GAP) -> int:
    """Compare every result with no baseline yet with the methods that measured the same series, in place.

    A result the band left "error" for want of a baseline (``conditions["baseline"] == "none"``), whose series
    another method measured and its band judged, becomes ``pass`` with ``conditions["verdict"] == NO_BASELINE``,
    the proposed baseline (its own median) in ``conditions["proposed_baseline"]`` and a reason saying how it
    compares with the others; ``conditions["behind"]`` when it is behind the best beyond the noise on
    MIN_SAMPLES samples per build or more (then it needs a look; on fewer the gap is shown, not judged, as
    :func:`check` does). A series no judged method measured stays an error: nothing holds it against
    anything. How many were adopted.
    """
    samples = method_samples(results)
    values = {g: {m: statistics.median(v) for m, v in by.items()} for g, by in samples.items()}
    banded = {(r.key().without(), r.method) for r in results if r.status in ("pass", "fail") and r.value is not None}
    adopted = 0
    for r in results:
        if not (r.status == "error" and r.conditions.get("baseline") == "none" and r.value is not None):
            continue
        group = r.key().without()
        by_method = values.get(group, {})
        if not any((group, m) in banded for m in by_method if m != r.method):
            continue
        own, unit = by_method[r.method], METRICS[r.metric].unit
        best_method, best_value = _best(r.metric, by_method)
        others = ", ".join(f"{m} {fv(v)} {unit}" for m, v in sorted(by_method.items()) if m != r.method)
        fewest = _fewest(group, by_method, samples)
        compare_with = best_method if best_method != r.method else min(
            (m for m in by_method if m != r.method), key=lambda m: abs(_shortfall(r.metric, by_method[m], own)))
        threshold = _threshold(group, (r.method, compare_with), noise or {}, z, min_gap, samples, fewest)
        gap = _shortfall(r.metric, own, best_value)
        if best_method == r.method:
            ahead = _shortfall(r.metric, by_method[compare_with], own)
            where = f"the best of them ({ahead:.0%} ahead of {compare_with})"
        else:
            where = f"{gap:.0%} behind {best_method}"
        beyond = gap > threshold
        if fewest < MIN_SAMPLES:
            # One value per build says nothing of the run's noise (issue 30): shown, not judged.
            judged = (f"{'beyond' if beyond else 'within'} the noise on {fewest} sample(s) per build: not judged, "
                      f"{MIN_SAMPLES} per build are needed (mpiregress run --repeat {MIN_SAMPLES}), and with them a "
                      f"gap >= {threshold:.0%} is flagged")
        else:
            judged = f"{'beyond' if beyond else 'within'} the noise: a gap >= {threshold:.0%} would be flagged"
        behind = beyond and fewest >= MIN_SAMPLES
        r.status = "pass"
        r.conditions.update({"verdict": NO_BASELINE, "proposed_baseline": own, "behind": behind})
        r.reason = (f"{NO_BASELINE} — here is how it compares with the others: {r.method} {fv(own)} {unit}, "
                    f"{others}: {where}, {judged}; proposed baseline {fv(own)} {unit} "
                    f"(mpiregress baseline propose)")
        adopted += 1
    return adopted


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
