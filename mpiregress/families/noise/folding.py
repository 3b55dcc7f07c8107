"""Slow periods the spectrum cannot see: the core's stall onsets folded at the event's own period.

On a loaded core at normal priority the other processes' time slices fill the lost-time spectrum, and a
daemon's 2 ms every 90 or 250 ms leaves no line in it. Its stalls are still there, and exact: a sleeper
woken by its timer preempts FWQ within a fraction of a millisecond, so whenever FWQ held the core at that
moment, a stall starts at the same phase of the daemon's period (benchmarks/noise_injected.py: at load 7,
FWQ keeping a fifth of its core, a 90 ms daemon's stalls start within 0.3 ms of one phase in 30-38 of
31-38 cycles FWQ could see, against 2-8 % of cycles at a phase taken at random; within the 2 % of a
period recurrence.py allows a spectral line, 92 % of random phases hold one).

So the time domain searches on its own, as pulsar searches do: the onsets away from the tick's busiest
phase (``off_tick``) are folded at every period from MIN_PERIOD_NS up in steps of SCREEN_NS of drift
(``candidates``); the CANDIDATES periods where they pile up most are refined at FOLD_TOLERANCE_NS
(``refine``) and named only when one phase holds a stall in most observable cycles, beyond chance over
every period and phase tried (MAX_CHANCE) and beyond the tick's own phases (recurrence.tick_phases), and
not because a faster event (the tick, the host's timers, a daemon the spectrum names) recurs at every
whole share of it (``faster``). (A harmonic sum of the onsets' spectrum was tried as the screen first:
the 90 ms daemon's 37 pulses among 865 onsets ranked below 40 others.)

Where the daemon does not preempt FWQ at once, its wake-up still costs FWQ microseconds at its phase: the fold
is run a second time on the short stalls (WAKE_US), the host's timers' own left out (``off_faster``).
"""
from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import NamedTuple

import numpy as np

from mpiregress.families.noise import recurrence
from mpiregress.families.noise.recurrence import Stalls

# A sleeper at normal priority preempts FWQ within this of its timer (the daemon's own jitter included).
FOLD_TOLERANCE_NS = 300_000
# Periods from this up are searched here (a 27 ms daemon the spectrum missed on a crowded core is found);
# faster ones hold enough cycles for the spectrum.
MIN_PERIOD_NS = 20e6
# The slowest period searched holds this many cycles of the core's own (FWQ-running) time.
MIN_OBSERVED = 8
# Onsets of stalls this long or longer (us): a daemon's, not the tick's few microseconds.
SIZES_US = (200.0,)
# Then onsets from this up, away from the phases of the faster events named on the core (``off_faster``): a
# daemon at normal priority preempts FWQ at once in only some cycles, and in the others its wake-up costs FWQ
# tens of microseconds at the same phase. A 90 ms one on a crowded core (noise-keep30, FWQ keeping a tenth of
# it): stalls of 10 us or more started within 0.3 ms of its timer in 29-37 of 29-37 cycles FWQ could see there
# (a stall of 200 us or more in half of them), at the phases 10, 20 ... ms on, where the host's 10 ms timer is
# not, in 0-23 %; the host's own onsets hold every cycle at its phases, and are left out first. A fold of them is
# an event only where its phase also starts long stalls (``preempts``).
WAKE_US = 10.0
# The blind search tries ~10^5 periods x 10^2-10^3 phases per core: a binomial tail this small is no luck.
MAX_CHANCE = 1e-9
# The screen folds at this resolution (2x the tolerance: 4x, half the periods to try, named 46 of 80
# sources at normal priority in two live sets where 2x named 55), then the best CANDIDATES periods are
# refined at FOLD_TOLERANCE_NS; CHUNK trial periods are folded at once.
SCREEN_NS = 2 * FOLD_TOLERANCE_NS
CANDIDATES = 8
# A candidate the screen's few onsets placed that is no event is refined again on all the long stalls' onsets,
# this far either side (``rescreened``): a real-time 90 ms source sat at the tick's busiest phase in 19 of its 25
# cycles FWQ saw, the screen had 11 onsets away from it, and its best was 90.03 ms, 7 steps off the source's
# 90.000 (noise-keep34).
RESCREEN_NS = 8 * SCREEN_NS
# The power's screen around the rate it added (``slow_periods``).
NEAR = 0.05
# A slower period found beside a faster one it is a whole multiple of is the event's only when it holds
# this much more of its cycles.
SLOWER_GAIN = 0.15
# ... and, where the cycles are known, beyond chance at the faster's share (``one_event``).
OUTWEIGH_CHANCE = 0.01
CHUNK = 256
# A period within this share of a whole multiple of a known event's is that event's (the tick measured
# against CLOCK_MONOTONIC, to a part in 10^3).
RATIO_SLACK = 0.002
# A source above FWQ's priority (a kernel thread, an interrupt's, a real-time daemon) holds its core for its
# whole burst whoever runs there: FWQ runs in no cycle just after its phase. On a crowded core FWQ is seldom
# the one running when it fires (at load 5 its stalls started there in 5-17 of 63-75 cycles of a 250 ms one),
# and a source started on the tick, as a process is, sits at the tick's busiest phase, where the load's slices
# start as often: that test alone names it beyond chance in none of 5 runs. The window after its phase was idle
# in all 63-75 (benchmarks/noise_injected.py, noise-keep14), where FWQ ran in 20-35 % of cycles at other phases
# and in at least 5 % at the best such phase of 198 cores with no source (four kept sets). So the onset's phase
# also names the period where FWQ ran in at most 1 - MIN_IDLE_SHARE of all cycles in IDLE_WINDOW_NS from
# IDLE_AFTER_NS past it, beyond chance (IDLE_MAX_CHANCE, against a random phase's idle share or the tick's other
# phases', 0.8 there: a test at the CANDIDATES' own phases, not a search, so 10^-5 each keeps a core under
# recurrence.MAX_CHANCE; at 10^-6 the 63-75 idle cycles of four of those five runs fell short, at 2-6 x 10^-6).
IDLE_AFTER_NS = FOLD_TOLERANCE_NS
IDLE_WINDOW_NS = 1_000_000
MIN_IDLE_SHARE = 0.98
IDLE_MAX_CHANCE = 1e-5
# The idle window is tried after at most this many phases of the onsets' best share.
MAX_TIED = 4


class Fold(NamedTuple):
    """A period the core's stalls recur at, found by folding them."""

    frequency_hz: float
    share: float        # of the cycles FWQ could see at its phase, those in which a stall starts there
    cycles: int         # the cycles FWQ could see there
    # Where the core was idle after that phase in nearly every cycle (IDLE_WINDOW_NS): (those cycles, all).
    idle: tuple[int, int] | None = None
    # The folds at whole shares of its period that hold nearly as often (``faster_folds``): one_event weighs them.
    faster: tuple[Fold, ...] = ()
    # Where in its cycle (ns) the onsets that found it hold it: the train ``trains_apart`` compares.
    phase_ns: float = 0.0


def folded_peaks(onsets_ns: np.ndarray, periods_ns: np.ndarray, window_ns: float) -> np.ndarray:
    """For each trial period, the most onsets within two adjacent phase bins of ``window_ns``: the
    folded light curve's peak."""
    out = np.zeros(len(periods_ns))
    for start in range(0, len(periods_ns), CHUNK):
        chunk = periods_ns[start:start + CHUNK]
        bins = np.ceil(chunk / window_ns).astype(np.int64)
        stride = int(bins.max()) + 1
        index = np.minimum(((onsets_ns[None, :] % chunk[:, None]) / window_ns).astype(np.int64), bins[:, None] - 1)
        rows = np.arange(len(chunk))[:, None] * stride
        counts = np.bincount((rows + index).ravel(), minlength=len(chunk) * stride).reshape(len(chunk), stride)
        counts[np.arange(len(chunk)), bins] = counts[:, 0]    # the cycle is a circle: the last bin meets the first
        out[start:start + len(chunk)] = (counts[:, :-1] + counts[:, 1:]).max(axis=1)
    return out


def candidates(onsets_ns: np.ndarray, duration_ns: float, shortest_ns: float, longest_ns: float,
               known_hz: Sequence[float] = ()) -> list[float]:
    """The CANDIDATES periods (ns) from ``shortest_ns`` to ``longest_ns`` at which the onsets pile up most
    above the even spread, folded at every period (steps small enough that the phase drifts less than
    SCREEN_NS over the run), leaving out the whole multiples of ``known_hz`` (the tick, named events)."""
    if longest_ns <= shortest_ns or len(onsets_ns) < MIN_OBSERVED:
        return []
    steps = int(np.log(longest_ns / shortest_ns) / np.log1p(SCREEN_NS / duration_ns)) + 1
    periods = shortest_ns * (1 + SCREEN_NS / duration_ns) ** np.arange(steps)
    peak = folded_peaks(onsets_ns.astype(np.float64), periods, SCREEN_NS)
    from scipy.stats import poisson  # not at import: the CLI starts without scipy (pyproject's banned imports)

    expected = 2 * len(onsets_ns) / np.ceil(periods / SCREEN_NS)
    # How unlikely the peak is for onsets spread evenly (a z-score favoured the slowest periods, whose few
    # cycles make a peak of 6 stand 5 sigma above 0.9 and crowded out a 90 ms source's 28 of 28).
    score = -poisson.logsf(peak - 1, expected)
    for rate in known_hz:
        ratio = periods * rate / 1e9
        score[(np.round(ratio) >= 1) & (np.abs(ratio - np.round(ratio)) <= RATIO_SLACK * np.round(ratio))] = -np.inf
    out: list[float] = []
    # A pile-up past the float's tail (logsf -inf: +inf here) ranks first, as it is; only the notched end it.
    for i in np.argsort(-score):
        if score[i] == -np.inf or len(out) == CANDIDATES:
            break
        if all(abs(periods[i] - q) > 0.02 * q for q in out):
            out.append(float(periods[i]))
    return out


def refine(onsets_ns: np.ndarray, period_ns: float, duration_ns: float, drift_ns: float = SCREEN_NS) -> float:
    """The period (ns) within a screening step of ``period_ns`` at which the most onsets fall within
    FOLD_TOLERANCE_NS of one phase (steps small enough that the phase drifts less than that over the run).
    ``drift_ns``: how far the phase of the period searched from may drift over the run (a screening step; a whole
    period for a rate as the spectrum names it, within a bin of the run: ``off_faster``)."""
    relative = FOLD_TOLERANCE_NS / duration_ns
    trials = period_ns * (1 + np.arange(-drift_ns / duration_ns, drift_ns / duration_ns + relative, relative))
    return float(trials[int(np.argmax(folded_peaks(onsets_ns.astype(np.float64), trials, FOLD_TOLERANCE_NS)))])


def idle_faster(stalls: Stalls, period_ns: float, phase_ns: float) -> bool:
    """Is the core as idle after the phases a whole share of ``period_ns`` after the event's (the median of them
    MIN_IDLE_SHARE): a faster source holding the core at every one of them? (Not ``faster_folds``' onsets: at the
    tick's busiest phase the load's slices start at every tick, and would explain any period there.)"""
    return any(float(np.median(recurrence.idle_shares(stalls, period_ns, shifted, IDLE_AFTER_NS, IDLE_WINDOW_NS)))
               >= MIN_IDLE_SHARE for _, shifted in recurrence.whole_shares(period_ns, phase_ns))


def busiest_tick_phase(onsets_ns: np.ndarray, tick_hz: float | None, cpu_ns: float
                       ) -> tuple[float, float] | None:
    """(the tick's period as the onsets keep it, ns; the phase where most of them start, ns): where the
    scheduler hands the core to the load's other processes (``_busiest_tick_bin``). None where the node shows no
    tick or the onsets show no such crowd."""
    found = _busiest_tick_bin(onsets_ns, tick_hz, cpu_ns)
    if found is None:
        return None
    period, busiest = found
    return period, (busiest + 1) * FOLD_TOLERANCE_NS % period


def _busiest_tick_bin(onsets_ns: np.ndarray, tick_hz: float | None, cpu_ns: float) -> tuple[float, int] | None:
    """(the tick's period, ns; the first of the two adjacent FOLD_TOLERANCE_NS bins of it holding most onsets),
    where those bins hold more onsets than FWQ could see of an event every MIN_PERIOD_NS in ``cpu_ns``, its own
    time on the core: more than any event the fold searches could start there, so the tick's own or its time
    slices'. Fewer are no crowd to leave out: on a quiet core a 250 ms daemon's 13 long stalls were all the core
    had, its 62.5 ticks put 7 at one phase of the tick, and with them left out too few were left to fold
    (noise-keep33-quiet: unnamed, 11 of 11 cycles held)."""
    if not tick_hz or len(onsets_ns) < MIN_OBSERVED:
        return None
    # The tick's clock and CLOCK_MONOTONIC agree to a part in 10^4 (recurrence.tick_hz): a few steps do.
    periods = 1e9 / tick_hz * (1 + np.linspace(-2e-4, 2e-4, 9))
    period = float(periods[int(np.argmax(folded_peaks(onsets_ns.astype(np.float64), periods, FOLD_TOLERANCE_NS)))])
    counts = np.bincount(_tick_bins(onsets_ns, period), minlength=int(np.ceil(period / FOLD_TOLERANCE_NS)))
    pairs = counts + np.roll(counts, -1)
    busiest = int(np.argmax(pairs))
    return (period, busiest) if pairs[busiest] > cpu_ns / MIN_PERIOD_NS else None


def _tick_bins(onsets_ns: np.ndarray, period_ns: float) -> np.ndarray:
    bins = int(np.ceil(period_ns / FOLD_TOLERANCE_NS))
    return np.minimum((onsets_ns % period_ns / FOLD_TOLERANCE_NS).astype(np.int64), bins - 1)


def preempts(stalls: Stalls, wake_onsets: np.ndarray, period_ns: float, tick_hz: float | None,
             faster_hz: Sequence[float] = ()) -> bool:
    """Do long stalls (SIZES_US) start at the phase the wake-ups hold (``held_at``) clearly more often than at the
    median phase (recurrence.MIN_CONTRAST): is it a daemon that takes FWQ's core in some cycles, not only
    microseconds? A 90 ms daemon's phase started one in 45-77 % of the cycles FWQ could see, the median phase in
    0-3 % (noise-keep30). Wake-ups alone can hold a phase where the load lets FWQ run only in some cycles: beside
    a 13 ms daemon, short stalls (16-64 us) held one phase of 43.33 ms in 58 of 62 cycles, long ones 3 % there
    and 14 % at the median phase (noise-keep27)."""
    phase = recurrence.held_at(stalls, period_ns, FOLD_TOLERANCE_NS, onsets=wake_onsets, tick_hz=tick_hz,
                               faster_hz=faster_hz)[3]
    long = stalls.at_least(SIZES_US[0]).start
    grid = recurrence.phase_grid(period_ns, FOLD_TOLERANCE_NS)
    at = recurrence.shares_at(stalls, period_ns, FOLD_TOLERANCE_NS, np.array([phase]), long)[0][0]
    typical = float(np.median(recurrence.shares_at(stalls, period_ns, FOLD_TOLERANCE_NS, grid, long)[0]))
    return bool(at - typical >= recurrence.MIN_CONTRAST)


def slower_train(stalls: Stalls, frequency_hz: float, slower_hz: float, tick_hz: float | None) -> bool:
    """Do the long stalls at the fold's phase of ``frequency_hz`` (``phase_of``) come back every k-th cycle
    (k: its whole ratio to ``slower_hz``) clearly more often than every cycle (SLOWER_GAIN, beyond chance:
    OUTWEIGH_CHANCE)? Then the wake-ups that hold its other cycles are another source's, and where an event is
    named at ``slower_hz`` the fold is that event's share (analysis.without_harmonics). A quiet core's real-time
    90 ms daemon, its 2 ms stalls every 90.0 ms in 34 of 34 cycles, was named at 45 ms (22.22 Hz) in 5 runs of
    5 and its 11.11 Hz line dropped as the subharmonic: the host timer's 23 us interrupts, 0.2-0.6 ms off the
    daemon's phase plus 45 ms, held the odd cycles within the fold's window (noise-keep36-quiet). Where no event
    is named there the fold stands: a normal-priority 90 ms daemon on a crowded core preempted FWQ at once only
    in every other cycle (13 of 13, and 2 of 17), its wake-ups at its phase in all (noise-keep30)."""
    k = round(frequency_hz / slower_hz)
    long = stalls.at_least(SIZES_US[0]).start
    if k < 2 or len(long) < MIN_OBSERVED:
        return False
    period, phase = phase_of(stalls, frequency_hz, tick_hz)
    at = float(recurrence.shares_at(stalls, period, FOLD_TOLERANCE_NS, np.array([phase]), long)[0][0])
    shares, seen = recurrence.shares_at(stalls, k * period, FOLD_TOLERANCE_NS,
                                        (phase + np.arange(k) * period) % (k * period), long)
    i = int(np.argmax(shares))
    return bool(shares[i] >= at + SLOWER_GAIN
                and recurrence.chance_of(float(shares[i]), int(seen[i]), at) <= OUTWEIGH_CHANCE)


def off_faster(stalls: Stalls, onsets_ns: np.ndarray, faster_hz: Sequence[float]) -> np.ndarray:
    """The onsets away from the phase of each of ``faster_hz`` faster than the fold searches (MIN_PERIOD_NS):
    those events' own stalls. Each event's period is refined within a spectral bin of the run (its rate as
    named is rounded) at FOLD_TOLERANCE_NS, and its onsets within that of its best phase go."""
    for rate in (f for f in faster_hz if 1e9 / f < MIN_PERIOD_NS):
        if len(onsets_ns) < MIN_OBSERVED:
            break
        period = refine(onsets_ns, 1e9 / rate, stalls.duration_ns, drift_ns=1e9 / rate)
        phase = recurrence.held_at(stalls, period, FOLD_TOLERANCE_NS, onsets=onsets_ns)[3]
        onsets_ns = onsets_ns[np.abs(recurrence.offsets(onsets_ns, phase, period)) > FOLD_TOLERANCE_NS]
    return onsets_ns


def off_tick(onsets_ns: np.ndarray, tick_hz: float | None, cpu_ns: float) -> np.ndarray:
    """The onsets away from the tick's busiest phase (FOLD_TOLERANCE_NS either side; all of them where
    the node shows no tick or no crowd there: ``_busiest_tick_bin``; ``cpu_ns``: FWQ's own time)."""
    found = _busiest_tick_bin(onsets_ns, tick_hz, cpu_ns)
    if found is None:
        return onsets_ns
    period, busiest = found
    index = _tick_bins(onsets_ns, period)
    return onsets_ns[(index != busiest) & (index != (busiest + 1) % int(np.ceil(period / FOLD_TOLERANCE_NS)))]


def judged(stalls: Stalls, onsets: np.ndarray, period_ns: float, tick_hz: float | None,
           faster_hz: Sequence[float] = ()) -> Fold | None:
    """The period when the ``onsets`` recur at one phase of ``period_ns`` as an event's (``slow_periods``' test):
    beyond chance in the cycles FWQ could see there, or in most of them with the core idle after that phase in
    nearly every cycle (``IDLE_WINDOW_NS``); else None. Chance counts the phases of the tick and of
    ``faster_hz``, the events already named on the core, where the period is a whole number of theirs
    (recurrence.visited_phases)."""
    share, chance, cycles, phase = recurrence.held_at(stalls, period_ns, FOLD_TOLERANCE_NS, onsets=onsets,
                                                      tick_hz=tick_hz, faster_hz=faster_hz)
    if share < recurrence.MIN_HIT_SHARE:
        return None
    if cycles >= MIN_OBSERVED and recurrence.significant(share, chance, cycles, most_chance=MAX_CHANCE):
        shares = faster_folds(stalls, onsets, period_ns, phase, share, tick_hz, faster_hz)
        return None if shares is None else Fold(1e9 / period_ns, share, cycles, faster=shares, phase_ns=phase)
    # The onsets' phase is known to the fold's grid (FOLD_TOLERANCE_NS): the window is tried a half step either
    # side too (one cycle of 65 fell outside it at the grid's phase, a 250 ms source in noise-keep14), and at each
    # phase the onsets hold as often (few cycles show a real-time source's phase: a real-time 250 ms source's held
    # 6 of 6 beside a phase of the load's that held 7 of 7, noise-keep20). Of the phases idle as often, the one
    # whose chance is least: a real-time 250 ms source's window was idle in 61 of 61 cycles at five of them, the
    # tick's phases 0.77 there and 0.84 a half step on, and the one at 0.84 was taken (noise-keep34).
    tried = [(*recurrence.idle_at(stalls, period_ns, best + shift, IDLE_AFTER_NS, IDLE_WINDOW_NS, tick_hz, faster_hz),
              best + shift)
             for best in recurrence.best_phases(stalls, period_ns, FOLD_TOLERANCE_NS, onsets, MAX_TIED)
             for shift in np.arange(-2, 3) * FOLD_TOLERANCE_NS / 2]
    idle, idle_chance, every, phase = min(tried, key=lambda one: (-one[0], one[1]))
    if idle < MIN_IDLE_SHARE or recurrence.chance_of(idle, every, idle_chance) > IDLE_MAX_CHANCE \
            or idle_faster(stalls, period_ns, phase):
        return None
    return Fold(1e9 / period_ns, share, cycles, (int(round(idle * every)), every), phase_ns=phase)


def faster_folds(stalls: Stalls, onsets: np.ndarray, period_ns: float, phase_ns: float, share: float,
                 tick_hz: float | None, faster_hz: Sequence[float] = ()) -> tuple[Fold, ...] | None:
    """The folds at the whole shares of ``period_ns`` whose phases hold the onsets nearly as often as its phase
    (recurrence.explaining_shares, 60 % of its ``share`` against no chance), each judged on its own: the faster
    event the period may be, for one_event to weigh against it. None when one of them is no fold of its own
    (faster than the fold searches, MIN_PERIOD_NS, or not held there) or stalls of any size start at each of its
    phases as often as at the period's (``split``): the period is that faster event's.

    Against no chance, however often a random phase holds: weighed against chance, a 13 ms daemon's 26 ms stayed
    the fold's in noise-keep23 and took its 76.92 Hz for a harmonic. Weighed, not dropped, where the share is a
    fold too: a real-time 250 ms source's phase held 17 of 17 cycles, the phase 125 ms on 2 in 3 (the load's
    slices after its burst), and dropped for its 125 ms it was told as an 8 Hz event held in 27 of 33
    (noise-keep27). Dropped where ``split``: a 27 ms daemon at normal priority held its phase of 54 ms in 45 of
    45 cycles by long stalls and the phase 27 ms on in 29 of 44, but by stalls of any size in 44 of 44 (its
    wake-up costs FWQ microseconds where it does not preempt at once), and weighed it was told at 54 ms
    (noise-keep28)."""
    found: list[Fold] = []
    for d in recurrence.explaining_shares(stalls, period_ns, phase_ns, share, 0.0, FOLD_TOLERANCE_NS, onsets):
        fold = None if period_ns / d < MIN_PERIOD_NS or split(stalls, 1e9 / period_ns, d, tick_hz) else \
            judged(stalls, onsets, refine(onsets, period_ns / d, stalls.duration_ns), tick_hz, faster_hz)
        if fold is None:
            return None
        found.append(fold)
    return tuple(found)


def holds(stalls: Stalls, frequency_hz: float, tick_hz: float | None) -> bool:
    """Do the core's stalls recur at ``frequency_hz`` (a rate another path named) by the fold's own test?"""
    return placed(stalls, frequency_hz, tick_hz) is not None


def placed(stalls: Stalls, frequency_hz: float, tick_hz: float | None, drift_ns: float = SCREEN_NS
           ) -> tuple[float, float] | None:
    """(period, phase: ns into the cycle) where the core's long stalls recur near ``frequency_hz`` by the fold's
    own test (``judged``), else None. ``drift_ns``: ``refine``'s (a spectral line's rate, rounded and known to
    its bin: a period)."""
    onsets = stalls.at_least(SIZES_US[0]).start
    if 1e9 / frequency_hz < MIN_PERIOD_NS or len(onsets) < MIN_OBSERVED:
        return None
    period, phase = phase_of(stalls, frequency_hz, tick_hz, drift_ns)
    return None if judged(stalls, onsets, period, tick_hz) is None else (period, phase)


def split(stalls: Stalls, frequency_hz: float, parts: int, tick_hz: float | None) -> bool:
    """Is the event the fold finds at ``frequency_hz`` a faster one's, ``parts`` times as fast: do stalls of any
    size start at each whole share of its cycle (within FOLD_TOLERANCE_NS of its phase plus k/``parts`` of the
    period) in nearly as many of the cycles FWQ could see there as at its phase (recurrence.MULTIPLE_SLACK)?

    The fold counts only a daemon's long stalls (SIZES_US), and ``faster`` asks those at the whole shares. A
    daemon at normal priority woken every 13 ms on a crowded core preempts FWQ at once only where its wake-up
    falls at some phases of the 4 ms tick, every other cycle; in the others its wake-up costs FWQ tens of
    microseconds at the same phase and its burst comes later. At load 8 (FWQ keeping 6 % of its core) the fold
    found 26 ms, held in 90-97 % of its cycles by long stalls, the phase 13 ms on in 47-58 % by long stalls and
    in all by stalls of any size (benchmarks/noise_injected.py, noise-keep23: told at 26 ms in 3 of 5 runs). A
    27 ms daemon's phase 13.5 ms on, where the load's slices follow its burst, held 23-61 % (noise-keep22, -24)."""
    return split_any(stalls, frequency_hz, (parts,), tick_hz)


def split_any(stalls: Stalls, frequency_hz: float, parts: Sequence[int], tick_hz: float | None) -> bool:
    """``split`` for any of ``parts``, the fold's phase placed once."""
    if all(k < 2 for k in parts) or len(stalls.at_least(SIZES_US[0]).start) < MIN_OBSERVED:
        return False
    period, phase = phase_of(stalls, frequency_hz, tick_hz)

    def at(k: int) -> bool:
        shares, _ = recurrence.shares_at(stalls, period, FOLD_TOLERANCE_NS,
                                         (phase + np.arange(k) * period / k) % period)
        return bool(shares[1:].min() >= shares[0] - recurrence.MULTIPLE_SLACK)

    return any(at(k) for k in parts if k >= 2)


def slow_periods(stalls: Stalls, cpu_ns: float, tick_hz: float | None, near_hz: float | None = None,
                 faster_hz: Sequence[float] = ()) -> list[Fold]:
    """Each period from MIN_PERIOD_NS up that the core's stall onsets recur at, found without the spectrum;
    ``cpu_ns``: the time FWQ held its core (what sets the cycles it can see).
    ``near_hz``: screen only within NEAR of that rate (the power, which knows the rate it added: the cost of
    a run's whole screen per stall size tried; it assumes the whole screen would rank it among its
    CANDIDATES). ``faster_hz``: the events the spectrum named on the core (``judged``; their onsets are left out
    of the wake-ups', ``off_faster``). Folded by long stalls (SIZES_US), then by wake-ups (WAKE_US); a period
    both find is kept with the share of the one that holds it more often."""
    slowest_ns = cpu_ns / MIN_OBSERVED
    fastest_ns = MIN_PERIOD_NS
    if near_hz:
        fastest_ns = max(fastest_ns, 1e9 / near_hz / (1 + NEAR))
        slowest_ns = min(slowest_ns, 1e9 / near_hz * (1 + NEAR))
    if slowest_ns <= fastest_ns:
        return []
    notch = [tick_hz] if tick_hz and tick_hz > 0 else []
    found: list[Fold] = []

    def add(fold: Fold) -> None:                    # one per period (within 2 %): the tier holding it most often
        same = [i for i, g in enumerate(found) if abs(fold.frequency_hz - g.frequency_hz) <= 0.02 * g.frequency_hz]
        if not same:
            found.append(fold)
        elif fold.share > found[same[0]].share:
            found[same[0]] = fold

    for size in (*SIZES_US, WAKE_US):
        onsets = stalls.at_least(size).start
        if size == WAKE_US:
            onsets = off_faster(stalls, onsets, faster_hz)
        if len(onsets) < MIN_OBSERVED:
            continue
        # The load's slices start on the tick: most onsets sit at one phase of it, and whole numbers of half
        # ticks fold them into a comb that crowds the screen. A daemon woken by its own timer is elsewhere
        # (one woken on the tick, among the slices, would stand out from the tick's other phases only by
        # far: recurrence.tick_phases), and the screen is cheaper by as much as the onsets are fewer.
        away = off_tick(onsets, tick_hz, cpu_ns)
        for guess in candidates(away, stalls.duration_ns, fastest_ns, slowest_ns, notch):
            held = judged(stalls, onsets, refine(away, guess, stalls.duration_ns), tick_hz, faster_hz) or (
                rescreened(stalls, onsets, guess, tick_hz, faster_hz) if size != WAKE_US else None)
            if held and (size != WAKE_US or preempts(stalls, onsets, 1e9 / held.frequency_hz, tick_hz, faster_hz)):
                add(held)
        for faster in (f for fold in list(found) for f in _shares_of(fold)):
            add(faster)
    # Two periods found, one a whole multiple of the other, are one event (one_event): an event every 250 ms
    # held 79 % of 125 ms cycles, 100 % of its own; a 90 ms one held 93 % of its cycles and all of a 270 ms
    # run's 11, by their fewness.
    def same(f: float, g: float) -> bool:
        return abs(f / g - round(f / g)) <= RATIO_SLACK * round(f / g)

    # Two trains at different phases are two events whatever their rates (``trains_apart``, each at the phase its
    # own onsets hold it): a real-time 250 ms source held its phase in 14 of 14 cycles and was dropped as a
    # subharmonic of the host's 50 ms pattern, whose wake-ups the fold found beside it (noise-keep34).
    folds = {f.frequency_hz: f for f in found}

    def apart(fast: float, slow: float) -> bool:
        return trains_apart(stalls, (1e9 / slow, folds[slow].phase_ns),
                            (1e9 / fast, folds[fast].phase_ns, FOLD_TOLERANCE_NS))

    shares = {f.frequency_hz: f.share for f in found}
    kept = one_event(list(shares), shares.__getitem__, same, apart)
    return [f for f in found if f.frequency_hz in kept]


def rescreened(stalls: Stalls, onsets: np.ndarray, guess_ns: float, tick_hz: float | None,
               faster_hz: Sequence[float] = ()) -> Fold | None:
    """The fold near ``guess_ns`` refined on all the long stalls' ``onsets`` (RESCREEN_NS), where it is an event and
    no faster one's: all onsets include the load's slices, which start at every whole share of a faster event's
    cycle too (``split``). A normal-priority 27 ms daemon on a crowded core, preempting FWQ at once in every other
    cycle, was found so at 54 ms and named there (noise-keep38-loaded)."""
    fold = judged(stalls, onsets, refine(onsets, guess_ns, stalls.duration_ns, RESCREEN_NS), tick_hz, faster_hz)
    if fold is None or split_any(stalls, fold.frequency_hz, range(2, int(1e9 / fold.frequency_hz // MIN_PERIOD_NS) + 1),
                                 tick_hz):
        return None
    return fold


def trains_apart(stalls: Stalls, slower: tuple[float, float], faster: tuple[float, float, float]) -> bool:
    """Does the slower train (period, phase: ns) pass away from the faster one (period, phase, window: ns) in the
    run: its cycles' median offset from the faster's nearest beyond that window and the fold's own? Then it is no
    subharmonic of the faster (``one_event``'s ``apart``)."""
    period, phase = slower
    times = phase + np.arange(int(stalls.duration_ns // period)) * period
    return float(np.median(np.abs(recurrence.offsets(times, faster[1], faster[0])))) > faster[2] + FOLD_TOLERANCE_NS


def _shares_of(fold: Fold) -> Iterator[Fold]:
    for faster in fold.faster:
        yield faster
        yield from _shares_of(faster)


def one_event(rates_hz: Sequence[float], share: Callable[[float], float],
              multiple: Callable[[float, float], bool],
              apart: Callable[[float, float], bool] = lambda faster, slower: False,
              cycles: Callable[[float], int] | None = None) -> list[float]:
    """The rates of one core's periods that are events of their own. Two, one a whole multiple of the other
    (``multiple(faster, slower)``), are one event: the faster, unless the slower holds its cycles clearly
    more often (SLOWER_GAIN). ``share(rate)``: the share of its cycles the rate holds a stall in, asked only
    of rates that have such a partner (a time-domain search each, where the spectrum named them).

    ``cycles(rate)``, where given: the cycles that share was counted over; clearly more is then also beyond
    chance at the faster's share over the slower's cycles (OUTWEIGH_CHANCE): a 90 ms daemon's third
    subharmonic held 11 of 11 cycles of 271 ms where its own 90 ms held 27 of 33 (every sixth burst only woke
    on a quiet core, and the 271 ms window is three times as wide), 9 % by chance; it was named alone
    (noise-keep33-quiet).

    ``apart(faster, slower)``: are their trains at different phases (the slower's stalls start away from the
    faster's)? Then the slower is not the faster's and stays: a 250 ms daemon, its phase held in 12 of 12
    cycles, beside the host's 50 ms pattern elsewhere in the cycle, held in 97 % of its own, was dropped as its
    subharmonic on a quiet core (noise-keep33-quiet)."""
    def outweighs(slow: float, fast: float) -> bool:
        if share(slow) < share(fast) + SLOWER_GAIN:
            return False
        return cycles is None or \
            recurrence.chance_of(share(slow), cycles(slow), share(fast)) <= OUTWEIGH_CHANCE

    return [f for f in rates_hz
            if not any(g < f and multiple(f, g) and outweighs(g, f) for g in rates_hz)
            and not any(g > f and multiple(g, f) and not outweighs(f, g) and not apart(g, f) for g in rates_hz)]


def phase_of(stalls: Stalls, frequency_hz: float, tick_hz: float | None, drift_ns: float = SCREEN_NS
             ) -> tuple[float, float]:
    """(period, phase: ns into the cycle) at which the long stalls (SIZES_US) recur near ``frequency_hz``: the
    fold's (``refine`` within ``drift_ns``, recurrence.held_at)."""
    onsets = stalls.at_least(SIZES_US[0]).start
    period = refine(onsets, 1e9 / frequency_hz, stalls.duration_ns, drift_ns)
    return period, recurrence.held_at(stalls, period, FOLD_TOLERANCE_NS, onsets=onsets, tick_hz=tick_hz)[3]
