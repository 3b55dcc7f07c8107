"""``mpiregress links analyze|enough``: the link matrix of a linktest run, its figures and its verdict.

Exit 0 when no node and no link is judged bad, 1 when one is, 5 when none is but the run could not
see the targets it was given (its power is short: never a pass), 2 on bad input
(a truncated or unfinished results file is analysed and its outputs written,
then exits 2: the run must be repeated before it can clear the nodes).
"""
from __future__ import annotations

import argparse
from pathlib import Path

from mpiregress.errors import ERROR, NEEDS_A_LOOK, OK, REGRESSION
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
    a.add_argument("--round", type=Path, action="append", default=[], dest="rounds_measured",
                   help="a further all-pairs round of the same run (repeatable; the check's links-round-<k>.bin)")
    _judging(a)
    a.add_argument("--series", type=Path, help="also write per-node/per-link results (results.json format) here, "
                                                "for `mpiregress history import`")
    a.add_argument("--system", default="", help="system name for --series records")
    a.add_argument("--partition", default="", help="partition name for --series records")
    a.add_argument("--method", default="", help="build method for --series records")
    a.set_defaults(func=run_analyze)
    e = verbs.add_parser("enough", help="whether a run's rounds so far can see the targets: exit 0 when they can "
                                        "(or a fault was named), 1 when the run should measure another round")
    e.add_argument("results", type=Path, nargs="+", help="the results file, then its further rounds")
    _judging(e)
    e.set_defaults(func=run_enough)


def _judging(p: argparse.ArgumentParser) -> None:
    """The judging's options (systems/<name>.yaml links: settings)."""
    defaults = analysis.Thresholds()
    p.add_argument("--ratio", type=float, default=defaults.ratio, help="slow: at least this many times worse")
    p.add_argument("--link-ratio", type=float, default=None,
                   help="a link is named when its pair is this many times worse, at first and on re-test "
                        "(default: --ratio)")
    p.add_argument("--whole-nodes", action="store_true",
                   help="judge a node on all its ranks' pairs and a link on the median of its rank pairs "
                        "(ranks that share cores with other work)")
    p.add_argument("--z", type=float, default=defaults.z, help="slow: and at least this many robust sigmas")
    p.add_argument("--statistic", choices=sorted(analysis.COLUMNS), default=defaults.statistic,
                   help="per-pair value judged (median of its iterations by default)")
    p.add_argument("--metrics", default=",".join(defaults.metrics),
                   help="metrics judged, comma-separated (default: latency,bandwidth)")
    p.add_argument("--node-target", type=float, default=None,
                   help="a node this many times slower on all its links must be seen (default: no target)")
    p.add_argument("--link-target", type=float, default=None,
                   help="a link this many times slower must be seen (default: no target)")
    p.add_argument("--rounds", type=int, default=defaults.rounds,
                   help="all-pairs rounds the run may measure to see its targets (default: 1)")


def _thresholds(args: argparse.Namespace) -> analysis.Thresholds:
    return analysis.Thresholds(ratio=args.ratio, link_ratio=args.link_ratio, whole_nodes=args.whole_nodes, z=args.z,
                               statistic=args.statistic, metrics=analysis.metric_names(args.metrics),
                               node_target=args.node_target, link_target=args.link_target, rounds=args.rounds)


def run_enough(args: argparse.Namespace) -> int:
    """Exit 0 when the rounds so far see the targets (or name a fault), 1 when another round is wanted."""
    run = judge.read_rounds(args.results[0], args.results[1:])
    found = analysis.analyse(run, thresholds=_thresholds(args))
    short = found.short_of_target()
    print(f"mpiregress links: round {run.rounds}: {found.power_sentence()}"
          + (f"; short: {short}" if short else "; enough"))
    return REGRESSION if short else OK


def run_analyze(args: argparse.Namespace) -> int:
    judged = judge.judge_file(args.results, args.out, _thresholds(args),
                              switches=args.switches, focus=args.nodes, rounds=args.rounds_measured)
    if args.series:
        context = {"system": args.system, "partition": args.partition, "method": args.method}
        args.series.write_text(results.dump([results.Result(**r) for r in judged.records(context)]))
    print("\n".join(judged.summary))
    print(f"outputs in {args.out}: {' '.join(judge.ARTIFACTS[1:])}")
    if judged.problems:
        return ERROR
    if judged.analysis.judged_bad:
        return REGRESSION
    return NEEDS_A_LOOK if judged.analysis.short_of_target() else OK
