"""A/B by hand on this host: does an MCA setting in B's environment slow 8 KiB latency / 1 MiB bandwidth?

Runs osu_latency (8192 B) and osu_bw (1 MiB) from ``--bin-dir`` (a built OSU, or the
test double's install) with ``mpirun --oversubscribe -np 2`` alternately for A (the
plain environment) and B (A plus ``--mca NAME=VALUE`` settings as OMPI_MCA_*
variables), in the balanced order of mpiregress.run.ab.plan, tags every sample like an
A/B run does and judges it with mpiregress.verdict.ab.paired, then prints the verdicts
with their attribution. ``--repeat N`` runs N independent A/B rounds and prints how
many turned red (an A/A run, no ``--mca``, is the "MR that changes nothing").

Not the pipeline (that runs under Slurm through ReFrame); a check of which MCA
setting is worth using for the real local A/B MR, with the figures it gives here.

Usage: python benchmarks/ab_mca_by_hand.py --bin-dir DIR [--mca btl=^vader] [--pairs 10] [--repeat 1]
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

from mpiregress.run.ab.plan import interleaved_order
from mpiregress.verdict import compose  # noqa: E402
from mpiregress.verdict.ab import attribution, paired

BENCHES = (("osu_latency", 8192, "latency", "us", 1000), ("osu_bw", 1048576, "bandwidth", "MB/s", 20))


def measure(binary: Path, size: int, iterations: int, env: dict[str, str]) -> float | None:
    cmd = ["mpirun", "--oversubscribe", "-np", "2", "--bind-to", "core", "--map-by", "core", str(binary),
           "-m", f"{size}:{size}", "-x", "50", "-i", str(iterations)]
    try:
        out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120).stdout
    except subprocess.TimeoutExpired:
        return None
    rows = [line.split() for line in out.splitlines() if line.strip() and not line.startswith("#")]
    return float(rows[-1][1]) if rows and len(rows[-1]) == 2 else None


def one_round(bin_dir: Path, pairs: int, mca: list[str]) -> list[dict]:
    base = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    slow = dict(base, **{f"OMPI_MCA_{k}": v for k, v in (m.split("=", 1) for m in mca)})
    records = []
    host = os.uname().nodename
    for bench, size, metric, unit, iterations in BENCHES:
        for step in interleaved_order(pairs):
            value = measure(bin_dir / "pt2pt" / bench, size, iterations, base if step.side == "A" else slow)
            records.append(dict(system="local", partition="host", method="source", placement="same_numa",
                                metric=metric, unit=unit, value=value, status="pass" if value else "error",
                                reason="" if value else "no value (timeout or crash)", ab_side=step.side,
                                ab_pair=step.pair, nodelist=[host], target="host"))
    return records


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bin-dir", type=Path, required=True, help=".../libexec/osu-micro-benchmarks/mpi")
    parser.add_argument("--mca", action="append", default=[], help="NAME=VALUE for B only (repeatable)")
    parser.add_argument("--pairs", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args(argv)
    started = time.perf_counter()
    red = 0
    for attempt in range(args.repeat):
        records = one_round(args.bin_dir, args.pairs, args.mca)
        verdicts = paired.judge(records)
        causes = attribution.sentences(attribution.attribute([attribution.observation(v) for v in verdicts]))
        code = compose.exit_code_of_paired(verdicts)
        red += code == 1
        for v in verdicts:
            a = "-" if v.a_value is None else f"{v.a_value:.4g}"
            b = "-" if v.b_value is None else f"{v.b_value:.4g}"
            effect = "-" if v.effect is None else f"{v.effect:+.1%}"
            power = "-" if v.power is None else v.power.amount()
            p = 1.0 if v.p_adjusted is None else v.p_adjusted
            interval = "-" if v.low is None else f"{v.low:+.1%}..{v.high:+.1%}"
            print(f"round {attempt + 1}: {v.verdict:<12} {v.key.metric:<9} A {a:>8} B {b:>8} {v.unit:<4} effect "
                  f"{effect:>8} ({interval}) Holm p {p:.2g}, could see {power} "
                  f"{causes.get(v.key, '')}")
        print(f"round {attempt + 1}: exit {code}")
    print(f"{red} of {args.repeat} round(s) red; B's MCA: {' '.join(args.mca) or 'none (A/A)'}; "
          f"elapsed {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
