"""``mpiregress run``: the pipeline's main job (checks on Slurm, judged against baselines)."""
from __future__ import annotations

import argparse
import os
from pathlib import Path

from mpiregress import paths
from mpiregress.errors import InputError
from mpiregress.model import toolchain
from mpiregress.model.names import FAMILIES, SYSTEMS
from mpiregress.run.conductor import run as run_checks
from mpiregress.run.options import RunOptions
from mpiregress.verdict import policy


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("run", help="run the OSU checks on a system's Slurm and judge them against baselines")
    p.add_argument("--system", required=True, choices=SYSTEMS)
    p.add_argument("--partition", help="one partition only (default: all of the system's)")
    p.add_argument("--methods", help="comma-separated build methods; named methods must produce a result "
                                      "(default: every method, skipped where it has no build)")
    p.add_argument("--metrics", help="comma-separated metrics (default: latency,bandwidth)")
    p.add_argument("--placements", help="comma-separated placements (default: all four)")
    p.add_argument("--families", help=f"comma-separated families of checks, of {', '.join(FAMILIES)} (default: "
                                       "the system's own, systems/<name>.yaml; coll-sweep and pt2pt-sweep are "
                                       "the weekly sweeps)")
    p.add_argument("--collectives", help="comma-separated collectives (default: every one of the sweep)")
    p.add_argument("--algorithms", help="comma-separated coll/tuned algorithm names, 'default' included "
                                         "(default: every one of the subset)")
    p.add_argument("--iterations", type=int, help="measured iterations per check (default: 1000)")
    p.add_argument("--setvar", action="append", default=[], metavar="[CHECK.]NAME=VALUE",
                   help="set a check variable (ReFrame -S), repeatable; e.g. LinktestCheck.nodes=64, "
                        "LinktestCheck.nodelist=aion-[0001-0064] (checks/linktest.py)")
    p.add_argument("--report-dir", type=Path, help="where reports go (default: reports/<system>)")
    p.add_argument("--dry-run", action="store_true", help="write the job scripts, submit nothing")
    p.add_argument("--repeat", default="1", help="measure each check k times (median judged); 'auto': k from "
                                                  "the nodes' latest noise in the history (noise.verdict.repeats_for)")
    p.add_argument("--manifest-dir", type=Path, default=None)
    p.add_argument("--baselines-dir", type=Path, default=None)
    p.add_argument("--toolchain", type=Path, default=None)
    p.add_argument("--allow-missing-baselines", action="store_true",
                   help="measure series that have no baseline without failing (they are reported unjudged)")
    p.add_argument("--no-build", action="store_true",
                   help="systems with builds: on_demand (local): do not build OSU when no usable build exists "
                   "(pipeline jobs pass it: their build jobs built)")
    p.add_argument("--source-mirror", type=Path, default=None,
                   help="folder with osu-micro-benchmarks-7.2.tar.gz (default: $OSU_SOURCE_MIRROR)")
    p.add_argument("--sha256", default=None, help="accept a site tarball with this sha256 (default: $OSU_SHA256)")
    p.add_argument("--ab-against", metavar="DIR|auto|SAME", default=None,
                   help="A/B run of a toolchain MR: B = --manifest-dir (the MR's builds), A = the target branch's "
                        "builds in DIR, or 'auto' (the system's manifest store, else built at the merge base); "
                        "A and B alternate in one job per series, judged by their pairs. 'SAME': an A/A run, A is "
                        "B's own build (give the target branch's build as --manifest-dir): every alarm is false")
    p.add_argument("--ab-pairs", type=int, default=None,
                   help="A/B pairs per series at the first look (default: the system's ab.initial_pairs, 5)")
    p.add_argument("--ab-max-pairs", type=int, default=None,
                   help="at most this many pairs for a series still inconclusive beyond the minimum effect "
                        "(default: the system's ab.max_pairs, 11; equal to --ab-pairs: no extra rounds)")
    p.add_argument("--ab-branch", default=os.environ.get("CI_MERGE_REQUEST_TARGET_BRANCH_NAME")
                   or os.environ.get("CI_DEFAULT_BRANCH") or "main",
                   help="the branch A is built from (default: the MR's target branch, else main)")
    p.add_argument("--event", choices=policy.event_names(), default=None,
                   help="the pipeline event whose gating rules judge the run (verdict/gating.yaml; default: run, "
                        "or toolchain_mr with --ab-against)")
    p.add_argument("--measure-only", action="store_true",
                   help="a pipeline's measurement job: exit 0 when it measured (2 error, 3 infrastructure, 4 "
                        "nothing measured); the pipeline's verdict job judges (mpiregress verdict)")
    p.set_defaults(func=run)


def _list(value):
    return [item.strip() for item in value.split(",") if item.strip()] if value else None


def _repeat(value: str) -> int:
    """--repeat k, or 1 for 'auto' (the runner chooses k before anything runs)."""
    if value == "auto":
        return 1
    try:
        return int(value)
    except ValueError:
        raise InputError(f"--repeat {value!r} is neither a whole number nor 'auto'") from None


def run(args: argparse.Namespace) -> int:
    mirror = args.source_mirror or (Path(os.environ["OSU_SOURCE_MIRROR"]) if os.environ.get("OSU_SOURCE_MIRROR")
                                    else None)
    opts = RunOptions(
        system=args.system, partition=args.partition,
        methods=_list(args.methods), metrics=_list(args.metrics), placements=_list(args.placements),
        families=_list(args.families) or [],
        collectives=_list(args.collectives), algorithms=_list(args.algorithms),
        iterations=args.iterations, setvars=list(args.setvar),
        # Not resolved: a report folder that is a symlink must reach the run to be refused there.
        report_dir=Path(os.path.abspath(args.report_dir or paths.reports_dir() / args.system)),
        dry_run=args.dry_run, repeat=_repeat(args.repeat), repeat_auto=args.repeat == "auto",
        manifest_dir=(args.manifest_dir or paths.manifest_dir()).resolve(),
        baselines_dir=(args.baselines_dir or paths.baselines_dir()).resolve(),
        toolchain_file=(args.toolchain or toolchain.default_path()).resolve(),
        allow_missing_baselines=args.allow_missing_baselines, build_missing=not args.no_build,
        source_mirror=mirror, sha256_override=args.sha256 or os.environ.get("OSU_SHA256") or None,
        pipeline=os.environ.get("CI_PIPELINE_ID", ""),
        ab_against=args.ab_against, ab_pairs=args.ab_pairs, ab_max_pairs=args.ab_max_pairs,
        ab_branch=args.ab_branch,
        event=args.event or ("toolchain_mr" if args.ab_against else "run"), measure_only=args.measure_only,
    )
    return run_checks(opts)
