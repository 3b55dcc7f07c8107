"""What a noise run could have seen: the smallest periodic event its own samples would have named.

"No event" says nothing unless one knows what would have been named. The power is measured on the run's own
samples, with the analysis's own detector: an event of a stall ``d`` every ``P`` is added to a core's iterations as
a real one lands (the iteration running when it fires is ``d`` longer, the iterations FWQ would have run meanwhile
are gone, and the rest of the run stays where it was: ``inject``), and the core is analysed again: a line in its
lost-time spectrum (``analysis.dominant_periods``) that its stalls place at 1/P in the time domain
(``analysis.confirmed``), the two things ``analysis.core_noise`` asks of a period, or, for a slow one, its stalls
folded at 1/P with no line (``folding.slow_periods``, the search ``core_noise`` runs after the spectrum). The
smallest ``d`` on STALL_GRID_US (up to what FWQ held of P) that is named is the core's power at ``P``; a node's is
its noisiest core's (the most time lost: the background an event must stand out from), over REFERENCE_PERIODS_MS
(the fastest and the slowest of the daemons the noise benchmark injects, and the 90 ms between them). It is stated
as the share of a core such an event steals (``d / P``): "could have seen >= 0.3 % here".

Cost: about 25 analyses of one core per node (five per placement and period; the fold's periods are measured on
the timer and at the tick), 30-50 s of CPU per node on a loaded 3 s run of the 2-core host, which is why one core
per node, only the lines at a whole ratio of 1/P are asked to the time domain, and the fold screens only near 1/P.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from mpiregress.families.noise import analysis, findings, folding, recurrence
from mpiregress.families.noise.fwqfile import NodeData, RankData
from mpiregress.model.results import power_conditions

# 250 ms: a 3 s run holds 12 of its cycles, often too few on a loaded host, and a pass must say so.
REFERENCE_PERIODS_MS = (13.0, 90.0, 250.0)
# 10 us to 9.9 ms in steps of 1.5x (up to what FWQ held of the period: stall_grid_us): the power is stated to
# within that step.
STALL_GRID_US = tuple(round(10.0 * 1.5 ** k, 1) for k in range(18))
# Where in the first period the first event fires (any phase that is not the run's start).
PHASE = 0.37


def inject(data: RankData, period_ns: float, stall_ns: float, phase: float = PHASE,
           on_tick: tuple[float, float] | None = None) -> RankData:
    """``data`` with an event of ``stall_ns`` every ``period_ns`` of wall time, the rest of the run where it was;
    ``on_tick`` (the tick's period and busiest phase, ns: ``folding.busiest_tick_phase``): each one starts at
    the first tick after its timer, as a daemon at normal priority that does not preempt at once.

    The iteration running when an event fires (or the stall it is in) lasts until the first iteration that
    started ``stall_ns`` after it ended; those between are gone, as FWQ was off its core. The run is not
    stretched: the tick and the load's slices keep wall time, as they would beside a real daemon. (Stretched,
    every event moved the load's later slices off the tick by its stall, and at stalls that were not a whole
    number of half ticks they piled up again at P plus the stall, less whole half ticks: on a loaded core the
    fold's screen ranked those ahead of the event (a 90 ms one was named at 1.9 ms, not at 2.9 or 4.4 ms; the
    screen's best were 86.9, 88.9, 90.9 and 92.9 ms).)"""
    times = data.times_ns.astype(np.int64)
    starts = data.start_times_ns()
    total = int(times.sum())
    fires = np.arange(phase * period_ns, total, period_ns)
    if on_tick is not None:
        tick_ns, tick_phase = on_tick
        fires = np.ceil((fires - tick_phase) / tick_ns) * tick_ns + tick_phase
    kept = np.ones(len(times), dtype=bool)
    lasts = times.copy()
    head, resume = -1, 0
    for hit in np.searchsorted(starts, fires[(fires >= 0) & (fires < total)], side="right") - 1:
        if hit < resume:            # FWQ is still off its core from the last event: this one adds to that stall
            hit = head
        head = int(hit)
        resume = int(np.searchsorted(starts, starts[head] + lasts[head] + stall_ns, side="left"))
        kept[head + 1:resume] = False
        lasts[head] = (starts[resume] if resume < len(starts) else total) - starts[head]
    return replace(data, times_ns=np.minimum(lasts[kept], np.iinfo(np.uint32).max).astype(np.uint32))


def _own_ns(data: RankData) -> float:
    """FWQ's own time on the core: its iterations at their median length (what the fold's cycles are counted in)."""
    return len(data.times_ns) * float(np.median(data.times_ns))


def named_at(data: RankData, frequency_hz: float, tick_hz: float | None,
             threshold_fraction: float = analysis.DEFAULT_THRESHOLD_FRACTION, faster_hz: Sequence[float] = ()) -> bool:
    """Would the analysis name an event at ``frequency_hz`` on this core: a spectral line there that the
    core's stalls confirm by recurring at it, or (a slow one) its stalls folded at it with no line?
    ``faster_hz``: the spectral periods the analysis named on the core, which the fold is told of as it is there
    (folding.slow_periods)."""
    freqs, power, lines = analysis.rank_spectrum(data)
    if len(freqs) < 2:
        return False
    bin_hz = float(freqs[1] - freqs[0])
    stalls = recurrence.stalls_over(data, threshold_fraction)
    # The lines the time domain could place at 1/P (analysis.confirmed: a line at a whole share or multiple of it,
    # recurrence.fundamental): a 13 ms event that keeps wall time beside the 4 ms tick repeats every 52 ms, and the
    # spectrum's line is that comb's 19.23 Hz, which core_noise raises to 76.92 Hz.
    found = [p for p in analysis.dominant_periods(freqs, power, lines=lines)
             if _whole_ratio(p.frequency_hz, frequency_hz, bin_hz)]
    if any(abs(p.frequency_hz - frequency_hz) <= max(bin_hz, 0.02 * frequency_hz)
           for p in analysis.confirmed(found, stalls, bin_hz, tick_hz)[0]):
        return True
    if 1e9 / frequency_hz < folding.MIN_PERIOD_NS:
        return False
    cpu_ns = _own_ns(data)
    folded = folding.slow_periods(stalls, cpu_ns, tick_hz, near_hz=frequency_hz, faster_hz=faster_hz)
    return any(abs(f.frequency_hz - frequency_hz) <= 0.02 * frequency_hz for f in folded)


def placements(data: RankData, period_ms: float, tick_hz: float | None,
               threshold_fraction: float = analysis.DEFAULT_THRESHOLD_FRACTION) -> list[tuple[float, float] | None]:
    """Where an event every ``period_ms`` is placed to measure the power: on its own timer (None) and, for the
    periods the fold searches (from folding.MIN_PERIOD_NS) on a core whose load's slices crowd a phase of the
    tick (``folding.busiest_tick_phase``), also waiting for the tick there (``inject``'s ``on_tick``).

    A slow daemon at FWQ's priority often waits (EEVDF lets the running task finish its slice): its stalls
    then start where the load's time slices end (the kept FWQ files of benchmarks/noise_injected.py at load
    4-8: a 90 ms daemon's onsets within 0.3 ms of the tick's busiest phase in some runs, on its own timer in
    others). There they stand out far less. Faster ones only on the timer: a 13 ms daemon's onsets were
    timer-exact in those files (spread over the tick, named at its own rate), and one moved to the tick would be
    named at its beat with the tick, never at 1/P (a power of "none" on a quiet core). A core with no such
    crowd has no slices to wait for: on quiet cores a 250 ms daemon's stalls began 40-49 us after its timer in 11
    of 11 cycles, a 90 ms one's in all 32 in which FWQ was running there (a 2 ms stall in 27, a 20-30 us wake-up
    in 5; noise-keep33-quiet), and the tick placement put a quiet control's power at 1.4 % where its timer's was
    0.3 % (11 % on another, 2026-11-29)."""
    if period_ms * 1e6 < folding.MIN_PERIOD_NS:
        return [None]
    ticked = folding.busiest_tick_phase(recurrence.stalls_over(data, threshold_fraction).at_least(
        folding.SIZES_US[0]).start, tick_hz, _own_ns(data))
    return [None] if ticked is None else [None, ticked]


def _whole_ratio(line_hz: float, frequency_hz: float, bin_hz: float) -> bool:
    """Is one of the two a whole multiple of the other (within a bin or 2 % of the slower)?"""
    slow, fast = sorted((line_hz, frequency_hz))
    k = round(fast / slow)
    return k >= 1 and abs(fast - k * slow) <= max(bin_hz, 0.02 * slow)


def stall_grid_us(data: RankData, period_ms: float) -> tuple[float, ...]:
    """STALL_GRID_US up to the share of ``period_ms`` FWQ held the core (at least the grid's first step). An event
    cannot take more of FWQ's time than FWQ has, and one that would (``inject`` takes it from FWQ's next turns)
    leaves too few samples to name anything: on a core FWQ held 19 % of, a 13 ms event was named from 0.58 to
    1.9 ms and at no size from 2.9 ms up (noise-keep28 control-1), which a bisection over the whole grid can land in."""
    held_us = _own_ns(data) / float(data.times_ns.sum(dtype=np.float64)) * period_ms * 1e3
    return tuple(s for s in STALL_GRID_US if s <= held_us) or STALL_GRID_US[:1]


def smallest_named_us(data: RankData, period_ms: float, tick_hz: float | None,
                      on_tick: tuple[float, float] | None = None,
                      threshold_fraction: float = analysis.DEFAULT_THRESHOLD_FRACTION,
                      faster_hz: Sequence[float] = ()) -> float:
    """The smallest stall on ``stall_grid_us`` every ``period_ms``, placed as ``on_tick`` says (``inject``), that
    the core would have named (inf: none of them; ``faster_hz``: ``named_at``'s). Bisection over the grid: a
    longer stall of the same period stands higher in both domains (it did not where ``inject`` stretched the run:
    see there)."""
    grid = stall_grid_us(data, period_ms)
    low, high = -1, len(grid)
    while high - low > 1:
        mid = (low + high) // 2
        if named_at(inject(data, period_ms * 1e6, grid[mid] * 1e3, on_tick=on_tick), 1e3 / period_ms,
                    tick_hz, threshold_fraction, faster_hz):
            high = mid
        else:
            low = mid
    return grid[high] if high < len(grid) else float("inf")


def smallest_by_placement(data: RankData, period_ms: float, tick_hz: float | None,
                          threshold_fraction: float = analysis.DEFAULT_THRESHOLD_FRACTION,
                          faster_hz: Sequence[float] = ()) -> list[float]:
    """``smallest_named_us`` in each of ``placements``, the timer's first."""
    return [smallest_named_us(data, period_ms, tick_hz, where, threshold_fraction, faster_hz)
            for where in placements(data, period_ms, tick_hz, threshold_fraction)]


def smallest_stall_us(data: RankData, period_ms: float, tick_hz: float | None,
                      threshold_fraction: float = analysis.DEFAULT_THRESHOLD_FRACTION,
                      faster_hz: Sequence[float] = ()) -> float:
    """The smallest stall on ``stall_grid_us`` every ``period_ms`` the core would have named wherever the event is
    placed (``placements``): a power measured on the timer alone claimed events the judge then missed in
    silence."""
    return max(smallest_by_placement(data, period_ms, tick_hz, threshold_fraction, faster_hz))


def _size(stall_us: float) -> str:
    return f"{stall_us / 1e3:.1f} ms" if stall_us >= 1000 else f"{stall_us:.0f} us"


def _said(stall_us: float, largest_us: float) -> str:
    return f"not even with {_size(largest_us)} stalls" if stall_us == float("inf") else f">= {_size(stall_us)}"


@dataclass(frozen=True)
class NodePower:
    """The smallest periodic events one node's noisiest core would have named."""

    node: str
    cpu: int
    stalls_us: dict[float, float]     # reference period (ms) -> smallest stall named however placed (us; inf: none)
    # The periods also measured waiting for the tick (``placements``) -> the smallest named on the timer alone,
    # where that is smaller: what the core could see of a daemon that preempts at once.
    on_timer_us: dict[float, float] = field(default_factory=dict)
    # The periods whose grid stopped short of STALL_GRID_US's end (``stall_grid_us``) -> the largest stall tried.
    largest_us: dict[float, float] = field(default_factory=dict)
    # The tick's own interrupt on that core (analysis.CoreNoise.tick_detour_us): an event of its size is named but
    # not flagged (findings.tick_sized), so the stalls above count only from the grid's first step past that.
    tick_us: float | None = None

    @property
    def share(self) -> float:
        """The largest share of a core stolen by the smallest event named, over the reference periods (an event
        never named counts at the grid's largest stall: it could see nothing smaller)."""
        return max(min(stall, STALL_GRID_US[-1]) / (period * 1e3) for period, stall in self.stalls_us.items())

    def how(self) -> str:
        """'a periodic event stealing that share of core 2 (its noisiest) every 13 ms (stalls >= 22 us), 90 ms
        (>= 256 us; on its own timer >= 86 us) or 250 ms (>= 1.3 ms) would have been named on its own timer and
        (from 20 ms) waiting for the tick, measured by adding it to this run's own samples'."""
        said: list[str] = []
        for period, stall in self.stalls_us.items():
            largest = self.largest_us.get(period, STALL_GRID_US[-1])
            size = _said(stall, largest)
            if not said and stall != float("inf"):
                size = "stalls " + size
            timer = self.on_timer_us.get(period, stall)
            if timer < stall:
                size += f"; on its own timer {_said(timer, largest)}"
            said.append(f"{period:g} ms ({size})")
        listed = " or ".join(filter(None, (", ".join(said[:-1]), said[-1])))
        flagged = (f", and flagged (its stalls longer than {findings.tick_sized_times()} the tick's own "
                   f"{_size(self.tick_us)} there)"
                   if self.tick_us is not None else "")
        return (f"a periodic event stealing that share of core {self.cpu} (its noisiest) every "
                f"{listed} would have been named on its own timer and (from {folding.MIN_PERIOD_NS / 1e6:g} ms) "
                f"waiting for the tick{flagged}, measured by adding it to this run's own samples")

    def to_conditions(self) -> dict[str, Any]:
        """conditions["power"] of the node's records (verdict.power.Power's fields)."""
        return power_conditions("noise", round(self.share, 5), "relative", self.how())


def noisiest_rank(node: NodeData, analysed: analysis.NodeNoise) -> RankData:
    """The samples of the node's core that lost the most time: the background an event must stand out from."""
    return node.ranks[_noisiest(analysed)]


def noisiest_spectral(analysed: analysis.NodeNoise) -> list[float]:
    """The spectral periods (Hz) the analysis named on the node's noisiest core (``named_at``'s ``faster_hz``)."""
    return [p.frequency_hz for p in analysed.cores[_noisiest(analysed)].periods if not p.folded]


def _noisiest(analysed: analysis.NodeNoise) -> int:
    return max(range(len(analysed.cores)), key=lambda i: analysed.cores[i].lost_fraction)


def node_power(node: NodeData, analysed: analysis.NodeNoise,
               periods_ms: tuple[float, ...] = REFERENCE_PERIODS_MS) -> NodePower:
    """The node's power, measured on its core that lost the most time."""
    data = noisiest_rank(node, analysed)
    spectral = noisiest_spectral(analysed)
    tick_us = analysed.cores[_noisiest(analysed)].tick_detour_us
    least = (min((s for s in STALL_GRID_US if s > findings.TICK_SIZED * tick_us), default=STALL_GRID_US[-1])
             if tick_us else 0.0)
    stalls: dict[float, float] = {}
    on_timer: dict[float, float] = {}
    largest: dict[float, float] = {}
    for period in periods_ms:
        timer, *elsewhere = smallest_by_placement(data, period, analysed.tick_hz, faster_hz=spectral)
        timer, elsewhere = max(timer, least), [max(e, least) for e in elsewhere]
        stalls[period] = max([timer, *elsewhere])
        if timer < stalls[period]:
            on_timer[period] = timer
        tried = stall_grid_us(data, period)[-1]
        if tried < STALL_GRID_US[-1]:
            largest[period] = tried
    return NodePower(node=node.name, cpu=data.cpu, stalls_us=stalls, on_timer_us=on_timer, largest_us=largest,
                     tick_us=tick_us)
