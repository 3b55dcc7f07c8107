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
by what it costs. A line counts when its power stands ``min_prominence`` times above
the median power around it (the broadband background of random noise and of other
jobs' time slices on a shared machine), harmonics are folded into their fundamental,
and a fundamental low enough to have harmonics in the band must show two of them:
an OS event is a train of pulses, whose spectrum is a comb, while the lines random
contention throws up stand alone. Lines are sought from 2 Hz to 1 kHz (the fastest
kernel tick).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .fwqfile import FwqRun, NodeData, RankData

# Grid of the lost-time signal: 100 µs bins see events up to 5 kHz (HZ=1000 ticks included).
BIN_NS = 100_000
# Lines below this are not periodic events (a 1 s run resolves 1 Hz; below ~2 Hz it is drift).
MIN_FREQUENCY_HZ = 2.0
# OS noise sources tick at 1000 Hz at most (CONFIG_HZ); above, the lines are harmonics of
# tick-aligned scheduling (multiples of 250 Hz here) that would crowd out the events.
MAX_FREQUENCY_HZ = 1000.0
DEFAULT_THRESHOLD_FRACTION = 0.2   # a detour is an iteration 20 % (2 µs of 10 µs) above nominal
DEFAULT_MIN_PROMINENCE = 30.0      # random contention here threw up lone lines of 30-120x (tests/test_noise_fwq.py)
MAX_PERIODS = 5
# Lines up to this multiple of a stronger one are its harmonics; beyond, too many coincidences.
MAX_HARMONIC = 8
REQUIRED_HARMONICS = 2
# A line with fewer harmonics than that must stand this much higher to count.
LONE_LINE_FACTOR = 3.0


@dataclass(frozen=True)
class Period:
    """A periodic event: its frequency and how far its spectral line stands above the background."""

    frequency_hz: float
    prominence: float        # line power ÷ median power around it (local_background)
    harmonics: int           # lines at integer multiples folded into this one


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


@dataclass(frozen=True)
class NodeNoise:
    """One node: the seed's efficiency and its cores."""

    node: str
    efficiency: float
    iterations: int
    cores: tuple[CoreNoise, ...]

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
                     limit: int = MAX_PERIODS) -> tuple[Period, ...]:
    """Lines standing ``min_prominence`` × above their local background, harmonics folded into their fundamental."""
    # The background needs bins on both sides of the highest line: cut at 1.5 x the limit.
    keep = (freqs >= MIN_FREQUENCY_HZ) & (freqs <= 1.5 * MAX_FREQUENCY_HZ)
    freqs, power = freqs[keep], power[keep]
    if len(power) < 3:
        return ()
    # Local maxima only: a Hann window spreads a line over neighbouring bins.
    peak = (power[1:-1] >= power[:-2]) & (power[1:-1] >= power[2:])
    index = np.nonzero(peak)[0] + 1
    index = index[freqs[index] <= MAX_FREQUENCY_HZ]
    resolution = float(freqs[1] - freqs[0])
    lines = []
    for i in index:
        background = local_background(freqs, power, int(i))
        if power[i] >= min_prominence * background:
            lines.append((float(freqs[i]), float(power[i]), float(power[i] / background)))
    # A pulse train's harmonics are lines too; report the train once, at its fundamental.
    # Go through lines from the lowest frequency up: a line at a multiple of a kept one is its harmonic.
    fundamentals: list[list[float]] = []   # [frequency, power, prominence, harmonics]
    for f, p, prominence in sorted(lines):
        for fund in fundamentals:
            k = round(f / fund[0])
            # A harmonic is not much stronger than its fundamental; a strong line at twice a
            # faint one (100 Hz over a 50 Hz wobble) is an event of its own.
            if (2 <= k <= MAX_HARMONIC and abs(f - k * fund[0]) <= max(1.5 * resolution, 0.005 * f)
                    and p <= 2.0 * fund[1]):
                fund[3] += 1
                break
        else:
            fundamentals.append([f, p, prominence, 0])
    # An OS event is a pulse train, whose spectrum is a comb: a line with room for harmonics
    # in the band needs two of them, or to stand LONE_LINE_FACTOR times higher; above 500 Hz
    # (no room) the same higher bar applies. Lone lines are mostly wobbles of contention.
    combs = [fp for fp in fundamentals
             if (int(MAX_FREQUENCY_HZ / fp[0]) > REQUIRED_HARMONICS and fp[3] >= REQUIRED_HARMONICS)
             or fp[2] >= LONE_LINE_FACTOR * min_prominence]
    strongest = sorted(combs, key=lambda fp: -fp[2])[:limit]
    return tuple(Period(frequency_hz=round(f, 2), prominence=round(prom, 1), harmonics=int(h))
                 for f, _, prom, h in strongest)


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


def core_noise(node: str, data: RankData, threshold_fraction: float = DEFAULT_THRESHOLD_FRACTION,
               min_prominence: float = DEFAULT_MIN_PROMINENCE) -> CoreNoise:
    """Losses and periodic events of one rank's core."""
    times = data.times_ns.astype(np.float64)
    nominal = float(np.median(times))
    excess = np.clip(times - nominal, 0.0, None)
    duration_s = float(times.sum()) * 1e-9
    threshold = threshold_fraction * nominal
    freqs, power = spectrum(lost_time_signal(times, nominal))
    return CoreNoise(
        node=node, rank=data.rank, cpu=data.cpu, bound=data.bound, migrated=data.migrated,
        nominal_us=nominal / 1e3,
        lost_fraction=float(excess.sum() / times.sum()),
        max_detour_us=float(excess.max()) / 1e3,
        detours_per_s=float((excess > threshold).sum()) / duration_s if duration_s > 0 else 0.0,
        threshold_us=threshold / 1e3, duration_s=duration_s,
        periods=dominant_periods(freqs, power, min_prominence), spectrum=(freqs, power))


def node_noise(node: NodeData, threshold_fraction: float = DEFAULT_THRESHOLD_FRACTION,
               min_prominence: float = DEFAULT_MIN_PROMINENCE) -> NodeNoise:
    """Efficiency of a node and the noise of each of its cores."""
    matrix = np.vstack([r.times_ns for r in node.ranks])
    cores = tuple(core_noise(node.name, r, threshold_fraction, min_prominence) for r in node.ranks)
    return NodeNoise(node=node.name, efficiency=efficiency(matrix), iterations=matrix.shape[1], cores=cores)


def analyse(run: FwqRun, threshold_fraction: float = DEFAULT_THRESHOLD_FRACTION,
            min_prominence: float = DEFAULT_MIN_PROMINENCE) -> RunNoise:
    """Every complete node of an FWQ run."""
    return RunNoise(nodes=tuple(node_noise(n, threshold_fraction, min_prominence) for n in run.nodes),
                    quantum_target_ns=run.quantum_target_ns, iterations=run.iterations, truncated=run.truncated)
