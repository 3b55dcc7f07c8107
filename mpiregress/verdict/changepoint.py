"""Weekly change-point detection over the history, pooling the series of a partition and its groups.

Method: sparsified binary segmentation (Cho & Fryzlewicz 2015, "Multiple change-point
detection for high dimensional time series via sparsified binary segmentation") of
the CUSUM statistics of every series of one system partition, on the log of each
run's median, each series scaled by its own robust run-to-run noise.

* Logs make a change relative ("bandwidth fell 8 %"); dividing by the series' noise
  (MAD of consecutive differences, blind to the steps looked for) makes one threshold
  suit 0.6 us latencies and 17 GB/s bandwidths, quiet and noisy series alike.
* For a split at run t of an interval, each series gives its CUSUM C_i(t) (the
  standardised difference of the means before and after). The pooled statistic is
  ``sum_i max(0, C_i(t)^2 - LAMBDA)``: a series adds evidence only when it moved on its
  own, so one build's step is found as in a single series, and a system change that
  moves many series of the partition at once (a new UCX, a firmware) adds up: it is
  found at smaller sizes and placed at the right week, where one series alone often
  places a 5 % step a few weeks off. Splits go on in both halves while the pooled
  statistic exceeds ``PENALTY``.
* A series takes part in a split only where its own C_i^2 exceeds ``JOIN`` (2 standard
  errors at a known week: the 4 cross-node series of a network change, 1.4-2 noise
  standard deviations each at 5 %, join; a quiet series sometimes joins by chance, which
  the benchmark counts as a false point), and a change point is reported only when the
  segment medians moved by ``MIN_EFFECT``.
* Each value is first pulled to within ``CLIP`` noise units of the running median of
  its neighbours: one slow week is not a new level, and a real step (which the running
  median follows) is untouched.
* The groups a system change moves together in practice (``GROUP_BY``: one benchmark,
  metric and placement across the build methods, as a fabric or UCX change moves the 4
  cross-node series) are also scanned as their means: the CUSUM^2 of a group's mean standardised
  series, where m series moved by d noise units give m x d^2 (the sparse sum gives
  m x (d^2 - LAMBDA), and a series with d^2 < LAMBDA adds nothing). A group that moved
  (beyond ``GROUP_PENALTY``, and beyond its strongest series alone: one build's step is no
  group's move) places the split, and its series that moved the same way join it on
  weaker evidence (``GROUP_JOIN``); the sparse sum finds what no group explains.
* The effect filter of a series judges a step that ``SHARED_FLOOR`` series of its group
  share by their mean shift: one series' segment medians often show a 5 % step of
  cross-node bandwidth (3.5 % noise) as less than 2 %.

benchmarks/changepoint_methods.py compares it with the PELT (L1 cost, noise-scaled
penalty) this module used first, with E-divisive means with a permutation test (the
method of Apache Otava and MongoDB), with the pool of the whole partition alone (before
the group scans) and with a ceiling that is told where a step exists, on synthetic years
with steps of 3-70 % and the noise of benchmarks/_synth.py. The thresholds are calibrated
against the budget of at most one false change point per series-year, of which they spend
0.055-0.076 (the partition pool alone 0.055-0.074). Within one week they place (300 years,
seed 5) 99.9 % of 5 % steps shared by a partition's 12 series (partition pool alone 99.1 %,
E-divisive 85 %, PELT 71 %) and 97.7 % [96.6-98.4] of those shared by its 4 cross-node
series (partition pool alone 93.3 %, E-divisive 65-69 %, the ceiling 98.7 %); at 3 % 95.0 %
and 76.1 % (before 85.4 % and 51.9 %). A 5 % step of one series alone is placed within one
week 78.7 % of the time (before 79.0 %) (E-divisive one series at a time 87 % on a third of
those years), the ceiling 88 %: on cross-node bandwidth (3.5 % run-to-run noise, shared by a
run's samples, so its samples add nothing) such a step is 1.4 standard deviations, and no
reading of the run medians places it within a week 95 % of the time.

Nothing here assumes one run a week: the scan reads runs in time order, and the benchmark's
``--runs-per-week 2`` (a second weekly schedule) places 93.4 % [91.4-94.9] of one build's 5 %
steps within 7 days (three a week 96.0 %), with fewer false points per series-year (0.035, flat
years) at the same thresholds (docs/pipeline.md, "How often").

Each change point names what changed between the last run before it and the first run
after it: the commit range, the toolchain when it differs, and both pipelines.
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Mapping, Optional, Sequence

import numpy as np

from mpiregress.history.store import History, RunPoint
from mpiregress.model.names import METRICS
from mpiregress.model.names import format_value as fv
from mpiregress.model.series import SeriesKey

METHOD = ("sparsified binary segmentation of noise-scaled CUSUMs, pooled over a partition's series and "
          "over the groups a system change moves together")
LAMBDA = 4.0        # a series adds to the pooled statistic of a split only where its own CUSUM^2 exceeds this
PENALTY = 10.0      # the pooled statistic must exceed this: one series alone needs CUSUM^2 > 14 (3.7 standard errors)
JOIN = 4.0          # a series takes part in a pooled split (where it is placed) only with CUSUM^2 above this
# Counted in runs, not weeks, here and in JOIN/CLIP's neighbourhood: the evidence for a level is its runs
# (independent run effects), whatever the schedule's cadence; at two runs a week a level needs 1.5 weeks.
MIN_SIZE = 3        # a segment spans at least 3 runs: one odd run (or two) is not a new level
MIN_EFFECT = 0.02   # smallest relative shift of the segment medians that is reported
CLIP = 3.0          # values further than this many noise units from their neighbours' median are pulled in
NOISE_FLOOR = 1e-3  # a perfectly flat series (noise 0) must not split on rounding
GROUP_PENALTY = 16.0  # a group's mean must move by this CUSUM^2 (4 standard errors): several groups are scanned
GROUP_REST = 9.0    # ... and its mean without its strongest series must move this much (3 standard errors)
GROUP_JOIN = 1.0    # at a split where its group moved, a series joins with CUSUM^2 above this, the same way
SHARED_FLOOR = 3    # a step moved this many series of a group: the effect filter reads their mean shift
# What a system change moves together in practice, within a partition: one benchmark and metric at one
# placement (and message size) across build methods (a fabric, UCX or firmware change: cross-node only;
# a toolchain change moves every such group at once, and the sparse sum adds them up). Wider groups were
# measured and left out (benchmarks/changepoint_methods.py): one benchmark and metric across placements
# places a step that moves a part of it (one build's series) worse, and one build's series across
# placements and metrics adds false points for little.
GROUP_BY: tuple[tuple[str, ...], ...] = (("benchmark", "parameters", "metric"),)


@dataclass(frozen=True)
class ChangePoint:
    """A lasting shift of a series' level, between two consecutive runs."""

    key: SeriesKey
    index: int                 # position of the first run of the new level
    before: float              # median of the segment before
    after: float               # median of the segment after
    change: float              # relative change after/before - 1
    worse: bool                # on the hurting side for this metric
    run_before: RunPoint
    run_after: RunPoint
    shared: int = 1            # how many series of the partition moved at this run (1: this series alone)

    @property
    def toolchain_changed(self) -> bool:
        return self.run_before.toolchain != self.run_after.toolchain

    @property
    def commits(self) -> str:
        """The commit range to look at, ``old..new`` (or the one commit when both runs share it)."""
        old, new = self.run_before.commit or "?", self.run_after.commit or "?"
        return new if old == new else f"{old}..{new}"

    @property
    def pipelines(self) -> str:
        """The pipelines on either side, ``before -> after``."""
        return f"{self.run_before.pipeline or '?'} -> {self.run_after.pipeline or '?'}"

    def sentence(self) -> str:
        unit = METRICS[self.key.metric].unit
        direction = "worse" if self.worse else "better"
        what = (f"{self.key.name()}: {abs(self.change):.1%} {direction} ({fv(self.before)} -> "
                f"{fv(self.after)} {unit}) from run {self.run_after.run_id} ({self.run_after.time[:10]}), "
                f"commit {self.commits}, pipelines {self.pipelines}")
        if self.toolchain_changed:
            what += f", toolchain {self.run_before.toolchain} -> {self.run_after.toolchain}"
        if self.shared > 1:
            what += f"; {self.shared} series of {self.key.system}/{self.key.partition} moved at this run"
        return what


def _noise(y: np.ndarray) -> float:
    """Robust sigma of a log series from consecutive differences (steps barely move it)."""
    if len(y) < 3:
        return 0.0
    d = np.diff(y)
    return float(1.4826 * np.median(np.abs(d - np.median(d))) / math.sqrt(2))


def _declipped(z: np.ndarray, clip: float) -> np.ndarray:
    """``z`` (noise units) with each value pulled to within ``clip`` of the median of its 5-run neighbourhood."""
    n = len(z)
    if n < 5:
        return z
    padded = np.concatenate([np.repeat(z[0], 2), z, np.repeat(z[-1], 2)])
    local = np.median(np.lib.stride_tricks.sliding_window_view(padded, 5), axis=1)
    return local + np.clip(z - local, -clip, clip)


def _segments(n: int, breaks: Sequence[int]) -> list[tuple[int, int]]:
    edges = [0, *breaks, n]
    return [(a, b) for a, b in zip(edges, edges[1:])]


class _Pool:
    """The standardised series of one partition on a common timeline of runs (missing runs allowed)."""

    def __init__(self, columns: Sequence[Sequence[Optional[float]]], clip: float):
        # columns[i][t]: series i's value at timeline position t (None: not measured in that run).
        self.d = len(columns)
        self.n = len(columns[0]) if columns else 0
        counts = np.zeros((self.d, self.n + 1))
        sums = np.zeros((self.d, self.n + 1))
        self.sigma = np.zeros(self.d)
        for i, column in enumerate(columns):
            present = np.array([v is not None for v in column])
            y = np.log(np.array([v for v in column if v is not None], dtype=float))
            sigma = _noise(y)
            self.sigma[i] = sigma
            z = _declipped(y / max(sigma, NOISE_FLOOR), clip) if len(y) else y
            full = np.zeros(self.n)
            full[present] = z
            counts[i, 1:] = np.cumsum(present)
            sums[i, 1:] = np.cumsum(full)
        self.counts, self.sums = counts, sums

    def cusum(self, start: int, end: int, min_size: int) -> np.ndarray:
        """Signed C_i(t) for every series i and split t in (start, end), 0 where a side has < min_size runs."""
        t = np.arange(start + 1, end)
        c, s = self.counts, self.sums
        n1 = c[:, t] - c[:, [start]]
        n2 = c[:, [end]] - c[:, t]
        ok = (n1 >= min_size) & (n2 >= min_size)
        with np.errstate(divide="ignore", invalid="ignore"):
            m1 = (s[:, t] - s[:, [start]]) / n1
            m2 = (s[:, [end]] - s[:, t]) / n2
            value = np.sqrt(n1 * n2 / (n1 + n2)) * (m2 - m1)
        return np.where(ok, value, 0.0)

    def cusum2(self, start: int, end: int, min_size: int) -> np.ndarray:
        """C_i(t)^2 for every series i and split t in (start, end), 0 where a side has < min_size runs."""
        return self.cusum(start, end, min_size) ** 2


def _mean2(c: np.ndarray, g: np.ndarray) -> np.ndarray:
    """CUSUM^2 of the mean of group ``g``'s standardised series at each split, from their CUSUMs ``c``.

    Over the series measured on both sides (CUSUM 0 where not): m series moved the same way by d
    noise units give m x d^2, where the sparse sum of ``detect_pooled`` gives m x (d^2 - lambda);
    one series of the group alone gives d^2 / m.
    """
    measured = np.count_nonzero(c[g], axis=0)
    return np.where(measured > 0, c[g].sum(axis=0) ** 2 / np.maximum(measured, 1), 0.0)


def _not_one(c: np.ndarray, g: np.ndarray, at: int, rest: float) -> bool:
    """Whether group ``g`` moved at split ``at`` beyond its strongest series: the mean of the others
    moved the same way, by CUSUM^2 above ``rest`` (one build's large step is no group's move)."""
    strongest = g[int(np.argmax(np.abs(c[g, at])))]
    others = g[g != strongest]
    total = float(c[others, at].sum())
    return bool(np.sign(total) == np.sign(c[strongest, at])
                and total ** 2 / max(1, int(np.count_nonzero(c[others, at]))) > rest)


def detect_pooled(columns: Sequence[Sequence[Optional[float]]], lam: float = LAMBDA, penalty: float = PENALTY,
                  min_size: int = MIN_SIZE, clip: float = CLIP, join: float = JOIN,
                  groups: Sequence[Sequence[int]] = (), group_penalty: float = GROUP_PENALTY,
                  group_join: float = GROUP_JOIN, group_rest: float = GROUP_REST) -> list[list[int]]:
    """Per series, the timeline positions where a new level starts (before the ``MIN_EFFECT`` filter).

    ``columns[i][t]`` is series i's positive value in run t of the shared timeline (oldest first),
    or None when that run did not measure it. ``groups`` lists series (indices into ``columns``)
    that one change moves together and the same way; each group is also scanned as its mean.
    """
    if not columns or not len(columns[0]):
        return [[] for _ in columns]
    pool = _Pool(columns, clip)
    sets = [np.asarray(g, dtype=int) for g in groups if len(g) >= 2]
    found: list[list[int]] = [[] for _ in range(pool.d)]
    stack = [(0, pool.n)]
    while stack:
        start, end = stack.pop()
        if end - start < 2 * min_size:
            continue
        c = pool.cusum(start, end, min_size)
        c2 = c ** 2
        # A group that moved (its mean's CUSUM^2, beyond its strongest series) places the split: the
        # sparse sum, which also weighs series that did not move, places it less well. The sparse sum
        # finds what no group explains: one build's step, or a few series of different groups.
        best, margin = 0, 0.0
        for g in sets:
            mean2 = _mean2(c, g)
            at = int(np.argmax(mean2))
            if mean2[at] - group_penalty > margin and _not_one(c, g, at, group_rest):
                best, margin = at, float(mean2[at] - group_penalty)
        if margin <= 0:
            score = np.maximum(c2 - lam, 0.0).sum(axis=0) - penalty
            best = int(np.argmax(score))
            margin = float(score[best])
        if margin <= 0:
            continue
        split = start + 1 + best
        members = set(np.nonzero(c2[:, best] > max(join, lam))[0].tolist())
        for g in sets:
            if _mean2(c[:, [best]], g)[0] > group_penalty and _not_one(c, g, best, group_rest):
                # The group moved at this split: its series that moved the same way join on weaker evidence.
                way = np.sign(c[g, best].sum())
                members |= {int(i) for i in g if np.sign(c[i, best]) == way and c2[i, best] > group_join}
        for i in members:
            found[i].append(split)
        stack += [(start, split), (split, end)]
    return [sorted(points) for points in found]


def _shifts(y: np.ndarray, breaks: Sequence[int]) -> list[float]:
    """Signed shift of the segment medians of log values ``y`` at each of ``breaks``."""
    segs = _segments(len(y), breaks)
    return [float(np.median(y[b0:b1]) - np.median(y[a0:a1])) for (a0, a1), (b0, b1) in zip(segs, segs[1:])]


def _filtered(values: Sequence[float], breaks: list[int], min_effect: float,
              floor: Optional[Mapping[int, float]] = None) -> list[int]:
    """``breaks`` less those whose segment medians differ by less than ``min_effect`` (weakest first).

    ``floor`` maps a break to the log shift of the series that moved with it (its own shift counts
    when larger).
    """
    y = np.log(np.asarray(values, dtype=float))
    breaks = list(breaks)
    floor = floor or {}
    while breaks:
        shifts = [max(abs(v), floor.get(b, 0.0)) for b, v in zip(breaks, _shifts(y, breaks))]
        weakest = min(range(len(shifts)), key=shifts.__getitem__)
        if shifts[weakest] >= math.log1p(min_effect):
            break
        del breaks[weakest]
    return breaks


def detect(values: Sequence[float], lam: float = LAMBDA, penalty: float = PENALTY, min_size: int = MIN_SIZE,
           min_effect: float = MIN_EFFECT, clip: float = CLIP, join: float = JOIN) -> list[int]:
    """Indices where a new level starts in one series' ``values`` (positive numbers, oldest first)."""
    [breaks] = detect_pooled([list(values)], lam, penalty, min_size, clip, join)
    return _filtered(values, breaks, min_effect)


def _points(key: SeriesKey, runs: Sequence[RunPoint], breaks: Sequence[int],
            shared: Mapping[int, int]) -> list[ChangePoint]:
    medians = [r.median for r in runs]
    points = []
    for (a0, a1), (b0, b1) in zip(_segments(len(runs), breaks), _segments(len(runs), breaks)[1:]):
        before, after = statistics.median(medians[a0:a1]), statistics.median(medians[b0:b1])
        points.append(ChangePoint(key, b0, before, after, after / before - 1, METRICS[key.metric].worse(after, before),
                                  runs[b0 - 1], runs[b0], shared.get(b0, 1)))
    return points


def series_changepoints(key: SeriesKey, runs: Sequence[RunPoint], **params) -> list[ChangePoint]:
    """Change points of one series' runs (oldest first) on its own, each naming its commit range."""
    return _points(key, runs, detect([r.median for r in runs], **params), {})


def _groups(keys: Sequence[SeriesKey], group_by: Sequence[Sequence[str]]) -> list[list[int]]:
    """Indices of ``keys`` sharing the values of each field tuple of ``group_by`` (groups of 2 or more)."""
    groups = []
    for fields in group_by:
        by: dict[tuple, list[int]] = {}
        for i, key in enumerate(keys):
            by.setdefault(tuple(getattr(key, f) for f in fields), []).append(i)
        groups += [g for g in by.values() if len(g) >= 2]
    return groups


def scan_runs(runs: Mapping[SeriesKey, Sequence[RunPoint]], lam: float = LAMBDA, penalty: float = PENALTY,
              min_size: int = MIN_SIZE, min_effect: float = MIN_EFFECT, clip: float = CLIP,
              join: float = JOIN, group_by: Sequence[Sequence[str]] = GROUP_BY, group_penalty: float = GROUP_PENALTY,
              group_join: float = GROUP_JOIN, group_rest: float = GROUP_REST,
              shared_floor: int = SHARED_FLOOR) -> dict[SeriesKey, list[ChangePoint]]:
    """Change points of many series (runs oldest first), the series of each system partition pooled,
    with the groups of ``group_by`` (series equal in those fields) also scanned as their means."""
    partitions: dict[tuple[str, str], list[SeriesKey]] = {}
    for key, series in runs.items():
        if series:
            partitions.setdefault((key.system, key.partition), []).append(key)
    found: dict[SeriesKey, list[ChangePoint]] = {}
    for keys in partitions.values():
        keys.sort()
        # The partition's timeline: every run that measured one of its series, in time order.
        timeline = sorted({(r.time, r.run_id) for key in keys for r in runs[key]})
        where = {run_id: t for t, (_, run_id) in enumerate(timeline)}
        columns: list[list[Optional[float]]] = []
        for key in keys:
            column: list[Optional[float]] = [None] * len(timeline)
            for r in runs[key]:
                column[where[r.run_id]] = r.median
            columns.append(column)
        pooled = detect_pooled(columns, lam, penalty, min_size, clip, join, _groups(keys, group_by), group_penalty,
                               group_join, group_rest)
        # Back to each series' own run positions (own[key]: timeline split -> own break).
        own: dict[SeriesKey, dict[int, int]] = {}
        moved_with: dict[tuple[tuple, int], list[float]] = {}
        mates = {key: tuple(getattr(key, f) for f in (group_by[0] if group_by else ("metric",))) for key in keys}
        for key, breaks in zip(keys, pooled):
            position = {where[r.run_id]: i for i, r in enumerate(runs[key])}
            mine = {t: position.get(t, _next_position(runs[key], where, t)) for t in breaks}
            own[key] = {t: b for t, b in mine.items() if 0 < b < len(runs[key])}
            y = np.log([r.median for r in runs[key]])
            for t, shift in zip(own[key], _shifts(y, list(own[key].values()))):
                moved_with.setdefault((mates[key], t), []).append(shift)
        # The effect filter per series. A step shared by several series of its finest group (one metric at
        # one placement) is judged by their mean shift: a 5 % step of cross-node bandwidth (3.5 % noise)
        # often shows < 2 % in one series' segment medians, and the series that moved with it say what it
        # was. A series of another group that joined the split by chance is judged on its own.
        kept: dict[SeriesKey, list[int]] = {}
        for key in keys:
            floor = {b: abs(float(np.mean(moved_with[(mates[key], t)]))) for t, b in own[key].items()
                     if shared_floor and len(moved_with[(mates[key], t)]) >= shared_floor}
            kept[key] = _filtered([r.median for r in runs[key]], sorted(set(own[key].values())), min_effect, floor)
        # How many series moved at each run of the timeline (after the filter).
        moved: dict[str, int] = {}
        for key, breaks in kept.items():
            for b in breaks:
                moved[runs[key][b].run_id] = moved.get(runs[key][b].run_id, 0) + 1
        for key, breaks in kept.items():
            points = _points(key, runs[key], breaks, {b: moved[runs[key][b].run_id] for b in breaks})
            if points:
                found[key] = points
    return found


def _next_position(series: Sequence[RunPoint], where: Mapping[str, int], t: int) -> int:
    """The position in ``series`` of its first run at or after timeline position ``t``."""
    for i, r in enumerate(series):
        if where[r.run_id] >= t:
            return i
    return len(series)


def scan(history: History, keys: Optional[Sequence[SeriesKey]] = None, since: Optional[str] = None,
         **params) -> dict[SeriesKey, list[ChangePoint]]:
    """Change points of every accepted series (or of ``keys``); ``since`` (ISO date) keeps recent ones."""
    runs = {key: history.series_runs(key) for key in (keys if keys is not None else history.series_keys())}
    found = {}
    for key, points in scan_runs(runs, **params).items():
        if since:
            points = [p for p in points if p.run_after.time >= since]
        if points:
            found[key] = points
    return found
