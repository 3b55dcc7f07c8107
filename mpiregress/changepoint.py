"""Weekly change-point detection over each series of the history.

Method: PELT (Killick, Fearnhead & Eckley 2012, "Optimal detection of changepoints
with a linear computational cost") from the ``ruptures`` library, with the L1 cost
(least absolute deviations, i.e. segment medians), on the log of each run's median.

Why this method:
* PELT finds the *exact* optimal segmentation for a penalised cost, any number of
  change points, in linear time: a year of weekly runs per series is instantaneous.
* The L1 cost makes it robust to the heavy-tailed, one-sided noise of OSU runs: one
  slow week is not a segment (with L2 it is: two spurious change points around it).
* Logs make a change relative ("bandwidth fell 8 %") and the noise homoscedastic,
  so one penalty suits 0.6 us latencies and 17 GB/s bandwidths alike.
* The penalty is scaled by the series' own robust noise (MAD of consecutive
  differences, blind to the steps being looked for): ``beta x sigma x log(n)``.
* Reported change points must also move the segment median by at least
  ``min_effect`` (2 %) and by ``z_effect`` standard errors of the difference of the
  two segment medians: statistically real but negligible shifts are not worth a
  weekly e-mail, and a short segment must show a bigger shift.

Why not apache-otava (E-divisive means, the method MongoDB and Otava use): it is
the better-known tool for CI performance data, but its package pins numpy 2.2 (this
project runs numpy 2.4 for matplotlib) and pulls BigQuery, Postgres, Slack and
Grafana clients; E-divisive's permutation test also makes results depend on a
random seed. ruptures needs only numpy and scipy.

Each change point names what changed between the last run before it and the first
run after it: the commit range and, when it differs, the toolchain.
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np

from .history import History, RunPoint
from .names import METRICS
from .names import format_value as fv
from .series import SeriesKey

BETA = 3.0          # penalty multiplier (benchmarks/gate_detection-style calibration in tests/test_changepoint.py)
MIN_SIZE = 3        # a segment spans at least 3 runs: one odd week is not a new level
MIN_EFFECT = 0.02   # smallest relative shift reported
Z_EFFECT = 3.0      # ... and at least this many standard errors of the two segment medians' difference


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

    @property
    def toolchain_changed(self) -> bool:
        return self.run_before.toolchain != self.run_after.toolchain

    @property
    def commits(self) -> str:
        """The commit range to look at, ``old..new`` (or the one commit when both runs share it)."""
        old, new = self.run_before.commit or "?", self.run_after.commit or "?"
        return new if old == new else f"{old}..{new}"

    def sentence(self) -> str:
        unit = METRICS[self.key.metric].unit
        direction = "worse" if self.worse else "better"
        what = (f"{self.key.name()}: {abs(self.change):.1%} {direction} ({fv(self.before)} -> "
                f"{fv(self.after)} {unit}) from run {self.run_after.run_id} ({self.run_after.time[:10]}), "
                f"commit {self.commits}")
        if self.toolchain_changed:
            what += f", toolchain {self.run_before.toolchain} -> {self.run_after.toolchain}"
        return what


def _noise(y: np.ndarray) -> float:
    """Robust sigma of a log series from consecutive differences (steps barely move it)."""
    if len(y) < 3:
        return 0.0
    d = np.diff(y)
    return float(1.4826 * np.median(np.abs(d - np.median(d))) / math.sqrt(2))


def _segments(n: int, breaks: Sequence[int]) -> list[tuple[int, int]]:
    edges = [0, *breaks, n]
    return [(a, b) for a, b in zip(edges, edges[1:])]


def detect(values: Sequence[float], beta: float = BETA, min_size: int = MIN_SIZE, min_effect: float = MIN_EFFECT,
           z_effect: float = Z_EFFECT) -> list[int]:
    """Indices where a new level starts in ``values`` (positive numbers, oldest first)."""
    import ruptures  # imported here: only the weekly scan and reports need it

    y = np.log(np.asarray(values, dtype=float))
    n = len(y)
    if n < 2 * min_size:
        return []
    sigma = _noise(y)
    # A floor keeps a perfectly flat series (sigma 0) from splitting on rounding.
    scale = max(sigma, 1e-3)
    breaks = ruptures.Pelt(model="l1", min_size=min_size, jump=1).fit(y.reshape(-1, 1)).predict(
        pen=beta * scale * math.log(n))[:-1]
    # Drop the weakest negligible break and re-measure its neighbours until every one matters.
    while breaks:
        segs = _segments(n, breaks)
        # Shift of the segment medians, in units of what it needs to count.
        ratios = []
        for (a0, a1), (b0, b1) in zip(segs, segs[1:]):
            shift = abs(float(np.median(y[b0:b1]) - np.median(y[a0:a1])))
            stderr = math.sqrt(math.pi / 2) * sigma * math.sqrt(1 / (a1 - a0) + 1 / (b1 - b0))
            ratios.append(shift / max(math.log1p(min_effect), z_effect * stderr))
        weakest = min(range(len(ratios)), key=ratios.__getitem__)
        if ratios[weakest] >= 1:
            break
        del breaks[weakest]
    return list(breaks)


def series_changepoints(key: SeriesKey, runs: Sequence[RunPoint], **params) -> list[ChangePoint]:
    """Change points of one series' runs (oldest first), each naming its commit range."""
    medians = [r.median for r in runs]
    breaks = detect(medians, **params)
    segs = _segments(len(runs), breaks)
    points = []
    for (a0, a1), (b0, b1) in zip(segs, segs[1:]):
        before, after = statistics.median(medians[a0:a1]), statistics.median(medians[b0:b1])
        change = after / before - 1
        worse = METRICS[key.metric].worse(after, before)
        points.append(ChangePoint(key, b0, before, after, change, worse, runs[b0 - 1], runs[b0]))
    return points


def scan(history: History, keys: Optional[Sequence[SeriesKey]] = None, since: Optional[str] = None,
         **params) -> dict[SeriesKey, list[ChangePoint]]:
    """Change points of every accepted series (or of ``keys``); ``since`` (ISO date) keeps recent ones."""
    found = {}
    for key in keys if keys is not None else history.series_keys():
        points = series_changepoints(key, history.series_runs(key), **params)
        if since:
            points = [p for p in points if p.run_after.time >= since]
        if points:
            found[key] = points
    return found
