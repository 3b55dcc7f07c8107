"""Real A/A MRs beside the simulation: false alarms and yellow MRs per MR, and the noise model checked.

Input: the ``ab-samples.json`` of MRs that changed nothing the benchmark can feel, run through the real
pipeline (``benchmarks/verdict_pipeline.py``: a comment-only MR and a neutral MCA setting; keep each MR's
``ab-samples.json``). Each is an A/A on the proving ground: the same OSU built twice, interleaved on the
same nodes, the real sequential looks. For each file the real judge (``paired.judge`` with the system's
power target, then ``compose`` for a toolchain MR) gives the MR's A/B state as the pipeline saw it today.

The simulation runs the same design (the files' series, the system's ``ab:`` schedule and power target,
the same judge and looks) on null MRs with two noise models for the pair log-ratio log(B/A):

* ``clusters``: benchmarks/_synth.py's model (one-sided |t3| jitter per execution, the seeds'
  InfiniBand/Omni-Path levels): what docs/ab.md's 0.5 % false alarms per MR was simulated with;
* ``local (empirical)``: each simulated MR takes one real MR at random (the day's load and the mode
  the cross-node TCP settled in are shared by a whole MR), then each pair's log-ratio is drawn from that
  MR's real pairs of its noise class (metric and intra/inter-node) with a random sign (A and B are the
  same build): the model corrected to what the proving ground measured, bursts and bimodal steps
  included;
* ``local (pooled)``: the same, drawn from the pairs of all the real MRs pooled (no day-to-day level):
  between the two, how much of the noise is the MR's day.

Printed: per noise class the pair spread (1.4826 MAD of log B/A) real and simulated; per model the false
alarms per MR (any regression), yellow MRs (A/B state "needs a look"), median and worst pairs per series,
beside the real figures of the files.

    python benchmarks/ab_aa_real_vs_sim.py /work/bench/*/ab-samples.json [--mrs 200] [--seed 5]

Evidence, not a test; a few minutes for 200 MRs per model on a 2-core VM.

2026-11-27, 8 MRs through the real pipeline at load 0.5-2.5 (5 comment-only, 3 btl_vader_eager_limit 1024;
kept outside the repository), --mrs 100, beside the test suite (nice 19):

    real:                false alarms 0/8 (0.0%, 95 % up 32.4%); needs a look 1/8 (12%); pairs median 6, worst 10
    | bandwidth inter-node | 116 | 16.11% | 3.09%-33.89% | 1.02% |
    | bandwidth intra-node |  96 |  1.58% | 0.53%-2.55%  | 0.52% |
    | latency inter-node   | 110 | 13.31% | 4.46%-23.97% | 1.02% |
    | latency intra-node   | 116 |  4.40% | 2.35%-21.11% | 0.52% |
    simulated, clusters' model:    false alarms 0/100; needs a look 0/100 (0%); pairs median 4, worst 4
    simulated, local (empirical):  false alarms 1/100 (1.0%, 95 % up 5.4%); needs a look 24/100; pairs median 6, worst 10
    simulated, local (pooled):     false alarms 1/100 (1.0%, 95 % up 5.4%); needs a look 16/100; pairs median 6, worst 10
"""
from __future__ import annotations

import argparse
import collections
import dataclasses
import json
import math
import statistics
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _synth  # noqa: E402
from _ab_looks import run_looks  # noqa: E402
from ab_aa_local import upper95  # noqa: E402

from mpiregress.model.names import METRICS  # noqa: E402
from mpiregress.model.systems import get  # noqa: E402
from mpiregress.verdict import compose  # noqa: E402
from mpiregress.verdict.ab import judge, paired  # noqa: E402
from mpiregress.verdict.ab.sequential import Schedule, schedule_of  # noqa: E402

KEYS = ("system", "partition", "method", "benchmark", "parameters", "metric", "unit")


def noise_class(key) -> tuple[str, str]:
    """(metric, intra-node or inter-node) of a series: the judge's pooling of pair jitter."""
    return key.metric, _synth.locality(dict(key.parameters)["placement"])


def outcome_of(verdicts: list) -> dict:
    """One MR as the pipeline would say it: its A/B state, the noise classes of the series that made it "needs a
    look", its regressions and each series' pairs."""
    composed = compose.compose("toolchain_mr", compose.Evidence(paired=verdicts))
    return dict(state=composed.state, regressions=sum(v.verdict == "regression" for v in verdicts),
                looked={noise_class(f.key) for f in composed.findings if f.state == "needs a look" and f.key},
                pairs={v.name(): v.pairs for v in verdicts})


def real_mrs(files: list[Path], config: paired.PairedConfig) -> tuple[list[dict], list[dict], dict]:
    """(per file its outcome judged with ``config`` on the pairs it measured, per file per class the real
    log-ratios, per series its template record and A level)."""
    outcomes, per_file, series = [], [], {}
    for path in files:
        records = [r for r in json.loads(path.read_text()) if "ab_side" in r]
        verdicts = paired.judge(records, config)
        outcomes.append(dict(outcome_of(verdicts), file=str(path)))
        pools: dict = defaultdict(list)
        per_file.append(pools)
        for s in paired.collect(records).values():
            pools[noise_class(s.key)] += [float(d) for d in s.log_ratios()]
            template = next(r for r in records if paired.series_key(r) == s.key)
            series.setdefault(s.key, ({k: template[k] for k in KEYS}, statistics.median(s.a)))
    return outcomes, per_file, series


def simulate(rng: np.random.Generator, series: dict, model, schedule: Schedule, config: paired.PairedConfig):
    """One null MR of ``series`` with the sequential looks; ``model(rng)`` gives the MR's
    ``draw(rng, key, n)``: n log(B/A)."""
    draw = model(rng)

    def measure(key, first: int, count: int, look: int) -> list[dict]:
        template, level = series[key]
        nodes = ["node1", "node2"] if _synth.locality(dict(key.parameters)["placement"]) == "inter-node" else ["node1"]
        return [dict(template, value=value, status="pass", ab_side=side, ab_pair=first + offset, ab_look=look,
                     ab_max_pairs=schedule.max_pairs, nodelist=nodes, target="t")
                for offset, d in enumerate(draw(rng, key, count))
                for side, value in (("A", level), ("B", level * math.exp(d)))]

    return run_looks(list(series), measure, schedule, config)[0]


def clusters_model(rng: np.random.Generator):
    return clusters_draw


def clusters_draw(rng: np.random.Generator, key, n: int) -> np.ndarray:
    """_synth's pair jitter: each execution its own one-sided |t3| tail."""
    _, jitter = _synth.NOISE[noise_class(key)]
    tails = np.abs(rng.standard_t(3, size=(2, n))) * jitter
    sign = -1.0 if METRICS[key.metric].higher_is_better else 1.0
    return sign * (tails[1] - tails[0])


def empirical_model(per_file: list[dict], pooled: bool):
    """Per MR: one real MR's pairs (or all of them pooled), drawn with a random sign."""
    everything: dict = defaultdict(list)
    for pools in per_file:
        for cls, values in pools.items():
            everything[cls] += values

    def model(rng: np.random.Generator):
        pools = everything if pooled else per_file[int(rng.integers(len(per_file)))]

        def draw(rng: np.random.Generator, key, n: int) -> np.ndarray:
            pool = np.asarray(pools[noise_class(key)])
            return rng.choice(pool, size=n) * rng.choice([-1.0, 1.0], size=n)
        return draw
    return model


def summary(outcomes: list[dict]) -> str:
    n = len(outcomes)
    fa = sum(o["regressions"] > 0 for o in outcomes)
    yellow = sum(o["state"] == "needs a look" for o in outcomes)
    pairs = [p for o in outcomes for p in o["pairs"].values()]
    by_class = collections.Counter(c for o in outcomes for c in o["looked"])
    where = ", ".join(f"{m} {loc} {k}" for (m, loc), k in sorted(by_class.items())) or "-"
    return (f"false alarms {fa}/{n} ({fa / n:.1%}, 95 % up {upper95(fa, n):.1%}); needs a look {yellow}/{n} "
            f"({yellow / n:.0%}; from {where}); pairs per series median {statistics.median(pairs):.0f}, "
            f"worst {max(pairs)}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="+", type=Path, help="ab-samples.json of A/A-like MRs")
    parser.add_argument("--mrs", type=int, default=200, help="simulated null MRs per model")
    parser.add_argument("--seed", type=int, default=5)
    parser.add_argument("--system", default="local")
    parser.add_argument("--max-pairs", type=int, default=None, help="the budget to simulate (default: the system's)")
    parser.add_argument("--target", action="append", default=[], metavar="METRIC[@PLACEMENT]=X",
                        help="a power target to simulate instead of the system's (repeatable)")
    parser.add_argument("--models", default="clusters,empirical,pooled", help="the simulated noise models to run")
    opts = parser.parse_args()
    system = get(opts.system)
    schedule = schedule_of(system)
    if opts.max_pairs is not None:
        schedule = dataclasses.replace(schedule, max_pairs=opts.max_pairs)
    config = judge.with_target([{"system": opts.system}])
    if opts.target:
        overrides = {k: float(x) for k, x in (t.split("=", 1) for t in opts.target)}
        config = dataclasses.replace(config, target={**dict(config.target or {}), **overrides})
    outcomes, per_file, series = real_mrs(opts.files, config)
    pools: dict = defaultdict(list)
    for found in per_file:
        for cls, values in found.items():
            pools[cls] += values
    print(f"{len(outcomes)} real A/A MRs, {len(series)} series each; schedule {schedule}; target {config.target}")
    for o in outcomes:
        print(f"  {o['file']}: {o['state']}, {o['regressions']} regression(s), pairs "
              + ", ".join(f"{p}" for p in o["pairs"].values()))
    print(f"real:                {summary(outcomes)}")
    print("\n| noise class | real pairs | pair spread real, pooled | per MR (min-max) | clusters' model |"
          "\n|---|---|---|---|---|")
    rng = np.random.default_rng(opts.seed)
    for cls in sorted(pools):
        model = clusters_draw(rng, next(k for k in series if noise_class(k) == cls), 20000)
        each = [paired.robust_scale(np.asarray(f[cls])) for f in per_file if len(f.get(cls, ())) > 2]
        print(f"| {cls[0]} {cls[1]} | {len(pools[cls])} | {paired.robust_scale(np.asarray(pools[cls])):.2%} | "
              f"{min(each):.2%}-{max(each):.2%} | {paired.robust_scale(model):.2%} |")
    models = {"clusters": ("clusters' model", clusters_model),
              "empirical": ("local (empirical)", empirical_model(per_file, False)),
              "pooled": ("local (pooled)", empirical_model(per_file, True))}
    for label, model in (models[m] for m in opts.models.split(",")):
        rng = np.random.default_rng(opts.seed)
        simulated = []
        for _ in range(opts.mrs):
            verdicts = simulate(rng, series, model, schedule, config)
            simulated.append(outcome_of(verdicts))
        print(f"simulated, {label + ':':<19} {summary(simulated)}", flush=True)
    print("\nThe clusters' model is what docs/ab.md's figures were simulated with; 'local (empirical)' is the model "
          "corrected to the proving ground.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
