"""``mpiregress noise``: analyse an FWQ run, lay out the placement experiments, ask the kernel (rtla).

    mpiregress noise analyze FILE --out DIR   summary.txt, cores.tsv, spectrum.png, records.json
    mpiregress noise layouts --topology processor.json   srun lines of the 24-vs-23 / SMT experiments
    mpiregress noise rtla --cpus 0,1 --seconds 5 --out FILE   the kernel's view (exit 4 where it cannot run)

Exit codes: 0 done; 2 bad or truncated input (every complete node is still
analysed and written); 3 rtla failed; 4 rtla not available here.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from mpiregress.errors import OK, InputError
from mpiregress.families.noise import analysis, artifacts, fwqfile, known, placement, records, rtla
from mpiregress.model.inputs import read_json


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("noise", help="OS noise: analyse FWQ runs, placement experiments, kernel cross-check")
    actions = p.add_subparsers(dest="action", metavar="ACTION")
    actions.required = True

    a = actions.add_parser("analyze", help="per-node efficiency, per-core losses and periods of an FWQ file")
    a.add_argument("file", type=Path, help="FWQ result file (checks/src/fwq)")
    a.add_argument("--out", type=Path, required=True, help="folder for summary.txt, cores.tsv, spectrum.png, "
                                                           "records.json")
    a.add_argument("--threshold-fraction", type=float, default=analysis.DEFAULT_THRESHOLD_FRACTION,
                   help="a detour is an iteration this fraction above the nominal quantum (default %(default)s)")
    a.add_argument("--min-prominence", type=float, default=analysis.DEFAULT_MIN_PROMINENCE,
                   help="a spectral line counts at this multiple of its local background (default %(default)s)")
    a.add_argument("--rtla-output", type=Path, help="`rtla osnoise top` output of the same cores, shown side by side")
    a.add_argument("--system", default="local", help="the system the file was measured on: its records' system, "
                   "and its known_noise_sources said beside the events they are (default %(default)s)")
    a.add_argument("--partition", default="batch")
    a.add_argument("--method", default="source")
    a.add_argument("--layout", default="all_cores", choices=records.LAYOUTS)
    a.set_defaults(func=run_analyze)

    lay = actions.add_parser("layouts", help="srun lines of the all-cores / one-free-per-socket / SMT experiments")
    lay.add_argument("--topology", type=Path, required=True, help="processor.json of the partition (checks/topology)")
    lay.add_argument("--fwq", default="fwq", help="path of the fwq binary on the cluster")
    lay.add_argument("--iterations", type=int, default=placement.ITERATIONS)
    lay.set_defaults(func=run_layouts)

    r = actions.add_parser("rtla", help="run `rtla osnoise top` on CPUs (root, osnoise tracer needed)")
    r.add_argument("--cpus", required=True, help="comma-separated CPU list, the cores FWQ ran on")
    r.add_argument("--seconds", type=int, default=5)
    r.add_argument("--out", type=Path, required=True, help="file for rtla's output")
    r.set_defaults(func=run_rtla)


def _cpu_list(text: str) -> list[int]:
    try:
        cpus = [int(c) for c in text.split(",") if c.strip()]
    except ValueError:
        raise InputError(f"--cpus must be a comma-separated list of CPU numbers, got {text!r}") from None
    if not cpus:
        raise InputError("--cpus is empty")
    return cpus


def run_analyze(args: argparse.Namespace) -> int:
    raw = fwqfile.read(args.file)
    run = analysis.analyse(raw, args.threshold_fraction, args.min_prominence)
    rtla_text = None
    if args.rtla_output:
        try:
            rtla_text = args.rtla_output.read_text()
        except OSError as err:
            raise InputError(f"cannot read --rtla-output {args.rtla_output}: {err.strerror}") from None
    lines = artifacts.write(run, args.out, rtla_text, known=known.known_of(args.system))
    recs = records.to_records(run, system=args.system, partition=args.partition, method=args.method,
                              layout=args.layout)
    (args.out / "records.json").write_text(json.dumps(recs, indent=1) + "\n")
    print("\n".join(lines))
    if run.truncated:
        raise InputError(f"{args.file} was cut short: {run.truncated} (analysed and written to {args.out})")
    return OK


def run_layouts(args: argparse.Namespace) -> int:
    info = read_json(args.topology, "processor topology")
    for name in records.LAYOUTS:
        print(placement.srun_line(placement.layout(name, info), fwq=args.fwq, iterations=args.iterations))
    return OK


def run_rtla(args: argparse.Namespace) -> int:
    rows = rtla.run_top(_cpu_list(args.cpus), args.seconds)
    args.out.write_text("\n".join(f"{r.cpu} #1 {r.runtime_us} {r.noise_us} {r.available_percent} {r.max_noise_us} "
                                  f"{r.max_single_us} {r.hw} {r.nmi} {r.irq} {r.softirq} {r.thread}" for r in rows)
                        + "\n")
    for r in rows:
        print(f"cpu {r.cpu}: {r.lost_fraction:.4%} of the time noise, max single {r.max_single_us} us", file=sys.stdout)
    return OK
