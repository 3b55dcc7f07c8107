"""Detection and false-alarm rates of the MR gate vs the seed study's fixed ±20 % band.

Synthetic histories (benchmarks/_synth.py: lognormal run effect shared by a run's
samples, heavy-tailed one-sided sample jitter), N accepted runs of k samples, then a
new run of k samples with an injected step of 0, 5 or 10 % on the hurting side.

* gate: mpiregress.gate.judge_values (median of run medians, MAD-scaled one-sided
  band, minimum effect 3 %), counting ``regression`` verdicts;
* fixed band: the study's ReFrame style, (ref, None, +0.2) for latency and
  (ref, -0.2, None) for bandwidth, with ref = the true mean (the best case for a
  hand-set reference), applied to the same new median.

A second table shows how the false-alarm rate depends on how much history there is
(the gate's noise estimate is uncertain when few runs exist).

Usage: python benchmarks/gate_detection.py [--trials 1000] [--seed 7] [--runs 26] [--k 5]
Prints one table; seeded, a few seconds. Evidence, not a test: nothing is asserted.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _synth  # noqa: E402

from mpiregress.gate import GateConfig, judge_values  # noqa: E402
from mpiregress.names import METRICS  # noqa: E402
from mpiregress.results import pt2pt_key  # noqa: E402

STEPS = (0.0, 0.05, 0.10)
FIXED_BAND = 0.20
SERIES_PER_MR = (80, 20)   # the full matrix (a toolchain MR), one build method's series (a spack-env MR)


def fixed_band_fails(metric: str, value: float, reference: float) -> bool:
    if METRICS[metric].higher_is_better:
        return value < reference * (1 - FIXED_BAND)
    return value > reference * (1 + FIXED_BAND)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--runs", type=int, default=26, help="accepted history runs available")
    parser.add_argument("--k", type=int, default=5, help="samples per run")
    args = parser.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    config = GateConfig()
    started = time.perf_counter()
    print(f"gate (z={config.z}, level from last {config.last_runs} runs, noise from last {config.noise_runs}, "
          f"min effect 3 %) vs fixed ±20 % band")
    print(f"{args.trials} trials per cell, {args.runs} accepted history runs, k={args.k} samples per run, "
          f"seed {args.seed}")
    print(f"{'metric':<10} {'locality':<11} {'noise run/sample':>17} {'step':>5} | {'gate regr.':>10} "
          f"{'gate noisy':>10} {'median band':>11} | {'fixed ±20%':>10}")
    false_alarms = []
    for (metric, where), noise in _synth.NOISE.items():
        base = _synth.BASE[(metric, "cross_node" if where == "inter-node" else "same_numa")]
        key = pt2pt_key("synthetic", "p", "source", "cross_node" if where == "inter-node" else "same_numa", metric)
        for step in STEPS:
            gate_hits = noisy = fixed_hits = 0
            bands = []
            for _ in range(args.trials):
                hist = _synth.history(rng, metric, base, noise, args.runs, args.k)
                new = _synth.run_samples(rng, metric, base, *noise, args.k, step=step)
                verdict = judge_values(key, new.tolist(), [h.tolist() for h in hist], config)
                gate_hits += verdict.verdict == "regression"
                noisy += verdict.verdict == "noisy"
                bands.append(verdict.band)
                fixed_hits += fixed_band_fails(metric, float(np.median(new)), base)
            label = "false alarm" if step == 0 else "detected"
            if step == 0:
                false_alarms.append(gate_hits / args.trials)
            print(f"{metric:<10} {where:<11} {noise[0]:>8.1%}/{noise[1]:<8.1%} {step:>5.0%} | "
                  f"{gate_hits / args.trials:>10.1%} {noisy / args.trials:>10.1%} {np.median(bands):>11.1%} | "
                  f"{fixed_hits / args.trials:>10.1%}   ({label})")
    worst = max(false_alarms)
    print(f"\nper-series false-alarm rate of the gate: at most {worst:.2%}; P(at least one false regression in "
          f"an MR), series independent: " + ", ".join(f"{n} series <= {1 - (1 - worst) ** n:.1%}" for n in SERIES_PER_MR))
    print("\nhistory length (latency intra-node / bandwidth inter-node): false alarms and 10 % detection")
    print(f"{'runs':>5} | {'lat FA':>7} {'lat 10%':>8} | {'bw FA':>7} {'bw 10%':>8}")
    for runs in (5, 10, 26):
        cells = []
        for metric, where in (("latency", "intra-node"), ("bandwidth", "inter-node")):
            noise = _synth.NOISE[(metric, where)]
            base = _synth.BASE[(metric, "same_numa" if where == "intra-node" else "cross_node")]
            key = pt2pt_key("synthetic", "p", "source", "same_numa", metric)
            for step in (0.0, 0.10):
                hits = 0
                for _ in range(args.trials // 2):
                    hist = _synth.history(rng, metric, base, noise, runs, args.k)
                    new = _synth.run_samples(rng, metric, base, *noise, args.k, step=step)
                    hits += judge_values(key, new.tolist(), [h.tolist() for h in hist], config).verdict == "regression"
                cells.append(hits / (args.trials // 2))
        print(f"{runs:>5} | {cells[0]:>7.2%} {cells[1]:>8.1%} | {cells[2]:>7.2%} {cells[3]:>8.1%}")
    print(f"elapsed {time.perf_counter() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
