"""``mpiregress coll``: what a collective sweep's results tell an admin, and the rules-file check.

    mpiregress coll analyse results.json... --openmpi 4.1.6 --out DIR
        best-algorithm map, default-vs-best table and findings (printed and in DIR as JSON),
        figures, and one coll/tuned dynamic rules file per distribution (DIR/coll_tuned_rules-<dist>.conf)
    mpiregress coll verify results.json...
        compares runs under a rules file (algorithm "rules_file") with default runs of the same
        points; exit 1 when the rules file is slower beyond the noise anywhere
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from mpiregress.errors import OK, REGRESSION, InputError
from mpiregress.families.coll import algorithms, analysis, sweep
from mpiregress.model import inputs


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("coll", help="collective sweeps: best algorithms, findings, rules files, their verification")
    verbs = p.add_subparsers(dest="verb", metavar="VERB")
    verbs.required = True
    ana = verbs.add_parser("analyse", help="best-algorithm map, default vs best, findings, figures, rules files")
    ana.add_argument("results", type=Path, nargs="+", help="results.json file(s) of collective runs")
    ana.add_argument("--openmpi", required=True, help="the OpenMPI version the runs used (e.g. 4.1.6)")
    ana.add_argument("--out", type=Path, required=True, help="folder for tables, figures and rules files")
    ana.add_argument("--min-effect", type=float, default=sweep.MIN_EFFECT,
                     help="smallest relative difference reported, whatever the noise (default 0.10)")
    ana.add_argument("--segsize", default=None, help="segment size the sweep forced (default: the data's)")
    ana.set_defaults(func=run_analyse)
    ver = verbs.add_parser("verify", help="rules-file runs against default runs of the same points")
    ver.add_argument("results", type=Path, nargs="+")
    ver.add_argument("--min-effect", type=float, default=sweep.MIN_EFFECT)
    ver.set_defaults(func=run_verify)


def _records(paths: list[Path]) -> list:
    records: list = []
    for path in paths:
        data = inputs.read_json(path, "results file")
        if not isinstance(data, list):
            raise InputError(f"results file {path} must hold a list of result records")
        for index, record in enumerate(data):
            if isinstance(record, dict):
                samples = record.get("samples") if isinstance(record.get("samples"), list) else []
                inputs.check_physical(str(record.get("metric", "")), record.get("value"), samples,
                                      record.get("reference"), f"results file {path}: result #{index}")
        records += data
    return records


def _table(paths: list[Path]) -> dict:
    table, left_out = sweep.table_from_records(_records(paths))
    for sentence in left_out:
        print(f"left out: {sentence}")
    if not table:
        raise InputError(f"no collective latency measurement in {', '.join(map(str, paths))}")
    return table


def run_analyse(args: argparse.Namespace) -> int:
    tuned = algorithms.load(args.openmpi)
    segsize = None if args.segsize is None else algorithms.parse_segsize(args.segsize, "--segsize")
    found = analysis.analyse(_records(args.results), tuned, args.openmpi, [p.name for p in args.results],
                             args.min_effect, segsize)
    if found is None:
        raise InputError("the results hold no point measured with both forced algorithms and the default")
    for sentence in found.left_out:
        print(f"left out: {sentence}")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "default_vs_best.json").write_text(json.dumps(found.table, indent=1) + "\n")
    (args.out / "findings.txt").write_text("".join(f"{s}\n" for s in found.findings))
    for name, png in found.figures.items():
        (args.out / name).write_bytes(png)
    for dist, text in found.rules.items():
        (args.out / analysis.rules_name(dist)).write_text(text)
    print(f"{len(found.cells)} points, default slower than the best forced algorithm beyond the noise at "
          f"{len(found.findings)}")
    for sentence in found.findings:
        print(f"  {sentence}")
    print(f"tables, figures and rules files in {args.out}")
    return OK


def run_verify(args: argparse.Namespace) -> int:
    comparisons = sweep.verify_rules(_table(args.results), args.min_effect)
    if not comparisons:
        raise InputError("no point was measured both under a rules file (algorithm 'rules_file') and with the default")
    flagged = [c for c in comparisons if c.flagged]
    for c in comparisons:
        print(c.sentence())
    print(f"{len(comparisons)} points: the rules file is slower than the default beyond the noise at {len(flagged)}")
    return REGRESSION if flagged else OK
