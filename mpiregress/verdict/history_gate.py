"""The MR gate: k new measurements of a series against its recent accepted history.

The statistic (and why)
-----------------------
A *series* is (system, partition, method, benchmark, parameters, metric). Its history is the
last N accepted runs; each run is summarised by the **median of its samples**, so
one run counts once however many samples it took, and an outlier sample (a
daemon waking up during osu_latency) cannot move it.

* centre ``h`` = median of the last N (10) run medians: the current level;
* run-to-run noise ``s`` = 1.4826 x MAD of the *differences* between consecutive
  run medians / sqrt(2), over a longer window (the last 26 runs, half a year of
  weekly runs). Differences make it blind to level shifts (an accepted toolchain
  change does not inflate the noise), MAD makes it blind to a bad week, and the
  longer window makes the estimate itself steadier: with only 10 runs the MAD is
  so uncertain that the false-alarm rate doubles (benchmarks/gate_detection.py).
  A short history is shrunk toward a prior noise level per metric (2 % latency,
  3 % bandwidth) weighted as 8 differences: s^2 = (m s_mad^2 + 8 prior^2)/(m + 8)
  for m differences, so a new series with five lucky quiet weeks does not get a
  band so tight that the next ordinary week fails it;
* new value ``x`` = median of the k new samples;
* effect ``d`` = (x - h) / h, signed so that positive is *worse* (latency up,
  bandwidth down);
* band ``b`` = max(z x (s/h) x sqrt(1 + pi/(2N)), minimum effect of the metric).
  The sqrt term adds the uncertainty of ``h`` itself (the variance of a median is
  about pi/2 times that of a mean). z = 3.5 is one-sided: only the hurting side can
  fail; it is high because one MR that touches the toolchain gates ~80 series at
  once, and the false alarms of all of them add up. The minimum effect (3 %) keeps a very quiet series from failing on
  differences nobody would act on.

Why run medians and not a rank test on all samples: the k samples of an MR come
from one allocation, so they share that run's node pair and its offset; pooling
them with a Mann-Whitney test treats them as independent and turns a normal
run-to-run wobble into a "significant" difference. The run, not the sample, is
the unit of replication. Why not mean/stdev: OSU noise is heavy-tailed and
one-sided; a single slow run would widen a stdev band for ten weeks.

Verdicts: ``regression`` (d > b), ``improvement`` (d < -b: the good side; the
history or baseline is stale, not a failure), ``noisy`` (too variable to certify:
the band is wider than ``max_band``, or the new samples scatter far more than the
history's runs do; a clear regression still wins), ``error`` (failed check, no or
too few samples, nothing to compare with), ``skip`` (the check was skipped, e.g. a
placement the machine cannot offer), ``pass``. Only ``regression`` and ``error``
gate (exit codes 1 and 2).

Fallback: with fewer than ``min_runs`` accepted runs of the same toolchain, the
verdict uses the baselines file's band (Reference.limit()) and says so.
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

from mpiregress.history.store import History, RunPoint
from mpiregress.model.baselines import Baselines, Reference, for_system
from mpiregress.model.names import METRICS, format_value
from mpiregress.model.results import Result
from mpiregress.model.series import SeriesKey
from mpiregress.verdict import node_noise as nodehistory
from mpiregress.verdict import noise as noise_verdict
from mpiregress.verdict.power import Power, beyond_band

VERDICTS: tuple[str, ...] = ("regression", "error", "noisy", "improvement", "skip", "pass")
GATING: frozenset[str] = frozenset({"regression", "error"})

MAD_TO_SIGMA = 1.4826   # MAD x this = standard deviation, for normal data


@dataclass(frozen=True)
class GateConfig:
    """The gate's knobs, as data (the CLI exposes them)."""

    last_runs: int = 10            # N: how many accepted runs give the current level (median)
    noise_runs: int = 26           # how many accepted runs give the run-to-run noise (MAD of differences)
    # Per metric; efficiency is a ratio near 1 that moves little, a detour (us) moves a lot.
    prior_noise: Mapping[str, float] = field(default_factory=lambda: {
        "latency": 0.02, "bandwidth": 0.03, "efficiency": 0.01, "max_detour": 0.25})
    prior_weight: float = 8.0      # the prior counts as this many run-to-run differences
    min_runs: int = 5              # fewer accepted runs than this: fall back to the baselines file
    min_samples: int = 3           # k: fewer new samples than this is an error, not a verdict
    z: float = 3.5                 # one-sided threshold, in robust standard deviations
    min_effect: Mapping[str, float] = field(default_factory=lambda: {
        "latency": 0.03, "bandwidth": 0.03, "efficiency": 0.02, "max_detour": 0.5})
    max_band: float = 0.25         # a band wider than this cannot certify a pass: "noisy"
    noisy_factor: float = 3.0      # new samples scattering this many times more than history runs: "noisy"
    noisy_floor: float = 0.05      # ... and more than this relative spread at all


@dataclass(frozen=True)
class Verdict:
    """The gate's judgement of one series."""

    key: SeriesKey
    verdict: str
    reason: str
    unit: str = ""
    toolchain: str = ""
    value: Optional[float] = None        # median of the new samples
    samples: int = 0
    reference: Optional[float] = None    # history median, or baseline value
    limit: Optional[float] = None        # worst value that still passes
    band: Optional[float] = None         # relative band used
    effect: Optional[float] = None       # relative change, positive = worse
    basis: str = "none"                  # history | baseline | run (judged by its check) | none
    history_runs: int = 0
    power: Optional[Power] = None        # the smallest change this judgement could have caught (:func:`gate_power`)

    @property
    def gates(self) -> bool:
        return self.verdict in GATING

    def name(self) -> str:
        return self.key.name()


def robust_spread(values: Sequence[float]) -> float:
    """1.4826 x median absolute deviation: a standard deviation that ignores outliers."""
    if len(values) < 2:
        return 0.0
    centre = statistics.median(values)
    return MAD_TO_SIGMA * statistics.median(abs(v - centre) for v in values)


def run_noise(medians: Sequence[float]) -> float:
    """Robust run-to-run standard deviation from consecutive run medians (blind to level shifts)."""
    if len(medians) < 3:
        return robust_spread(medians)
    diffs = [b - a for a, b in zip(medians, medians[1:])]
    return robust_spread(diffs) / math.sqrt(2)


def relative_noise(medians: Sequence[float], metric: str, config: "GateConfig") -> float:
    """Run-to-run noise relative to the level, shrunk toward the metric's prior when history is short."""
    window = list(medians[-config.noise_runs:])
    centre = statistics.median(window[-config.last_runs:])
    measured = run_noise(window) / centre
    m = max(len(window) - 1, 0)
    prior = config.prior_noise[metric]
    return math.sqrt((m * measured ** 2 + config.prior_weight * prior ** 2) / (m + config.prior_weight))


def series_noise(runs: Sequence[RunPoint]) -> Optional[float]:
    """Relative run-to-run noise of a series, or None with fewer than 2 runs."""
    if len(runs) < 2:
        return None
    medians = [r.median for r in runs]
    centre = statistics.median(medians)
    return run_noise(medians) / centre if centre else None


def _worse(metric: str, value: float, reference: float) -> float:
    """Relative change of ``value`` against ``reference``, positive on the hurting side."""
    change = (value - reference) / reference
    return -change if METRICS[metric].higher_is_better else change


def _at(metric: str, reference: float, effect: float) -> float:
    """The value that is ``effect`` worse than ``reference``."""
    return reference * (1 - effect) if METRICS[metric].higher_is_better else reference * (1 + effect)


_fmt = format_value


def judge_values(key: SeriesKey, new: Sequence[float], history: Sequence[Sequence[float]],
                 config: GateConfig = GateConfig(), baseline: Optional[Reference] = None,
                 fallback_note: str = "", unit: str = "", toolchain: str = "") -> Verdict:
    """Judge k ``new`` samples against ``history`` (one sample list per accepted run, oldest first).

    The last ``config.last_runs`` runs give the level, all of ``history`` (pass up to
    ``config.noise_runs``) the noise.

    Pure function on numbers: the benchmarks and tests call it directly; :func:`judge`
    feeds it from results and the history store.
    """
    metric = key.metric
    unit = unit or METRICS[metric].unit
    common: dict[str, Any] = dict(key=key, unit=unit, toolchain=toolchain, samples=len(new), history_runs=len(history))
    if len(new) < config.min_samples:
        reason = f"only {len(new)} new sample(s), at least {config.min_samples} are needed to judge"
        return Verdict(verdict="error", reason=reason, **common)
    x = statistics.median(new)
    new_spread = robust_spread(new) / x if x else 0.0
    runs = [list(r) for r in history if r]
    if len(runs) >= config.min_runs:
        medians = [statistics.median(r) for r in runs]
        recent = medians[-config.last_runs:]
        h = statistics.median(recent)
        noise = relative_noise(medians, metric, config)
        band = max(config.z * noise * math.sqrt(1 + math.pi / (2 * len(recent))), config.min_effect[metric])
        within = statistics.median(robust_spread(r) / statistics.median(r) for r in runs[-config.last_runs:])
        basis, reference = "history", h
        where = f"the median of the last {len(recent)} accepted runs"
        note = ""
    elif baseline is not None:
        band, reference, basis, within = baseline.tolerance, baseline.value, "baseline", 0.0
        where = f"the baselines file (provenance {baseline.provenance!r})"
        why = fallback_note or f"history has {len(runs)} accepted run(s), fewer than {config.min_runs}"
        note = (f"{why}, so judged against the baselines band ({_fmt(baseline.value)} {unit}, "
                f"tolerance {baseline.tolerance:.0%}); ")
    else:
        why = fallback_note or f"history has {len(runs)} accepted run(s), fewer than {config.min_runs}"
        reason = f"{why}, and there is no baseline for this series: too few samples to judge"
        return Verdict(verdict="error", value=x, reason=reason, **common)
    effect = _worse(metric, x, reference)
    limit = _at(metric, reference, band)
    values: dict[str, Any] = dict(value=x, reference=reference, limit=limit, band=band, effect=effect, basis=basis,
                                  power=gate_power(band, new_spread, len(new), basis,
                                                   noise if basis == "history" else None,
                                                   len(recent) if basis == "history" else 0), **common)
    summary = (f"{_fmt(x)} {unit} is {abs(effect):.1%} {'worse' if effect > 0 else 'better'} than "
               f"{_fmt(reference)} {unit}, {where}; band {band:.1%}")
    if basis == "history" and baseline is not None and _worse(metric, x, baseline.value) > baseline.tolerance:
        # History decides, but an accepted change the baselines file never saw deserves a sentence.
        summary += (f"; outside the baselines band (it admits {METRICS[metric].admits()} {_fmt(baseline.limit())} "
                    f"{unit}, provenance "
                    f"{baseline.provenance!r}): the history accepted what the baseline calls a regression")
    best_new = min(_worse(metric, v, reference) for v in new)
    noisy_new = new_spread > max(config.noisy_factor * within, config.noisy_floor)
    if effect > band and (not noisy_new or best_new > band):
        return Verdict(verdict="regression", reason=note + summary, **values)
    if band > config.max_band and basis == "history":
        return Verdict(verdict="noisy", reason=note + f"{summary}: runs of this series vary so much "
                       f"(±{noise:.1%}) that a {band:.0%} band cannot certify a pass", **values)
    if noisy_new:
        return Verdict(verdict="noisy", reason=note + f"{summary}; the {len(new)} new samples scatter by "
                       f"±{new_spread:.1%}, too much to judge", **values)
    if effect < -band:
        return Verdict(verdict="improvement", reason=note + f"{summary}: better than the band, so the "
                       f"{'history' if basis == 'history' else 'baseline'} is stale (not a failure)", **values)
    return Verdict(verdict="pass", reason=note + summary, **values)


def gate_power(band: float, new_spread: float, k: int, basis: str, noise: Optional[float] = None,
               recent: int = 0) -> Power:
    """What a judgement against ``band`` could have caught: the new median's error is this run's own sample
    spread (the variance of a median of ``k`` is about pi/2 / k times the samples'), plus, against history,
    the run-to-run noise of the level and of the run itself (the same sqrt(1 + pi/2N) the band carries)."""
    own = new_spread * math.sqrt(math.pi / (2 * max(k, 1)))
    if basis == "history" and noise is not None:
        spread = math.sqrt(noise ** 2 * (1 + math.pi / (2 * max(recent, 1))) + own ** 2)
        how = f"band {band:.1%}, run-to-run noise {noise:.1%} and this run's {k} samples (±{new_spread:.1%})"
        return beyond_band("history gate", band, spread, how)
    how = (f"the baselines' {band:.0%} tolerance and this run's {k} samples (±{new_spread:.1%}); the run-to-run "
           f"offset is not known without history")
    return beyond_band("history gate", band, own, how)


def new_samples(results: Sequence[Result]) -> dict[SeriesKey, list[Result]]:
    """Results of the current run grouped by series."""
    grouped: dict[SeriesKey, list[Result]] = {}
    for r in results:
        grouped.setdefault(r.key(), []).append(r)
    return grouped


def _samples_of(group: Sequence[Result]) -> list[float]:
    values: list[float] = []
    for r in group:
        if r.status in ("pass", "fail"):
            values.extend(r.samples if r.samples else ([r.value] if r.value is not None else []))
    return [float(v) for v in values]


def judge(results: Sequence[Result], history: Optional[History], baselines: Mapping[str, Optional[Baselines]],
          config: GateConfig = GateConfig(), exclude_run: Optional[str] = None) -> list[Verdict]:
    """A verdict for every series of ``results``, against ``history`` and ``baselines`` (by system)."""
    verdicts = []
    usual: dict[tuple[str, str], dict[str, list[float]]] = {}   # node noise history per partition
    for key, group in sorted(new_samples(results).items()):
        metric = key.metric
        toolchain = group[0].toolchain
        common: dict[str, Any] = dict(key=key, unit=group[0].unit or METRICS[metric].unit, toolchain=toolchain)
        errors = [r for r in group if r.status == "error"]
        if errors:
            reason = f"the check failed: {errors[0].reason or 'no reason given'}"
            verdicts.append(Verdict(verdict="error", reason=reason, **common))
            continue
        toolchains = {r.toolchain for r in group}
        if len(toolchains) > 1:
            verdicts.append(Verdict(verdict="error", reason=f"the results mix toolchains {sorted(toolchains)}",
                                    **common))
            continue
        samples = _samples_of(group)
        judged = [r for r in group if r.status == "fail" and r.conditions.get("judged_by")]
        if judged:
            # Judged within its own run by its check (the link matrix names a bad node or link against
            # the typical pair of the same run): that stands whatever the history says.
            verdicts.append(Verdict(verdict="regression", value=statistics.median(samples) if samples else None,
                                    samples=len(samples), basis="run",
                                    reason=f"{judged[0].reason} ({judged[0].conditions['judged_by']})", **common))
            continue
        if not samples and all(r.status == "skip" for r in group):
            verdicts.append(Verdict(verdict="skip", reason=group[0].reason or "skipped", **common))
            continue
        runs = history.series_runs(key, toolchain=toolchain, last=max(config.last_runs, config.noise_runs),
                                   exclude_run=exclude_run) \
            if history else []
        note = ""
        if history and len(runs) < config.min_runs:
            others = [t for t in history.toolchains(key) if t != toolchain]
            if others:
                note = (f"history of this series is toolchain {others[-1]!r}, the results are {toolchain!r} "
                        f"(not mixed), and has {len(runs)} accepted {toolchain!r} run(s)")
        elif not history:
            note = "no history given"
        baseline = None
        book = baselines.get(key.system)
        if book is not None:
            if book.toolchain == toolchain:
                baseline = book.lookup(key)
            elif note:
                note += f"; the baselines file is toolchain {book.toolchain!r}"
        if baseline is None and len(runs) < config.min_runs and all(r.conditions.get("baseline") == "none"
                                                                   for r in group):
            # Measured on purpose without a baseline (the weekly collective sweep): recorded in the
            # history until it has enough accepted runs to judge, never an error meanwhile.
            verdicts.append(Verdict(verdict="skip", value=statistics.median(samples) if samples else None,
                                    samples=len(samples), history_runs=len(runs),
                                    reason=f"recorded, not judged yet: no baseline and {len(runs)} accepted "
                                           f"run(s) of history, fewer than {config.min_runs}", **common))
            continue
        verdict = judge_values(key, samples, [r.samples for r in runs], config, baseline=baseline,
                               fallback_note=note, unit=common["unit"], toolchain=toolchain)
        verdicts.append(noise_aware(verdict, group, history, usual, exclude_run))
    return verdicts


def noise_aware(verdict: Verdict, group: Sequence[Result], history: Optional[History],
                usual: dict[tuple[str, str], dict[str, list[float]]], exclude_run: Optional[str] = None) -> Verdict:
    """A regression measured on a noisy node becomes ``noisy``: its probe is outside that node's usual band,
    or beyond the system's noise floor, with or without history (noise.verdict.reclassify, the rule the
    baseline band applies too).

    ``noisy`` does not gate: the run's numbers say more about the node than about the
    toolchain. ``usual`` caches each partition's node history.
    """

    if verdict.verdict != "regression":
        return verdict
    probed = nodehistory.probe_entries([r.conditions for r in group])
    if not probed:
        return verdict
    where = (verdict.key.system, verdict.key.partition)
    if where not in usual:
        usual[where] = nodehistory.node_efficiencies(history, *where, exclude_run=exclude_run) if history else {}
    nodes = sorted({n for r in group for n in r.nodelist}) or [str(e["node"]) for e in probed]
    slowdown = METRICS[verdict.key.metric].slowdown(verdict.value, verdict.reference)
    name, reason = noise_verdict.reclassify(verdict.verdict, verdict.reason, nodes, probed, usual[where], slowdown,
                                            floor=noise_verdict.floor_of(verdict.key.system))
    return verdict if name == verdict.verdict else replace(verdict, verdict=name, reason=reason)


def load_baselines(systems: Sequence[str], directory: Path) -> dict[str, Optional[Baselines]]:
    """The baselines file of each system; None where there is none, one sentence where it is malformed."""
    books: dict[str, Optional[Baselines]] = {}
    for system in sorted(set(systems)):
        path = Path(directory) / f"{system}.yaml"
        books[system] = for_system(system, Path(directory)) if path.exists() else None
    return books


def counts(verdicts: Sequence[Verdict]) -> dict[str, int]:
    """How many series got each verdict, in VERDICTS order."""
    return {name: sum(v.verdict == name for v in verdicts) for name in VERDICTS}
