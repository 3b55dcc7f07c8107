"""Detection power of the FWQ period finder on real, contended runs (prints figures, asserts nothing).

Takes FWQ files measured without injected noise (e.g. kept by
MPIREGRESS_KEEP_FWQ=/dir pytest tests/test_noise_fwq.py -k injected, the quiet-*.fwq
ones), adds a synthetic periodic detour to core 1 of each (a ``--detour-us`` spin every
``--period-ms``, placed on the run's own time axis) and reports, per detour size, how
often the analysis finds the period on that core and how often it finds the same
period in the untouched run (false finding).

    python benchmarks/noise_detection.py /tmp/noise-runs/quiet-*.fwq
"""
from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

import numpy as np

from mpiregress.families.noise import analysis, fwqfile


def inject(times: np.ndarray, period_ns: int, detour_ns: int) -> np.ndarray:
    out = times.astype(np.int64).copy()
    now, next_event = 0, period_ns
    for i in range(len(out)):
        if now + out[i] >= next_event:
            out[i] += detour_ns
            next_event += period_ns * (1 + (now + out[i] - next_event) // period_ns)
        now += out[i]
    return np.minimum(out, 2**32 - 1).astype(np.uint32)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="+", type=Path)
    parser.add_argument("--period-ms", type=float, default=10.0)
    parser.add_argument("--detours-us", default="20,100,300,1000")
    args = parser.parse_args()
    hz = 1000.0 / args.period_ms
    # The spectrum resolves ~0.3 Hz on a 3 s run: a wider window at 5 Hz would take the host's own
    # 3-4 Hz lines for the event.
    near = max(0.4, 0.02 * hz)

    def at(periods, f: float) -> bool:
        return any(abs(p.frequency_hz - f) <= max(0.4, 0.02 * f) for p in periods)

    def harmonic_alone(periods) -> bool:
        """A multiple of the event reported as an event of its own (what folding must prevent)."""
        return any(abs(p.frequency_hz - k * hz) <= max(0.4, 0.02 * k * hz) for p in periods
                   for k in range(2, int(analysis.MAX_FREQUENCY_HZ / hz) + 1))

    print(f"# event at {hz:.2f} Hz (within {near:.2f} Hz)")
    print(f"{'detour_us':>9} {'runs':>4} {'found':>5} {'harmonic_alone':>14} {'false_in_quiet':>14}")
    for detour in (int(d) for d in args.detours_us.split(",")):
        found = false = runs = alone = 0
        for path in args.files:
            node = fwqfile.read(path).nodes[0]
            core = node.ranks[-1]
            quiet = analysis.core_noise(node.name, core)
            noisy = analysis.core_noise(node.name, dataclasses.replace(
                core, times_ns=inject(core.times_ns, int(args.period_ms * 1e6), detour * 1000)))
            runs += 1
            found += at(noisy.periods, hz)
            alone += harmonic_alone(noisy.periods) and not harmonic_alone(quiet.periods)
            false += at(quiet.periods, hz)
        print(f"{detour:>9} {runs:>4} {found:>5} {alone:>14} {false:>14}")


if __name__ == "__main__":
    main()
