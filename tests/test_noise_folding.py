"""The time domain's own search for slow periods (families/noise/folding.py) on a loaded core at normal
priority: other processes' time slices on the tick take half of it, and a daemon every 90 ms leaves no
spectral line, only stalls that start at one phase whenever FWQ held the core when it woke."""
from __future__ import annotations

import numpy as np
import pytest

from mpiregress.families.noise import analysis, findings, folding, fwqfile, recurrence

QUANTUM_NS = 10_000
TICK_NS = 4_000_000


def loaded_core(seed: int, daemon_ns: int = 0, spin_ns: int = 2_000_000, iterations: int = 300_000) -> np.ndarray:
    """FWQ's iteration times on a core where each 4 ms tick interrupts for 3 us or, with probability 0.6,
    hands the core to another process for a 1-6 ms slice, and (``daemon_ns``) a daemon woken every
    ``daemon_ns`` spins ``spin_ns``: it preempts FWQ when FWQ holds the core, and runs unseen inside another
    process's slice when it does not."""
    rng = np.random.default_rng(seed)
    horizon = iterations * QUANTUM_NS * 4
    ticks = np.arange(TICK_NS, horizon, TICK_NS)
    taken = ticks[rng.random(len(ticks)) < 0.6]
    away = [(int(t + rng.integers(0, 20_000)), int(rng.integers(1_000_000, 6_000_000))) for t in taken]
    away += [(int(t), 3_000) for t in np.setdiff1d(ticks, taken)]        # the tick's own interrupt
    if daemon_ns:
        phase = int(rng.integers(0, daemon_ns))
        away += [(int(t), spin_ns) for t in range(phase, horizon, daemon_ns)]
    away.sort()
    merged: list[list[int]] = []
    for start, length in away:
        if merged and start < merged[-1][1]:
            merged[-1][1] += length                 # woken while the core is away: it runs after, unseen
        else:
            merged.append([start, start + length])
    times = np.full(iterations, QUANTUM_NS, dtype=np.int64)
    now, j = 0, 0
    for i in range(iterations):
        while j < len(merged) and merged[j][0] < now + times[i]:
            times[i] += merged[j][1] - merged[j][0]
            j += 1
        now += int(times[i])
    return times.astype(np.uint32)


def rank(times: np.ndarray) -> fwqfile.RankData:
    return fwqfile.RankData(0, 0, False, True, QUANTUM_NS, 0, times)


def slow(times: np.ndarray) -> list[tuple[float, float, int]]:
    stalls = recurrence.stalls_over(rank(times), analysis.DEFAULT_THRESHOLD_FRACTION)
    return folding.slow_periods(stalls, len(times) * QUANTUM_NS, recurrence.tick_hz(stalls))


@pytest.mark.parametrize("seed", [1, 2])
def test_a_90_ms_daemon_on_a_loaded_core_is_named_by_folding_with_no_spectral_line(seed: int) -> None:
    times = loaded_core(seed, daemon_ns=90_000_000)
    assert analysis.efficiency(np.vstack([times, np.full_like(times, QUANTUM_NS)])) < 0.6   # the load took half
    freqs, power, lines = analysis.rank_spectrum(rank(times))
    bin_hz = float(freqs[1] - freqs[0])
    spectral = analysis.dominant_periods(freqs, power, lines=lines)
    assert not any(abs(p.frequency_hz - 1000 / 90) <= max(bin_hz, 0.2) for p in spectral)
    found = slow(times)
    assert [round(1000 / f) for f, _, _ in found] == [90]
    share, cycles = found[0][1], found[0][2]
    assert share >= recurrence.MIN_HIT_SHARE and cycles >= folding.MIN_OBSERVED
    core = analysis.core_noise("node1", rank(times))
    folded = [p for p in core.periods if p.folded]
    assert [round(1000 / p.frequency_hz) for p in folded] == [90]
    said = findings.periodic(core)
    assert any("every 90 ms" in s and "found by folding" in s and "no spectral line" in s for s in said), said


@pytest.mark.parametrize("seed", [3, 4, 5])
def test_the_loads_time_slices_on_the_tick_alone_fold_to_no_period(seed: int) -> None:
    """Slices start on the tick: every whole number of (half) ticks holds them at one phase; no period."""
    assert slow(loaded_core(seed)) == []
    core = analysis.core_noise("node1", rank(loaded_core(seed)))
    assert not [p for p in core.periods if p.folded]


def test_a_faster_event_is_not_named_again_at_a_whole_multiple() -> None:
    """A daemon every 30 ms holds one phase of every 90 ms cycle too; the search leaves 90 ms to it (and, below
    MIN_PERIOD_NS, 30 ms to the spectrum)."""
    found = slow(loaded_core(6, daemon_ns=30_000_000, spin_ns=1_000_000))
    assert not any(abs(1000 / f - 90) < 2 or abs(1000 / f - 60) < 2 for f, _, _ in found), found


def test_a_beats_comb_whose_fundamental_does_not_recur_is_named_at_the_multiple_it_has_a_line_at() -> None:
    """A 13 ms daemon on a crowded core: the spectrum's comb sits 19.2 Hz apart (52 ms, its beat with the 4 ms
    tick), whose phases a crowded core fills; its stalls recur every 13 ms, where the comb has its 4th line."""
    stalls = recurrence.stalls_over(rank(loaded_core(7, daemon_ns=13_000_000, spin_ns=1_000_000)),
                                    analysis.DEFAULT_THRESHOLD_FRACTION)
    bin_hz = 1e9 / stalls.duration_ns
    assert recurrence.hit_share(stalls, 1000 / 52, bin_hz, tick_hz=250.0) == 0.0
    assert recurrence.fundamental(stalls, 1000 / 52, bin_hz, 250.0) == (1000 / 52, 0.0)    # no line: no guess
    frequency, share = recurrence.fundamental(stalls, 1000 / 52, bin_hz, 250.0, lines=[1000 / 26, 1000 / 13])
    assert abs(frequency - 1000 / 13) < 0.01 and share >= recurrence.MIN_HIT_SHARE


@pytest.mark.parametrize(("period_ms", "phases"), [(90.0, 44), (6.0, 2), (40 / 3, 9), (8.0, 1), (7.1, 0)])
def test_the_tick_comes_back_at_few_phases_of_a_period_a_whole_number_of_its_shares(period_ms: float,
                                                                                   phases: int) -> None:
    """90 ms is 45 half ticks, 6 ms 3 half ticks, 13.3 ms 10 third ticks, 8 ms 2 ticks: the tick's phases an
    event there must stand out from; 7.1 ms is no whole number of eighths of a tick."""
    offsets = recurrence.tick_phases(period_ms * 1e6, 250.0)
    assert len(offsets) == phases
    assert all(abs(o / 4e6 - round(o / 4e6)) < 1e-9 for o in offsets)
    assert recurrence.tick_phases(period_ms * 1e6, None).size == 0
