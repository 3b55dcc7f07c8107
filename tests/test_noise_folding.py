"""The time domain's own search for slow periods (families/noise/folding.py) on a loaded core at normal
priority: other processes' time slices on the tick take half of it, and a daemon every 90 ms leaves no
spectral line, only stalls that start at one phase whenever FWQ held the core when it woke."""
from __future__ import annotations

import numpy as np
import pytest
from helpers.kept_stalls import measured

from mpiregress.families.noise import analysis, findings, folding, fwqfile, recurrence

QUANTUM_NS = 10_000
TICK_NS = 4_000_000
DURATION_NS = 12e9


def loaded_core(seed: int, daemon_ns: int = 0, spin_ns: int = 2_000_000, iterations: int = 300_000,
                daemon_phase_ns: int | None = None) -> np.ndarray:
    """FWQ's iteration times on a core where each 4 ms tick interrupts for 3 us or, with probability 0.6,
    hands the core to another process for a 1-6 ms slice, and (``daemon_ns``) a daemon woken every
    ``daemon_ns`` (first at ``daemon_phase_ns``, by default at random) spins ``spin_ns``: it preempts FWQ when
    FWQ holds the core, and runs unseen inside another process's slice when it does not."""
    rng = np.random.default_rng(seed)
    horizon = iterations * QUANTUM_NS * 4
    ticks = np.arange(TICK_NS, horizon, TICK_NS)
    taken = ticks[rng.random(len(ticks)) < 0.6]
    away = [(int(t + rng.integers(0, 20_000)), int(rng.integers(1_000_000, 6_000_000))) for t in taken]
    away += [(int(t), 3_000) for t in np.setdiff1d(ticks, taken)]        # the tick's own interrupt
    if daemon_ns:
        phase = int(rng.integers(0, daemon_ns)) if daemon_phase_ns is None else daemon_phase_ns
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
    assert [round(1000 / f.frequency_hz) for f in found] == [90]
    share, cycles = found[0].share, found[0].cycles
    assert share >= recurrence.MIN_HIT_SHARE and cycles >= folding.MIN_OBSERVED
    core = analysis.core_noise("node1", rank(times))
    folded = [p for p in core.periods if p.folded]
    assert [round(1000 / p.frequency_hz) for p in folded] == [90]
    said = findings.periodic(core)
    assert any("every 90 ms" in s and "found by folding" in s and "no spectral line" in s for s in said), said


@pytest.mark.parametrize("seed", [10, 11, 12])
def test_a_real_time_daemon_at_the_ticks_busiest_phase_is_named_by_the_idle_window_after_it(seed: int) -> None:
    """A 250 ms daemon started on a tick (as a process starts) spins at the phase where the load's slices start
    too: its onsets in the cycles FWQ could see are no proof beyond chance over the blind search, but FWQ ran in
    none of the run's cycles just after it, where at a phase taken at random it ran in about half."""
    times = loaded_core(seed, daemon_ns=250_000_000, daemon_phase_ns=12 * TICK_NS + 200_000)
    stalls = recurrence.stalls_over(rank(times), analysis.DEFAULT_THRESHOLD_FRACTION)
    onsets = stalls.at_least(folding.SIZES_US[0]).start
    tick = recurrence.tick_hz(stalls)
    period = folding.refine(onsets, 250e6, stalls.duration_ns)
    share, chance, cycles, _ = recurrence.held_at(stalls, period, folding.FOLD_TOLERANCE_NS, onsets=onsets,
                                                  tick_hz=tick)
    assert share == 1.0 and not recurrence.significant(share, chance, cycles, most_chance=folding.MAX_CHANCE)
    fold = folding.judged(stalls, onsets, period, tick)
    assert fold is not None and round(1000 / fold.frequency_hz) == 250
    assert fold.idle is not None and fold.idle[0] == fold.idle[1] >= 24
    control = recurrence.stalls_over(rank(loaded_core(seed)), analysis.DEFAULT_THRESHOLD_FRACTION)
    at = control.at_least(folding.SIZES_US[0]).start
    assert folding.judged(control, at, folding.refine(at, 250e6, control.duration_ns), tick) is None


def test_a_faster_source_holding_the_core_at_every_share_of_a_period_explains_its_idle_window() -> None:
    """Every 270 ms cycle of a 90 ms real-time daemon is idle after its phase too, and 90 and 180 ms later: the
    faster source's, not a 270 ms one; a 250 ms daemon's window 125 ms later is as busy as anywhere."""
    for daemon_ms, period_ms, explained in ((90, 270, True), (250, 250, False)):
        times = loaded_core(10, daemon_ns=daemon_ms * 1_000_000, daemon_phase_ns=12 * TICK_NS + 200_000)
        stalls = recurrence.stalls_over(rank(times), analysis.DEFAULT_THRESHOLD_FRACTION)
        phase = (12 * TICK_NS + 200_000 - folding.IDLE_AFTER_NS / 2) % (period_ms * 1e6)
        idle, _, _ = recurrence.idle_at(stalls, period_ms * 1e6, phase, folding.IDLE_AFTER_NS, 500_000)
        assert idle >= folding.MIN_IDLE_SHARE
        assert folding.idle_faster(stalls, period_ms * 1e6, phase) is explained


def test_a_period_named_by_its_idle_window_says_so() -> None:
    said = findings.evidence(analysis.Period(4.0, 0.0, 0, recurring=True, folded=(14, 14, 26, 26)), 0.0)
    assert said.startswith("its stalls start at one phase in 14 of the 14 cycles FWQ could see, and FWQ did not "
                           "run in the 1 ms after it in 26 of all 26 cycles"), said
    assert "26 of all" not in findings.evidence(analysis.Period(4.0, 0.0, 0, recurring=True, folded=(14, 14)), 0.0)


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
    assert not any(abs(1000 / f.frequency_hz - 90) < 2 or abs(1000 / f.frequency_hz - 60) < 2 for f in found), found


def test_a_beats_comb_whose_fundamental_does_not_recur_is_named_at_the_multiple_it_has_a_line_at() -> None:
    """A 13 ms daemon on a crowded core: the spectrum's comb sits 19.2 Hz apart (52 ms, its beat with the 4 ms
    tick), whose phases a crowded core fills; its stalls recur every 13 ms, where the comb has its 4th line (its
    12th where the spectrum reads the comb 6.41 Hz apart)."""
    stalls = recurrence.stalls_over(rank(loaded_core(7, daemon_ns=13_000_000, spin_ns=1_000_000)),
                                    analysis.DEFAULT_THRESHOLD_FRACTION)
    bin_hz = 1e9 / stalls.duration_ns
    assert recurrence.hit_share(stalls, 1000 / 52, bin_hz, tick_hz=250.0) == 0.0
    # No line at it: the beat's multiples at its exact rate are asked too (noise-keep25: no 4th line, 5 runs of 5).
    frequency, share = recurrence.fundamental(stalls, 1000 / 52, bin_hz, 250.0)
    assert frequency == pytest.approx(1000 / 13) and share >= recurrence.MIN_HIT_SHARE
    frequency, share = recurrence.fundamental(stalls, 1000 / 52, bin_hz, 250.0, lines=[1000 / 26, 1000 / 13])
    assert abs(frequency - 1000 / 13) < 0.01 and share >= recurrence.MIN_HIT_SHARE
    # A comb read 6.41 Hz apart (156 ms, 39 ticks: a real crowded core's slices turning over every three ticks):
    # every 13 ms is its 12th line, past the MAX_MULTIPLE of other rates.
    assert recurrence.hit_share(stalls, 1000 / 156, bin_hz, tick_hz=250.0) == 0.0
    frequency, share = recurrence.fundamental(stalls, 1000 / 156, bin_hz, 250.0, lines=[1000 / 13])
    assert abs(frequency - 1000 / 13) < 0.01
    assert share >= recurrence.MIN_HIT_SHARE


@pytest.mark.parametrize(("period_ms", "phases"), [(90.0, 44), (6.0, 2), (40 / 3, 9), (8.0, 1), (7.1, 0)])
def test_the_tick_comes_back_at_few_phases_of_a_period_a_whole_number_of_its_shares(period_ms: float,
                                                                                   phases: int) -> None:
    """90 ms is 45 half ticks, 6 ms 3 half ticks, 13.3 ms 10 third ticks, 8 ms 2 ticks: the tick's phases an
    event there must stand out from; 7.1 ms is no whole number of eighths of a tick."""
    offsets = recurrence.tick_phases(period_ms * 1e6, 250.0)
    assert len(offsets) == phases
    assert all(abs(o / 4e6 - round(o / 4e6)) < 1e-9 for o in offsets)
    assert recurrence.tick_phases(period_ms * 1e6, None).size == 0


def stalls_of(*trains: tuple[np.ndarray, float]) -> recurrence.Stalls:
    """A core's stalls over DURATION_NS from (onsets ns, length ns) trains."""
    onsets = np.concatenate([t for t, _ in trains])
    lengths = np.concatenate([np.full(len(t), length) for t, length in trains])
    order = np.argsort(onsets)
    return recurrence.Stalls(onsets[order], onsets[order] + lengths[order], lengths[order] / 1e3, DURATION_NS)


def slices_and_daemon(seed: int, period_ns: float, late_ns: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Onsets over DURATION_NS: the slices handed out at half the ticks (within 20 us of them), and a daemon's
    every ``period_ns`` from 1.3 ms (within 50 us; ``late_ns`` later in alternate cycles)."""
    rng = np.random.default_rng(seed)
    ticks = np.arange(TICK_NS, DURATION_NS, TICK_NS)
    slices = ticks[rng.random(len(ticks)) < 0.5]
    slices = slices + rng.integers(0, 20_000, len(slices))
    daemon = np.arange(1.3e6, DURATION_NS, period_ns)
    daemon = daemon + np.where(np.arange(len(daemon)) % 2, late_ns, 0) + rng.integers(0, 50_000, len(daemon))
    return slices, daemon


def test_a_rate_just_off_a_whole_number_of_ticks_held_by_the_ticks_slices_is_no_event() -> None:
    """16.04 ms is 4.01 ticks: its wide window drifts over the tick's phases in a run, and slices handed out on
    the tick fall into it cycle after cycle (62.34 Hz beside a real-time 90 ms daemon, noise-keep15). Those stalls
    start at one phase of the tick; a daemon's keep its own period's phase and spread over the tick's."""
    duration, period = DURATION_NS, 16.04e6
    slices, daemon = slices_and_daemon(3, period)
    tolerance = recurrence.TICK_MULTIPLE_TOLERANCE_SHARE * period
    locked = stalls_of((slices, 500_000))
    assert recurrence.whole_ticks(period, 250.0) == 4
    assert recurrence.tick_locked(locked, locked.start, period, 0.0, tolerance, 250.0)
    assert recurrence.hit_share(locked, 1e9 / period, 1e9 / duration, tick_hz=250.0) == 0.0
    both = stalls_of((np.concatenate((slices, daemon)), 200_000))
    assert not recurrence.tick_locked(both, both.start, period, 1.3e6, tolerance, 250.0)
    assert recurrence.hit_share(both, 1e9 / period, 1e9 / duration, tick_hz=250.0) >= recurrence.MIN_HIT_SHARE
    # At the whole number itself the window keeps its phase of the tick all run: the tick's phases judge it.
    assert not recurrence.tick_locked(locked, locked.start, 16e6, 0.0, tolerance, 250.0)


def test_a_source_the_spectrum_names_is_not_given_up_for_the_folds_period_twice_as_long() -> None:
    """A 27 ms daemon at normal priority (6.75 ticks: its timer falls on alternate halves of the tick) started
    its stalls within 0.3 ms of one phase in every 54 ms cycle and spread over a millisecond in the cycles
    between, in 3 runs of 5 of noise-keep15. Every 54 ms cycle holds a stall within the fold's 0.3 ms of one
    phase, every 27 ms one within the spectrum's 2 % of its own: both hold all their cycles, and the faster
    is the event. (The fold's screen found nothing here at first: its pile-up was past the float's tail.)"""
    duration, period = DURATION_NS, 27e6
    slices, daemon = slices_and_daemon(5, period, late_ns=800_000)
    stalls = stalls_of((np.concatenate((slices, daemon)), 300_000))
    folded = folding.slow_periods(stalls, duration, 250.0)
    assert [round(1000 / f.frequency_hz) for f in folded] == [54]
    spectral = analysis.Period(frequency_hz=round(1e9 / period, 2), prominence=10.0, harmonics=3, recurring=True)
    assert recurrence.hit_share(stalls, spectral.frequency_hz, 1e9 / duration, tick_hz=250.0) >= \
        recurrence.MIN_HIT_SHARE
    both = analysis.folded_periods(stalls, duration, 250.0, (spectral,))
    kept, dropped = analysis.without_harmonics(stalls, 1e9 / duration, 250.0, both)
    assert [p.frequency_hz for p in kept] == [spectral.frequency_hz]
    assert [round(1000 / f) for f in dropped] == [54]


@pytest.mark.parametrize(("every_ms", "half"), [(13, "wake-up"), (26, "slices")])
def test_a_daemon_preempting_at_once_only_every_other_cycle_is_not_told_at_twice_its_period(every_ms: int,
                                                                                          half: str) -> None:
    """A 13 ms daemon at normal priority on a crowded core preempted FWQ at once every other cycle; in the others
    its wake-up cost FWQ tens of microseconds at the same phase and its burst came later (noise-keep23, load 8:
    the fold's 26 ms took its 76.92 Hz for a harmonic, 3 runs of 5). Every share of the fold's cycle holding
    stalls of any size as often as its phase is the faster event's. A 26 ms daemon whose half phase the load's
    slices fill in half its cycles stays the fold's, and the faster line is its harmonic."""
    rng = np.random.default_rng(every_ms)
    slices, daemon = slices_and_daemon(9, every_ms * 1e6)
    if half == "wake-up":
        late = np.arange(len(daemon)) % 2 == 1
        stalls = stalls_of((slices, 500_000), (daemon[~late], 1e6), (daemon[late], 30_000), (daemon[late] + 1.5e6, 1e6))
    else:
        filled = daemon[rng.random(len(daemon)) < 0.5] + every_ms * 1e6 / 2
        stalls = stalls_of((slices, 500_000), (daemon, 1e6), (filled, 1e6))
    folded = folding.slow_periods(stalls, DURATION_NS, 250.0)
    assert [round(1000 / f.frequency_hz) for f in folded] == [26]
    spectral = analysis.Period(frequency_hz=76.92, prominence=10.0, harmonics=3, recurring=True)
    kept, _ = analysis.without_harmonics(stalls, 1e9 / DURATION_NS, 250.0,
                                         analysis.folded_periods(stalls, DURATION_NS, 250.0, (spectral,)))
    assert [p.frequency_hz for p in kept] == ([76.92] if half == "wake-up" else [38.46])


def host_timer_and_turns(seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Onsets over DURATION_NS: the host's 10 ms timer (from 2.5 ms, within 50 us) and the load's turns, each
    starting at a random one of the timer's cycles (the turns the scheduler hands out)."""
    rng = np.random.default_rng(seed)
    timer = np.arange(2.5e6, DURATION_NS, 10e6) + rng.integers(0, 50_000, int((DURATION_NS - 2.5e6) // 10e6) + 1)
    turns = timer[rng.random(len(timer)) < 0.2] + 100_000
    return timer, turns


def test_a_rate_whose_stalls_recur_at_every_whole_share_of_its_cycle_is_the_faster_events() -> None:
    """The host's 10 ms timer holds every 30 ms cycle as surely as its own: a core shared in turns had a 33.36 Hz
    line, held by stalls of 20 us or more in 96 % of its cycles and the phases 10 and 20 ms on in 91 and 87 %,
    named in 3 of 15 controls (noise-keep26, -27). Asked at the longest stalls that recur there, the rate is the
    100 Hz timer's, which stays."""
    timer, turns = host_timer_and_turns(1)
    stalls = stalls_of((timer, 30_000), (turns, 8e6))
    assert recurrence.hit_share(stalls, 33.33, 0.1, tick_hz=250.0) > 0.9         # what the time domain allows
    assert recurrence.fundamental(stalls, 33.33, 0.1, tick_hz=250.0)[1] == 0.0
    assert recurrence.fundamental(stalls, 100.0, 0.3, tick_hz=250.0)[1] > 0.9


@pytest.mark.parametrize("phase", ["the timer's", "its own"])
def test_a_daemon_whose_period_is_a_whole_number_of_the_host_timers_stays_its_own(phase: str) -> None:
    """A 50 ms daemon beside the host's 10 ms timer: its own stalls are its longest, and at their size no faster
    event recurs at the shares of its cycle, even where it wakes at the timer's phase."""
    timer, _ = host_timer_and_turns(2)
    daemon = timer[::5] + (0 if phase == "the timer's" else 3.3e6)
    stalls = stalls_of((timer, 30_000), (daemon + 40_000, 1.5e6))
    assert recurrence.fundamental(stalls, 20.0, 0.1, tick_hz=250.0) == (20.0, pytest.approx(1.0, abs=0.05))


def test_a_multiple_of_an_event_named_on_the_core_must_stand_out_from_its_phases() -> None:
    """Measured: core 0 of noise-keep27, a 13 ms daemon at normal priority beside busy loops. The core was idle
    after one phase of 247 ms (19 of its periods) in 40 of 40 cycles, against 0.65 at a random phase: a 4.05 Hz
    event by the idle window. After the daemon's other 18 phases it was idle in a median 96 %: the 76.92 Hz the
    spectrum named there holds that phase, and no event of 247 ms does."""
    stalls, cpu_ns = measured("noise-keep27-normal13ms-core0")
    assert 4.05 in [round(f.frequency_hz, 2) for f in folding.slow_periods(stalls, cpu_ns, 250.0)]
    assert folding.slow_periods(stalls, cpu_ns, 250.0, faster_hz=[76.92]) == []
    # 247 ms is no whole number of 27 ms
    assert 4.05 in [round(f.frequency_hz, 2) for f in folding.slow_periods(stalls, cpu_ns, 250.0, faster_hz=[37.04])]


def test_a_slow_source_is_not_given_up_for_a_faster_share_the_load_holds_less_often() -> None:
    """Measured: core 1 of noise-keep27, a real-time 250 ms daemon beside busy loops. Its phase held a long stall
    in every cycle FWQ could see (17 of 17); the phase 125 ms on, where the load's slices followed it, in 2 of 3.
    The fold is told at 250 ms, not 125 ms: the faster share is judged beside it and one_event weighs the two
    (before, the 125 ms explained the 250 ms away in ``judged``, and 8 Hz was named)."""
    stalls, cpu_ns = measured("noise-keep27-fifo250ms-core1")
    onsets = stalls.at_least(folding.SIZES_US[0]).start
    share, _, cycles, _ = recurrence.held_at(stalls, folding.refine(onsets, 250e6, stalls.duration_ns),
                                             folding.FOLD_TOLERANCE_NS, onsets=onsets, tick_hz=250.0)
    assert (share, cycles) == (1.0, 17)          # the phase of most cycles among equal bests
    assert [round(f.frequency_hz, 1) for f in folding.slow_periods(stalls, cpu_ns, 250.0)] == [4.0]


def test_a_real_time_sources_idle_window_is_asked_at_each_phase_of_the_best_share() -> None:
    """Measured: core 1 of noise-keep20, a real-time 250 ms daemon beside busy loops. Folded at 250 ms, its phase
    held a long stall in 6 of the 6 cycles FWQ could see there, and a phase of the load's in 7 of 7: asked only
    after the phase of more cycles, the idle window (0.92 there, 1.0 after the daemon's) named nothing."""
    stalls, cpu_ns = measured("noise-keep20-fifo250ms-core1")
    onsets = stalls.at_least(folding.SIZES_US[0]).start
    period = folding.refine(folding.off_tick(onsets, 250.0, cpu_ns), 250e6, stalls.duration_ns)
    assert len(recurrence.best_phases(stalls, period, folding.FOLD_TOLERANCE_NS, onsets, folding.MAX_TIED)) == 2
    assert [round(f.frequency_hz, 1) for f in folding.slow_periods(stalls, cpu_ns, 250.0)] == [4.0]


def test_a_daemon_whose_wake_up_costs_fwq_a_stall_at_every_share_is_not_told_at_a_multiple() -> None:
    """Measured: core 0 of noise-keep28, a 27 ms daemon at normal priority (load 5, FWQ keeping 14 %). Folded at
    54 ms its phase held a long stall in 45 of 45 cycles, the phase 27 ms on in 29 of 44; the 27 ms fold held 76
    of 91. Weighed as a real-time source and its slower share are, 54 ms would win by its 15 points; but stalls of
    any size start at both phases in every cycle (``split``): the daemon's, every 27 ms."""
    stalls, cpu_ns = measured("noise-keep28-normal27ms-core0")
    assert folding.split(stalls, 1000 / 54, 2, 250.0)
    assert [round(f.frequency_hz, 2) for f in folding.slow_periods(stalls, cpu_ns, 250.0)] == [37.04]


def test_a_fold_is_weighed_by_its_own_share_against_a_line_its_comb_was_raised_to() -> None:
    """Measured: core 0 of a 9 s run of noise-keep29 (FWQ keeping 14 % of it), a 90 ms daemon at normal priority.
    The spectrum's comb 5.56 Hz apart was raised to 33.36 Hz, the daemon's 3rd harmonic; the fold held 90 ms in
    114 of the 114 cycles FWQ could see there. Within the spectrum's 2 % of either period (1.8 ms of 90 ms) this
    core's stalls start in every cycle at every phase: neither rate recurs by that test, and the faster won the
    tie. Each weighed by the test that found it, the daemon is named at its own rate."""
    stalls, cpu_ns = measured("noise-keep29-normal90ms-core0")
    bin_hz = 1e9 / stalls.duration_ns
    line = analysis.Period(frequency_hz=33.36, prominence=134.3, harmonics=633)
    assert recurrence.hit_share(stalls, 33.36, bin_hz, tick_hz=250.0) == 0.0
    both = analysis.folded_periods(stalls, cpu_ns, 250.0, (line,))
    [fold] = [p for p in both if p.folded]
    assert round(1000 / fold.frequency_hz) == 90 and fold.folded[:2] == (114, 114)
    assert recurrence.hit_share(stalls, fold.frequency_hz, bin_hz, tick_hz=250.0) == 0.0
    kept, harmonics = analysis.without_harmonics(stalls, bin_hz, 250.0, both)
    assert [p.frequency_hz for p in kept] == [fold.frequency_hz] and harmonics == (33.36,)


def test_a_daemon_that_seldom_preempts_is_named_by_its_wake_ups_away_from_the_hosts_timer() -> None:
    """Measured: core 0 of noise-keep30, a 90 ms daemon at normal priority on a core FWQ kept a tenth of. Its long
    stalls held one phase in 17 of 23 cycles (under the floor): where FWQ was not preempted at once, the daemon's
    wake-up cost it tens of microseconds at its phase. The wake-ups name it once the host's 10 ms timer (named on
    the core by the spectrum) is left out: its onsets hold every 10 ms phase, and 90 ms is nine of them."""
    stalls, cpu_ns = measured("noise-keep30-normal90ms-run1-core0")
    onsets = stalls.at_least(folding.SIZES_US[0]).start
    share, _, cycles, _ = recurrence.held_at(stalls, folding.refine(onsets, 90e6, stalls.duration_ns),
                                             folding.FOLD_TOLERANCE_NS, onsets=onsets, tick_hz=250.0)
    assert (round(share, 2), cycles) == (0.74, 23)
    assert folding.slow_periods(stalls, cpu_ns, 250.0) == []
    [fold] = folding.slow_periods(stalls, cpu_ns, 250.0, faster_hz=[100.06])
    assert (round(fold.frequency_hz, 2), fold.share, fold.cycles) == (11.11, 1.0, 31)
    wakes = folding.off_faster(stalls, stalls.at_least(folding.WAKE_US).start, [100.06])
    assert 0 < len(wakes) < len(stalls.at_least(folding.WAKE_US).start)
    assert folding.preempts(stalls, wakes, folding.refine(wakes, 90e6, stalls.duration_ns), 250.0, [100.06])


def test_wake_ups_alone_at_one_phase_are_no_event() -> None:
    """Measured: core 0 of noise-keep27, a 13 ms daemon at normal priority. Its wake-ups left out, short stalls
    (16-64 us) held one phase of 43.33 ms (10/3 of its period) in 58 of 62 cycles; long stalls started there
    less often than at the median phase: no daemon takes the core at that phase, and no period is named."""
    stalls, cpu_ns = measured("noise-keep27-normal13ms-core0")
    wakes = folding.off_faster(stalls, stalls.at_least(folding.WAKE_US).start, [76.92])
    period = folding.refine(wakes, 1e9 / 23.077, stalls.duration_ns)
    assert folding.judged(stalls, wakes, period, 250.0, [76.92]) is not None
    assert not folding.preempts(stalls, wakes, period, 250.0, [76.92])
    assert folding.slow_periods(stalls, cpu_ns, 250.0, faster_hz=[76.92]) == []


def test_a_period_both_tiers_find_keeps_the_share_of_the_one_holding_it_more_often() -> None:
    """Measured: core 0 of another noise-keep30 run of the 90 ms daemon. Long stalls held its phase in 24 of 30
    cycles, wake-ups in 31 of 31; a 270 ms fold (three of its periods) held 12 of 12. Weighed at the long
    stalls' share, the 90 ms lost to the 270 ms (one_event's SLOWER_GAIN) and 3.7 Hz was named."""
    stalls, cpu_ns = measured("noise-keep30-normal90ms-run0-core0")
    assert [(round(f.frequency_hz, 2), round(f.share, 2)) for f in folding.slow_periods(stalls, cpu_ns, 250.0)] \
        == [(11.11, 0.8)]
    [fold] = folding.slow_periods(stalls, cpu_ns, 250.0, faster_hz=[100.0])
    assert (round(fold.frequency_hz, 2), fold.share, fold.cycles) == (11.11, 1.0, 31)


def test_a_control_core_names_nothing_by_its_wake_ups() -> None:
    """Measured: core 0 of a noise-keep30 control (no injector), the host's 100 Hz timer named on it."""
    stalls, cpu_ns = measured("noise-keep30-control1-core0")
    assert folding.slow_periods(stalls, cpu_ns, 250.0, faster_hz=[100.0]) == []


def test_a_quiet_cores_few_long_stalls_are_no_crowd_at_the_tick() -> None:
    """Measured (a quiet core, noise-keep33-quiet): a 250 ms daemon's 13 long stalls were all the core had; its
    62.5 ticks put 7 at one phase of the tick, which the fold took for the load's slices and left out, and too few
    were left to fold (unnamed, its phase held in 11 of 11 cycles). A crowd at the tick is more onsets than FWQ
    could see of any event the fold searches."""
    stalls, cpu_ns = measured("noise-keep33-quiet-normal250ms-run1-core0")
    onsets = stalls.at_least(folding.SIZES_US[0]).start
    assert len(onsets) == 13 and folding.busiest_tick_phase(onsets, 250.0, cpu_ns) is None
    assert [(round(f.frequency_hz, 1), f.share, f.cycles) for f in folding.slow_periods(stalls, cpu_ns, 250.0)] \
        == [(4.0, 1.0, 12)]




def test_of_the_phases_idle_as_often_the_idle_window_is_judged_where_chance_is_least() -> None:
    """Measured: core 1 of noise-keep34, a real-time 250 ms source on a loaded core. FWQ did not run after its
    phase in 61 of 61 cycles at each phase the idle test tried; the tick's phases were idle in 77 % of cycles
    around one of them and 84 % around others, and the 84 % was taken: 2 x 10^-5, past IDLE_MAX_CHANCE."""
    stalls, cpu_ns = measured("noise-keep34-fifo27ms-and-250ms-run4-core1")
    onsets = stalls.at_least(folding.SIZES_US[0]).start
    fold = folding.judged(stalls, onsets, folding.refine(onsets, 250e6, stalls.duration_ns), 250.0)
    assert fold is not None and fold.idle == (61, 61), fold
    assert [round(f.frequency_hz, 1) for f in folding.slow_periods(stalls, cpu_ns, 250.0)] == [4.0]


def test_a_candidate_the_screens_few_onsets_misplaced_is_refined_on_all_of_them() -> None:
    """Measured: core 0 of noise-keep34, a real-time 90 ms source on a loaded core. In 19 of the 25 cycles FWQ saw
    its stalls began at the tick's busiest phase, which the screen leaves out: 11 onsets were left, and their
    best was 90.03 ms, 7 steps off the source's 90.000 (RESCREEN_NS)."""
    stalls, cpu_ns = measured("noise-keep34-fifo90ms-run0-core0")
    onsets = stalls.at_least(folding.SIZES_US[0]).start
    away = folding.off_tick(onsets, 250.0, cpu_ns)
    guess = next(g for g in folding.candidates(away, stalls.duration_ns, folding.MIN_PERIOD_NS,
                                               cpu_ns / folding.MIN_OBSERVED, [250.0])
                 if abs(g - 90e6) < 0.01 * 90e6)
    assert folding.judged(stalls, onsets, folding.refine(away, guess, stalls.duration_ns), 250.0) is None
    assert [round(f.frequency_hz, 2) for f in folding.slow_periods(stalls, cpu_ns, 250.0)] == [11.11]


def test_a_slower_fold_whose_train_passes_away_from_a_faster_ones_is_an_event_of_its_own() -> None:
    """Measured: core 0 of noise-keep34 (load 6-8), a real-time 250 ms source, its phase held in 14 of 14 cycles.
    Where the fold also found the host's 50 ms pattern (the wake-ups refined again on all onsets, which
    ``rescreened`` no longer does), the source was dropped as its subharmonic (five times 4 Hz is 20 Hz), though
    its train passes 10.6 ms from the pattern's (``trains_apart``, as analysis.without_harmonics asks)."""
    stalls, cpu_ns = measured("noise-keep34-fifo250ms-run1-core0")
    slower = folding.phase_of(stalls, 4.0, 250.0)
    assert folding.trains_apart(stalls, slower, (*folding.phase_of(stalls, 20.0, 250.0), folding.FOLD_TOLERANCE_NS))
    assert not folding.trains_apart(stalls, slower, (*slower, folding.FOLD_TOLERANCE_NS))
    assert folding.one_event([4.0, 20.0], {4.0: 1.0, 20.0: 1.0}.__getitem__, lambda f, g: True,
                             lambda fast, slow: folding.trains_apart(
                                 stalls, folding.phase_of(stalls, slow, 250.0),
                                 (*folding.phase_of(stalls, fast, 250.0), folding.FOLD_TOLERANCE_NS))) == [4.0, 20.0]
    assert [round(f.frequency_hz, 1) for f in folding.slow_periods(stalls, cpu_ns, 250.0, faster_hz=[100.0])] \
        == [4.0]


def test_a_rescreened_fold_at_a_whole_multiple_of_a_daemons_wake_ups_is_no_event() -> None:
    """Measured: core 0 of noise-keep38-loaded (load 6-8, FWQ keeping 7 %), a normal-priority 27 ms daemon that
    preempted FWQ at once in every other cycle. Refined again on all the long stalls' onsets, a candidate became
    54 ms, held in 60 of 60 cycles, and took the 27 ms fold (75 %) for its share; stalls of any size start 27 ms on
    as at its phase (``split``): it is the daemon's, every 27 ms."""
    stalls, cpu_ns = measured("noise-keep38-loaded-normal27ms-and-250ms-run1-core0")
    onsets = stalls.at_least(folding.SIZES_US[0]).start
    found = folding.judged(stalls, onsets, folding.refine(onsets, 54e6, stalls.duration_ns, folding.RESCREEN_NS), 250.0)
    assert found is not None and round(found.frequency_hz, 2) == 18.52
    assert folding.split(stalls, found.frequency_hz, 2, 250.0)
    assert folding.rescreened(stalls, onsets, 54e6, 250.0) is None
    assert [round(f.frequency_hz, 2) for f in folding.slow_periods(stalls, cpu_ns, 250.0, faster_hz=[55.56])] \
        == [37.04]
