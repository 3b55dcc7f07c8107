"""Fixed-n vs sequential paired A/B on simulated toolchain MRs: false alarms, detection, inconclusive, cluster time.

Each simulated MR is one A/B allocation of the 80-series matrix (benchmarks/_synth.py: Iris 2
partitions x 3 placements, Aion 4 placements, x 4 methods x 2 metrics) with the noise model of
_synth.py and the pair jitter of benchmarks/gate_detection.py: the run effect is shared by A and B of
a series (one allocation), each execution gets its own one-sided heavy-tailed jitter. Extra rounds
of a series stay in the same allocation (the same run effect).

* fixed-n (today): ``initial_pairs`` pairs, one look, Holm at 1 % over the series;
* sequential (mpiregress.verdict.ab.sequential): after each look, the series still inconclusive beyond the
  minimum effect get ``look_every`` more pairs, up to ``max_pairs``; alpha spent over the looks,
  Holm over the sequential p-values. The real code path: mpiregress.verdict.ab.paired.judge on records
  tagged ``ab_look``/``ab_max_pairs``, and paired.continuing to choose the next round's series.

Null MRs (nothing changes) give false alarms per MR; step MRs (4 series 5 % worse, 4 series 10 %
worse, the rest unchanged) give detection. Cluster time per MR is the benchmark executions of the
MR (2 per pair) over those of one ordinary measurement of the same series (k = 5 samples each):
fixed 5 pairs = 2.0x. "worst" is the largest simulated MR; "bound" the budget's own worst case
(every series to max_pairs).

Usage: python benchmarks/ab_sequential.py [--mrs 100] [--seed 11] [--designs fixed:5 seq:5:2:11 ...]
Prints the table; seeded. About 10 minutes with the defaults, 25 with --mrs 400, on a 2-core VM.
Evidence, not a test.

2026-11-25, --mrs 400 (the table in docs/ab.md):
fixed-n, 5 pairs     FA/MR 0.5 % (95 % up 1.8 %), det 5 % 96.6 %, 10 % 99.8 %, inconcl. 5 % 3.2 %, time 2.00x/2.00x
sequential 4+2..10   FA/MR 0.5 % (1.8 %), det 5 % 99.8 %, 10 % 100 %, inconcl. 5 % 0.1 %, time 1.60x avg, 1.64x worst
sequential 5+2..11   FA/MR 1.0 % (2.5 %), det 5 % 99.9 %, 10 % 100 %, inconcl. 5 % 0.0 %, time 2.00x avg, 2.07x worst
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import dataclass

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _synth  # noqa: E402
from _ab_looks import run_looks  # noqa: E402

from mpiregress.model.names import METRICS  # noqa: E402
from mpiregress.verdict.ab import paired  # noqa: E402
from mpiregress.verdict.ab.sequential import Schedule  # noqa: E402

K = 5   # samples of one ordinary measurement
STEPPED = {0: 0.05, 20: 0.05, 45: 0.05, 70: 0.05, 5: 0.10, 30: 0.10, 51: 0.10, 77: 0.10}   # as gate_detection.py


@dataclass
class Outcome:
    verdicts: dict
    executions: int
    looks: int


def _series_draw(rng: np.random.Generator, metric: str, placement: str) -> float:
    """The allocation's run effect of one series (shared by A and B, and by every round)."""
    run_sigma, _ = _synth.NOISE[(metric, _synth.locality(placement))]
    return _synth.BASE[(metric, placement)] * float(np.exp(rng.normal(0.0, run_sigma)))


def _pairs(rng: np.random.Generator, metric: str, placement: str, centre: float, count: int,
           step: float) -> tuple[np.ndarray, np.ndarray]:
    """``count`` more A and B executions in the allocation (the jitter of _synth.ab_samples)."""
    _, jitter = _synth.NOISE[(metric, _synth.locality(placement))]
    worse = METRICS[metric].higher_is_better
    tails = np.abs(rng.standard_t(3, size=(2, count))) * jitter
    a, b = centre * (np.exp(-tails) if worse else np.exp(tails))
    return a, b * (1 - step if worse else 1 + step)


def simulate(rng: np.random.Generator, schedule: Schedule, steps: dict[int, float],
             config: paired.PairedConfig) -> Outcome:
    """One MR's A/B allocation, round by round, as `mpiregress run --ab-against` does it."""
    series = _synth.matrix_series()
    centres = [_series_draw(rng, metric, placement) for (_, _, _, placement, metric) in series]
    index_of = {_key(i): i for i in range(len(series))}

    def measure(key, first: int, count: int, look: int) -> list[dict]:
        index = index_of[key]
        system, partition, method, placement, metric = series[index]
        a, b = _pairs(rng, metric, placement, centres[index], count, steps.get(index, 0.0))
        nodes = [f"{system}-001", f"{system}-002"] if placement == "cross_node" else [f"{system}-001"]
        return [dict(system=system, partition=partition, method=method, placement=placement, metric=metric,
                     value=float(values[offset]), status="pass", ab_side=side, ab_pair=first + offset,
                     ab_look=look, ab_max_pairs=schedule.max_pairs, nodelist=nodes, target="t")
                for offset in range(count) for side, values in (("A", a), ("B", b))]

    verdicts, looks, pairs = run_looks(list(index_of), measure, schedule, config)
    return Outcome(verdicts={v.key: v for v in verdicts}, executions=2 * pairs, looks=looks)


def _key(index: int):
    s = _synth.matrix_series()[index]
    return paired.series_key(dict(zip(("system", "partition", "method", "placement", "metric"), s, strict=True)))


def _parse(design: str) -> tuple[str, Schedule]:
    kind, *numbers = design.split(":")
    if kind == "fixed":
        (pairs,) = map(int, numbers)
        return f"fixed-n, {pairs} pairs", Schedule(initial_pairs=pairs, look_every=1, max_pairs=pairs)
    first, every, most = map(int, numbers)
    return f"sequential {first}+{every}..{most}", Schedule(initial_pairs=first, look_every=every, max_pairs=most)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mrs", type=int, default=100, help="simulated MRs of each kind (null, step) per design")
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--designs", nargs="+", default=["fixed:5", "seq:4:2:10", "seq:5:2:11"],
                        help="fixed:PAIRS or seq:INITIAL:EVERY:MAX (the default of systems/*.yaml: seq:4:2:10)")
    parser.add_argument("--rho", type=float, default=None, help="power spending exponent (default: the config's)")
    args = parser.parse_args(argv)
    config = paired.PairedConfig() if args.rho is None else paired.PairedConfig(rho=args.rho)
    started = time.perf_counter()
    series = len(_synth.matrix_series())
    print(f"paired A/B per MR of {series} series, {args.mrs} null MRs and {args.mrs} step MRs (4 series 5 %, 4 "
          f"series 10 % worse) per design; Holm at {config.alpha:.0%} family-wise, min effect "
          f"{config.min_effect['latency']:.0%}; spending {config.spending} rho {config.rho}; seed {args.seed}")
    print(f"cluster time in units of one ordinary measurement (k={K} samples per series)")
    header = (f"{'design':<24} | {'FA/MR':>6} {'(95% up)':>8} | {'det 5%':>6} {'det 10%':>7} | {'inconcl. null':>13} "
              f"{'inconcl. 5%':>11} | {'time avg':>8} {'worst':>6} {'bound':>6} | {'MRs >1 look':>11}")
    print(header)
    print("-" * len(header))
    for design in args.designs:
        label, schedule = _parse(design)
        rng = np.random.default_rng(args.seed)
        fa_mr = 0
        inconclusive_null = 0
        hits = {0.05: 0, 0.10: 0}
        inconclusive_step = 0
        times: list[float] = []
        extra_looks = 0
        for _ in range(args.mrs):
            null = simulate(rng, schedule, {}, config)
            fa_mr += any(v.verdict == "regression" for v in null.verdicts.values())
            inconclusive_null += sum(v.verdict == "inconclusive" for v in null.verdicts.values())
            stepped = simulate(rng, schedule, STEPPED, config)
            for index, step in STEPPED.items():
                verdict = stepped.verdicts[_key(index)]
                hits[step] += verdict.verdict == "regression"
                inconclusive_step += step == 0.05 and verdict.verdict == "inconclusive"
            for outcome in (null, stepped):
                times.append(outcome.executions / (series * K))
                extra_looks += outcome.looks > 1
        per_step = args.mrs * 4
        bound = 2 * schedule.max_pairs / K
        print(f"{label:<24} | {fa_mr / args.mrs:>6.1%} {_upper95(fa_mr, args.mrs):>8.1%} | "
              f"{hits[0.05] / per_step:>6.1%} {hits[0.10] / per_step:>7.1%} | "
              f"{inconclusive_null / (args.mrs * series):>13.2%} {inconclusive_step / per_step:>11.1%} | "
              f"{np.mean(times):>7.2f}x {max(times):>5.2f}x {bound:>5.1f}x | {extra_looks / (2 * args.mrs):>11.0%}",
              flush=True)
    print("targets: FA/MR <= 1 %, det 5% >= 95 %, time avg <= 2.0x. 'inconcl.': share of series ending "
          "inconclusive (null MRs: of all series; 5%: of the 5 % steps); 'MRs >1 look': MRs that measured "
          "extra rounds.")
    print(f"elapsed {time.perf_counter() - started:.0f} s")
    return 0


def _upper95(hits: int, trials: int) -> float:
    """Wilson 95 % upper bound of a rate."""
    z, p = 1.96, hits / trials
    centre = p + z * z / (2 * trials)
    spread = z * np.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials))
    return float((centre + spread) / (1 + z * z / trials))


if __name__ == "__main__":
    sys.exit(main())
