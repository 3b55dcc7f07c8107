"""The time domain's word on a spectral line: do the core's stalls really recur at that interval?

A spectrum puts a line wherever the lost time has power; a few long stalls, or the time slices of
other processes on a shared core, throw up lines that are no period (three stalls a second apart
make a 3 Hz line, "every 334 ms", that never happened). A period is named only when the stalls
themselves come back at it: over the run's cycles of that period, one phase of the cycle must hold a
stall in most cycles (``MIN_HIT_SHARE``), clearly more often than a phase taken at random does
(``MIN_CONTRAST``). The interval is refined here, within a spectral bin of the line's frequency:
over hundreds of cycles a bin's error would smear the phase.

Where the kernel said its tick (FWQ format 2 records its jiffy) that is the tick. Where it did not, the
same test measures it: the tick interrupts a busy core on every jiffy, so the tick's own interval
(1/CONFIG_HZ) is the shortest of the usual rates at which every cycle holds a detour (``tick_hz``). Under a
hypervisor that test can find the host's faster pattern instead (1 kHz under the local VM's 250 Hz kernel).
"""
from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from mpiregress.families.noise.fwqfile import RankData

# A phase "holds a stall" within this share of the period (and at least TOLERANCE_NS): a daemon woken
# by an absolute timer comes back within its wake-up latency, a fraction of its period.
TOLERANCE_SHARE = 0.02
# A period that is a whole number of ticks is held to the wider window: the tick's own phases crowd it
# (benchmarks/noise_injected.py: 0.02 named a 27 ms real-time source in 5 of 5 runs that 0.08 missed, and
# the wider window kept a control's 50 Hz, five ticks, from being named).
TICK_MULTIPLE_TOLERANCE_SHARE = 0.08
TOLERANCE_NS = 300_000
# The period must recur in this share of its observable cycles (more than every other one: stalls a second
# apart are no 2 Hz event), at least MIN_CYCLES of them ...
MIN_HIT_SHARE = 0.75
MIN_CYCLES = 4
# ... and that share must exceed a random phase's by this much (a crowded core's stalls are everywhere).
MIN_CONTRAST = 0.25
# ... and be too many to be luck: the binomial tail of so many cycles at the random phase's rate (at least
# MIN_CHANCE), against the ~10^3 phases, intervals and stall sizes tried per line.
MAX_CHANCE = 1e-4
MIN_CHANCE = 0.05
# A fraction of the spectrum's frequency is the event's when its cycles hold a stall this much more often.
FUNDAMENTAL_GAIN = 0.25
# Two of a core's rates, one a whole multiple of the other up to this, are one event's (analysis.without_harmonics,
# folded_periods); a period a whole number of ticks or of shares of one down to this has the tick's phases.
MAX_MULTIPLE = 8
# A multiple of a beat's rate is the event's when its cycles hold a stall nearly as often (``faster``,
# ``beat_multiple``).
MULTIPLE_SLACK = 0.05
# The tick's rate over a beat's is a whole number within this (the spectrum's line is good to a part in 10^3).
BEAT_RATIO_SLACK = 0.05
# The tick's phases an event must stand out from, at most (tick_phases).
MAX_TICK_PHASES = 256
# A refused line's multiples are tried too (beat_multiple): up to BEAT_MAX_MULTIPLE more intervals per line
# where the comb's lines are harmonics, each held to this tail.
BEAT_MAX_CHANCE = 1e-9
# A beat's comb (a rate the tick is a whole multiple of) is raised to its multiples up to this one (``faster``,
# ``beat_multiple``): a real-time 13 ms daemon's comb was 6.41 Hz apart in 1 run of 5 (156 ms, 39 ticks: the
# load's slices turning over every three), its line every 13 ms the 12th, and the run named nothing
# (benchmarks/noise_injected.py, noise-keep15).
BEAT_MAX_MULTIPLE = 16
# Candidate intervals tried across one spectral bin around the line.
REFINE_STEPS = 21
# Kernel tick rates (CONFIG_HZ) Linux is built with; the tick interrupts nearly every jiffy of a busy core.
TICK_RATES = (1000.0, 300.0, 250.0, 100.0)
TICK_HIT_SHARE = 0.8
TICK_TOLERANCE_NS = 150_000
# The tick's interrupt handler costs microseconds: a stall this long is something else (a daemon woken by a
# 10 ms timer is no 100 Hz tick).
TICK_MAX_US = 50.0
TICK_SHORT_CONTRAST = 0.1
# A stall: consecutive iterations over the detour threshold, merged when closer than this.
MERGE_NS = 100_000
# Stalls this long or longer are listed by time when a core has stalls but no period.
LONG_STALL_NS = 1_000_000
# A period of whole ticks whose stalls last this share of it or more is the scheduler's turns among processes
# sharing the core (two in equal turns hold each half), not an event: a daemon's burst was a tenth of its period
# or less in every live set (benchmarks/noise_injected.py: 1 ms of 13, 2 of 27, 2 of 90).
MIN_TURN_SHARE = 0.4
# Faster events looked for down to this period (the 250 Hz tick's): ``whole_shares``.
FASTEST_NS = 3.9e6
# A faster event explains a period when the phases a whole share of it apart stand this share of its best
# phase's height above chance (``explained_faster``): the fold's test, which drops a period it found (weighed
# against no chance there: folding.judged).
FASTER_SHARE = 0.6
# The same for a rate the spectrum or a beat gave (``faster_explains``), which moves or drops a confirmed event:
# nearly as high. The host's 10 ms timer under a 33.36 Hz line stood 88 % of its height at every 10 ms; a second
# stall 5 ms after the timer in two cycles of three, 63 % (100 Hz is the event, not 200 Hz).
NEARLY_SHARE = 0.8


@dataclass(frozen=True)
class Stall:
    """A run of detours: when it started (ms from the run's start) and the time it took away (us)."""

    at_ms: float
    lost_us: float


# Stall sizes tried (us of lost time): the tick costs a few us, a daemon hundreds; each period is tested
# on the stalls of each size and up, so a daemon's are not drowned in the tick's.
SIZES_US = (0.0, 20.0, 200.0, 1000.0)


@dataclass(frozen=True)
class Stalls:
    """A core's stalls from its raw samples: start and end (ns from the run's start), lost time (us)."""

    start: np.ndarray
    end: np.ndarray
    lost_us: np.ndarray
    duration_ns: float

    def at_least(self, lost_us: float, below: float = np.inf) -> "Stalls":
        keep = (self.lost_us >= lost_us) & (self.lost_us < below)
        return Stalls(self.start[keep], self.end[keep], self.lost_us[keep], self.duration_ns)

    def listed(self) -> list[Stall]:
        return [Stall(float(a) / 1e6, float(lost)) for a, lost in zip(self.start, self.lost_us)]


def stalls_over(data: RankData, threshold_fraction: float) -> Stalls:
    """The core's stalls as the analysis sees them: iterations longer than the core's median by more than
    ``threshold_fraction`` of it (the one threshold of the detours, the periods' check and the power)."""
    return core_stalls(data, threshold_fraction * float(np.median(data.times_ns)))


def core_stalls(data: RankData, threshold_ns: float) -> Stalls:
    """Iterations ``threshold_ns`` over the median, merged into one stall when MERGE_NS apart or less."""
    times = data.times_ns.astype(np.float64)
    excess = times - float(np.median(times))
    starts = data.start_times_ns().astype(np.float64)
    index = np.flatnonzero(excess > threshold_ns)
    duration = float(times.sum())
    if not len(index):
        return Stalls(np.zeros(0), np.zeros(0), np.zeros(0), duration)
    first = np.concatenate(([0], np.flatnonzero(np.diff(starts[index]) > MERGE_NS) + 1))
    last = np.concatenate((first[1:] - 1, [len(index) - 1]))
    lost = np.add.reduceat(excess[index], first) / 1e3
    return Stalls(starts[index[first]], starts[index[last]] + times[index[last]], lost, duration)


def shares_at(stalls: Stalls, period_ns: float, tolerance_ns: float, phases_ns: np.ndarray,
              onsets: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """For each of ``phases_ns``: the share of the observable cycles in which a stall of ``onsets`` starts
    within ``tolerance_ns`` of it, and those cycles (a cycle is observable when no stall was under way
    there, ``held``)."""
    onsets = stalls.start if onsets is None else onsets
    k = np.arange(int(stalls.duration_ns // period_ns), dtype=np.float64)
    a = np.asarray(phases_ns, dtype=np.float64)[:, None] + k[None, :] * period_ns - tolerance_ns
    b = a + 2 * tolerance_ns
    before = np.searchsorted(stalls.start, a, side="right") - 1
    running = (before < 0) | (stalls.end[np.maximum(before, 0)] <= a)
    starts = np.searchsorted(onsets, b, side="right") - np.searchsorted(onsets, a, side="left")
    observable = running.sum(axis=1)
    hits = ((starts > 0) & running).sum(axis=1)
    share = np.where(observable >= MIN_CYCLES, hits / np.maximum(observable, 1), 0.0)
    return share, observable


def held(stalls: Stalls, period_ns: float, tolerance_ns: float, phases: int = 0,
         onsets: np.ndarray | None = None, tick_hz: float | None = None) -> tuple[float, float, int]:
    """(best phase's share of observable cycles where a stall starts, the share chance gives, the best
    phase's observable cycles).

    A cycle is observable at a phase when FWQ was running there (no stall under way): a core lent to
    another process cannot show when the event would have begun. A stall starting within
    ``tolerance_ns`` of the phase holds the event in that cycle; ``onsets``: the starts that count (default:
    every stall's), a subset of the stalls by size, while every stall keeps the core from being observed.
    Chance is the median phase's share (at least what the onsets spread evenly would give, ``spread_chance``);
    for a period that is a whole number of ticks (``tick_hz``), also
    at least the other ticks' phases': the tick (and the time slices the scheduler hands out on it) recurs
    at every multiple of its own period, so an event there must stand out from the tick's other phases.
    """
    return held_at(stalls, period_ns, tolerance_ns, phases, onsets, tick_hz)[:3]


def held_at(stalls: Stalls, period_ns: float, tolerance_ns: float, phases: int = 0,
            onsets: np.ndarray | None = None, tick_hz: float | None = None, faster_hz: Sequence[float] = ()
            ) -> tuple[float, float, int, float]:
    """``held`` and the best phase (ns into the cycle); ``faster_hz``: events already named on the core, whose
    phases an event at a whole multiple of their period must stand out from as from the tick's
    (``visited_phases``)."""
    onsets = stalls.start if onsets is None else onsets
    if int(stalls.duration_ns // period_ns) < MIN_CYCLES or not len(onsets):
        return 0.0, 0.0, 0, 0.0
    grid = phase_grid(period_ns, tolerance_ns, phases)
    share, observable = shares_at(stalls, period_ns, tolerance_ns, grid, onsets)
    i = int(_best_first(share, observable)[0])
    best, seen, at = float(share[i]), int(observable[i]), float(grid[i])
    others = [shares_at(stalls, period_ns, tolerance_ns, (at + offsets) % period_ns, onsets)[0]
              for offsets in visited_phases(period_ns, tick_hz, faster_hz)]
    return best, max(chance_at(share, *others), spread_chance(len(onsets), tolerance_ns, stalls.duration_ns)), seen, at


def spread_chance(onsets: int, tolerance_ns: float, duration_ns: float) -> float:
    """The chance that a window of 2 ``tolerance_ns`` holds one of ``onsets`` spread evenly at random over the
    run (Poisson). The median phase's share is a coarse floor where cycles are few: at 340 ms, a window of
    +-27 ms (whole ticks) held 6 of 8 cycles of a quiet control by the long stalls of two slow sources (every
    512 ms and every second), the median phase 1 of 8, the spread 26 %: a 2.89 Hz event was named on a control
    (noise-keep36-quiet)."""
    return float(1.0 - np.exp(-onsets * 2.0 * tolerance_ns / max(duration_ns, 1.0)))


def best_phases(stalls: Stalls, period_ns: float, tolerance_ns: float, onsets: np.ndarray, most: int) -> np.ndarray:
    """The phases (ns into the cycle) that hold ``onsets`` in the best share of the cycles FWQ could see (``held_at``'s
    grid), those of most cycles first, at most ``most`` of them."""
    grid = phase_grid(period_ns, tolerance_ns)
    return grid[_best_first(*shares_at(stalls, period_ns, tolerance_ns, grid, onsets))[:most]]


def _best_first(share: np.ndarray, observable: np.ndarray) -> np.ndarray:
    """The indices of the best ``share``, those of most ``observable`` cycles first (then in the grid's order): a
    real-time 250 ms source's phase held 17 of 17, and the fold took an earlier one held in 4 of 4, too few to
    name, for it (noise-keep27)."""
    tied = np.flatnonzero(share == share.max())
    return tied[np.argsort(-observable[tied], kind="stable")]


def whole_shares(period_ns: float, phase_ns: float) -> Iterator[tuple[int, np.ndarray]]:
    """For each faster period down to FASTEST_NS that ``period_ns`` is a whole number d of: (d, the phases
    (ns into the cycle) d-1 whole shares of ``period_ns`` after ``phase_ns``, where its events would also be)."""
    for d in range(2, int(period_ns // FASTEST_NS) + 1):
        yield d, (phase_ns + np.arange(1, d) * period_ns / d) % period_ns


def explaining_shares(stalls: Stalls, period_ns: float, phase_ns: float, share: float, chance: float,
                      tolerance_ns: float, onsets: np.ndarray, least: float = FASTER_SHARE) -> Iterator[int]:
    """The whole numbers d (from 2 up) whose d-1 phases, whole shares of ``period_ns`` after the event's, hold
    ``onsets`` nearly as often (the median of them ``least`` of its ``share``'s height above ``chance``,
    ``shares_at``): a faster event every ``period_ns``/d (the tick, the host's 100 Hz timer, a daemon the
    spectrum names) recurring at every one of them."""
    for d, shifted in whole_shares(period_ns, phase_ns):
        if float(np.median(shares_at(stalls, period_ns, tolerance_ns, shifted, onsets)[0])) - chance \
                >= least * (share - chance):
            yield d


def explained_faster(stalls: Stalls, period_ns: float, phase_ns: float, share: float, chance: float,
                     tolerance_ns: float, onsets: np.ndarray, least: float = FASTER_SHARE) -> bool:
    """Is the event a faster one's, not one of this period: any of ``explaining_shares``?"""
    return any(explaining_shares(stalls, period_ns, phase_ns, share, chance, tolerance_ns, onsets, least))


def phase_grid(period_ns: float, tolerance_ns: float, phases: int = 0) -> np.ndarray:
    """The phases (ns into the cycle) a period is folded at: ``phases`` of them, or one per ``tolerance_ns``
    (at least 8)."""
    phases = phases or max(8, int(np.ceil(period_ns / tolerance_ns)))
    return np.arange(phases) * period_ns / phases


def chance_at(random_phases: np.ndarray, *visited: np.ndarray) -> float:
    """What a phase taken at random holds (the median of ``random_phases``), or the phases a faster event comes
    back at (the median of each of ``visited``: ``visited_phases``), whichever is most."""
    return max([float(np.median(random_phases)), *(float(np.median(v)) for v in visited if len(v))])


def idle_shares(stalls: Stalls, period_ns: float, phases_ns: np.ndarray, after_ns: float, window_ns: float
                ) -> np.ndarray:
    """For each of ``phases_ns``: the share of the run's cycles in which FWQ did not run from ``after_ns`` to
    ``after_ns + window_ns`` past it (one stall under way over the whole window). Every cycle counts, not only
    those in which FWQ held the core at the phase: whatever holds the core for the window shows in all."""
    cycles = int(stalls.duration_ns // period_ns)
    if cycles < 1 or not len(stalls.start):
        return np.zeros(len(phases_ns))
    a = np.asarray(phases_ns, dtype=np.float64)[:, None] + np.arange(cycles)[None, :] * period_ns + after_ns
    before = np.searchsorted(stalls.start, a, side="right") - 1
    return ((before >= 0) & (stalls.end[np.maximum(before, 0)] >= a + window_ns)).mean(axis=1)


def idle_at(stalls: Stalls, period_ns: float, phase_ns: float, after_ns: float, window_ns: float,
            tick_hz: float | None = None, faster_hz: Sequence[float] = ()) -> tuple[float, float, int]:
    """(``idle_shares`` at ``phase_ns``; the share a phase taken at random gives, or the phases a faster event
    comes back at, as ``held_at``; the run's cycles)."""
    cycles = int(stalls.duration_ns // period_ns)
    if cycles < MIN_CYCLES:
        return 0.0, 0.0, cycles
    grid = (phase_ns + phase_grid(period_ns, TOLERANCE_NS)) % period_ns
    visited = [idle_shares(stalls, period_ns, (phase_ns + offsets) % period_ns, after_ns, window_ns)
               for offsets in visited_phases(period_ns, tick_hz, faster_hz)]
    idle = idle_shares(stalls, period_ns, grid, after_ns, window_ns)
    return float(idle[0]), chance_at(idle, *visited), cycles


def visited_phases(period_ns: float, tick_hz: float | None, faster_hz: Sequence[float] = ()) -> list[np.ndarray]:
    """The offsets (ns, within the cycle) at which a faster event comes back after a phase: the tick's
    (``tick_phases``) and those of each of ``faster_hz`` (events already named on the core) whose period
    ``period_ns`` is a whole number of (within 1 %, ``whole_ticks``). Folded at a multiple of a named event's
    period the event's stalls pile up at all its phases, and one of them, picked as the best of many periods and
    phases tried, holds a few more cycles than the others: a real-time 13 ms daemon's core was idle after 1 of
    its phases in 38 of 38 cycles of 299 ms (23 of its periods), after the others in a median 0.89 of them,
    against 0.63 at a random phase (benchmarks/noise_injected.py, noise-keep27: told as a 3.34 Hz event)."""
    sets = [tick_phases(period_ns, tick_hz)]
    for rate in faster_hz:
        count = whole_ticks(period_ns, rate)
        if count:
            sets.append(np.arange(1, min(count, MAX_TICK_PHASES)) * period_ns / count)
    return [offsets for offsets in sets if len(offsets)]


def tick_phases(period_ns: float, tick_hz: float | None) -> np.ndarray:
    """The offsets (ns, within the cycle) at which the tick comes back after a phase, when ``period_ns`` is
    a whole number of ticks or of a whole share of one, up to MAX_MULTIPLE (within 1 %; at most
    MAX_TICK_PHASES); empty otherwise. At normal priority the scheduler hands the core to other processes
    on the tick: folded at such a period the tick's stalls pile up at these few phases (at 90 ms, 22.5
    ticks, every 2 ms), and an event must stand out from them, not from the quiet phases between."""
    if not tick_hz:
        return np.zeros(0)
    for share_of_tick in range(1, MAX_MULTIPLE + 1):
        count = whole_ticks(period_ns, tick_hz, share_of_tick)
        if count:
            return np.arange(1, min(count, MAX_TICK_PHASES)) * 1e9 / tick_hz
    return np.zeros(0)


def chance_of(share: float, cycles: int, chance: float) -> float:
    """The probability that a phase taken at random holds a stall in ``share`` of ``cycles`` or more, each
    cycle holding one with probability ``chance`` (at least MIN_CHANCE): the binomial tail."""
    from scipy.stats import binom  # not at import: the CLI starts without scipy (pyproject's banned imports)

    hits = int(round(share * cycles))
    q = min(max(chance, MIN_CHANCE), 1.0)
    # The survival function, not a sum of math.comb terms: a 6 s run has 1500 cycles of the 250 Hz tick,
    # whose binomial coefficients overflow a float.
    return float(binom.sf(hits - 1, cycles, q))


def significant(share: float, chance: float, cycles: int, least: float = MIN_HIT_SHARE,
                most_chance: float = MAX_CHANCE) -> bool:
    """A phase holding stalls in ``share`` of ``cycles`` is an event's: most cycles, clearly above the random
    phase's ``chance``, and too many to be luck over every phase, interval and size tried (``most_chance``)."""
    return share >= least and share - chance >= MIN_CONTRAST and chance_of(share, cycles, chance) <= most_chance


def recurs(stalls: Stalls, frequency_hz: float, bin_hz: float, steps: int = REFINE_STEPS,
           tick_hz: float | None = None) -> bool:
    """Do stalls of some size (SIZES_US) start at one phase of ``frequency_hz`` (refined within ``bin_hz``)
    in most observable cycles, clearly more often than at a phase taken at random (or the tick's others)?"""
    return hit_share(stalls, frequency_hz, bin_hz, steps, tick_hz) > 0


def hit_share(stalls: Stalls, frequency_hz: float, bin_hz: float, steps: int = REFINE_STEPS,
              tick_hz: float | None = None, most_chance: float = MAX_CHANCE) -> float:
    """The best share of observable cycles holding a stall (``recurs``) at ``frequency_hz``; 0: no recurrence.
    ``most_chance``: the binomial tail allowed (``significant``)."""
    return best_share(holds_by_size(stalls, frequency_hz, bin_hz, steps, tick_hz, most_chance))


def best_share(held: Sequence[Hold]) -> float:
    """The best share of ``held`` (``holds_by_size``); 0 when there is none."""
    return max((hold.share for hold in held), default=0.0)


def best_hold(held: Sequence[Hold]) -> Hold | None:
    """The hold of ``held`` with the best share (of those, the most cycles FWQ could see); None when there is none."""
    return max(held, key=lambda hold: (hold.share, hold.cycles), default=None)


class Hold(NamedTuple):
    """The best phase at which stalls of one size recur at a rate: its share of the observable cycles, the
    random phase's, the period and phase (ns) and window it was found at, the onsets of that size, and the
    observable cycles."""

    share: float
    chance: float
    period_ns: float
    phase_ns: float
    tolerance_ns: float
    onsets: np.ndarray
    cycles: int = 0             # the cycles FWQ could see at that phase


def window_ns(period_ns: float, tick_hz: float | None) -> float:
    """How near a phase a stall starts to hold it at a spectral line's period (TOLERANCE_SHARE, or
    TICK_MULTIPLE_TOLERANCE_SHARE for whole ticks; from TOLERANCE_NS, to a quarter of the period)."""
    share = TICK_MULTIPLE_TOLERANCE_SHARE if whole_ticks(period_ns, tick_hz) else TOLERANCE_SHARE
    return min(max(share * period_ns, TOLERANCE_NS), 0.25 * period_ns)


def holds_by_size(stalls: Stalls, frequency_hz: float, bin_hz: float, steps: int = REFINE_STEPS,
                  tick_hz: float | None = None, most_chance: float = MAX_CHANCE) -> list[Hold]:
    """For each of SIZES_US (shortest first) at which the stalls recur at ``frequency_hz`` (refined within
    ``bin_hz`` in ``steps``): the best ``Hold`` (significant, and not the tick's slices: ``tick_locked``)."""
    if frequency_hz <= 0 or stalls.duration_ns * frequency_hz / 1e9 < MIN_CYCLES:
        return []
    out: list[Hold] = []
    for size in SIZES_US:
        some = stalls.at_least(size).start
        if len(some) < MIN_CYCLES:
            break
        at_size: Hold | None = None
        for f in np.linspace(frequency_hz - bin_hz / 2, frequency_hz + bin_hz / 2, steps):
            period = 1e9 / f
            tolerance = window_ns(period, tick_hz)
            best, chance, cycles, phase = held_at(stalls, period, tolerance, onsets=some, tick_hz=tick_hz)
            if significant(best, chance, cycles, most_chance=most_chance) \
                    and not tick_locked(stalls, some, period, phase, tolerance, tick_hz) \
                    and (at_size is None or best > at_size.share):
                at_size = Hold(best, chance, period, phase, tolerance, some, cycles)
        if at_size is not None:
            out.append(at_size)
    return out


def faster_explains(stalls: Stalls, frequency_hz: float, bin_hz: float, tick_hz: float | None = None,
                    steps: int = REFINE_STEPS) -> bool:
    """Is the event the stalls recur at ``frequency_hz`` a faster one's: do the longest stalls that recur there
    also start at every whole share of its cycle nearly as often (``explained_faster``, NEARLY_SHARE)? A
    daemon's own stalls are its longest, the host's timer's a few microseconds.

    On a core shared in turns the spectrum had a 33.36 Hz line, held by stalls of 20 us or more in 96 % of its
    cycles and the phases 10 and 20 ms on in 91 and 87 % (chance 38 %): the host's 10 ms timer, named at
    33.33 Hz in 3 of 15 controls of noise-keep26 and -27 (benchmarks/noise_injected.py)."""
    return longest_explained(stalls, holds_by_size(stalls, frequency_hz, bin_hz, steps, tick_hz))


def longest_explained(stalls: Stalls, held: Sequence[Hold]) -> bool:
    """``faster_explains`` on the holds a caller has found already (``holds_by_size``)."""
    if not held:
        return False
    longest = held[-1]
    return explained_faster(stalls, longest.period_ns, longest.phase_ns, longest.share, longest.chance,
                            longest.tolerance_ns, longest.onsets, NEARLY_SHARE)


def whole_ticks(period_ns: float, tick_hz: float | None, share_of_tick: int = 1) -> int:
    """The whole number of ticks (or of ``share_of_tick``-ths of one) ``period_ns`` is within 1 % of, from 2, and
    within TOLERANCE_NS of: folded at it, the tick comes back to its phase each cycle; 0 when it is none.

    1 % alone made every period from 50 ticks up a whole number of them (271 ms is 67.75 ticks of 4 ms, a
    millisecond from 68): held to the tick's 8 % window (TICK_MULTIPLE_TOLERANCE_SHARE, 22 ms there), a 90 ms
    daemon's stalls started in it in every cycle, and a quiet core named a 3.82 Hz event beside the daemon's
    11.11 Hz in 3 runs of 3 (benchmarks/noise_injected.py, noise-keep33-quiet)."""
    if not tick_hz:
        return 0
    count = period_ns * share_of_tick * tick_hz / 1e9
    off_ns = abs(count - round(count)) * 1e9 / (tick_hz * share_of_tick)
    return int(round(count)) if count >= 1.5 and abs(count - round(count)) <= 0.01 * count \
        and off_ns <= TOLERANCE_NS else 0


def offsets(times_ns: np.ndarray, phase_ns: float, period_ns: float) -> np.ndarray:
    """Each of ``times_ns`` less the nearest time at ``phase_ns`` of a cycle of ``period_ns`` (ns, signed)."""
    return times_ns - phase_ns - np.round((times_ns - phase_ns) / period_ns) * period_ns


def tick_locked(stalls: Stalls, onsets: np.ndarray, period_ns: float, phase_ns: float, tolerance_ns: float,
                tick_hz: float | None) -> bool:
    """Are the stalls holding ``period_ns`` at ``phase_ns`` the tick's: do most of them (MIN_HIT_SHARE) start
    within TICK_TOLERANCE_NS of one phase of the tick, though the period's cycles drift over the tick's phases?

    A period within 1 % of a whole number of ticks is held to the wide window (TICK_MULTIPLE_TOLERANCE_SHARE).
    A little off that multiple, the window drifts over the tick's phases in the run, and the slices the
    scheduler hands out on the tick fall into it cycle after cycle: 62.34 Hz (4.01 ticks) named beside a
    real-time 90 ms daemon in 2 of 5 runs, 94-98 % of its stalls within 0.15 ms of one phase of the tick, and
    5.85 Hz (42.8 ticks) in a control, 82 % (benchmarks/noise_injected.py, noise-keep15 and noise-keep16-6s).
    An event's stalls keep their own period's phase and so spread over the tick's (a 13 ms daemon's comb
    read at 52.16 ms, 13 ticks: 17 %). Asked only where the cycles drift a whole tick or more from the
    multiple over the run: closer, the two phases are one (and ``held``'s tick phases judge it)."""
    count = whole_ticks(period_ns, tick_hz)
    if not count or not tick_hz:
        return False
    tick_ns = 1e9 / tick_hz
    if stalls.duration_ns // period_ns * abs(period_ns - count * tick_ns) < tick_ns:
        return False
    hits = onsets[np.abs(offsets(onsets, phase_ns, period_ns)) <= tolerance_ns]
    if len(hits) < MIN_CYCLES:
        return False
    phases = np.sort(hits % tick_ns)
    around = np.concatenate((phases - tick_ns, phases, phases + tick_ns))
    near = np.searchsorted(around, phases + TICK_TOLERANCE_NS, side="right") \
        - np.searchsorted(around, phases - TICK_TOLERANCE_NS, side="left")
    return int(near.max()) >= MIN_HIT_SHARE * len(hits)


def turn_share(stalls: Stalls, frequency_hz: float, tick_hz: float | None) -> float:
    """The share of a cycle of ``frequency_hz`` the stalls starting at its phase last (their median), where
    the period is a whole number of ticks; 0 elsewhere.

    Processes sharing a core run in turns the scheduler hands out on the tick, and FWQ's turn comes back every
    round: with two others on its core (load 4 on this 2-core VM), FWQ ran 4 ms of every 12 ms, a line at
    83.33 Hz (three ticks) 1477x its background whose stalls of 8 ms recur at one phase in 88 % of the cycles.
    It was named as an event in 3 of 10 controls (benchmarks/noise_injected.py, noise-keep24)."""
    longer = stalls.at_least(TICK_MAX_US)          # the tick's own interrupts start at the same phase
    if not whole_ticks(1e9 / frequency_hz, tick_hz) or not len(longer.start):
        return 0.0
    period = 1e9 / frequency_hz
    tolerance = TICK_MULTIPLE_TOLERANCE_SHARE * period
    phase = held_at(stalls, period, tolerance, onsets=longer.start, tick_hz=tick_hz)[3]
    at_phase = longer.lost_us[np.abs(offsets(longer.start, phase, period)) <= tolerance]
    return float(np.median(at_phase)) * 1e3 / period if len(at_phase) else 0.0


def fundamental(stalls: Stalls, frequency_hz: float, bin_hz: float,
                tick_hz: float | None = None, lines: Sequence[float] = ()) -> tuple[float, float]:
    """(frequency, hit share) of the event the spectrum placed at ``frequency_hz``: that frequency, or a
    fraction of it when the stalls recur there in clearly more cycles (a spectrum can read a slow train at
    its second or third harmonic; the time domain sees only every second or third cycle hold it there).
    (frequency_hz, 0) when it does not recur at all, nor at a multiple its comb has a line at (``lines``,
    ``beat_multiple``); (the rate, 0) when a faster event explains the rate it recurs at (``faster_explains``)."""
    held_here = holds_by_size(stalls, frequency_hz, bin_hz, tick_hz=tick_hz)
    share = best_share(held_here)
    if not share:
        return beat_multiple(stalls, frequency_hz, bin_hz, tick_hz, lines)
    best = (frequency_hz, share)
    for d in (2, 3, 4):
        lower = hit_share(stalls, frequency_hz / d, bin_hz / d, tick_hz=tick_hz)
        if lower >= best[1] + FUNDAMENTAL_GAIN:
            best = (frequency_hz / d, lower)
    rate, held = faster(stalls, *best, bin_hz, tick_hz)
    at_rate = held_here if rate == frequency_hz else \
        holds_by_size(stalls, rate, bin_hz * rate / frequency_hz, tick_hz=tick_hz)
    return (rate, 0.0) if longest_explained(stalls, at_rate) else (rate, held)


def beat_multiple(stalls: Stalls, frequency_hz: float, bin_hz: float, tick_hz: float | None,
                  lines: Sequence[float] = ()) -> tuple[float, float]:
    """(frequency, hit share) of the event behind a beat's comb whose own fundamental does not recur: the
    multiple of ``frequency_hz`` (below the tick, up to BEAT_MAX_MULTIPLE) at which the comb has a line
    (``lines``), or of which a line the stalls recur at is a harmonic (the 8th line is one of the 4th and the
    2nd), or any multiple below the tick at the beat's exact rate, the fastest at which the stalls recur
    (nearly) most often; (the frequency, 0) when none does or the tick is no whole multiple of it.

    A daemon woken every 13 ms at normal priority on a crowded core, run on the 4 ms tick's slices, leaves
    a comb 19.2 Hz apart (its 52 ms least common multiple with the tick); over 52 ms a 1 ms window holds
    some stall at half of all phases, and the comb's fundamental is no period, while its 4th line, every
    13 ms, holds a stall at one phase in 95 % of the cycles FWQ could see (benchmarks/noise_injected.py,
    FWQ keeping 14 % of its core). The comb lacked its 4th line in 4 of 7 such runs of noise-keep20, which
    were named at 6.5, 17.33 or 26 ms or not at all; and a control's 200 Hz, held in 82 % of its cycles at
    the exact rate, would be named where the 100 Hz it is a multiple of (held in all) has no line. Only a
    line the stalls recur at vouches for its fractions: taken from every line, a 10 Hz comb's 8th and 9th
    gave 20 Hz (the host's 100 Hz every fifth cycle) and a 6.25 Hz comb's 12th 37.5 Hz, beside a real-time
    27 ms source on the other core.

    Every multiple below the tick is also tried at the beat's exact rate (no search: a daemon on an absolute
    timer and the host's timers keep exact time with the tick). At load 6 a 13 ms daemon's comb had neither
    its 4th nor its 8th line in 5 of 5 runs (noise-keep25), named at 26 or 17.33 ms or missed, while every
    13 ms held all 136-174 cycles at the exact rate. Tried only up to BEAT_MAX_MULTIPLE, the exact rates named
    20, 30, 33.33, 40 or 66.67 Hz in 8 controls of 180 kept files: whole multiples of the host's 10 ms timer,
    whose own 100 Hz lay past the 16th multiple of those combs or was not tried; with every multiple tried it is
    the fastest held, and those are named as the host's 100 Hz (in 63 of the 180 files, 27 before).

    A multiple a faster event explains (``faster_explains``) gives way to the next held one."""
    none = (frequency_hz, 0.0)
    multiples = beat_multiples(frequency_hz, tick_hz)
    lined = [k for k in multiples if any(abs(f - frequency_hz * k) <= max(bin_hz, 0.01 * f) for f in lines)]
    held = {k: multiple_held(stalls, frequency_hz, k, bin_hz, tick_hz, BEAT_MAX_CHANCE) for k in lined}
    recurring = [k for k, (_, share) in held.items() if share]
    held.update({k: multiple_held(stalls, frequency_hz, k, bin_hz, tick_hz, BEAT_MAX_CHANCE)
                 for k in multiples if k not in held and any(m % k == 0 for m in recurring)})
    # Every multiple below the tick at the beat's exact rate, beyond BEAT_MAX_MULTIPLE too: a multiple the host's
    # timers hold is held at their own rate as well, and the fastest held is theirs.
    exact = exact_beat(frequency_hz, tick_hz)
    for k in range(2, int(round(tick_hz / exact)) if tick_hz and multiples else 0):
        at_exact = exact * k, hit_share(stalls, exact * k, 0.0, steps=1, tick_hz=tick_hz, most_chance=BEAT_MAX_CHANCE)
        if at_exact[1] > held.get(k, none)[1]:
            held[k] = at_exact
    while True:
        most = max((share for _, share in held.values()), default=0.0)
        if not most:
            return none
        # Held every 26 ms too when held every 13 ms: the event's is the fastest held (nearly) as often (``faster``).
        k, best = max(((k, m) for k, m in held.items() if m[1] >= most - MULTIPLE_SLACK), key=lambda km: km[1][0])
        # One a faster event explains is no candidate (a shared core's turns at the host's 10 ms held every 30 ms
        # in all cycles, the 100 Hz itself in 76 %: 33.33 Hz in two controls of noise-keep26).
        if not faster_explains(stalls, best[0], 0.0, tick_hz, steps=1):
            return best
        del held[k]


def faster(stalls: Stalls, frequency_hz: float, share: float, bin_hz: float,
           tick_hz: float | None = None) -> tuple[float, float]:
    """(frequency, hit share) of the event whose stalls recur at ``frequency_hz`` in ``share`` of its cycles:
    the highest whole multiple of it (up to BEAT_MAX_MULTIPLE, below the tick) at which they still recur as often.

    Stalls that come back every period T also come back every 2T, 4T ...: the time domain confirms every
    sub-multiple of an event's rate. The spectrum of a daemon at normal priority gives such a sub-multiple:
    woken every 13 ms but run on the 4 ms tick's time slices, its stalls repeat exactly every 52 ms (the
    least common multiple), a comb spaced 19.2 Hz whose fundamental is no event (benchmarks/noise_injected.py).
    The event's own rate is the fastest at which nearly every cycle still holds a stall."""
    best = (frequency_hz, share)
    for k in beat_multiples(frequency_hz, tick_hz):
        higher = hit_share(stalls, frequency_hz * k, bin_hz * k, tick_hz=tick_hz)
        if higher >= share - MULTIPLE_SLACK:
            best = (frequency_hz * k, higher)
    return best


def multiple_held(stalls: Stalls, frequency_hz: float, k: int, bin_hz: float, tick_hz: float | None,
                  most_chance: float = MAX_CHANCE) -> tuple[float, float]:
    """(frequency, hit share) at the ``k``-th multiple of a beat's rate, searched across ``k`` spectral bins
    around ``k * frequency_hz`` (``beat_multiple`` asks the beat's exact rate too).

    The search's steps widen with ``k``: at the 4th multiple of a 19.2 Hz comb they are a fifth of a bin
    apart, and over a 20 s run a step's error moves the phase by more than the 0.3 ms window (a 13 ms daemon
    held 95 % of its cycles at 76.911 Hz, 100 % at 76.923). A daemon woken by an absolute timer beats with
    the tick exactly, and its rate is the exact beat's multiple (benchmarks/noise_injected.py, noise-keep20:
    76.92 Hz held 100 % of the cycles in the seven 13 ms runs named at 6.5, 17.33 or 26 ms, or missed)."""
    return frequency_hz * k, hit_share(stalls, frequency_hz * k, bin_hz * k, tick_hz=tick_hz, most_chance=most_chance)


def exact_beat(frequency_hz: float, tick_hz: float | None) -> float:
    """The rate of a beat's comb as the tick makes it: the tick's over the whole number of ticks the comb
    repeats after (250 Hz / 13 = 19.2308 Hz); ``frequency_hz`` where it is no beat (``beat_multiples``)."""
    if not tick_hz or not beat_multiples(frequency_hz, tick_hz):
        return frequency_hz
    return tick_hz / round(tick_hz / frequency_hz)


def beat_multiples(frequency_hz: float, tick_hz: float | None) -> list[int]:
    """The whole multiples (2 up to BEAT_MAX_MULTIPLE, below the tick) a beat's rate is raised to (``faster``,
    ``beat_multiple``); none where ``frequency_hz`` has no beat's signature: a rate the tick is a whole multiple
    of (250 Hz / 19.23 Hz = 13). Elsewhere a multiple may be held by another event's stalls (a 90 ms daemon's
    30 ms by the host's 100 Hz timer)."""
    if not tick_hz or abs(tick_hz / frequency_hz - round(tick_hz / frequency_hz)) > BEAT_RATIO_SLACK:
        return []
    return [k for k in range(2, BEAT_MAX_MULTIPLE + 1) if frequency_hz * k < tick_hz * (1 - 0.01)]


def tick_detour_us(stalls: Stalls, tick: float | None) -> float | None:
    """The median length (us) of the short stalls (under TICK_MAX_US) at the tick's phase, where nearly every
    cycle FWQ could see holds one (TICK_HIT_SHARE): what the kernel's own interrupt costs FWQ on this core
    (23-25 us on the local VM; a few are expected on bare metal, not measured here). None where the tick is not
    seen so."""
    if not tick:
        return None
    short = stalls.at_least(0.0, below=TICK_MAX_US)
    period = 1e9 / tick
    tolerance = min(TICK_TOLERANCE_NS, 0.15 * period)
    best, _, cycles, phase = held_at(stalls, period, tolerance, onsets=short.start)
    if cycles < MIN_CYCLES or best < TICK_HIT_SHARE:
        return None
    return round(float(np.median(short.lost_us[np.abs(offsets(short.start, phase, period)) <= tolerance])), 1)


def tick_hz(stalls: Stalls) -> float | None:
    """The kernel tick's rate as a core's stalls show it: the highest of TICK_RATES at which nearly every
    observable cycle (TICK_HIT_SHARE) starts a stall at one phase, beyond chance; None when none does.

    The tick's interrupt costs microseconds (stalls under TICK_MAX_US): at real time those alone show it. At
    normal priority the scheduler also hands the core to other processes on the tick, so stalls of any
    length start on it, and its short stalls need only stand above chance (TICK_SHORT_CONTRAST) there: a
    daemon woken every 10 ms, whose stalls are all long, is no 100 Hz tick.
    """
    short = stalls.at_least(0.0, below=TICK_MAX_US).start
    for rate in TICK_RATES:
        period = 1e9 / rate
        tolerance = min(TICK_TOLERANCE_NS, 0.15 * period)
        # The tick's clock and CLOCK_MONOTONIC agree to far better than a part in 10^4: a few steps do.
        for f in np.linspace(rate * (1 - 2e-4), rate * (1 + 2e-4), 5):
            best, chance, cycles = held(stalls, 1e9 / f, tolerance, onsets=short)
            if significant(best, chance, cycles, TICK_HIT_SHARE):
                return rate
            if best - chance >= TICK_SHORT_CONTRAST:
                every, chance, cycles = held(stalls, 1e9 / f, tolerance)
                if significant(every, chance, cycles, TICK_HIT_SHARE):
                    return rate
    return None
