"""``mpiregress links analyze``: the link matrix of a linktest run, its figures and its verdict.

Exit 0 when no node and no link is judged bad, 1 when one is, 2 on bad input
(a truncated or unfinished results file is analysed and its outputs written,
then exits 2: the run must be repeated before it can clear the nodes).
"""
from __future__ import annotations

import argparse
from pathlib import Path

from mpiregress.errors import ERROR, OK, REGRESSION
from mpiregress.families.links import analysis, judge
from mpiregress.model import results


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("links", help="the all-pairs link matrix (linktest): analyze a results file")
    verbs = p.add_subparsers(dest="verb", metavar="VERB")
    verbs.required = True
    a = verbs.add_parser("analyze", help="matrices, heatmap, histogram, bad-links CSV, summary; "
                                         "exit 1 when a bad node or link is judged")
    a.add_argument("results", type=Path, help="linktest's binary results file")
    a.add_argument("--out", type=Path, required=True, help="folder for the outputs")
    a.add_argument("--switches", type=Path, help="YAML 'switches:' mapping node -> switch (optional)")
    a.add_argument("--nodes", help="comma-separated nodes to report on (e.g. after maintenance)")
    defaults = analysis.Thresholds()
    a.add_argument("--ratio", type=float, default=defaults.ratio, help="slow: at least this many times worse")
    a.add_argument("--z", type=float, default=defaults.z, help="slow: and at least this many robust sigmas")
    a.add_argument("--statistic", choices=sorted(analysis.COLUMNS), default=defaults.statistic,
                   help="per-pair value judged (median of its iterations by default)")
    a.add_argument("--metrics", default=",".join(defaults.metrics),
                   help="metrics judged, comma-separated (default: latency,bandwidth)")
    a.add_argument("--series", type=Path, help="also write per-node/per-link results (results.json format) here, "
                                                "for `mpiregress history import`")
    a.add_argument("--system", default="", help="system name for --series records")
    a.add_argument("--partition", default="", help="partition name for --series records")
    a.add_argument("--method", default="", help="build method for --series records")
    a.set_defaults(func=run_analyze)


def run_analyze(args: argparse.Namespace) -> int:
    thresholds = analysis.Thresholds(ratio=args.ratio, z=args.z, statistic=args.statistic,
                                     metrics=analysis.metric_names(args.metrics))
    judged = judge.judge_file(args.results, args.out, thresholds,
                              switches=args.switches, focus=args.nodes)
    if args.series:
        context = {"system": args.system, "partition": args.partition, "method": args.method}
        args.series.write_text(results.dump([results.Result(**r) for r in judged.records(context)]))
    print("\n".join(judged.summary))
    print(f"outputs in {args.out}: {' '.join(judge.ARTIFACTS[1:])}")
    if judged.problems:
        return ERROR
    return REGRESSION if judged.analysis.judged_bad else OK
