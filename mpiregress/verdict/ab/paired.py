"""The paired A/B verdict of a toolchain MR: effect, interval and a family-wise decision.

Input: result records of one A/B allocation (see :mod:`.plan`), each tagged with
``ab_side`` (A = target branch's build, B = the MR's build) and ``ab_pair``; in a
sequential run also ``ab_look`` (the look the pair was measured for) and
``ab_max_pairs`` (the run's budget), see :mod:`.sequential`.

The effect (and why log-ratios of pairs)
----------------------------------------
For pair ``j`` of a series, ``d_j = log(B_j / A_j)`` (``log(A_j / B_j)`` for a
higher-is-better metric), so ``d > 0`` is always the hurting side. A and B of one
pair ran minutes apart on the same nodes with the same binding, so the
allocation's effect (node pair, the day's load; 1.5-3.5 % between runs, larger
than the 5 % steps that matter once history is compared twice) is common to both
and cancels in ``d``; what is left is the within-run jitter of two executions.
Logs make the effect symmetric (a 5 % slowdown and its undoing cancel) and
comparable across series of different units.

The estimate is the Hodges-Lehmann estimate: the median of the Walsh averages
``(d_i + d_j)/2, i <= j``. It is the centre of symmetry of the ``d`` (which a pair
difference has whenever A and B are exchangeable), it is as efficient as the mean
on normal jitter (95 %) and far better on OSU's heavy-tailed one-sided jitter,
and one crazy pair moves it by at most one Walsh rank (four pairs 2.4-5.6x worse and
one where B won: the estimate stays at ~3x, among the four).

The effect reported is on the ratio's scale: ``exp(HL) - 1`` of the hurting-side
log-ratio, i.e. B/A - 1 for latency and A/B - 1 for bandwidth (how much longer B needs
per byte), and the interval's ends are mapped the same way. Both stay above -100 %
whatever the data, as a ratio must.

The interval, and why not a per-series test
-------------------------------------------
An MR of the full matrix judges ~80 series at once, so the family-wise error of
1 % leaves each series about 1 % / 80 = 1.25e-4 (Holm's first step). The budget
is k = 5..6 pairs per series (cluster time at most twice one ordinary
measurement of k = 5 samples). No per-series procedure can reach 1.25e-4 with
so few pairs:

* the exact Wilcoxon signed-rank test's smallest one-sided p-value is 2^-k
  (1/32 for k = 5; 13 pairs are needed before 2^-k < 1.25e-4), and its
  confidence interval for the HL estimate at 99.99 % does not exist below that;
  at k = 5 the widest interval it offers, [min d, max d], covers only 93.75 %;
* a per-series bootstrap of 5 values underestimates the spread (by (k-1)/k in
  variance) and has at most C(9,5) = 126 distinct resamples: its 1.25e-4 tail
  is not defined;
* a max-statistic permutation test, flipping A/B of whole pairs jointly across
  the series (valid under any dependence between series), has 2^k sign
  patterns: its smallest p-value is 1/32 at k = 5, so 7 pairs are needed for a
  1 % family at all.

What the MR does have is many series measured the same way in the same
allocation. The pair jitter of series in one **noise class** (same benchmark and
metric, intra- or inter-node) has one distribution whatever B's shift is, so the
*residuals* ``d_j - HL`` of all series of the class (scaled by sqrt(k/(k-1)) for
the fitted centre) give that distribution with tens of degrees of freedom. The
null distribution of HL for a series with k pairs is then drawn by Monte Carlo:
k distinct residuals drawn from the pool (without replacement: one extreme
residual drawn twice would break a 5-pair HL far more often than the jitter
really does) with random signs (pair differences are
symmetric under "B is A"), 50 000 draws, seeded so a verdict never changes on a
rerun. From it:

* p-value (hurting side) = P*(HL* >= HL observed); the improvement side mirrors it;
* interval = [HL - q(1-g/2), HL - q(g/2)] with q the quantiles of HL* (a pivot
  bootstrap that uses the class's jitter instead of five values), shown at 95 %.

A series whose own residuals scatter more than k residuals of its class do in
99.9 % of the Monte Carlo draws is not covered by the pooled jitter: it is
``inconclusive`` (noisy) unless every one of its pairs is worse than the minimum
effect. A class in which some series finds fewer than ``min_pool`` residuals of
other series borrows the whole metric's residuals, widened to the class's own spread if that
is larger (never narrower). Every pool is then widened to the upper 90 % bound of its
own scale (:func:`scale_margin`): a pool of two series' residuals is a poor estimate of
the jitter, and treating it as exact gave 3 false alarms in 20 unchanged local MRs.

A series that still finds fewer than ``min_pool`` residuals of other series (one series
per metric: an MR of a few series, the local A/A benchmark) is judged no bolder than its
own pairs allow: each look's p is the larger of the pooled one and the exact Wilcoxon
signed-rank test of its own pairs (:func:`signed_rank_p`, never below 2^-k). Its own
residuals say nothing of the jitter's tail: on 32 real A/A MRs beside other jobs two such
series (bandwidth, 4 pairs, B slower in each) were called at p 5e-05 from their own four
residuals, where four signs can say 1/16. So such an MR needs 7-12 pairs before it can fail
(one series: 7 in a fixed run, 10 over the looks 4, 6 ... 12; two: 8 and 12), and its power
says so (infinite below that: "could have seen no effect here", so the run takes more pairs).

The decision (Holm, and why not max-statistic)
----------------------------------------------
Holm's step-down over the hurting-side p-values of all paired series of the MR,
at family-wise alpha = 1 %. Holm holds the family-wise error under any
dependence between series (they share the allocation, so they are dependent),
is uniformly better than Bonferroni, and needs nothing the max-statistic
permutation needs (2^k >= 100 joint sign patterns, i.e. 7+ pairs). A series is a
**regression** when Holm rejects "B is no worse than A" AND the estimate is worse
than the metric's minimum effect (3 %): the test controls false alarms on
unchanged builds, the minimum effect keeps a real but irrelevant 1 % change from
failing an MR. (Requiring the interval's lower bound, rather than the estimate,
to exceed 3 % would need ~25 pairs for a 5 % step; benchmarks/gate_detection.py
prints that variant too.) **improvement**: the mirror, not gating. A series whose
estimate is beyond the minimum effect but not significant is **inconclusive**.

Sequential looks: an inconclusive series beyond the minimum effect gets more pairs
(:mod:`.sequential`, run by ``mpiregress run --ab-against``). Its p-value is then the
*sequential* one over its looks (each look's HL of the first n_j pairs against its own
null, alpha spent over the looks by a Lan-DeMets spending function), and Holm runs over
those, so the family-wise error holds over series and looks. A series still inconclusive
at the budget says so, with its effect, interval, pairs and looks.

Verdicts: ``pass``, ``regression``, ``improvement``, ``inconclusive``, ``error``;
series with no A (a new method or target) are judged by the history gate
(:func:`mpiregress.verdict.history_gate.judge_values`) and say so; their verdict keeps the gate's
name. Only ``regression`` (exit 1) and ``error`` (exit 2) gate.
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field, replace
from typing import Any, Iterable, Mapping, Optional, Sequence

import numpy as np

from mpiregress.errors import InputError
from mpiregress.model.baselines import Reference
from mpiregress.model.names import METRICS, PT2PT
from mpiregress.model.series import SeriesKey, freeze
from mpiregress.verdict.ab import sequential
from mpiregress.verdict.history_gate import GateConfig, Verdict, judge_values
from mpiregress.verdict.power import Power, Target, target_for

PAIRED_VERDICTS: tuple[str, ...] = ("regression", "error", "inconclusive", "improvement", "pass")
GATING: frozenset[str] = frozenset({"regression", "error"})

SeriesId = SeriesKey
MIN_SCALE = 1e-4   # log-ratio jitter scale below which pairs count as equal (0.01 %, below any OSU resolution)


@dataclass(frozen=True)
class PairedConfig:
    """The paired decision's knobs, as data."""

    alpha: float = 0.01                   # family-wise error over all series of the MR
    min_effect: Mapping[str, float] = field(default_factory=lambda: {"latency": 0.03, "bandwidth": 0.03})
    min_pairs: int = 4                    # fewer complete pairs than this: error, not a verdict
    draws: int = 50_000                   # Monte Carlo draws of the null HL per (class, k): p down to 2e-5
    seed: int = 13                        # fixed: the same data always gets the same verdict
    interval: float = 0.95                # level of the interval shown
    noisy_quantile: float = 0.999         # own residual spread beyond this quantile of the class's: too noisy
    min_pool: int = 12                    # fewer residuals of other series in a class: borrow the metric's pool
    # The sequential design (:mod:`.sequential`): alpha spent over the looks by alpha * t**rho.
    spending: str = "power"
    rho: float = 0.25
    draws_later: int = 200_000            # later looks' boundaries sit near z 4.2 at an 80-series Holm level
    # The effect every series must be able to show (``power.paired_ab`` of the system file; None: none declared).
    # A series whose power is short of it gets more pairs while the budget allows (:meth:`PairedVerdict.wants_more`).
    target: Optional[Target] = None


@dataclass
class SeriesPairs:
    """The complete pairs of one series, and what was dropped."""

    key: SeriesId
    metric: str
    unit: str
    a: list[float] = field(default_factory=list)
    b: list[float] = field(default_factory=list)
    pairs: list[int] = field(default_factory=list)
    nodes: list[list[str]] = field(default_factory=list)       # per kept pair (A and B ran on the same)
    dropped: dict[int, str] = field(default_factory=dict)      # pair -> why
    b_only: list[float] = field(default_factory=list)          # B samples when there is no A at all
    b_only_nodes: list[list[str]] = field(default_factory=list)
    target: str = ""
    looks: list[int] = field(default_factory=list)             # per kept pair: the look it was measured for
    max_pairs: int = 0                                         # the run's budget (0: fixed, what was measured)
    # Pairs whose B step hit its time limit where A's finished: (pair, B's limit s, A's time s, nodes).
    b_timed_out: list[tuple[int, float, float, list[str]]] = field(default_factory=list)

    def look_sizes(self) -> list[int]:
        """Complete pairs at each look that added some (pairs of look <= j), in look order."""
        return sorted({sum(1 for x in self.looks if x <= look) for look in set(self.looks)})

    def log_ratios(self) -> np.ndarray:
        """Hurting-side log-ratios, one per kept pair: > 0 means B is worse."""
        ratio = np.log(np.asarray(self.b) / np.asarray(self.a))
        return -ratio if METRICS[self.metric].higher_is_better else ratio

    def noise_class(self) -> tuple[str, str]:
        """(metric, intra-node | inter-node): series whose pairs share a jitter distribution."""
        multi = any(len(set(n)) > 1 for n in self.nodes)
        return (self.metric, "inter-node" if multi else "intra-node")


@dataclass(frozen=True)
class PairedVerdict:
    """The verdict on one series of an A/B run (or its history fallback)."""

    key: SeriesId
    verdict: str
    reason: str
    basis: str = "paired"                 # paired | history | baseline | none
    metric: str = ""
    unit: str = ""
    effect: Optional[float] = None        # hurting-side ratio - 1 (B/A - 1 latency, A/B - 1 bandwidth): > -100 %
    low: Optional[float] = None           # interval of the effect, on the same ratio scale
    high: Optional[float] = None
    p_value: Optional[float] = None       # hurting side, sequential (over the looks), before Holm
    p_adjusted: Optional[float] = None    # Holm-adjusted
    pairs: int = 0
    looks: int = 0                        # looks at the series (1: the fixed run; more: extra rounds of pairs)
    max_pairs: int = 0                    # the budget of pairs the run allowed the series
    dropped: int = 0
    a_value: Optional[float] = None       # median of A
    b_value: Optional[float] = None       # median of B
    nodes: tuple[str, ...] = ()
    gate: Optional[Verdict] = None        # the history gate's verdict when there was no A
    power: Optional[Power] = None         # the smallest effect these pairs could have shown (:func:`power_of`)
    timed_out: int = 0                    # pairs whose B step hit its time limit where A's finished

    @property
    def gates(self) -> bool:
        return self.verdict in GATING

    @property
    def b_over_a(self) -> Optional[float]:
        """The estimated ratio B/A itself (both metrics), from the effect: 0.5 = B half of A."""
        if self.effect is None or self.basis != "paired" or self.metric not in METRICS:
            return None
        hurting = 1 + self.effect
        return 1 / hurting if METRICS[self.metric].higher_is_better else hurting

    def wants_more(self, config: "PairedConfig") -> bool:
        """More pairs would help and the budget allows them: inconclusive with its estimate beyond the minimum
        effect, or not a regression while its power is short of the target (a pass that could not have seen it)."""
        if self.basis != "paired" or self.pairs + self.dropped >= self.max_pairs:
            return False
        if self.verdict == "inconclusive" and self.effect is not None \
                and self.effect > config.min_effect.get(self.metric, 0.03):
            return True
        # An improvement is not re-measured: B clearly differs from A on the good side.
        return self.verdict in ("pass", "inconclusive") and self.power is not None and self.power.short

    def name(self) -> str:
        return series_name(self.key)


def series_key(record: Mapping[str, Any]) -> SeriesKey:
    """The series of a record (the open series model); a point-to-point record without ``parameters``
    gets the seed study's (placement, size)."""
    if "parameters" in record:
        params = freeze(dict(record["parameters"]))
        benchmark = record["benchmark"]
    else:
        spec = PT2PT[record["metric"]]
        params = freeze({"placement": record["placement"], "size": record.get("message_size") or spec.size})
        benchmark = record.get("benchmark") or spec.benchmark
    return SeriesKey(record["system"], record["partition"], record["method"], benchmark, params, record["metric"])


def series_name(key: SeriesKey) -> str:
    """How a series is named in sentences: ``system/partition method label metric``."""
    return key.name()


def _value(record: Mapping[str, Any]) -> Optional[float]:
    samples = record.get("samples") or []
    if samples:
        return float(statistics.median(samples))
    value = record.get("value")
    return None if value is None else float(value)


def collect(records: Iterable[Mapping[str, Any]]) -> dict[SeriesId, SeriesPairs]:
    """Group A/B records into complete pairs per series; crashed pairs are dropped and counted.

    Raises InputError (exit 2) for A and B of one series built for different
    targets, or the two sides of one pair run on different nodes: their ratio
    would not measure the MR's change.
    """
    by_series: dict[SeriesId, dict[str, dict[int, Mapping[str, Any]]]] = {}
    unpaired: dict[SeriesId, list[Mapping[str, Any]]] = {}
    for record in records:
        key = series_key(record)
        side = record.get("ab_side")
        if side is None:
            unpaired.setdefault(key, []).append(record)
            continue
        if side not in ("A", "B"):
            raise InputError(f"result of {series_name(key)} has ab_side {side!r}, expected 'A' or 'B'")
        pair = int(record["ab_pair"])
        slot = by_series.setdefault(key, {"A": {}, "B": {}})[side]
        if pair in slot:
            raise InputError(f"{series_name(key)} has two {side} results for pair {pair}")
        slot[pair] = record
    out: dict[SeriesId, SeriesPairs] = {}
    for key, sides in sorted(by_series.items()):
        metric = key.metric
        if metric not in METRICS:
            raise InputError(f"{series_name(key)} has metric {metric!r}, which is not one of {sorted(METRICS)}")
        any_record = next(iter({**sides["A"], **sides["B"]}.values()))
        found = SeriesPairs(key=key, metric=metric, unit=any_record.get("unit") or METRICS[metric].unit)
        targets = {side: {r.get("target", "") for r in sides[side].values()} for side in ("A", "B")}
        if sides["A"] and targets["A"] != targets["B"] and sides["B"]:
            raise InputError(f"A and B of {series_name(key)} were built for different targets "
                             f"(A {', '.join(sorted(targets['A']))}, B {', '.join(sorted(targets['B']))})")
        found.target = next(iter(targets["B"] or targets["A"]), "")
        if not sides["A"]:
            for pair in sorted(sides["B"]):
                record = sides["B"][pair]
                if record.get("status") in ("pass", "fail") and _value(record) is not None:
                    found.b_only.append(_value(record))  # type: ignore[arg-type]
                    found.b_only_nodes.append(list(record.get("nodelist") or []))
            out[key] = found
            continue
        for pair in sorted(set(sides["A"]) | set(sides["B"])):
            a, b = sides["A"].get(pair), sides["B"].get(pair)
            why = _broken(a, b)
            if why:
                found.dropped[pair] = why
                slow = _b_timed_out(a, b)
                if slow is not None:
                    found.b_timed_out.append((pair, *slow))
                continue
            assert a is not None and b is not None
            nodes_a, nodes_b = list(a.get("nodelist") or []), list(b.get("nodelist") or [])
            if sorted(nodes_a) != sorted(nodes_b):
                raise InputError(f"A and B of {series_name(key)} pair {pair} ran on different nodes "
                                 f"({','.join(nodes_a) or '?'} vs {','.join(nodes_b) or '?'}), so their ratio "
                                 f"is not the MR's change")
            found.a.append(_value(a))  # type: ignore[arg-type]
            found.b.append(_value(b))  # type: ignore[arg-type]
            found.pairs.append(pair)
            found.nodes.append(nodes_a)
            found.looks.append(_look(a, b))
        budgets = {int(r["ab_max_pairs"]) for side in sides.values() for r in side.values() if r.get("ab_max_pairs")}
        attempted = len(set(sides["A"]) | set(sides["B"]))
        found.max_pairs = max(budgets | {attempted})
        out[key] = found
    for key in unpaired:
        if key not in out:
            raise InputError(f"results of {series_name(key)} carry no A/B side (ab_side), so they are not "
                             f"from an A/B run")
    return out


def _look(a: Mapping[str, Any], b: Mapping[str, Any]) -> int:
    """The look a pair was measured for (``ab_look``; records of a fixed run have none: look 1)."""
    looks = {int(r.get("ab_look") or 1) for r in (a, b)}
    if len(looks) > 1:
        raise InputError(f"pair {a.get('ab_pair')} of {series_name(series_key(a))} has A and B in different looks "
                         f"({sorted(looks)})")
    return looks.pop()


def _b_timed_out(a: Optional[Mapping[str, Any]], b: Optional[Mapping[str, Any]]
                 ) -> Optional[tuple[float, float, list[str]]]:
    """(B's limit, A's time, nodes) when B's step hit its time limit while A's finished on the same nodes."""
    if a is None or b is None or not b.get("ab_timed_out") or a.get("status") not in ("pass", "fail"):
        return None
    limit, took = b.get("ab_step_limit"), a.get("ab_seconds")
    nodes_a, nodes_b = list(a.get("nodelist") or []), list(b.get("nodelist") or [])
    if not limit or not took or float(took) <= 0 or (nodes_a and nodes_b and sorted(nodes_a) != sorted(nodes_b)):
        return None
    return float(limit), float(took), nodes_a


def _broken(a: Optional[Mapping[str, Any]], b: Optional[Mapping[str, Any]]) -> str:
    """Why a pair cannot be used (one sentence), or '' when both sides measured."""
    for side, record in (("A", a), ("B", b)):
        if record is None:
            return f"no {side} result"
        if record.get("status") not in ("pass", "fail"):
            return f"{side} {record.get('status', 'error')}: {record.get('reason') or 'no reason given'}"
        value = _value(record)
        if value is None or not value > 0 or not math.isfinite(value):
            return f"{side} measured no usable value ({value})"
    return ""


def hodges_lehmann(d: Sequence[float] | np.ndarray) -> float:
    """Median of the Walsh averages (d_i + d_j)/2, i <= j."""
    x = np.asarray(d, dtype=float)
    i, j = np.triu_indices(len(x))
    return float(np.median((x[i] + x[j]) / 2))


def _row_median(x: np.ndarray) -> np.ndarray:
    """Median of each row (a full sort is faster than np.median's partition on short rows)."""
    ordered = np.sort(x, axis=1)
    n = x.shape[1]
    return (ordered[:, (n - 1) // 2] + ordered[:, n // 2]) / 2


def _hl_rows(x: np.ndarray) -> np.ndarray:
    i, j = np.triu_indices(x.shape[1])
    return _row_median((x[:, i] + x[:, j]) / 2)


def residuals(d: np.ndarray) -> np.ndarray:
    """Jitter left after the series' own centre, scaled for the one fitted degree of freedom."""
    n = len(d)
    return (d - hodges_lehmann(d)) * math.sqrt(n / (n - 1))


def robust_scale(values: np.ndarray) -> float:
    return float(1.4826 * np.median(np.abs(values - np.median(values)))) if len(values) else 0.0


def _distinct_indices(rng: np.random.Generator, population: int, k: int, draws: int) -> np.ndarray:
    """``draws`` rows of ``k`` distinct indices into a population (sampling without replacement).

    Distinct, because each residual is one observed pair: drawing a single extreme
    residual twice would give it a weight of (1/N)^2 that the jitter's true tail does
    not have, and two equal outliers are enough to move an HL estimate of 5 pairs.
    """
    k = min(k, population)
    if k * k > population:
        # Redrawing rows with a repeat would almost never end (11 of 16: one row in 400 is distinct):
        # the first k of a random permutation instead.
        return np.argsort(rng.random((draws, population)), axis=1)[:, :k]
    rows = rng.integers(0, population, size=(draws, k))
    while True:
        ordered = np.sort(rows, axis=1)
        clash = np.any(ordered[:, 1:] == ordered[:, :-1], axis=1) if k > 1 else np.zeros(draws, bool)
        if not clash.any():
            return rows
        rows[clash] = rng.integers(0, population, size=(int(clash.sum()), k))


@dataclass(frozen=True)
class NullModel:
    """What "B is A" looks like for a series of k pairs in one noise class."""

    hl: np.ndarray           # sorted HL estimates of k sign-flipped pool residuals
    noisy_scale: float       # own residual spread exceeded by chance in only 1 - noisy_quantile of draws
    jitter: np.ndarray       # one pair's jitter: the pool with both signs, sorted (a thin series' power)


def null_distribution(pool: np.ndarray, pairs: int, config: PairedConfig) -> NullModel:
    """HL (and residual spread) of ``pairs`` residuals drawn from ``pool`` with random signs.

    Drawn in chunks, so the later looks' 200 000 draws of up to a dozen pairs stay small in memory.
    """
    rng = np.random.default_rng([config.seed, pairs, len(pool)])
    hl_parts, scale_parts = [], []
    left = config.draws
    while left > 0:
        size = min(left, 50_000)
        left -= size
        draws = pool[_distinct_indices(rng, len(pool), pairs, size)]
        draws = draws * rng.choice((-1.0, 1.0), size=draws.shape)
        hl = _hl_rows(draws)
        spread = (draws - hl[:, None]) * math.sqrt(pairs / (pairs - 1)) if pairs > 1 else draws * 0
        hl_parts.append(hl)
        scale_parts.append(1.4826 * _row_median(np.abs(spread - _row_median(spread)[:, None])))
    scales = np.sort(np.concatenate(scale_parts))
    return NullModel(hl=np.sort(np.concatenate(hl_parts)), noisy_scale=_sorted_quantile(scales, config.noisy_quantile),
                     jitter=np.sort(np.concatenate([pool, -pool])))


def _sorted_quantile(ordered: np.ndarray, q: float) -> float:
    """Quantile of an already sorted array (linear interpolation, as np.quantile's default)."""
    position = q * (len(ordered) - 1)
    below = int(math.floor(position))
    above = min(below + 1, len(ordered) - 1)
    return float(ordered[below] + (ordered[above] - ordered[below]) * (position - below))


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm-adjusted p-values (same order as given): reject where adjusted <= alpha."""
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    adjusted = [1.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p_values[i]))
        adjusted[i] = running
    return adjusted


def _relative(metric: str, log_effect: float) -> float:
    """Hurting-side log-ratio -> the effect on the ratio's scale: exp(d) - 1, positive = B worse.

    Latency: B/A - 1; bandwidth: A/B - 1 (how much longer B needs per byte). The log domain is
    mapped back with exp for both metrics, so the effect and both ends of its interval stay above
    -100 % whatever the data (a ratio cannot fall below 0). The old bandwidth mapping, 1 - B/A, is
    bounded above instead and ran to -600 % on the improving side of a wide interval. At small
    effects the two agree to first order (5 % less bandwidth: 5.3 % here).
    """
    del metric  # one scale for both metrics; kept in the signature for the callers' sake
    return math.expm1(min(log_effect, 700.0))   # beyond e**700 a float overflows; no real ratio gets there


def _log_threshold(metric: str, effect: float) -> float:
    """The hurting-side log-ratio of an effect on the ratio's scale (inverse of :func:`_relative`)."""
    del metric
    return math.log1p(effect)


def judge_pairs(found: Mapping[SeriesId, SeriesPairs], config: PairedConfig = PairedConfig(),
                history: Optional[Mapping[Any, Sequence[Sequence[float]]]] = None,
                baselines: Optional[Mapping[Any, Reference]] = None,
                gate_config: GateConfig = GateConfig()) -> list[PairedVerdict]:
    """A verdict for every series of an A/B run.

    ``history`` (gate key -> accepted runs' samples) and ``baselines`` (gate key ->
    Reference) are used only for series with no A, through the history gate.
    """
    verdicts: dict[SeriesId, PairedVerdict] = {}
    testable: list[SeriesPairs] = []
    for key, s in found.items():
        if not s.a:
            if s.b_only or not s.dropped:
                verdicts[key] = _fallback(s, history or {}, baselines or {}, gate_config)
                continue
        if s.b_timed_out:
            verdicts[key] = _timed_out(s)
            continue
        if len(s.a) < config.min_pairs:
            why = "; ".join(f"pair {p}: {r}" for p, r in sorted(s.dropped.items())[:3])
            verdicts[key] = PairedVerdict(
                key=key, verdict="error", metric=s.metric, unit=s.unit, pairs=len(s.a), dropped=len(s.dropped),
                reason=f"only {len(s.a)} complete A/B pair(s) of {len(s.a) + len(s.dropped)}, at least "
                       f"{config.min_pairs} are needed to judge ({len(s.dropped)} dropped: {why})")
            continue
        testable.append(s)
    pools = _pools(testable, config)
    nulls: dict[tuple[tuple[str, str], int, int], NullModel] = {}

    def null(s: SeriesPairs, pairs: int, draws: int) -> NullModel:
        key = (s.noise_class(), pairs, draws)
        if key not in nulls:
            nulls[key] = null_distribution(pools[s.noise_class()], pairs, replace(config, draws=draws))
        return nulls[key]

    stats = [_series_stats(s, null, config, others=len(pools[s.noise_class()]) - len(s.a)) for s in testable]
    adjusted_up = holm([t.p_up for t in stats])
    adjusted_down = holm([t.p_down for t in stats])
    bars: dict[tuple[float, ...], float] = {}
    for t, adj_up, adj_down in zip(stats, adjusted_up, adjusted_down, strict=True):
        decided = _decide(t, adj_up, adj_down, config)
        verdicts[t.pairs.key] = replace(decided, power=power_of(t, null, config, len(stats), bars))
    return [verdicts[k] for k in found]


@dataclass(frozen=True)
class _Stats:
    """One series' figures before Holm: estimate and interval (log scale), sequential p-values, looks."""

    pairs: SeriesPairs
    estimate: float
    low: float           # -inf / +inf: a thin series with too few pairs for an exact interval (shown as none)
    high: float
    p_up: float          # hurting side, sequential over the looks
    p_down: float        # improving side, the same way
    looks: int
    noisy: bool
    others: int = 0      # other series' residuals in its pool (fewer than min_pool: no bolder than its signed ranks)
    own_p: Optional[float] = None   # a thin series' exact signed-rank p (hurting side, last look, before Holm)

    def thin(self, config: "PairedConfig") -> bool:
        """Its pool holds too few other series' residuals to model its jitter (:func:`signed_rank_p` bounds its p)."""
        return self.others < config.min_pool


def signed_rank_p(d: np.ndarray) -> tuple[float, float]:
    """The exact Wilcoxon signed-rank test of a series' own pairs: (hurting, improving) side p-values.

    Under "B is A" with A and B's order drawn at random per pair, every pair's sign is a fair coin whatever its
    size, so the signed-rank statistic (the ranks of |d| where B was worse) has an exact null that needs nothing
    of the jitter's shape, never below 2**-n (pairs with d = 0 dropped, as Wilcoxon did; tied |d| get mid-ranks).
    Ranks, not the HL estimate: the HL of a sign pattern can equal the observed one (flipping a small pair need not
    move the median of the Walsh averages), which made eight pairs all worse read 4/256 instead of 1/256.
    Why a floor for thin classes: the pooled null draws a series' jitter from the residuals of its noise class;
    when that class holds no (or few) other series, the pool is the series' own few residuals about its own
    centre, which say nothing of the jitter's tail. Two real A/A MRs on the local host (bandwidth, 4 pairs, B
    slower in each, load 1.2-5.5 beside other jobs) got p 5e-05 from the pool where their signed ranks give 1/16.
    """
    from scipy import stats

    x = np.asarray(d, dtype=float)
    x = x[x != 0]
    if not len(x):
        return 1.0, 1.0
    twice = np.rint(2 * stats.rankdata(np.abs(x))).astype(int)     # mid-ranks doubled: whole numbers
    tail = np.cumsum(_signed_rank_null(twice)[::-1])[::-1]          # tail[w] = P(statistic >= w)
    return float(tail[int(twice[x > 0].sum())]), float(tail[int(twice[x < 0].sum())])


def _signed_rank_null(ranks: np.ndarray) -> np.ndarray:
    """P(the signed-rank statistic = w), w = 0 .. sum(ranks), for whole-number ranks, each in or out by a coin."""
    counts = np.zeros(int(ranks.sum()) + 1)
    counts[0] = 1.0
    for r in ranks:
        counts[r:] = counts[r:] + counts[:-r].copy()
    return counts / counts.sum()


def signed_rank_interval(d: np.ndarray, level: float) -> Optional[tuple[float, float]]:
    """The exact confidence interval of the HL estimate from a series' own pairs (Walsh averages' order statistics
    at the signed-rank test's critical value), or None where ``level`` needs more pairs than there are.

    The interval a thin series shows is no narrower than this: its pooled interval comes from its own few
    residuals as much as its p does. Four pairs have none at 95 % (their widest, min to max, covers 87.5 %).
    """
    x = np.asarray(d, dtype=float)
    n = len(x)
    below = np.cumsum(_signed_rank_null(np.arange(1, n + 1)))     # P(statistic <= w)
    c = int(np.searchsorted(below, (1 - level) / 2, side="right")) - 1   # largest w with P(<= w) <= (1-level)/2
    if c < 0:
        return None
    i, j = np.triu_indices(n)
    walsh = np.sort((x[i] + x[j]) / 2)
    return float(walsh[c]), float(walsh[len(walsh) - 1 - c])


def _series_stats(s: SeriesPairs, null: Any, config: PairedConfig, others: int = 0) -> _Stats:
    """HL estimate and interval at the last look; at every look that has enough pairs, the HL of the first
    n_j pairs against its null, turned into z, and the sequential p-value of those z (:mod:`.sequential`).
    A series with fewer than ``min_pool`` other series' residuals in its pool gets at each look the larger of
    that p and its own exact signed-rank test's (:func:`signed_rank_p`): the pool cannot speak for its tail."""
    from scipy import special  # SciPy is loaded at the first judgement (start-up time; pyproject)

    d = s.log_ratios()
    n = len(d)
    est = hodges_lehmann(d)
    sizes = [k for k in s.look_sizes() if k >= config.min_pairs] or [n]
    budget = max(s.max_pairs, n)
    thin = others < config.min_pool
    own_p = None
    z_up, z_down = [], []
    for j, k in enumerate(sizes):
        model = null(s, k, config.draws if j == 0 else config.draws_later)
        h, draws = (est, len(model.hl)) if k == n else (hodges_lehmann(d[:k]), len(model.hl))
        p_up = float((1 + draws - np.searchsorted(model.hl, h, side="left")) / (draws + 1))
        p_down = float((1 + np.searchsorted(model.hl, h, side="right")) / (draws + 1))
        if thin:
            own_p, own_down = signed_rank_p(d[:k])
            p_up, p_down = max(p_up, own_p), max(p_down, own_down)
        z_up.append(float(-special.ndtri(p_up)))
        z_down.append(float(-special.ndtri(p_down)))
    fractions = [k / budget for k in sizes]
    last = null(s, n, config.draws if len(sizes) == 1 else config.draws_later)
    g = (1 - config.interval) / 2
    low, high = est - _sorted_quantile(last.hl, 1 - g), est - _sorted_quantile(last.hl, g)
    if thin:
        exact = signed_rank_interval(d, config.interval)
        low, high = (-math.inf, math.inf) if exact is None else (min(low, exact[0]), max(high, exact[1]))
    return _Stats(pairs=s, estimate=est, low=low, high=high,
                  p_up=sequential.sequential_p(z_up, fractions, config.spending, config.rho),
                  p_down=sequential.sequential_p(z_down, fractions, config.spending, config.rho),
                  looks=len(s.look_sizes()), noisy=robust_scale(residuals(d)) > last.noisy_scale, others=others,
                  own_p=own_p)


def power_of(t: "_Stats", null: Any, config: PairedConfig, family: int,
             bars: Optional[dict[tuple[float, ...], float]] = None) -> Power:
    """The smallest effect these pairs would have failed 4 times in 5 at the judge's error rate.

    The bar a series must cross at its last look is its design's boundary (:func:`sequential.boundaries`)
    at Holm's first-step level ``alpha / family`` (one series among ``family``: what a single real step
    among unchanged series faces), turned into a Hodges-Lehmann estimate through the same pooled null the
    p-values come from; the estimate must also exceed the minimum effect. A true shift ``theta`` gives
    ``HL* + theta``, so it is caught with probability 80 % when ``theta`` = bar - (20 % quantile of HL*).
    A series too noisy for its class (its own residuals scatter beyond the pool's) has its null widened
    to its own spread first. On the ratio scale of the effect (B/A - 1, A/B - 1 for bandwidth).
    """
    s = t.pairs
    n = len(s.a)
    sizes = [k for k in s.look_sizes() if k >= config.min_pairs] or [n]
    fractions = tuple(round(k / max(s.max_pairs, n), 12) for k in sizes)
    level = config.alpha / max(family, 1)
    cache = bars if bars is not None else {}
    if (level, *fractions) not in cache:
        cache[(level, *fractions)] = float(sequential.boundaries(level, fractions, config.spending, config.rho)[-1])
    z = cache[(level, *fractions)]
    model = null(s, n, config.draws if len(sizes) == 1 else config.draws_later)
    from scipy import special  # loaded at the first judgement (start-up time; pyproject)

    tail = float(special.ndtr(-z)) if math.isfinite(z) else 0.0
    crit = _sorted_quantile(model.hl, 1 - tail) if tail > 0 else float(model.hl[-1])
    spread = 1.0
    if t.noisy:
        pool_scale = robust_scale(model.hl)
        own = robust_scale(residuals(s.log_ratios())) / math.sqrt(n)
        spread = max(1.0, own / max(pool_scale, MIN_SCALE))
    delta = _log_threshold(s.metric, config.min_effect.get(s.metric, 0.03))
    theta = max(crit * spread, delta) - _sorted_quantile(model.hl, 1 - 0.8) * spread
    budget = max(s.max_pairs, n + len(s.dropped))
    how = f"{n} pairs of {budget}, {config.alpha:.0%} family-wise over {family} series"
    if t.thin(config):
        theta = max(theta, _signed_rank_power(model.jitter, n, tail, config.seed) * spread)
        how += (f"; its noise class holds {t.others} other series' residuals (fewer than {config.min_pool}), so it is "
                f"judged no bolder than its own pairs' signed ranks" + (
                    f", and {n} pairs cannot reach the p {tail:.1g} this look needs (B worse in all {n}: p "
                    f"{2.0 ** -n:.2g})" if not math.isfinite(theta) else ""))
    detectable = _relative(s.metric, theta) if math.isfinite(theta) else math.inf
    return Power("paired A/B", detectable, target=target_for(config.target, s.metric, s.key.placement), how=how)


def _signed_rank_power(jitter: np.ndarray, pairs: int, tail: float, seed: int, draws: int = 4000) -> float:
    """The shift (log scale) that a thin series' own signed-rank test at ``tail`` catches 4 times in 5.

    Infinite when even B worse in every pair (p 2**-pairs) cannot reach ``tail``. Otherwise ``draws`` series of
    ``pairs`` pairs are drawn from ``jitter`` (its pool, both signs), shifted, and the smallest shift at which 80 %
    of them reach the test's critical value is found by bisection (the statistic only grows with the shift).
    Seeded: the same pool always gets the same power.
    """
    tail_of = np.cumsum(_signed_rank_null(np.arange(1, pairs + 1))[::-1])[::-1]   # P(statistic >= w)
    critical = int(np.argmax(tail_of <= tail)) if tail_of[-1] <= tail else None
    if critical is None:
        return math.inf
    rng = np.random.default_rng([seed, pairs, len(jitter)])
    x = rng.choice(jitter, size=(draws, pairs))

    def caught(shift: float) -> float:
        y = x + shift
        order = np.argsort(np.argsort(np.abs(y), axis=1), axis=1) + 1
        return float(np.mean(np.sum(order * (y > 0), axis=1) >= critical))

    low, high = 0.0, float(np.max(np.abs(jitter))) + MIN_SCALE
    if caught(low) >= 0.8:
        return low
    for _ in range(40):
        middle = (low + high) / 2
        low, high = (low, middle) if caught(middle) >= 0.8 else (middle, high)
    return high


def scale_margin(dof: int, confidence: float = 0.90) -> float:
    """Factor from a pool's jitter scale to its upper ``confidence`` bound (chi-square, ``dof`` degrees of freedom).

    A pool of a few series' residuals (an MR of two series, the local system) estimates the
    jitter from a handful of values; drawn as if exact, the null is too narrow as often as
    the estimate is low, and an unchanged build fails. Widening the pool to the upper 90 %
    bound of its scale keeps the family-wise error where it is claimed: ~1.5x for 8 degrees of
    freedom (2 series of 5 pairs), ~1.05x for an 80-series MR, where it costs little power
    (benchmarks/gate_detection.py: 5 % steps caught 96.6 % rather than 98.8 %; at 95 %: 95.6 %).
    Wilson-Hilferty's chi-square quantile (within 3 % of the exact one from 4 dof up).
    """
    if dof < 1:
        return 1.0
    z = statistics.NormalDist().inv_cdf(1 - confidence)
    lower = dof * max(1 - 2 / (9 * dof) + z * math.sqrt(2 / (9 * dof)), 1e-3) ** 3
    return math.sqrt(dof / lower)


def _pools(testable: Sequence[SeriesPairs], config: PairedConfig) -> dict[tuple[str, str], np.ndarray]:
    """Residual pool per noise class; thin classes borrow their metric's pool, never narrowed; every pool is
    widened by the uncertainty of its own scale (:func:`scale_margin`)."""
    by_class: dict[tuple[str, str], list[np.ndarray]] = {}
    for s in testable:
        by_class.setdefault(s.noise_class(), []).append(residuals(s.log_ratios()))
    pools = {c: np.concatenate(parts) for c, parts in by_class.items()}
    dof = {c: sum(len(part) - 1 for part in parts) for c, parts in by_class.items()}
    out = {}
    for c, pool in pools.items():
        # Enough when every series of the class finds min_pool residuals of the others in it (its own are no
        # evidence of its jitter's tail: signed_rank_p bounds a series that has fewer).
        if len(pool) - max(len(part) for part in by_class[c]) >= config.min_pool:
            out[c] = pool * scale_margin(dof[c])
            continue
        # Only the borrowed residuals are brought up to the class's own spread: widening the class's own
        # residuals too would count its spread twice, and one outlying pair of a lone series then
        # inflated its whole null (a 3x regression with one pair where B won stayed inconclusive at 11 pairs).
        borrowed = [p for (m, where), p in pools.items() if m == c[0] and (m, where) != c]
        metric_dof = sum(n for (m, _), n in dof.items() if m == c[0])
        if not borrowed:
            out[c] = pool * scale_margin(metric_dof)
            continue
        others = np.concatenate(borrowed)
        # Floored: borrowed residuals that are all but equal (a scale of 1e-16) would be blown up 1e12-fold.
        widen = max(1.0, robust_scale(pool) / max(robust_scale(others), MIN_SCALE))
        out[c] = np.concatenate([pool, others * widen]) * scale_margin(metric_dof)
    return out


def _decide(t: _Stats, adj_up: float, adj_down: float, config: PairedConfig) -> PairedVerdict:
    s = t.pairs
    effect = _relative(s.metric, t.estimate)
    bounded = math.isfinite(t.low) and math.isfinite(t.high)
    lo, hi = (_relative(s.metric, t.low), _relative(s.metric, t.high)) if bounded else (None, None)
    delta = config.min_effect.get(s.metric, 0.03)
    d = s.log_ratios()
    nodes = tuple(sorted({n for ns in s.nodes for n in ns}))
    budget = max(s.max_pairs, len(d) + len(s.dropped))
    common: dict[str, Any] = dict(key=s.key, metric=s.metric, unit=s.unit, effect=effect, low=lo, high=hi,
                                  p_value=t.p_up, p_adjusted=adj_up, pairs=len(d), dropped=len(s.dropped),
                                  a_value=float(np.median(s.a)), b_value=float(np.median(s.b)), nodes=nodes,
                                  looks=t.looks, max_pairs=budget)
    side = "worse" if effect > 0 else "better"
    looks = f" in {t.looks} looks" if t.looks > 1 else ""
    ratio = math.exp(-t.estimate if METRICS[s.metric].higher_is_better else t.estimate)
    interval = f"{config.interval:.0%} interval {lo:+.1%} to {hi:+.1%}" if lo is not None and hi is not None \
        else f"no {config.interval:.0%} interval from {len(d)} pairs of their own"
    summary = (f"B (the MR) is {abs(effect):.1%} {side} than A (the target branch; B/A {ratio:.3g}) on the same nodes "
               f"({', '.join(nodes) or 'nodes not recorded'}), {interval}, {len(d)} pairs{looks}")
    if s.dropped:
        summary += f" ({len(s.dropped)} dropped: " + "; ".join(
            f"pair {p} {r}" for p, r in sorted(s.dropped.items())[:3]) + ")"
    significant = adj_up <= config.alpha
    every_pair_worse = bool(np.all(d > _log_threshold(s.metric, delta)))
    at_budget = len(d) + len(s.dropped) >= budget
    budget_note = (f", still so at the budget of {budget} pairs" if at_budget and budget > config.min_pairs
                   and t.looks > 1 else f", with {budget - len(d) - len(s.dropped)} more pairs allowed"
                   if not at_budget else "")
    if effect > delta and significant and (not t.noisy or every_pair_worse):
        return PairedVerdict(verdict="regression", reason=f"{summary}: worse than the {delta:.0%} minimum effect "
                             f"at {config.alpha:.0%} family-wise error over the looks (Holm p {adj_up:.2g})",
                             **common)
    if t.noisy and not every_pair_worse:
        return PairedVerdict(verdict="inconclusive", reason=f"{summary}: its pairs scatter more than "
                             f"the other series of its class do in {config.noisy_quantile:.1%} of draws, too noisy "
                             f"to judge{budget_note}", **common)
    if effect > delta:
        signs = (f"; its noise class holds {t.others} other series' residuals, too few to model its jitter, so it "
                 f"is judged no bolder than its own pairs' signed ranks (B worse in {int(np.sum(d > 0))} of {len(d)}, "
                 f"signed-rank p {t.own_p:.2g} before Holm)") if t.thin(config) and t.own_p is not None else ""
        return PairedVerdict(verdict="inconclusive", reason=f"{summary}: beyond the {delta:.0%} minimum effect "
                             f"but not significant at {config.alpha:.0%} family-wise (Holm p {adj_up:.2g})"
                             f"{signs}{budget_note}", **common)
    if effect < -delta and adj_down <= config.alpha:
        return PairedVerdict(verdict="improvement", reason=f"{summary}: better beyond the {delta:.0%} minimum "
                             f"effect (not a failure)", **common)
    return PairedVerdict(verdict="pass", reason=f"{summary}: within the {delta:.0%} minimum effect or not "
                         f"significant", **common)


def _timed_out(s: SeriesPairs) -> PairedVerdict:
    """B's step hit its time limit where A's finished on the same nodes: a regression of at least limit / A's time.

    A step that never ends is the regression itself (4 KiB TCP buffers make a 1 MiB bandwidth step take
    minutes where A's took seconds), not a failed check: its size is not measured, but its lower bound is,
    and it is far beyond any minimum effect. The smallest bound over the pairs is said (the most cautious).
    """
    pair, limit, took, nodes = min(s.b_timed_out, key=lambda t: t[1] / t[2])
    ratio = limit / took
    where = ", ".join(nodes) or "the same nodes"
    return PairedVerdict(
        key=s.key, verdict="regression", metric=s.metric, unit=s.unit, effect=ratio - 1, low=ratio - 1, high=None,
        pairs=len(s.a), dropped=len(s.dropped), nodes=tuple(sorted(nodes)),
        a_value=float(np.median(s.a)) if s.a else None,
        reason=f"B's step hit its {limit:g} s time limit in {len(s.b_timed_out)} pair(s) where A's finished on "
               f"{where} (pair {pair}: A took {took:.1f} s): B is at least {ratio:.3g}x slower than A "
               f"(+{ratio - 1:.0%} or more), a regression, not a failed check", timed_out=len(s.b_timed_out))


def continuing(verdicts: Sequence[PairedVerdict], config: PairedConfig = PairedConfig()) -> list[SeriesId]:
    """The series that get another round of pairs: inconclusive beyond the minimum effect, budget left."""
    return [v.key for v in verdicts if v.wants_more(config)]


def _fallback(s: SeriesPairs, history: Mapping[Any, Sequence[Sequence[float]]],
              baselines: Mapping[Any, Reference], gate_config: GateConfig) -> PairedVerdict:
    """No A for this series (new method or target): the history gate judges B, and the verdict says so."""
    key = s.key
    runs = [list(r) for r in history.get(key, [])]
    note = "no A build for this series (a new method or target), so B is judged by the history gate"
    gate = judge_values(key, s.b_only, runs, gate_config, baseline=baselines.get(key),
                        fallback_note=note + f" but history has {len(runs)} accepted run(s)", unit=s.unit)
    reason = gate.reason if gate.reason.startswith(note) else f"{note}: {gate.reason}"
    nodes = tuple(sorted({n for ns in s.b_only_nodes for n in ns}))
    return PairedVerdict(key=s.key, verdict=gate.verdict, reason=reason, basis=gate.basis, metric=s.metric,
                         unit=s.unit, effect=gate.effect, b_value=gate.value, pairs=0, dropped=len(s.dropped),
                         nodes=nodes, gate=gate)


def judge(records: Iterable[Mapping[str, Any]], config: PairedConfig = PairedConfig(),
          history: Optional[Mapping[Any, Sequence[Sequence[float]]]] = None,
          baselines: Optional[Mapping[Any, Reference]] = None) -> list[PairedVerdict]:
    """Records of an A/B run -> one verdict per series (InputError on mismatched A/B)."""
    return judge_pairs(collect(records), config, history, baselines)
