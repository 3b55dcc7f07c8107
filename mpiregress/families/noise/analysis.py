"""What an FWQ run says about each node and core.

Node: the seed's efficiency (004) = Σ_i min_r t[r, i] ÷ Σ_i max_r t[r, i], iterations
matched by index over the ranks of the node: the share of the node a code that
synchronises every quantum would get.

Core (one rank): its nominal quantum is the **median** iteration time (robust: on a
shared machine the minimum is an outlier and the mean is the noise itself); an
iteration's *excess* is its time above that. Fraction lost = Σ excess ÷ Σ time;
largest detour = largest excess; detours per second = iterations whose excess
exceeds a threshold, per second of run.

Periods (the spectrum, and why this one): iterations run back to back, so the
time each one started is exact (the sum of the earlier ones). The cumulative lost
time L(t) is known exactly at every iteration boundary; interpolated linearly
inside an iteration (the detour happened somewhere in it) and sampled on a uniform
grid, its differences are "time lost per bin": a uniformly sampled signal with no
resampling guesswork, to which a plain FFT applies. A 1 ms spin every 10 ms
becomes a 1-ms-wide pulse train whose strongest line is its fundamental (100 Hz).
The alternative, a periodogram of detour timestamps, needs a threshold first and
weighs a 2 µs tick like a 1 ms preemption; the lost-time signal weighs each event
by what it costs. A line's prominence is its power over the median power around it
(the broadband background of random noise and of other jobs' time slices on a shared
machine). An OS event is a train of pulses, whose spectrum is a comb: it is reported
once, at its fundamental, with its harmonics of every order folded in, even when the
fundamental's own line is buried under low-frequency contention (``dominant_periods``);
the lines random contention throws up stand alone. Lines are sought from 2 Hz to 1 kHz
(the fastest kernel tick); events from 5 ms to 200 ms periods and beyond. Below MIN_EVENT_HZ a
3 s run places nothing: a few long stalls (the kernel's real-time throttling of a SCHED_FIFO FWQ,
50 ms a second) throw up lines whose places differ from core to core, reported as one slow line.
Measured on the local cluster against a real noise source: benchmarks/noise_periods.py.
"""
from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from mpiregress.families.noise import folding, recurrence
from mpiregress.families.noise.fwqfile import FwqRun, NodeData, RankData
from mpiregress.families.noise.recurrence import Stall, Stalls

# Grid of the lost-time signal: 100 µs bins see events up to 5 kHz (HZ=1000 ticks included).
BIN_NS = 100_000
# Lines below this are not periodic events (a 1 s run resolves 1 Hz; below ~2 Hz it is drift).
MIN_FREQUENCY_HZ = 2.0
# OS noise sources tick at 1000 Hz at most (CONFIG_HZ); above, the lines are harmonics of
# tick-aligned scheduling (multiples of 250 Hz here) that would crowd out the events.
MAX_FREQUENCY_HZ = 1000.0
DEFAULT_THRESHOLD_FRACTION = 0.2   # a detour is an iteration 20 % (2 µs of 10 µs) above nominal
DEFAULT_MIN_PROMINENCE = 30.0      # random contention here threw up lone lines of 30-120x (tests/test_noise_fwq.py)
# A line at a multiple of a comb's fundamental need only stand this high to belong to it: at an
# expected place a modest line is evidence; 2^-8 of a white background's bins reach it by chance.
HARMONIC_PROMINENCE = 8.0
# An OS event is a pulse train, whose spectrum is a comb strongest at its low orders: a
# fundamental counts when this many of its orders 2..4 are lines (or it stands alone very high).
REQUIRED_HARMONICS = 2
LOW_ORDERS = (2, 3, 4)
# A line without that comb must stand this much higher to count.
LONE_LINE_FACTOR = 3.0
# A harmonic is not much stronger than its fundamental (a narrow pulse's spectrum falls with the
# order); a strong line at twice a faint one (100 Hz over a 50 Hz wobble) is an event of its own.
HARMONIC_POWER_FACTOR = 2.0
# Harmonics are matched at any order while the window around the expected place stays narrow
# against the comb's spacing: wider, and any line would match by coincidence (a 3 Hz host line
# would swallow every event above it).
MAX_WINDOW_SHARE = 0.125
# Half-width of the window around an expected harmonic, in spectral bins, at the orders already matched.
WINDOW_BINS = 0.5
# The lowest fundamental a comb may be given when its own line is buried (periods up to ~220 ms).
MIN_EVENT_HZ = 4.5
# Without its low orders, a comb needs this many lines on at least this share of the orders
# between its lowest and highest (a 100 ms event under contention: 41 lines over 93 orders).
BURIED_MIN_LINES = 4
BURIED_DENSITY = 0.35
# A comb must match this many times the lines it matches shifted half a spacing (coincidence).
COINCIDENCE_MARGIN = 3.0
# Combs whose fundamentals differ by less than this share are one event (its modulation sidebands).
SAME_EVENT_SHARE = 0.05
# A comb of this many lines is an event even when none of them stands min_prominence high
# (a 100 ms event under heavy contention: thirty lines of 8-20x at exact multiples of 10 Hz);
# its lines are sought from this prominence up.
MANY_LINES = 8
ANCHOR_PROMINENCE = 2 * HARMONIC_PROMINENCE
# A lower candidate fundamental must explain this much more than a higher one to win.
SUB_HARMONIC_GAIN = 1.3
# Sidebands (``sideband``) stand at least this much lower than their event: a gate that stops an
# event for a few % of the time moves a few % of its amplitude, a power 10-1000x lower, into them.
SIDEBAND_POWER_RATIO = 10.0
# A comb is checked for being another at up to this many times its fundamental (``stranger_anchor``).
STRANGER_MAX_FACTOR = 12


@dataclass(frozen=True)
class Period:
    """A periodic event: its frequency and how far its spectral line stands above the background."""

    frequency_hz: float
    prominence: float        # line power ÷ median power around it (local_background)
    harmonics: int           # lines at integer multiples folded into this one
    # Its comb's lines and their sidebands (Hz; other combs folded into it left out): what another
    # core must show for the event to be the host's (findings.shows).
    lines: tuple[float, ...] = field(default=(), compare=False, repr=False)
    # Several slow lines folded into one (one_slow_line): slow whatever its place (is_slow).
    slow_lines: bool = field(default=False, compare=False, repr=False)
    # The core's stalls recur at this period in the time domain (recurrence.fundamental): a period, slow or not.
    recurring: bool = field(default=False, compare=False, repr=False)
    # Found by folding the stalls, with no spectral line (folding.slow_periods): (cycles holding a stall at
    # its phase, cycles FWQ could see there) and, where FWQ's core was idle after that phase in nearly every
    # cycle (folding.Fold.idle), (those cycles, all).
    folded: tuple[int, ...] = field(default=(), compare=False, repr=False)
    # The median length (us) of the stalls that hold it (``sized``); 0 where not measured.
    detour_us: float = field(default=0.0, compare=False)


@dataclass(frozen=True)
class CoreNoise:
    """One rank's core."""

    node: str
    rank: int
    cpu: int
    bound: bool
    migrated: bool
    nominal_us: float
    lost_fraction: float
    max_detour_us: float
    detours_per_s: float
    threshold_us: float
    duration_s: float
    periods: tuple[Period, ...]
    spectrum: tuple[np.ndarray, np.ndarray] = field(repr=False, compare=False)  # (Hz, power)
    # Every line of the spectrum standing HARMONIC_PROMINENCE high, reported or not (Hz): where
    # another core's event is looked for (findings.shows).
    lines: tuple[float, ...] = field(default=(), repr=False, compare=False)
    # The kernel tick's rate on the node (the kernel's own, else recurrence.tick_hz), and the tick's lines the
    # spectrum had on this core (the rate and its harmonics: the tick, not events).
    tick_hz: float | None = None
    tick_lines: tuple[float, ...] = ()
    # Lines the spectrum had whose stalls do not recur at them in the time domain: no period.
    unconfirmed: tuple[float, ...] = ()
    # (rate Hz, share of each round the others held) of the scheduler's turns among processes sharing the core
    # (recurrence.turn_share): FWQ's turn coming back every round, no event.
    turns: tuple[tuple[float, float], ...] = ()
    # Stalls of recurrence.LONG_STALL_NS or more, in time order (what "stalls, no period" lists).
    long_stalls: tuple[Stall, ...] = field(default=(), repr=False, compare=False)
    # Every stall of the core (None when not measured here): where another core's event is checked in the
    # time domain (findings.shows).
    stalls: Stalls | None = field(default=None, repr=False, compare=False)
    # The kernel tick's own interrupt on this core: the median length (us) of its short stalls at the tick's
    # phase (recurrence.tick_detour_us), None where the tick was not seen. An event whose stalls are within
    # findings.TICK_SIZED times it is of the tick's size (findings.tick_sized).
    tick_detour_us: float | None = None


@dataclass(frozen=True)
class NodeNoise:
    """One node: the seed's efficiency and its cores."""

    node: str
    efficiency: float
    iterations: int
    cores: tuple[CoreNoise, ...]
    tick_hz: float | None = None
    tick_from_kernel: bool = False
    # The fastest rate its cores' stalls hold (recurrence.tick_hz) where the kernel's tick is slower: not this
    # kernel's tick (a hypervisor's or the firmware's pattern).
    faster_pattern_hz: float | None = None

    @property
    def max_detour_us(self) -> float:
        return max(c.max_detour_us for c in self.cores)

    @property
    def lost_fraction(self) -> float:
        return float(np.mean([c.lost_fraction for c in self.cores]))


@dataclass(frozen=True)
class RunNoise:
    """Every complete node of a file, and what was lost if the file was cut short."""

    nodes: tuple[NodeNoise, ...]
    quantum_target_ns: int
    iterations: int
    truncated: str | None


def efficiency(times: np.ndarray) -> float:
    """Seed 004's efficiency of a (ranks × iterations) array of iteration times."""
    times = np.asarray(times, dtype=np.float64)
    if times.ndim != 2 or times.shape[1] == 0:
        raise ValueError("efficiency needs a (ranks, iterations) array with at least one iteration")
    return float(times.min(axis=0).sum() / times.max(axis=0).sum())


def lost_time_signal(times_ns: np.ndarray, nominal_ns: float, bin_ns: int = BIN_NS) -> np.ndarray:
    """Time lost (ns) in each ``bin_ns`` bin of the run, from exact iteration boundaries."""
    times = np.asarray(times_ns, dtype=np.float64)
    boundaries = np.concatenate(([0.0], np.cumsum(times)))
    lost = np.concatenate(([0.0], np.cumsum(np.clip(times - nominal_ns, 0.0, None))))
    grid = np.arange(0.0, boundaries[-1], bin_ns)
    if len(grid) < 2:
        return np.zeros(0)
    return np.diff(np.interp(grid, boundaries, lost))


def spectrum(signal: np.ndarray, bin_ns: int = BIN_NS) -> tuple[np.ndarray, np.ndarray]:
    """(frequencies Hz, power) of a uniformly sampled signal, Hann-windowed, mean removed."""
    if len(signal) < 8:
        return np.zeros(0), np.zeros(0)
    centred = signal - signal.mean()
    power = np.abs(np.fft.rfft(centred * np.hanning(len(centred)))) ** 2
    freqs = np.fft.rfftfreq(len(centred), d=bin_ns * 1e-9)
    return freqs, power


def dominant_periods(freqs: np.ndarray, power: np.ndarray, min_prominence: float = DEFAULT_MIN_PROMINENCE,
                     limit: int | None = None,
                     lines: list[tuple[float, float, float]] | None = None,
                     shared: Sequence[bool] = ()) -> tuple[Period, ...]:
    """Periodic events, each once at its fundamental with every harmonic folded in, strongest first.

    Lines are the local maxima standing ``HARMONIC_PROMINENCE`` x above their local
    background. The strongest line not yet explained anchors a comb: it is taken as
    order m = 1, 2, ... of a fundamental F/m (down to ``MIN_EVENT_HZ``; the fundamental's
    own line may be buried under low-frequency contention), each candidate claims the
    lines at its multiples of any order (``comb``), and the candidate that explains the
    most (``comb_score``) wins, the highest frequency among those close to the best: a
    sub-harmonic F/2m explains the same lines and only adds coincidences. A comb counts
    when REQUIRED_HARMONICS of its orders 2..4 (or, with its fundamental buried, a dense
    run of harmonics) are present and either its strongest line stands ``min_prominence``
    high or it has ``MANY_LINES``; without a comb only a line ``LONE_LINE_FACTOR`` times
    higher counts. Every comb must match clearly more lines than itself shifted by half a
    spacing (``shifted_matches``): crowded lines match anything. A sub-harmonic whose other
    lines all sit at a multiple of its orders that the anchor misses took a stranger's line
    for its anchor (``stranger_anchor``); a comb mostly beside a much stronger event's
    harmonics is that event's sidebands (``sideband``); a pulse train's orders are alike, so the
    chosen fundamental moves to the candidate that is one whole train (``whole_train``); a comb most
    of whose lines are another found event's harmonics is that event's (``borrowed_combs``); the
    lines below MIN_EVENT_HZ are one (``one_slow_line``).
    """
    freqs, power = searched(freqs, power)
    if len(power) < 3:
        return ()
    if lines is None:   # a caller that keeps the lines too (core_noise) finds them once and hands them in
        lines = spectral_lines(freqs, power)
    if not lines:
        return ()
    resolution = float(freqs[1] - freqs[0])
    freq = np.array([line[0] for line in lines])
    prominence = np.array([line[2] for line in lines])
    claimed = np.zeros(len(lines), dtype=bool)
    accepted: list[list] = []   # [fundamental, highest order, prominence, harmonics, its lines (Hz)]
    for anchor in np.argsort(-prominence, kind="stable"):
        if claimed[anchor]:
            continue
        # A line on the comb of an event already found is one more of its harmonics (a line
        # the first match left out because its window was still too wide).
        home = next((a for a in accepted if on_comb(freq[anchor], a[0], a[1], resolution)), None)
        if home is not None:
            home[3] += 1
            home[4].append(float(freq[anchor]))
            claimed[anchor] = True
            continue
        if prominence[anchor] < ANCHOR_PROMINENCE:
            continue
        candidates = []
        for m in range(1, int(freq[anchor] / min(MIN_EVENT_HZ, freq[anchor])) + 1):
            members = comb(freq, claimed, anchor, m, resolution)
            if m == 1 or not stranger_anchor(members, m):
                candidates.append((m, members, comb_score(freq, prominence, members, resolution)))
        best = max(score for _, _, score in candidates)
        m, members, _ = next(c for c in candidates if c[2] >= best / SUB_HARMONIC_GAIN)
        m, members = whole_train(candidates, m, members, prominence)
        orders = [k for _, k in members]
        f0 = fundamental(freq, members)
        room = sum(1 for k in LOW_ORDERS if k * f0 <= MAX_FREQUENCY_HZ)
        low_orders = 1 in orders and room >= REQUIRED_HARMONICS and \
            len(set(orders) & set(LOW_ORDERS)) >= REQUIRED_HARMONICS
        # Or a dense run of harmonics (the fundamental or low orders buried under contention).
        span = max(orders) - min(orders) + 1
        is_comb = low_orders or (len(orders) >= BURIED_MIN_LINES and len(orders) >= BURIED_DENSITY * span)
        if len(members) > 1 and len(members) < COINCIDENCE_MARGIN * shifted_matches(freq, members, resolution):
            is_comb = False
        strongest = float(max(prominence[j] for j, _ in members))
        twin = next((a for a in accepted if abs(f0 - a[0]) <= SAME_EVENT_SHARE * a[0]
                     or (a[2] >= SIDEBAND_POWER_RATIO * strongest
                         and 2 * sum(sideband(float(freq[j]), a[0]) for j, _ in members) > len(members))), None)
        if twin is not None:
            # Lines of nearly the same spacing, or mostly beside its harmonics (sidebands of a modulated
            # event), are that event again.
            twin[3] += len(members)
            # Its sidebands are its lines too (no other core has them); other folded lines are not.
            twin[4].extend(float(freq[j]) for j, _ in members if sideband(float(freq[j]), twin[0]))
            claimed[[j for j, _ in members]] = True
        elif (strongest >= (min_prominence if is_comb else LONE_LINE_FACTOR * min_prominence)
              or (is_comb and len(members) >= MANY_LINES)):
            accepted.append([f0, max(orders), strongest, len(members) - 1, [float(freq[j]) for j, _ in members]])
            claimed[[j for j, _ in members]] = True
        else:
            claimed[anchor] = True
    host = freq[np.asarray(shared, dtype=bool)] if len(shared) == len(freq) else np.zeros(0)
    accepted = borrowed_combs(accepted, freq, prominence, resolution, LONE_LINE_FACTOR * min_prominence, host)
    found = [Period(frequency_hz=round(f0, 2), prominence=round(prom, 1), harmonics=int(h), lines=tuple(lines))
             for f0, _, prom, h, lines in accepted]
    found.sort(key=lambda p: -p.prominence)
    found = one_slow_line(found)
    return tuple(found[:limit] if limit is not None else found)


def sideband(frequency: float, f0: float) -> bool:
    """Is a line at ``frequency`` beside a harmonic of the event ``f0`` (not on it): a sideband?

    An event stopped now and then by something slower (here the kernel's real-time throttling,
    50 ms each second) has its harmonics flanked by the lines that modulation puts beside them
    (395-405, 595-605 Hz around a 200 Hz event's orders, 1 Hz apart). A comb most of whose lines
    are such is that event's modulation (``dominant_periods``), not an event of its own: nearer to
    a harmonic than MAX_WINDOW_SHARE of the spacing is where the comb matching itself stops telling
    a line of the event from a stranger.
    """
    if f0 < MIN_EVENT_HZ:
        return False   # a slow line is no event whose harmonics could be modulated (one_slow_line)
    k = round(frequency / f0)
    return k >= 1 and abs(frequency - k * f0) <= MAX_WINDOW_SHARE * f0


def stranger_anchor(members: list[tuple[int, int]], order: int) -> bool:
    """Is the anchor (at ``order``) a stranger to the comb that took it in?

    When nearly every other line of a comb sits at a multiple d of its orders and the anchor does
    not, the comb is one at d times its fundamental and the anchor one line of another event it met
    by chance: a host's 500 Hz line, order 73 of 6.85 Hz, drew in a 13.7 Hz event's lines at the
    even orders (d = 2); its 750 Hz line, order 137 of 5.48 Hz, the 13.7 Hz event's even orders
    again (d = 5). A pulse train's orders are alike: off the multiples of d it has (d - 1) lines
    for each on them, and COINCIDENCE_MARGIN times fewer is no such comb.
    """
    others = [k for _, k in members if k != order]
    for d in range(2, STRANGER_MAX_FACTOR + 1):
        on = sum(1 for k in others if k % d == 0)
        if order % d and on >= BURIED_MIN_LINES and COINCIDENCE_MARGIN * (len(others) - on) < (d - 1) * on:
            return True
    return False


def whole_train(candidates: list[tuple[int, list[tuple[int, int]], float]], m: int,
                members: list[tuple[int, int]], prominence: np.ndarray) -> tuple[int, list[tuple[int, int]]]:
    """The candidate (order, members) that is one whole pulse train, from the one the score chose (order ``m``).

    A pulse train's orders are alike. The score's preference for the higher of two close
    fundamentals stops a sub-harmonic that only adds coincidences, but:

    - a slow event of many weak lines (a 1 ms spin every 200 ms: lines of 8-26x) with another's
      strong line at one of its even orders (the host's 1000 Hz) scores as that line's 10 Hz. A
      candidate d times lower is the event when its orders off the multiples of d are many
      (MANY_LINES; as many as a pulse train has, (d - 1) for each on them, within
      COINCIDENCE_MARGIN) and not SIDEBAND_POWER_RATIO times weaker than those on them;
    - a strong event with a weak stranger at its odd half-orders (a 200 Hz source and the host's
      100 Hz timer) scores as one 100 Hz comb. When the chosen comb's orders off the multiples of d
      are SIDEBAND_POWER_RATIO times weaker than those on them, it is the candidate d times higher
      and the weak lines are another event's.
    """
    for lower, lower_members, _ in reversed(candidates):
        if lower <= m or lower % m:
            continue
        d = lower // m
        on, off = split_orders(lower_members, d, prominence)
        if (len(on) >= BURIED_MIN_LINES and len(off) >= MANY_LINES
                and COINCIDENCE_MARGIN * len(off) >= (d - 1) * len(on)
                and SIDEBAND_POWER_RATIO * float(np.median(off)) >= float(np.median(on))):
            return lower, lower_members
    for higher, higher_members, _ in candidates:
        if higher >= m or m % higher:
            continue
        on, off = split_orders(members, m // higher, prominence)
        if len(on) >= BURIED_MIN_LINES and off and SIDEBAND_POWER_RATIO * float(np.median(off)) < float(np.median(on)):
            return higher, higher_members
    return m, members


def split_orders(members: list[tuple[int, int]], d: int, prominence: np.ndarray) -> tuple[list[float], list[float]]:
    """(prominences of the comb's lines at multiples of ``d``, those of the others)."""
    on = [float(prominence[j]) for j, k in members if k % d == 0]
    return on, [float(prominence[j]) for j, k in members if k % d]


def borrowed_combs(accepted: list[list], freq: np.ndarray, prominence: np.ndarray, resolution: float,
                   lone: float, host: np.ndarray | None = None) -> list[list]:
    """``accepted`` with every comb of another event's harmonics and strangers folded into that event.

    A strong line met first anchors a comb of whatever lines fall at its orders: a host's 750 Hz
    line as order 89 of 8.43 Hz drew in a 13.7 Hz event's every 8th order (13 of 8.43 Hz), before
    that event, whose lines are weaker, was found; as order 80 of 9.37 Hz, the event's every 19th
    order and the host's 300, 600 and 900 Hz lines. When at least BURIED_MIN_LINES of a comb's
    lines sit on another, unrelated event's comb (neither fundamental a multiple of the other) and
    fewer of its lines are its own (on neither that comb nor ``host``, the lines every other core of
    the node has), they are that event's; the rest are judged as lone lines (``lone`` high to count).
    """
    host = np.zeros(0) if host is None else host
    out = [[*a[:4], list(a[4])] for a in accepted]
    for a in sorted(out, key=lambda a: len(a[4])):
        for b in out:
            ratio = max(a[0], b[0]) / min(a[0], b[0])
            if b is a or abs(ratio - round(ratio)) <= SAME_EVENT_SHARE * ratio:
                continue
            on = [x for x in a[4] if on_comb(x, b[0], b[1], resolution)]
            own = [x for x in a[4] if x not in on and not np.any(np.abs(host - x) <= resolution)]
            if len(on) >= BURIED_MIN_LINES and len(own) < len(on):
                out.remove(a)
                b[3] += len(on)
                b[4].extend(on)
                for x in a[4]:
                    p = float(prominence[int(np.argmin(np.abs(freq - x)))])
                    if x not in on and p >= lone and x >= MIN_FREQUENCY_HZ:
                        out.append([x, 1, p, 0, [x]])
                break
    return out


def is_slow(p: Period) -> bool:
    """Is ``p`` a slow line, no event a run can place: below MIN_EVENT_HZ, or a lone line below twice it?

    Between MIN_EVENT_HZ and twice it (periods of 110-220 ms) an event is a pulse train of many
    orders (a 200 ms source: 100-145 harmonics); a line there without one is a stall's, the
    throttling's strongest lines reaching 4.8 Hz (in 399 kept runs of benchmarks/noise_periods.py
    the only such lines: 4.59 and 4.77 Hz, each the one core's strongest stall line).
    """
    if p.recurring:
        return False   # the time domain saw it come back at its period (recurrence.fundamental)
    return p.slow_lines or p.frequency_hz < MIN_EVENT_HZ or (p.harmonics == 0 and p.frequency_hz < 2 * MIN_EVENT_HZ)


def one_slow_line(found: list[Period]) -> list[Period]:
    """``found`` (strongest first) with every slow line (``is_slow``) folded into the strongest of them.

    Below MIN_EVENT_HZ (periods beyond ~220 ms, fewer than 15 repeats in the check's 3 s) a line
    is a few spectral bins from the cut, and a few long stalls throw up several of them whose places
    move with the stalls' phases: here the kernel's real-time throttling of FWQ's SCHED_FIFO (a 50 ms
    stall every second on every core: lines at 2.5-4.8 Hz, a different pair on each core), on a
    cluster node a once-a-second daemon. The run cannot tell slow events apart: they are one.
    """
    slow = [p for p in found if is_slow(p)]
    if len(slow) < 2:
        return found
    first = slow[0]
    merged = Period(frequency_hz=first.frequency_hz, prominence=first.prominence,
                    harmonics=first.harmonics + sum(p.harmonics + 1 for p in slow[1:]),
                    lines=first.lines + tuple(line for p in slow[1:] for line in p.lines), slow_lines=True)
    return [merged if p is first else p for p in found if p is first or not is_slow(p)]


def searched(freqs: np.ndarray, power: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The part of a spectrum lines are sought in (MIN_FREQUENCY_HZ up, with room above MAX_FREQUENCY_HZ)."""
    keep = (freqs >= MIN_FREQUENCY_HZ) & (freqs <= 1.5 * MAX_FREQUENCY_HZ)
    return freqs[keep], power[keep]


def spectral_lines(freqs: np.ndarray, power: np.ndarray) -> list[tuple[float, float, float]]:
    """(frequency refined between bins, power, prominence) of every line up to MAX_FREQUENCY_HZ, lowest first.

    A Hann window spreads a line over neighbouring bins with a near-Gaussian top: a
    parabola through the log power of the peak and its neighbours places it to a small
    fraction of a bin, which high harmonic orders need.
    """
    peak = (power[1:-1] >= power[:-2]) & (power[1:-1] >= power[2:])
    index = np.nonzero(peak)[0] + 1
    index = index[freqs[index] <= MAX_FREQUENCY_HZ]
    resolution = float(freqs[1] - freqs[0])
    out = []
    for i in index:
        prominence = float(power[i]) / local_background(freqs, power, int(i))
        if prominence < HARMONIC_PROMINENCE:
            continue
        a, b, c = np.log(np.maximum(power[i - 1:i + 2], np.finfo(float).tiny))
        curve = a - 2 * b + c
        shift = 0.5 * (a - c) / curve if curve < 0 else 0.0
        out.append((float(freqs[i]) + float(np.clip(shift, -0.5, 0.5)) * resolution, float(power[i]), prominence))
    return out


def comb(freq: np.ndarray, claimed: np.ndarray, anchor: int, order: int,
         resolution: float) -> list[tuple[int, int]]:
    """(line, order) of the comb in which line ``anchor`` is harmonic ``order``, among the unclaimed lines.

    The fundamental is known to a fraction of a bin over the highest order matched; at
    order k the window is that uncertainty times k, and orders whose window would exceed
    ``MAX_WINDOW_SHARE`` of the spacing are not matched (a coincidence there is likely).
    Matched twice: the second time with the fundamental refined by the first match.
    """
    members = [(anchor, order)]
    for _ in range(4):
        f0 = fundamental(freq, members)
        top = max(k for _, k in members)
        k = np.maximum(np.rint(freq / f0), 1)
        window = WINDOW_BINS * resolution * (1 + k / top)
        near = (np.abs(freq - k * f0) <= window) & (window <= MAX_WINDOW_SHARE * f0) & ~claimed
        near[anchor] = True
        best: dict[int, int] = {}
        for j in np.flatnonzero(near):
            kj = int(k[j])
            if kj not in best or abs(freq[j] - kj * f0) < abs(freq[best[kj]] - kj * f0):
                best[kj] = int(j)
        best[order] = anchor
        matched = [(j, kj) for kj, j in sorted(best.items())]
        if matched == members:
            break
        members = matched
    return members


def on_comb(frequency: float, f0: float, top: int, resolution: float) -> bool:
    """Is ``frequency`` a harmonic of the comb ``f0`` matched up to order ``top``?"""
    k = max(round(frequency / f0), 1)
    window = WINDOW_BINS * resolution * (1 + k / top)
    return abs(frequency - k * f0) <= window and window <= MAX_WINDOW_SHARE * f0


def shifted_matches(freq: np.ndarray, members: list[tuple[int, int]], resolution: float) -> int:
    """Lines the same comb would match shifted by half its spacing: what coincidence alone gives here.

    Where lines crowd (sidebands around a strong event's harmonics), a low comb finds a
    line near most of its orders; shifted half a spacing it finds about as many.
    """
    f0 = fundamental(freq, members)
    top = max(k for _, k in members)
    k = np.rint(freq / f0 - 0.5)
    window = WINDOW_BINS * resolution * (1 + (k + 0.5) / top)
    return int(np.count_nonzero((k >= 1) & (np.abs(freq - (k + 0.5) * f0) <= window)
                                & (window <= MAX_WINDOW_SHARE * f0) & (k + 0.5 <= max(top, 1) + 0.5)))


def comb_score(freq: np.ndarray, prominence: np.ndarray, members: list[tuple[int, int]], resolution: float) -> float:
    """What a comb explains: per line, log of its prominence, weighed by how unlikely the match is by chance."""
    f0 = fundamental(freq, members)
    top = max(k for _, k in members)
    total = 0.0
    for j, k in members:
        window = WINDOW_BINS * resolution * (1 + k / top)
        total += np.log2(prominence[j] / HARMONIC_PROMINENCE + 1) * np.log2(max(f0 / (2 * window), 1.0))
    return float(total)


def fundamental(freq: np.ndarray, members: list[tuple[int, int]]) -> float:
    """Least-squares fundamental of a comb: f0 minimising sum (f_k - k f0)^2 over its lines."""
    return float(sum(freq[j] * k for j, k in members) / sum(k * k for _, k in members))


def local_background(freqs: np.ndarray, power: np.ndarray, index: int) -> float:
    """Median power from f/1.5 to 1.5 f, the line's own bins left out.

    Local, not global: random contention (other jobs' time slices) is strong at low
    frequencies and weak at high ones; against a global median every low-frequency
    wobble would look like a line.
    """
    f = freqs[index]
    near = (freqs >= f / 1.5) & (freqs <= f * 1.5)
    near[max(index - 3, 0):index + 4] = False
    values = power[near]
    if len(values) < 5:
        values = np.delete(power, np.s_[max(index - 3, 0):index + 4])
    background = float(np.median(values)) if len(values) else 0.0
    return background if background > 0 else float(np.finfo(float).tiny)


RankSpectrum = tuple[np.ndarray, np.ndarray, list[tuple[float, float, float]]]


def rank_spectrum(data: RankData) -> RankSpectrum:
    """(frequencies, power, spectral_lines) of one rank's lost-time signal."""
    times = data.times_ns.astype(np.float64)
    freqs, power = spectrum(lost_time_signal(times, float(np.median(times))))
    sought = searched(freqs, power)
    return freqs, power, spectral_lines(*sought) if len(sought[0]) >= 3 else []


def is_tick(frequency: float, tick: float | None, bin_hz: float, from_kernel: bool = False) -> bool:
    """Is ``frequency`` the kernel tick or one of its harmonics up to MAX_FREQUENCY_HZ (within a bin or 1 %), or
    of half the tick from 250 Hz? For a tick measured from the stalls (not ``from_kernel``), also a harmonic of
    a kernel tick rate the measured one is a whole multiple of, or of half the slowest such rate.

    Why the rates below it: stalls on a 1 kHz pattern hold every rate that divides 1000 at one phase too, so
    the measured tick is the highest (recurrence.tick_hz) and cannot tell a 250 Hz tick under it. On the local
    VM both are there: its kernel ticks at 250 Hz (251 jiffies a second in /proc/timer_list, 2026-11-27) while
    its cores' stalls show 1 kHz in about half of the loaded runs (the host's), and those runs named the guest's
    own tick, 250 and 750 Hz, as events (4 of 25 FWQ runs, 2 of 10 controls, benchmarks/noise_injected.py).
    The price: a 10 ms daemon is the tick under such a pattern. The kernel's own tick (FWQ format 2) pays none.
    """
    if not tick:
        return False
    rates = [tick] + ([] if from_kernel else [r for r in recurrence.TICK_RATES if r < tick and tick % r == 0])
    # Half the slowest of them from 250 Hz up: the scheduler acting on every other tick (its slices of two
    # ticks) puts lines at odd multiples of 125 Hz (125, 375 Hz were named so too).
    slowest = min((r for r in rates if r >= 250), default=None)
    for rate in rates + ([slowest / 2] if slowest else []):
        k = round(frequency / rate)
        if 1 <= k and k * rate <= MAX_FREQUENCY_HZ * 1.01 and abs(frequency - k * rate) <= max(bin_hz,
                                                                                          0.01 * frequency):
            return True
    return False


def confirmed(found: Sequence[Period], stalls: Stalls, bin_hz: float, tick: float | None,
              from_kernel: bool = False
              ) -> tuple[tuple[Period, ...], tuple[float, ...], tuple[float, ...], tuple[tuple[float, float], ...]]:
    """(periods the time domain confirms, the tick's lines, the lines refused, the scheduler's turns: (rate,
    share of the round the others held)) of the spectrum's ``found``.

    A line at the tick or a harmonic of it is the tick. Any other is a period only where the core's stalls
    recur at it (recurrence.fundamental), at the fundamental the time domain gives; the rest are no period.
    A period of whole ticks whose stalls take most of it is the turns of processes sharing the core
    (recurrence.turn_share), no event.
    """
    periods: list[Period] = []
    ticks: list[float] = []
    refused: list[float] = []
    turns: list[tuple[float, float]] = []
    for p in found:
        if is_tick(p.frequency_hz, tick, bin_hz, from_kernel):
            ticks.append(p.frequency_hz)
            continue
        frequency, share = recurrence.fundamental(stalls, p.frequency_hz, bin_hz, tick, p.lines)
        if share and is_tick(frequency, tick, bin_hz, from_kernel):
            ticks.append(p.frequency_hz)       # a subharmonic line whose stalls recur at the tick
            continue
        held = recurrence.turn_share(stalls, frequency, tick) if share else 0.0
        if held >= recurrence.MIN_TURN_SHARE:
            if not any(abs(f - frequency) <= bin_hz for f, _ in turns):
                turns.append((round(frequency, 2), held))
        elif not share:
            refused.append(p.frequency_hz)
        elif not any(abs(q.frequency_hz - frequency) <= bin_hz for q in periods):
            periods.append(replace(p, frequency_hz=round(frequency, 2), recurring=True, slow_lines=False))
    # Two periodic sources together repeat at their least common multiple (the host's 100 Hz timer and a
    # 250 Hz tick every 20 ms): a period two others (or one and the tick) are whole multiples of is theirs.
    sources = [q.frequency_hz for q in periods] + ([tick] if tick else [])
    kept = tuple(p for p in periods if not common_period(p.frequency_hz, sources))
    refused += [p.frequency_hz for p in periods if p not in kept]
    return kept, tuple(ticks), tuple(refused), tuple(turns)



def folded_periods(stalls: Stalls, cpu_ns: float, tick: float | None, periods: tuple[Period, ...],
                   bin_hz: float = 0.0) -> tuple[Period, ...]:
    """``periods`` (the spectrum's, confirmed) with the slow periods the stalls recur at by folding
    (folding.slow_periods) added, each not within 2 % of one already named. A fold within the spectral bin
    (``bin_hz``) of a spectral period is that period, told at the fold's rate: the line is known to its bin, the
    fold to 0.3 ms a cycle (a 250 ms daemon's line at 4.09 Hz, 2.2 % off, and its fold at 4.0 Hz, 11 of 11
    cycles, were named as two events on one core, noise-keep36-quiet).

    A spectral period faster than the fold searches (folding.MIN_PERIOD_NS) at a whole multiple of the rate of
    one the fold names or confirms (folding.holds) (up to recurrence.MAX_MULTIPLE: the host's 100 Hz timer
    stays beside a 4 Hz event) is that event's harmonic, and goes: the fold names a period only when the stalls
    do not recur at its whole shares (a 250 ms source the spectrum told at 20 Hz, its 5th line, holds 11 of 11
    cycles at one phase of 250 ms and none at the phases 50 ms after it; a 27 ms one's comb raised to 13.5 ms
    beside the fold's 27 ms in noise-keep15). It stays where stalls of any size start at every whole share of
    the event's cycle as often as at its phase (``folding.split``: the fold counts long stalls only, and a 13 ms
    daemon preempting FWQ at once only every other cycle was told at 26 ms), and ``without_harmonics`` weighs
    the two. From MIN_PERIOD_NS up both searched, and ``without_harmonics``
    weighs the share of its cycles each holds: a 27 ms daemon at normal priority, its stalls within the fold's
    0.3 ms of one phase only in every other cycle, was told at the fold's 54 ms with its 37.04 Hz line dropped
    in 3 runs of 5 of noise-keep15."""
    folded: list[Period] = []
    rates: list[float] = []             # the folds' rates as found (a Period's is rounded to 0.01 Hz)
    for fold in folding.slow_periods(stalls, cpu_ns, tick, faster_hz=[p.frequency_hz for p in periods]):
        frequency = fold.frequency_hz
        line = next((i for i, p in enumerate(periods)
                     if 0.02 * frequency < abs(p.frequency_hz - frequency) <= bin_hz), None)
        if line is not None:
            periods = (*periods[:line], replace(periods[line], frequency_hz=round(frequency, 2)),
                       *periods[line + 1:])
        elif not any(abs(p.frequency_hz - frequency) <= 0.02 * frequency for p in (*periods, *folded)):
            folded.append(Period(frequency_hz=round(frequency, 2), prominence=0.0, harmonics=0, recurring=True,
                                 folded=(int(round(fold.share * fold.cycles)), fold.cycles, *(fold.idle or ()))))
            rates.append(frequency)

    def unsearched(p: Period) -> bool:      # faster than the fold searches: the only periods that can go
        return 1e9 / p.frequency_hz < folding.MIN_PERIOD_NS

    # The fold's test of the others (a fold each) is run only when one of them could go.
    could_go = any(map(unsearched, periods))
    events = rates + [p.frequency_hz for p in periods if could_go and folding.holds(stalls, p.frequency_hz, tick)]

    def harmonic(p: Period, f: float) -> bool:
        return (whole_multiple(p.frequency_hz, f) and p.frequency_hz <= recurrence.MAX_MULTIPLE * 1.01 * f
                and not folding.split(stalls, f, round(p.frequency_hz / f), tick))

    kept = tuple(p for p in periods if not unsearched(p) or not any(harmonic(p, f) for f in events))
    return kept + tuple(folded)


def without_harmonics(stalls: Stalls, bin_hz: float, tick: float | None, periods: tuple[Period, ...]
                      ) -> tuple[tuple[Period, ...], tuple[float, ...]]:
    """(``periods`` that are events of their own, the rates of the others: another's harmonics or
    subharmonics): two, one a whole multiple of the other (up to recurrence.MAX_MULTIPLE), are one event by the
    fold's rule (folding.one_event). Every 26 ms
    cycle of a 13 ms source holds a stall as surely as its own do: a real-time one was named at 76.92 and
    38.46 Hz on its core (benchmarks/noise_injected.py, 2026-11-27 evening, 1 run of 5).

    Each is weighed by the test that found it: a spectral line by the stalls recurring within 2 % of its
    period (``recurrence.hit_share``), a fold by the share of its cycles its phase held (``Period.folded``, within
    the fold's 0.3 ms). The 2 % is 1.8 ms of a 90 ms cycle, where a crowded core's stalls start in every cycle
    FWQ could see, at any phase: a normal-priority 90 ms daemon the fold held in 114 of 114 cycles in a 9 s
    run had no share by the spectrum's test, and lost to the 33.36 Hz its comb was raised to, its 3rd harmonic,
    which had none either (benchmarks/noise_injected.py --iterations 900000, noise-keep29).

    Whole multiples within the spectral bin (``whole_multiple``), the slower clearly ahead only beyond chance over its
    cycles, and a slower one whose phase the fold's test places kept where the faster's train does not pass
    through it (``apart``; folding.one_event says why, with the quiet cores of noise-keep33-quiet). A fold whose
    long stalls come back only every k-th cycle, a named slower event's, goes first (``folding.slower_train``)."""
    folds = {p.frequency_hz: (p.folded[0] / p.folded[1], p.folded[1]) for p in periods if p.folded}
    holds: dict[float, list[recurrence.Hold]] = {}

    def held(rate: float) -> list[recurrence.Hold]:     # a time-domain search per spectral rate: once each
        if rate not in holds:
            holds[rate] = recurrence.holds_by_size(stalls, rate, bin_hz, tick_hz=tick)
        return holds[rate]

    def best(rate: float) -> recurrence.Hold | None:   # a spectral rate's best hold; None for a fold's
        return None if rate in folds else recurrence.best_hold(held(rate))

    def share(rate: float) -> float:
        hold = best(rate)
        return folds[rate][0] if rate in folds else hold.share if hold else 0.0

    def cycles(rate: float) -> int:
        hold = best(rate)
        return folds[rate][1] if rate in folds else hold.cycles if hold else 0

    def multiple(g: float, f: float) -> bool:
        return whole_multiple(g, f, bin_hz) and g <= recurrence.MAX_MULTIPLE * 1.01 * f

    def train(rate: float) -> tuple[float, float, float]:   # (period, phase, window), ns: the test that found it
        return train_of(stalls, rate, tick, best(rate))[:3]

    def apart(g: float, f: float) -> bool:      # only where the fold's test places the slower's phase
        # A spectral rate is known to its bin: its phase is asked within a period of drift over the run.
        place = folding.phase_of(stalls, f, tick) if f in folds else folding.placed(stalls, f, tick, 1e9 / f)
        if place is None:
            return False
        return folding.trains_apart(stalls, place, train(g))

    # A fold whose long stalls are a named slower event's train, every k-th of its cycles, is that event's share.
    shares_of_slower = {p.frequency_hz for p in periods if p.folded and any(
        q is not p and multiple(p.frequency_hz, q.frequency_hz)
        and folding.slower_train(stalls, p.frequency_hz, q.frequency_hz, tick) for q in periods)}
    rates = [p.frequency_hz for p in periods if p.frequency_hz not in shares_of_slower]
    kept = folding.one_event(rates, share, multiple, apart, cycles)
    return (tuple(p for p in periods if p.frequency_hz in kept),
            tuple(p.frequency_hz for p in periods if p.frequency_hz not in kept))


def train_of(stalls: Stalls, rate: float, tick: float | None, best: recurrence.Hold | None
             ) -> tuple[float, float, float, np.ndarray]:
    """(period, phase, window: ns; the onsets that count) of the test that found an event at ``rate``: ``best``,
    its spectral line's best hold (recurrence.holds_by_size), else the fold's (its long stalls)."""
    if best is None:
        period, phase = folding.phase_of(stalls, rate, tick)
        return period, phase, folding.FOLD_TOLERANCE_NS, stalls.at_least(folding.SIZES_US[0]).start
    return best.period_ns, best.phase_ns, best.tolerance_ns, best.onsets


def sized(stalls: Stalls, p: Period, bin_hz: float, tick: float | None) -> Period:
    """``p`` with the median length of the stalls that hold it, those its own test counts (``train_of``) at its
    phase. A real-time 13 ms daemon's stalls are 1 ms; a control's 96.6 Hz event held 211 of 290 cycles with
    4 us ones, where the tick's interrupt took 25 us (noise-keep35-quiet): what an admin weighs an event by.
    The median, not the sum: the phase is the best one of a period refined within a spectral bin, which may
    drift off the stalls over a long run, and a few coincident stalls of other sources fall in its window."""
    best = None if p.folded else recurrence.best_hold(recurrence.holds_by_size(stalls, p.frequency_hz, bin_hz,
                                                                                tick_hz=tick))
    if best is None and not p.folded:
        return p
    period, phase, window, onsets = train_of(stalls, p.frequency_hz, tick, best)
    at = np.isin(stalls.start, onsets) & (np.abs(recurrence.offsets(stalls.start, phase, period)) <= window)
    if not at.any():
        return p
    return replace(p, detour_us=round(float(np.median(stalls.lost_us[at])), 1))


def common_period(rate_hz: float, sources_hz: Sequence[float]) -> bool:
    """Is ``rate_hz`` the period two of ``sources_hz`` repeat at together: are two distinct sources among them
    (rates within 2 % of one another are one) whole multiples of it (``whole_multiple``)?

    One source told by two cores is one: the host's 100 Hz timer, measured at 100.02 Hz on one core and
    100.06 Hz on the other and counted twice, made a 90 ms daemon's 11.11 Hz, which the fold held in 31 of 31
    cycles, their common period, and it went unnamed (benchmarks/noise_injected.py, noise-keep30). And it is
    their least common one: ``rate_hz`` times two whole numbers with no common divisor."""
    distinct: list[int] = []
    for g in sorted(sources_hz):
        if whole_multiple(g, rate_hz) and not any(abs(g - h * rate_hz) <= 0.02 * g for h in distinct):
            distinct.append(round(g / rate_hz))
    # Their least common multiple: two sources every 10 and 50 ms repeat together every 50 ms, not every 250 ms
    # (a 250 ms daemon beside the host's 100 Hz and its 50 ms pattern was taken for them, noise-keep33-quiet).
    return any(math.gcd(a, b) == 1 for a, b in itertools.combinations(distinct, 2))


def whole_multiple(g: float, f: float, bin_hz: float = 0.0) -> bool:
    """Is ``g`` a whole multiple (2 or more) of ``f``, within 2 % of ``f``, or of the spectral bin ``bin_hz`` the two
    rates are each known to within half of? (Within 1 % of ``g`` made the 250 Hz tick a multiple of a 4 Hz
    daemon, 62.5 times, and the daemon no period.) A spectral line's rate is its bin's: a 90 ms daemon's third
    subharmonic, its stalls held every 271 ms, was named at 3.82 Hz (a bin of 0.32 Hz) beside its 11.11 Hz, 3 %
    off the third of it (noise-keep33-quiet)."""
    k = round(g / f)
    return k >= 2 and abs(g - k * f) <= max(0.02 * f, (k + 1) * bin_hz / 2)


def core_noise(node: str, data: RankData, threshold_fraction: float = DEFAULT_THRESHOLD_FRACTION,
               min_prominence: float = DEFAULT_MIN_PROMINENCE,
               others: Sequence[Sequence[float]] = (), measured: RankSpectrum | None = None,
               stalls: Stalls | None = None, tick: float | None = None, tick_from_kernel: bool = False
               ) -> CoreNoise:
    """Losses and periodic events of one rank's core.

    ``others``: the spectral lines (Hz) of each other core of its node; a line every one of them has
    too is the host's, no comb's own line (``borrowed_combs``). ``measured``: ``rank_spectrum(data)``
    when the caller has it already (node_noise needs every core's lines first). ``stalls``, ``tick`` and
    ``tick_from_kernel``: the core's stalls and the node's tick (node_noise), else found for this core alone.
    """
    times = data.times_ns.astype(np.float64)
    nominal = float(np.median(times))
    excess = np.clip(times - nominal, 0.0, None)
    duration_s = float(times.sum()) * 1e-9
    threshold = threshold_fraction * nominal
    freqs, power, lines = measured if measured is not None else rank_spectrum(data)
    bin_hz = float(freqs[1] - freqs[0]) if len(freqs) > 1 else 0.0
    shared = [bool(others) and all(any(abs(f - g) <= bin_hz for g in other) for other in others)
              for f, _, _ in lines]
    if stalls is None:
        stalls = recurrence.stalls_over(data, threshold_fraction)
        if not tick:
            tick, tick_from_kernel = node_tick([data], [stalls])[:2]
    found = dominant_periods(freqs, power, min_prominence, lines=lines, shared=shared)
    periods, tick_lines, refused, turns = confirmed(found, stalls, bin_hz, tick, tick_from_kernel)
    periods = folded_periods(stalls, len(times) * nominal, tick, periods, bin_hz)
    periods, harmonics = without_harmonics(stalls, bin_hz, tick, periods)
    periods = tuple(sized(stalls, p, bin_hz, tick) for p in periods)
    refused = refused + harmonics
    return CoreNoise(
        node=node, rank=data.rank, cpu=data.cpu, bound=data.bound, migrated=data.migrated,
        nominal_us=nominal / 1e3,
        lost_fraction=float(excess.sum() / times.sum()),
        max_detour_us=float(excess.max()) / 1e3,
        detours_per_s=float((excess > threshold).sum()) / duration_s if duration_s > 0 else 0.0,
        threshold_us=threshold / 1e3, duration_s=duration_s,
        periods=periods, spectrum=(freqs, power), lines=tuple(f for f, _, _ in lines),
        tick_hz=tick, tick_lines=tick_lines, unconfirmed=refused, turns=turns,
        long_stalls=tuple(stalls.at_least(recurrence.LONG_STALL_NS / 1e3).listed()), stalls=stalls,
        tick_detour_us=recurrence.tick_detour_us(stalls, tick))


def node_tick(ranks: Sequence[RankData], stalls: Sequence[Stalls]) -> tuple[float | None, bool, float | None]:
    """(the node's kernel tick, whether the kernel said it, a faster rate its stalls hold).

    The kernel's own (its jiffy, FWQ format 2) where it said; else the highest rate any core's stalls show:
    a core whose tick is hidden under load can still show the host's 100 Hz timer, which is no tick where
    another core shows 250 Hz. The stalls' rate is kept beside a slower kernel tick: the local VM's cores
    stall on the host's 1 kHz pattern while its kernel ticks at 250 Hz."""
    shown = max((t for t in (recurrence.tick_hz(s) for s in stalls) if t), default=None)
    kernel = max((r.kernel_hz for r in ranks if r.kernel_hz), default=None)
    if kernel is None:
        return shown, False, None
    return kernel, True, shown if shown and shown > kernel * 1.01 else None


def node_noise(node: NodeData, threshold_fraction: float = DEFAULT_THRESHOLD_FRACTION,
               min_prominence: float = DEFAULT_MIN_PROMINENCE) -> NodeNoise:
    """Efficiency of a node and the noise of each of its cores, under the node's tick (node_tick)."""
    matrix = np.vstack([r.times_ns for r in node.ranks])
    measured = [rank_spectrum(r) for r in node.ranks]
    lines = [[f for f, _, _ in m[2]] for m in measured]
    stalls = [recurrence.stalls_over(r, threshold_fraction) for r in node.ranks]
    tick, from_kernel, faster = node_tick(node.ranks, stalls)
    cores = tuple(core_noise(node.name, r, threshold_fraction, min_prominence,
                             others=[other for j, other in enumerate(lines) if j != i], measured=measured[i],
                             stalls=stalls[i], tick=tick, tick_from_kernel=from_kernel)
                  for i, r in enumerate(node.ranks))
    # The least-common-multiple rule of ``confirmed`` across the node: the host's 100 Hz timer may be one core's
    # period and only a line on another, whose 50 Hz comb is that timer and the tick together.
    everywhere = [q.frequency_hz for c in cores for q in c.periods] + ([tick] if tick else [])
    theirs = {p.frequency_hz for c in cores for p in c.periods if common_period(p.frequency_hz, everywhere)}
    cores = tuple(replace(c, periods=tuple(p for p in c.periods if p.frequency_hz not in theirs),
                          unconfirmed=c.unconfirmed + tuple(p.frequency_hz for p in c.periods
                                                            if p.frequency_hz in theirs))
                  for c in cores)
    return NodeNoise(node=node.name, efficiency=efficiency(matrix), iterations=matrix.shape[1], cores=cores,
                     tick_hz=tick, tick_from_kernel=from_kernel, faster_pattern_hz=faster)


def analyse(run: FwqRun, threshold_fraction: float = DEFAULT_THRESHOLD_FRACTION,
            min_prominence: float = DEFAULT_MIN_PROMINENCE) -> RunNoise:
    """Every complete node of an FWQ run."""
    return RunNoise(nodes=tuple(node_noise(n, threshold_fraction, min_prominence) for n in run.nodes),
                    quantum_target_ns=run.quantum_target_ns, iterations=run.iterations, truncated=run.truncated)
