"""``mpiregress links analyze``: the link matrix of a linktest run, its figures and its verdict.

Exit 0 when no node and no link is judged bad, 1 when one is, 2 on bad input
(a truncated or unfinished results file is analysed and its outputs written,
then exits 2: the run must be repeated before it can clear the nodes).
"""
from __future__ import annotations

import argparse
from pathlib import Path

from .. import results
from ..errors import ERROR, OK, REGRESSION, InputError
from ..links import analysis, figures, output, resultsfile, series, sitetopology


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
    a.add_argument("--series", type=Path, help="also write per-node/per-link results (results.json format) here, "
                                                "for `mpiregress history import`")
    a.add_argument("--system", default="", help="system name for --series records")
    a.add_argument("--partition", default="", help="partition name for --series records")
    a.add_argument("--method", default="", help="build method for --series records")
    a.set_defaults(func=run_analyze)


def run_analyze(args: argparse.Namespace) -> int:
    if args.ratio <= 1 or args.z <= 0:
        raise InputError("--ratio must be above 1 and --z above 0")
    run = resultsfile.read(args.results)
    if len(run.main) == 0:
        raise InputError(f"{args.results} holds no measured pair" + (f" ({run.problem})" if run.problem else ""))
    nodes = sorted(set(run.hosts))
    switches = sitetopology.load_switches(args.switches, nodes) if args.switches else None
    focus = sitetopology.parse_node_list(args.nodes, nodes)
    result = analysis.analyse(run, switches, analysis.Thresholds(ratio=args.ratio, z=args.z, statistic=args.statistic))
    out: Path = args.out
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise InputError(f"cannot create the output folder {out}: {err.strerror or err}") from None
    output.write_matrices(result, out / "matrix.npz")
    figures.heatmap(result, out / "heatmap.png")
    figures.histogram(result, out / "histogram.png")
    output.write_bad_links(result, out / "bad_links.csv")
    lines = output.summary_lines(result, focus)
    (out / "summary.txt").write_text("\n".join(lines) + "\n")
    if args.series:
        context = {"system": args.system, "partition": args.partition, "method": args.method}
        args.series.write_text(results.dump(series.series_results(result, context)))
    print("\n".join(lines))
    print(f"outputs in {out}: matrix.npz heatmap.png histogram.png bad_links.csv summary.txt")
    if run.problem:
        return ERROR
    return REGRESSION if result.judged_bad else OK
