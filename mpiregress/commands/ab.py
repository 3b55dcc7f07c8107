"""``mpiregress ab``: judge an A/B run of a toolchain MR (exit 0 pass, 1 regression, 2 error).

Reads the A/B result records (a JSON list, each tagged ``ab_side``/``ab_pair``, see
:mod:`mpiregress.run.ab.plan`), judges every series by its paired log-ratios
(:mod:`mpiregress.verdict.ab.paired`), falls back to the history gate for series with
no A, names a cause for each failing series (:mod:`mpiregress.verdict.ab.attribution`,
with the noise probe and the link matrix's bad nodes and links) and writes the MR
report's A/B section.
"""
from __future__ import annotations

import argparse
from pathlib import Path

from mpiregress.errors import InputError
from mpiregress.families.links import series as link_series
from mpiregress.history import url as history_url
from mpiregress.model import inputs
from mpiregress.model.names import METRICS
from mpiregress.report import ab as ab_report
from mpiregress.run import outputs
from mpiregress.verdict import compose
from mpiregress.verdict.ab import judge, paired


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("ab", help="judge an A/B run (B = the MR's build, A = the target branch's) on the same nodes")
    p.add_argument("results", type=Path, help="A/B result records (JSON list with ab_side, ab_pair, nodelist)")
    p.add_argument("--db", default=None,
                   help="for series with no A and for 'system' attribution, when it exists; " + history_url.DB_HELP)
    p.add_argument("--noise-probe", type=Path, help="JSON {node: [efficiency, [low, high]]} of this allocation")
    p.add_argument("--links", type=Path,
                   help="results.json of a link run (the links job's report folder); default: the run's own "
                        "linktest series, else the latest link run of the system in the history")
    defaults = paired.PairedConfig()
    p.add_argument("--alpha", type=float, default=defaults.alpha, help="family-wise error over the MR's series")
    p.add_argument("--min-effect", type=float, default=defaults.min_effect["latency"],
                   help="relative effect below which a series never fails")
    p.add_argument("--markdown", type=Path, help="write the A/B section (Markdown) here")
    p.add_argument("--html", type=Path, help="write the A/B section (HTML fragment) here")
    p.set_defaults(func=run)


def link_findings(path: Path) -> dict:
    """The bad nodes and links of a link run's results file (its linktest series)."""
    found = inputs.read_json(path, "link run results file")
    flagged = link_series.record_findings(r for r in found if isinstance(r, dict)) if isinstance(found, list) else None
    if flagged is None:
        raise InputError(f"link run results file {path} holds no linktest series (is it a link run's results.json?)")
    return flagged


def run(args: argparse.Namespace) -> int:
    # Rejected input must not leave an earlier A/B section in --markdown and --html.
    with outputs.replaced_on_failure("ab", markdown=[args.markdown], html=[args.html]):
        return _judge(args)


def _judge(args: argparse.Namespace) -> int:
    records = inputs.read_json(args.results, "A/B results file")
    if not isinstance(records, list) or not all(isinstance(r, dict) for r in records):
        raise InputError(f"A/B results file {args.results} is not a list of result records")
    for index, record in enumerate(records):
        samples = record.get("samples") if isinstance(record.get("samples"), list) else []
        inputs.check_physical(str(record.get("metric", "")), record.get("value"), samples, record.get("reference"),
                              f"A/B results file {args.results}: record #{index}")
    config = paired.PairedConfig(alpha=args.alpha, min_effect={m: args.min_effect for m in METRICS})
    noise = inputs.read_json(args.noise_probe, "noise probe record") if args.noise_probe else None
    links = link_findings(args.links) if args.links else None
    if noise is not None:
        noise = {node: (float(eff), (float(band[0]), float(band[1]))) for node, (eff, band) in noise.items()}
    try:
        verdicts, causes = judge.judge_run(records, args.db, config, noise, links)
    except KeyError as err:
        raise InputError(f"A/B results file {args.results} has a record without {err}") from None
    for row in ab_report.rows(verdicts, causes):
        print(f"{row.verdict:<12} {row.series:<48} {row.effect_text:>7} {row.interval_text:>17}  "
              f"{row.pairs} pairs")
        if row.verdict != "pass":
            print(f"{'':<12} {row.cause or row.reason}")
    if args.markdown:
        Path(args.markdown).parent.mkdir(parents=True, exist_ok=True)
        Path(args.markdown).write_text(ab_report.markdown(verdicts, causes, config))
    if args.html:
        Path(args.html).parent.mkdir(parents=True, exist_ok=True)
        Path(args.html).write_text(ab_report.html(verdicts, causes, config))
    code = compose.exit_code_of_paired(verdicts)
    print(f"exit {code}")
    return code
