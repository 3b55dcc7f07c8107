"""``mpiregress report``: the HTML page, Markdown summary and JUnit XML of a run against the history."""
from __future__ import annotations

import argparse
from pathlib import Path

from mpiregress import paths
from mpiregress.commands.compare import add_gate_options, build_report
from mpiregress.errors import OK
from mpiregress.report import html, junit, markdown, verdict_text
from mpiregress.run import outputs


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("report", help="write report.html, summary.md and junit.xml for a run and the history")
    add_gate_options(p)
    p.add_argument("--out-dir", type=Path, default=None, help="default: $MPIREGRESS_REPORTS_DIR or reports/")
    p.add_argument("--gate", action="store_true",
                   help="also exit with the verdict's code (1 regression, 2 error, 5 needs a look)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:

    out = args.out_dir or paths.reports_dir()
    # Rejected input must not leave the previous report's page, summary and JUnit in --out-dir.
    with outputs.replaced_on_failure("report", html=[out / "report.html"], markdown=[out / "summary.md"],
                                     junit=[out / "junit.xml"]):
        data = build_report(args, with_trends=True)
        data.ungated = not args.gate     # no line may claim an exit code this command does not return
        written = [html.write(data, out / "report.html"), markdown.write(data, out / "summary.md"),
                   junit.write(data, out / "junit.xml")]
    for path in written:
        print(f"wrote {path}")
    print(verdict_text.headline(data.pipeline_verdict, ungated=data.ungated))
    return data.exit_code if args.gate else OK
