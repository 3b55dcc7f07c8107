"""The looks of a sequential A/B run and its alpha spending (a group-sequential design).

Why sequential
--------------
Five pairs decide most series of a toolchain MR, but not all: one pair in which B happened
to beat A (a quiet moment for B, a busy one for A) leaves a 2-5x regression "inconclusive"
at 5 pairs, and an inconclusive series used to pass silently. So a series that is still
inconclusive after a look while its estimate is beyond the minimum effect gets more pairs, in
the same allocation, up to a budget (:class:`Schedule`, data in ``systems/<name>.yaml``,
``ab:``). A series that is clear after the first look (most of them) costs nothing more.

Why not simply test again
-------------------------
Testing the same series at 1 % after 5, 7, 9 and 11 pairs raises its false-alarm rate to
about 2-3 %: each look is another chance for the jitter to cross. A group-sequential design
fixes the false alarms over all looks instead: the level ``alpha`` is *spent* over the looks by
a spending function of the information fraction ``t = n / max_pairs`` (Lan & DeMets 1983), and
the boundary of each look is set so that the probability, under "B is A", of crossing there
without having crossed before is exactly what that look spends. Stopping early (a series that
is clear, or whose estimate is within the minimum effect) only lowers the false alarms
(non-binding futility).

The boundaries are computed on the canonical joint distribution of the looks' z-statistics
(Jennison & Turnbull 2000, ch. 3: ``Z_j = S_j / sqrt(I_j)`` with ``S`` a Brownian motion in the
information ``I_j`` = pairs), by the recursive numerical integration of Armitage, McPherson and
Rowe (1969). Each look's z comes from that look's own p-value: the Hodges-Lehmann estimate of
the first ``n_j`` pairs against its pooled-jitter Monte Carlo null (:mod:`.paired`), so the
heavy-tailed jitter is handled exactly per look and only the correlation between looks
(``sqrt(n_i / n_j)``, as for any asymptotically linear estimate) is the normal one.

One series among many: a series' **sequential p-value** is the smallest level at which its
design would have crossed at one of its looks (the repeated p-values' minimum). It is a valid
p-value (P(p <= u) <= u under "B is A", for any stopping), so Holm's step-down over the
sequential p-values of all series keeps the family-wise error across series *and* looks
(the group-sequential Holm of Maurer & Bretz 2013 with equal weights).

Why the power family and not O'Brien-Fleming
--------------------------------------------
O'Brien-Fleming-type spending saves almost all of alpha for the last look: at ``t = 4/10`` and
the Holm level of an 80-series MR (1.25e-4) it spends ~1e-9 at the first look, so no series could
fail after 4 pairs and every real 5 % step would cost the whole budget. The first look here is
already the ordinary A/B run; the extra looks are a rescue for the few inconclusive series. So
most of alpha goes to the first look: ``alpha * t**rho`` with ``rho = 0.25`` spends 80 % of alpha
at 4 of 10 pairs (benchmarks/ab_sequential.py prints the detection and the cluster time).
``obrien-fleming`` and ``pocock`` (Lan-DeMets types) are there too (``PairedConfig.spending``).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from mpiregress.errors import InputError
from mpiregress.model import systems

# scipy (about half a second to import) only inside the functions that compute with it: checks/osu_ab.py
# imports Schedule from here in every ReFrame run.

SPENDING_FAMILIES = ("power", "obrien-fleming", "pocock")


@dataclass(frozen=True)
class Schedule:
    """How many A/B pairs a series gets: ``initial_pairs`` first, then ``look_every`` more per look
    while it is inconclusive beyond the minimum effect, never more than ``max_pairs``."""

    initial_pairs: int = 4     # two ABBA blocks: 2 x 4 executions = 1.6x one ordinary measurement of k = 5
    look_every: int = 2        # an even step keeps every further round in whole ABBA blocks
    max_pairs: int = 10        # the worst case of one series: 4x one ordinary measurement

    def __post_init__(self) -> None:
        if not 2 <= self.initial_pairs <= self.max_pairs:
            raise InputError(f"A/B schedule: initial_pairs {self.initial_pairs} must be from 2 to max_pairs "
                             f"{self.max_pairs}")
        if self.look_every < 1:
            raise InputError(f"A/B schedule: look_every {self.look_every} must be at least 1")

    def look_sizes(self) -> list[int]:
        """Pairs measured at each look: e.g. 5, 7, 9, 11."""
        sizes = [self.initial_pairs]
        while sizes[-1] < self.max_pairs:
            sizes.append(min(sizes[-1] + self.look_every, self.max_pairs))
        return sizes

    @property
    def looks(self) -> int:
        return len(self.look_sizes())

    def next_round(self, pairs_so_far: int) -> tuple[int, int]:
        """(first pair index, number of pairs) of the round after ``pairs_so_far`` pairs; (n, 0) at the budget."""
        more = min(self.look_every, self.max_pairs - pairs_so_far)
        return pairs_so_far, max(more, 0)

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any], where: str) -> "Schedule":
        """The schedule from a system's ``ab:`` block (missing keys keep their defaults); one sentence if bad."""
        known = {"initial_pairs", "look_every", "max_pairs"}
        values = {}
        for name in known & set(data):
            value = data[name]
            if isinstance(value, bool) or not isinstance(value, int):
                raise InputError(f"{where}: ab.{name} is {value!r}, expected a whole number")
            values[name] = value
        try:
            return cls(**values)
        except InputError as err:
            raise InputError(f"{where}: {err}") from None


def schedule_of(system: systems.System) -> Schedule:
    """The A/B pairs budget of ``system`` (its ``ab:`` block: ``initial_pairs``, ``look_every``,
    ``max_pairs``); keys left out keep the defaults."""
    block = system.data.get("ab") or {}
    _check(block, system.path, "ab")
    return Schedule.from_mapping(block, f"system file {system.path}")


@systems.section_check("ab")
def _check(block: Any, path: Path, key: str) -> None:
    if not isinstance(block, dict):
        raise InputError(f"system file {path}: '{key}' must be a mapping")
    Schedule.from_mapping(block, f"system file {path}")


def spent(fraction: float, alpha: float, family: str = "power", rho: float = 0.25) -> float:
    """Alpha spent up to information fraction ``fraction`` (0..1] by the spending function ``family``."""
    t = min(max(fraction, 0.0), 1.0)
    if t <= 0:
        return 0.0
    if family == "power":
        return alpha * t ** rho
    if family == "pocock":
        return alpha * math.log1p((math.e - 1) * t)
    if family == "obrien-fleming":
        from scipy import special
        return float(2 * special.ndtr(-special.ndtri(1 - alpha / 2) / math.sqrt(t)))
    raise InputError(f"unknown alpha spending family {family!r} (known: {', '.join(SPENDING_FAMILIES)})")


_GRID = 301          # points of the continuation density per look
_LOW_Z = -9.0        # the density below this z is negligible (and never near a boundary)


def boundaries(alpha: float, fractions: Sequence[float], family: str = "power", rho: float = 0.25) -> np.ndarray:
    """Upper z-boundaries of the looks at information ``fractions`` (increasing, last <= 1) for level ``alpha``.

    Look j's boundary ``c_j`` solves P(Z_1 < c_1, ..., Z_{j-1} < c_{j-1}, Z_j >= c_j) = spent(t_j) -
    spent(t_{j-1}) under the canonical joint distribution; a look that spends nothing gets +inf.
    """
    from scipy import optimize, special
    info = np.asarray(fractions, dtype=float)
    out = np.full(len(info), np.inf)
    density = None          # continuation density of S_{j-1} on ``grid`` (trapezoid weights folded in)
    grid = None
    previous = 0.0
    for j, t in enumerate(info):
        target = spent(t, alpha, family, rho) - previous
        previous += max(target, 0.0)
        if j == 0:
            c = float(-special.ndtri(target)) if target > 0 else math.inf
            out[0] = c
            top = c if math.isfinite(c) else 12.0
            grid = np.linspace(_LOW_Z * math.sqrt(t), top * math.sqrt(t), _GRID)
            weights = _trapezoid(grid)
            density = np.exp(-grid ** 2 / (2 * t)) / math.sqrt(2 * math.pi * t) * weights
            continue
        assert grid is not None and density is not None
        step = t - info[j - 1]
        if step <= 0:
            raise InputError(f"information fractions must increase, got {list(fractions)}")
        scale = math.sqrt(step)
        root_t = math.sqrt(t)

        def crossing(c: float, grid=grid, density=density, scale=scale, root_t=root_t) -> float:
            return float(np.sum(density * special.ndtr((grid - c * root_t) / scale)))

        if target <= 0:
            c = math.inf
        elif crossing(-20.0) <= target:
            c = -20.0
        else:
            c = float(optimize.brentq(lambda x, goal=target: crossing(x) - goal, -20.0, 40.0, xtol=1e-10,
                                      rtol=1e-12))
        out[j] = c
        top = c if math.isfinite(c) else 12.0
        new_grid = np.linspace(_LOW_Z * root_t, top * root_t, _GRID)
        kernel = np.exp(-(new_grid[:, None] - grid[None, :]) ** 2 / (2 * step)) / math.sqrt(2 * math.pi * step)
        density = (kernel @ density) * _trapezoid(new_grid)
        grid = new_grid
    return out


def _trapezoid(grid: np.ndarray) -> np.ndarray:
    w = np.full(len(grid), grid[1] - grid[0])
    w[0] = w[-1] = w[0] / 2
    return w


# Levels at which the boundaries are tabulated for sequential p-values: 1e-9 .. 1, 10 per decade.
_LEVELS = np.logspace(-9, 0, 91)


@lru_cache(maxsize=256)
def _table(fractions: tuple[float, ...], family: str, rho: float) -> np.ndarray:
    """Boundaries (rows: levels of ``_LEVELS``, columns: looks)."""
    return np.vstack([boundaries(float(a), fractions, family, rho) for a in _LEVELS])


def sequential_p(z: Sequence[float], fractions: Sequence[float], family: str = "power", rho: float = 0.25) -> float:
    """The smallest level at which the design over ``fractions`` crosses at one of the looks with statistics ``z``.

    One look at full information is the fixed test: 1 - Phi(z). Otherwise the boundaries are
    tabulated per level and each look's repeated p-value is interpolated in log(level) between the
    two tabulated levels around it (boundaries fall as the level rises).
    """
    if len(z) != len(fractions) or not len(z):
        raise ValueError("one z per look is needed")
    if len(z) == 1 and fractions[0] >= 1:
        from scipy import special
        return float(special.ndtr(-z[0]))
    table = _table(tuple(round(float(f), 12) for f in fractions), family, rho)
    logs = np.log(_LEVELS)
    best = 1.0
    for j, value in enumerate(z):
        column = table[:, j]
        finite = np.isfinite(column)
        if not finite.any() or value < column[finite].min():
            continue
        crossed = np.nonzero(finite & (column <= value))[0]
        first = int(crossed[0])
        if first == 0:
            best = min(best, float(_LEVELS[0]))
            continue
        hi, lo = column[first], column[first - 1]     # hi <= value < lo (or lo is inf)
        if not math.isfinite(lo):
            best = min(best, float(_LEVELS[first]))
            continue
        share = (lo - value) / (lo - hi)
        best = min(best, float(math.exp(logs[first - 1] + share * (logs[first] - logs[first - 1]))))
    return best
