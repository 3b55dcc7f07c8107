"""Detection and false-alarm rates of the MR gate vs the seed study's fixed ±20 % band.

Synthetic histories (benchmarks/_synth.py: lognormal run effect shared by a run's
samples, heavy-tailed one-sided sample jitter), N accepted runs of k samples, then a
new run of k samples with an injected step of 0, 5 or 10 % on the hurting side.

* gate: mpiregress.verdict.history_gate.judge_values (median of run medians, MAD-scaled one-sided
  band, minimum effect 3 %), counting ``regression`` verdicts;
* fixed band: the study's ReFrame style, (ref, None, +0.2) for latency and
  (ref, -0.2, None) for bandwidth, with ref = the true mean (the best case for a
  hand-set reference), applied to the same new median.

A second table shows how the false-alarm rate depends on how much history there is
(the gate's noise estimate is uncertain when few runs exist).

A third table puts the paired A/B design (mpiregress.verdict.ab.paired: the target branch's
build A and the MR's build B interleaved in ONE allocation, so the run effect of the
same noise model is shared by A and B and only the per-execution jitter is left)
side by side with the gate and the fixed band, per MR of the full matrix (80 series:
Iris 2 partitions x 3 placements, Aion 4 placements, x 4 methods x 2 metrics):
per-series and family-wise false alarms (MRs that change nothing), detection of
5 % and 10 % steps (MRs where 4 series are 5 % worse and 4 are 10 % worse, the rest
unchanged), and cluster time relative to one ordinary measurement of the same
series (k samples): 2 x pairs / k for A/B. For the gate and the band the
family-wise rate is 1 - prod(1 - per-series rate) over the 80 series (their
verdicts are independent); for A/B it is counted directly, since its verdicts
share the MR's pooled jitter and Holm's correction.

Usage: python benchmarks/gate_detection.py [--trials 1000] [--seed 7] [--runs 26] [--k 5] [--mrs 300]
Prints the tables; seeded. The A/B rows simulate every MR: about 14 minutes with --mrs 400 on a
2-core VM. Evidence, not a test: nothing is asserted.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _synth  # noqa: E402

from mpiregress.model.names import METRICS  # noqa: E402
from mpiregress.model.results import pt2pt_key  # noqa: E402
from mpiregress.verdict.ab import paired  # noqa: E402
from mpiregress.verdict.history_gate import GateConfig, judge_values  # noqa: E402

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
    parser.add_argument("--mrs", type=int, default=200, help="simulated MRs per A/B cell")
    parser.add_argument("--pairs", type=int, nargs="+", default=[4, 5, 6, 8], help="A/B pairs to compare")
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
    rates: dict[tuple[str, str, float], tuple[float, float]] = {}
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
            rates[(metric, where, step)] = (gate_hits / args.trials, fixed_hits / args.trials)
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
    ab_table(rng, args, rates)
    print(f"elapsed {time.perf_counter() - started:.1f} s")
    return 0


def _mr_records(rng: np.random.Generator, pairs: int, steps: dict[int, float]) -> list[dict]:
    """One simulated A/B allocation of the 80-series matrix as result records."""
    records = []
    for index, (system, partition, method, placement, metric) in enumerate(_synth.matrix_series()):
        noise = _synth.NOISE[(metric, _synth.locality(placement))]
        a, b = _synth.ab_samples(rng, metric, _synth.BASE[(metric, placement)], *noise, pairs,
                                 step=steps.get(index, 0.0))
        nodes = [f"{system}-001", f"{system}-002"] if placement == "cross_node" else [f"{system}-001"]
        for pair in range(pairs):
            for side, values in (("A", a), ("B", b)):
                records.append(dict(system=system, partition=partition, method=method, placement=placement,
                                    metric=metric, value=float(values[pair]), status="pass", ab_side=side,
                                    ab_pair=pair, nodelist=nodes, target="t"))
    return records


def _upper95(hits: int, trials: int) -> float:
    """Wilson 95 % upper bound of a rate: how far the printed rate may be off with this many trials."""
    if not trials:
        return 1.0
    z, p = 1.96, hits / trials
    centre = p + z * z / (2 * trials)
    spread = z * np.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials))
    return float((centre + spread) / (1 + z * z / trials))


def _family_rate(per_series: list[float]) -> float:
    return 1 - float(np.prod([1 - p for p in per_series]))


def ab_table(rng: np.random.Generator, args, rates: dict) -> None:
    """Paired A/B vs gate vs fixed band, per MR of the 80-series matrix."""
    series = _synth.matrix_series()
    where = [_synth.locality(p) for (_, _, _, p, _) in series]
    config = paired.PairedConfig()
    print(f"\nper MR of {len(series)} series: A/B paired (HL of log B/A, pooled-jitter null, Holm at "
          f"{config.alpha:.0%} family-wise, min effect {config.min_effect['latency']:.0%}) vs gate vs fixed ±20 %")
    print(f"{args.mrs} simulated MRs per A/B row (null MRs for false alarms; MRs with 4 series 5 % worse and 4 "
          f"10 % worse for detection); one ordinary measurement = k={args.k} samples")
    header = (f"{'design':<24} | {'FA/series':>9} {'FA/MR':>7} | {'det 5%':>7} {'det 10%':>7} | "
              f"{'strict 5%':>9} | {'inconcl.':>8} | {'time':>5}")
    print(header)
    gate_fa = [rates[(m, w, 0.0)][0] for (_, _, _, _, m), w in zip(series, where)]
    band_fa = [rates[(m, w, 0.0)][1] for (_, _, _, _, m), w in zip(series, where)]
    det = {col: {step: float(np.mean([rates[(m, w, step)][col] for (_, _, _, _, m), w in zip(series, where)]))
                 for step in (0.05, 0.10)} for col in (0, 1)}
    print(f"{'history gate':<24} | {np.mean(gate_fa):>9.3%} {_family_rate(gate_fa):>7.1%} | "
          f"{det[0][0.05]:>7.1%} {det[0][0.10]:>7.1%} | {'—':>9} | {'—':>8} | {1.0:>4.1f}x")
    print(f"{'fixed ±20 % band':<24} | {np.mean(band_fa):>9.3%} {_family_rate(band_fa):>7.1%} | "
          f"{det[1][0.05]:>7.1%} {det[1][0.10]:>7.1%} | {'—':>9} | {'—':>8} | {1.0:>4.1f}x")
    stepped = {0: 0.05, 20: 0.05, 45: 0.05, 70: 0.05, 5: 0.10, 30: 0.10, 51: 0.10, 77: 0.10}
    for pairs in args.pairs:
        fa_series = fa_mr = inconclusive = 0
        hits = {0.05: 0, 0.10: 0}
        strict = 0
        for _ in range(args.mrs):
            verdicts = paired.judge(_mr_records(rng, pairs, {}), config)
            fails = sum(v.verdict == "regression" for v in verdicts)
            fa_series += fails
            fa_mr += fails > 0
            inconclusive += sum(v.verdict == "inconclusive" for v in verdicts)
            by_key = {v.key: v for v in paired.judge(_mr_records(rng, pairs, stepped), config)}
            for index, step in stepped.items():
                verdict = by_key[paired.series_key(dict(zip(("system", "partition", "method", "placement",
                                                                "metric"), series[index], strict=True)))]
                hits[step] += verdict.verdict == "regression"
                if step == 0.05:
                    low = verdict.low
                    strict += low is not None and low > config.min_effect[series[index][4]]
        n = args.mrs * len(series)
        per_step = args.mrs * 4
        print(f"{f'A/B paired, {pairs} pairs':<24} | {fa_series / n:>9.3%} {fa_mr / args.mrs:>7.1%} | "
              f"{hits[0.05] / per_step:>7.1%} {hits[0.10] / per_step:>7.1%} | {strict / per_step:>9.1%} | "
              f"{inconclusive / n:>8.2%} | {2 * pairs / args.k:>4.1f}x   (FA/MR {fa_mr}/{args.mrs}, 95 % "
              f"upper bound {_upper95(fa_mr, args.mrs):.1%})")
    print("targets: det 5% >= 95 %, FA/MR <= 1 %, time <= 2.0x. 'strict 5%': detection if the 95 % interval's "
          "lower bound had to exceed the minimum effect; 'inconcl.': null series called inconclusive (noisy)")


if __name__ == "__main__":
    sys.exit(main())
