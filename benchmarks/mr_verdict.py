"""Toolchain MRs through the real composition of every gating input, beside the old "any job fails".

Each simulated MR measures the 80-series matrix (benchmarks/_synth.py noise model) the way the
pipeline does:
* the run job: k samples per series in its own allocation (a run effect of its own), judged against
  a baselines band (the true level, tolerance --tolerance) -> band results;
* the history gate: the same k samples against 26 accepted runs of the series -> history verdicts;
* the A/B job: the systems' sequential schedule (mpiregress.verdict.ab.sequential.Schedule: 4 pairs, then 2
  more per look while a series is inconclusive beyond the minimum effect, up to 10) in one allocation
  (the run effect cancels) -> paired verdicts (benchmarks/ab_sequential.py's simulation, which runs
  mpiregress.verdict.ab.paired.judge and paired.continuing round by round);
then ONE verdict: mpiregress.verdict.compose.compose("toolchain_mr", Evidence(...)), the code the
verdict job runs. "Any job fails" is the old pipeline: red when the band, the history gate or the
A/B job has a regression.

Null MRs (nothing changes) give false alarms per MR (red) and how often the verdict is "needs a
look"; MRs with 4 series 5 % worse and 4 series 10 % worse give detection: a stepped series found
when the verdict holds a gating regression finding for it. Cluster time is in units of one ordinary
measurement (k samples per series): the A/B job's executions (average and worst MR), and the same plus
the run job's 1x (the pipeline still measures a toolchain MR in its run job too).

Usage: python benchmarks/mr_verdict.py [--mrs 200] [--k 5] [--seed 5]
Evidence, not a test: nothing is asserted. About 2 s per MR on a 2-core VM.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import _synth  # noqa: E402
from ab_sequential import simulate as ab_simulate  # noqa: E402
from gate_detection import _upper95  # noqa: E402

from mpiregress.model.names import METRICS  # noqa: E402
from mpiregress.model.results import pt2pt, pt2pt_key  # noqa: E402
from mpiregress.verdict import compose  # noqa: E402
from mpiregress.verdict.ab import paired  # noqa: E402
from mpiregress.verdict.ab.sequential import Schedule  # noqa: E402
from mpiregress.verdict.history_gate import GateConfig, judge_values  # noqa: E402

STEPPED = {0: 0.05, 20: 0.05, 45: 0.05, 70: 0.05, 5: 0.10, 30: 0.10, 51: 0.10, 77: 0.10}


def simulate(rng: np.random.Generator, args: argparse.Namespace, steps: dict[int, float]
             ) -> tuple[compose.PipelineVerdict, int]:
    """One MR: band results, history verdicts and paired verdicts of the matrix, composed; and the A/B job's
    benchmark executions."""
    config = GateConfig()
    results, history = [], []
    for index, (system, partition, method, placement, metric) in enumerate(_synth.matrix_series()):
        noise = _synth.NOISE[(metric, _synth.locality(placement))]
        base = _synth.BASE[(metric, placement)]
        samples = _synth.run_samples(rng, metric, base, *noise, args.k, step=steps.get(index, 0.0))
        value = float(np.median(samples))
        spec = METRICS[metric]
        limit = spec.limit(base, args.tolerance)
        status = "fail" if spec.worse(value, limit) else "pass"
        results.append(pt2pt(system, partition, method, placement, metric, value, status=status,
                             samples=[float(v) for v in samples], reason=f"{value:.4g} beyond {limit:.4g}"
                             if status == "fail" else "", toolchain="2023b"))
        past = _synth.history(rng, metric, base, noise, args.runs, args.k)
        history.append(judge_values(pt2pt_key(system, partition, method, placement, metric), list(samples),
                                    [list(r) for r in past], config))
    ab = ab_simulate(rng, Schedule(), steps, paired.PairedConfig())
    verdict = compose.compose("toolchain_mr", compose.Evidence(results=results, history=history,
                                                               paired=list(ab.verdicts.values())))
    return verdict, ab.executions


def any_job_fails(v: compose.PipelineVerdict) -> set:
    """The old composition: every judge's regression turned the pipeline red (the keys it named)."""
    return {f.key for f in v.findings if f.key is not None and (
        f.state == "regression" or (f.state == compose.EVIDENCE and f.judge in ("baseline band", "history gate")))}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mrs", type=int, default=200)
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument("--runs", type=int, default=26, help="accepted runs of history per series")
    parser.add_argument("--tolerance", type=float, default=0.10, help="baselines band (relative)")
    parser.add_argument("--seed", type=int, default=5)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    started = time.perf_counter()
    series = _synth.matrix_series()
    keys = [pt2pt_key(*s) for s in series]
    red_new = red_old = look = 0
    found_new = {0.05: 0, 0.10: 0}
    found_old = {0.05: 0, 0.10: 0}
    executions: list[int] = []
    for _ in range(args.mrs):
        null, spent = simulate(rng, args, {})
        executions.append(spent)
        red_new += null.state == "regression"
        look += null.state == "needs a look"
        red_old += bool(any_job_fails(null))
        stepped, spent = simulate(rng, args, STEPPED)
        executions.append(spent)
        gating = {f.key for f in stepped.of("regression")}
        old = any_job_fails(stepped)
        for index, step in STEPPED.items():
            found_new[step] += keys[index] in gating
            found_old[step] += keys[index] in old
    per_step = args.mrs * 4
    one = len(series) * args.k
    ab_mean, ab_worst = np.mean(executions) / one, max(executions) / one
    times = f"A/B {ab_mean:.2f}x (worst {ab_worst:.2f}x); with the run job {1 + ab_mean:.2f}x"
    print(f"{args.mrs} simulated toolchain MRs (null and stepped each) of {len(series)} series; k={args.k}, "
          f"sequential A/B {Schedule()}, {args.runs} runs of history, baselines band {args.tolerance:.0%}")
    print(f"{'composition':<34} | {'FA/MR':>6} {'(95% up)':>8} | {'look/MR':>7} | {'det 5%':>7} {'det 10%':>7}")
    print(f"{'any job fails (old)':<34} | {red_old / args.mrs:>6.1%} {_upper95(red_old, args.mrs):>8.1%} | "
          f"{'—':>7} | {found_old[0.05] / per_step:>7.1%} {found_old[0.10] / per_step:>7.1%}")
    print(f"{'one verdict (verdict/compose.py)':<34} | {red_new / args.mrs:>6.1%} {_upper95(red_new, args.mrs):>8.1%} | "
          f"{look / args.mrs:>7.1%} | {found_new[0.05] / per_step:>7.1%} {found_new[0.10] / per_step:>7.1%}")
    print(f"cluster time per MR, in units of one ordinary measurement (k={args.k}): {times}")
    print("targets: FA/MR <= 1 %, det 5% >= 95 %, time <= 2x one measurement. 'look/MR': null MRs whose verdict "
          "is 'needs a look' (orange, not red).")
    print(f"elapsed {time.perf_counter() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
