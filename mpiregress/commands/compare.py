"""``mpiregress compare``: the MR gate. Judges a results.json against the history; exit 1 regression, 2 error."""
from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Optional

from mpiregress import paths, report
from mpiregress.builds import differences
from mpiregress.errors import InputError
from mpiregress.history import url as history_url
from mpiregress.history.store import open_existing, read_results_file
from mpiregress.model import manifest, toolchain
from mpiregress.report import junit, markdown, verdict_text
from mpiregress.run import outputs
from mpiregress.verdict import cross_method as consistency
from mpiregress.verdict import policy
from mpiregress.verdict.compose import Evidence
from mpiregress.verdict.history_gate import GateConfig, load_baselines


def add_gate_options(p: argparse.ArgumentParser) -> None:
    """Options shared by compare and report: where the inputs are and the gate's knobs."""
    p.add_argument("results", type=Path, help="results.json of the run to judge")
    p.add_argument("--db", default=None, help=history_url.DB_HELP)
    p.add_argument("--baselines-dir", type=Path, default=None, help="default: $MPIREGRESS_BASELINES_DIR or baselines/")
    p.add_argument("--exclude-run", help="a run id already imported from these same results (not compared with itself)")
    defaults = GateConfig()
    p.add_argument("--last", type=int, default=defaults.last_runs, help="accepted runs that give the level (N)")
    p.add_argument("--min-runs", type=int, default=defaults.min_runs,
                   help="fewer accepted runs than this: judge by the baselines file")
    p.add_argument("--min-samples", type=int, default=defaults.min_samples, help="new samples needed per series (k)")
    p.add_argument("--z", type=float, default=defaults.z, help="one-sided threshold in robust sigmas")
    p.add_argument("--event", choices=policy.event_names(), default="history",
                   help="the pipeline event whose gating rules decide (mpiregress/verdict/gating.yaml; default: "
                        "history, the history gate as it stands)")


# Inclusive ranges of the gate's knobs, checked before anything is read: a zero --last has no level,
# a zero --min-samples would judge a series with no new sample, a z of 0 fails every wobble.
GATE_RANGES: dict[str, tuple[float, float]] = {
    "--last": (1, 1000), "--min-runs": (0, 1000), "--min-samples": (1, 1000), "--z": (0.5, 20.0)}


def gate_config(args: argparse.Namespace) -> GateConfig:
    """The gate's knobs from the command line, or InputError naming the one out of range."""
    values = {"--last": args.last, "--min-runs": args.min_runs, "--min-samples": args.min_samples, "--z": args.z}
    for option, value in values.items():
        low, high = GATE_RANGES[option]
        if not (math.isfinite(value) and low <= value <= high):
            raise InputError(f"{option} {value!r} is out of range: give a number from {low:g} to {high:g}")
    return GateConfig(last_runs=args.last, min_runs=args.min_runs, min_samples=args.min_samples, z=args.z)


def _stacks() -> dict[str, str]:
    """How each build's recorded MPI stack differs from the toolchain's (none when there are no manifests)."""

    return consistency.stack_differences(manifest.find_all(paths.manifest_dir()),
                                         toolchain.load(toolchain.default_path()))


def _builds() -> dict[frozenset[str], str]:
    """How the builds of the run's methods differ from each other (flags, MCA parameters), from their manifests."""

    return differences.between(manifest.find_all(paths.manifest_dir()))


def build_report(args: argparse.Namespace, with_trends: bool,
                 evidence: Optional[Evidence] = None) -> report.ReportData:
    config = gate_config(args)
    results = read_results_file(args.results)
    books = load_baselines([r.system for r in results], args.baselines_dir or paths.baselines_dir())
    db_path = history_url.resolve(args.db)
    shown = history_url.display(db_path)
    history = open_existing(db_path)
    try:
        data = report.build(results, history, books, config, results_source=str(args.results),
                            history_source=shown if history else "", exclude_run=args.exclude_run,
                            with_trends=with_trends, stacks=_stacks(), builds=_builds(), event=args.event,
                            evidence=evidence)
    finally:
        if history:
            history.close()
    if history is None:
        data.notes.insert(0, f"History file {shown} does not exist: judged against the baselines files only.")
    return data


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("compare", help="the MR gate: judge results against the history (exit 1 regression, 2 error)")
    add_gate_options(p)
    p.add_argument("--markdown", type=Path, help="write the MR summary here")
    p.add_argument("--junit", type=Path, help="write JUnit XML here (one testcase per series)")
    p.set_defaults(func=run)


def print_table(data: report.ReportData) -> None:
    print(f"{'verdict':<11} {'series':<48} {'new':>10} {'reference':>10} {'change':>7} {'band':>6}  basis")
    for v in data.verdicts:
        new = "-" if v.value is None else f"{v.value:.4g}"
        ref = "-" if v.reference is None else f"{v.reference:.4g}"
        change = "-" if v.effect is None else f"{v.effect:+.1%}"
        band = "-" if v.band is None else f"{v.band:.1%}"
        print(f"{v.verdict:<11} {v.name():<48} {new:>10} {ref:>10} {change:>7} {band:>6}  {v.basis}")
        if v.verdict != "pass":
            print(f"{'':<11} {v.reason}")
        if data.cause(v):
            print(f"{'':<11} likely cause: {data.cause(v)}")
    for note in data.notes:
        print(f"note: {note}")
    for finding in data.findings:
        print(f"cross-method: {finding.sentence()}")
    print("history gate: " + " ".join(f"{n} {k}" for k, n in data.counts.items() if n))
    print(verdict_text.headline(data.pipeline_verdict))


def run(args: argparse.Namespace) -> int:
    # Rejected input must not leave the previous run's "pass" in --markdown and --junit.
    with outputs.replaced_on_failure("compare", markdown=[args.markdown], junit=[args.junit]):
        data = build_report(args, with_trends=False)
        print_table(data)
        if args.markdown:
            markdown.write(data, args.markdown)
        if args.junit:
            junit.write(data, args.junit)
    return data.exit_code
