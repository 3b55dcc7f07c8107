"""``mpiregress confirm``: the schedule's confirm-before-failing (issue 13 §3).

The weekly run has no A to pair with: the history gate judges it, and its false alarms
come mostly from the allocation. Every series the gate calls a regression is measured
again (``mpiregress run``, the same k) in a fresh allocation that excludes the first
run's nodes (Slurm ``--exclude``, through ReFrame's job options), and judged again;
only a regression that reproduces gates, one that vanished is "transient on node X"
(:mod:`mpiregress.verdict.ab.confirm`). Prints and writes each outcome and the cost.

Exit codes are the verdict's (:mod:`mpiregress.verdict.compose`, event "schedule"): 0 nothing to
confirm, 5 a transient regression (needs a look), 1 a regression reproduced, 2 error (a series could
not be measured again, bad input), 3 Slurm.
"""
from __future__ import annotations

import argparse
import os
import subprocess
from pathlib import Path
from typing import Optional, Sequence

from mpiregress import paths
from mpiregress.commands.compare import add_gate_options, gate_config
from mpiregress.history.store import History, open_existing, read_results_file
from mpiregress.model.names import PT2PT
from mpiregress.model.results import Result
from mpiregress.run import cancel, outputs
from mpiregress.run.conductor import run as run_checks
from mpiregress.run.options import RunOptions
from mpiregress.verdict import compose
from mpiregress.verdict.ab import confirm
from mpiregress.verdict.history_gate import GateConfig, Verdict, judge, load_baselines


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("confirm", help="schedule: measure the gate's regressions again away from their nodes; "
                                       "only a reproduced one fails")
    add_gate_options(p)
    p.add_argument("--report-dir", type=Path, required=True, help="where the re-measurement's reports go")
    p.add_argument("--iterations", type=int, help="measured iterations (default: the check's)")
    p.add_argument("--markdown", type=Path, help="write the outcomes and the cost here")
    p.set_defaults(func=run)


def partition_nodes(partition: str) -> Optional[list[str]]:
    """The partition's node names as Slurm lists them (None when Slurm cannot say)."""
    try:
        out = subprocess.run(["sinfo", "-h", "-N", "-p", partition, "-o", "%N"], capture_output=True, text=True,
                             timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    nodes = sorted(set(out.stdout.split()))
    return nodes if out.returncode == 0 and nodes else None


def _remeasure(first: Sequence[Result], plan: confirm.RemeasurePlan, report_dir: Path,
               iterations: Optional[int]) -> list[Result]:
    """Run the plan's point-to-point series again, one run per (system, partition), excluding the plan's nodes."""
    again: list[Result] = []
    groups: dict[tuple[str, str], list] = {}
    for key in plan.series:
        groups.setdefault((key.system, key.partition), []).append(key)
    for (system, partition), keys in sorted(groups.items()):
        pt2pt = [k for k in keys if k.benchmark in {spec.benchmark for spec in PT2PT.values()}]
        if not pt2pt:
            continue
        folder = Path(report_dir) / f"{system}-{partition}"
        params = [dict(k.parameters) for k in pt2pt]
        run_checks(RunOptions(
            system=system, partition=partition,
            report_dir=Path(os.path.abspath(folder)),
            methods=sorted({k.method for k in pt2pt}), metrics=sorted({k.metric for k in pt2pt}),
            placements=sorted({str(p.get("placement")) for p in params}), families=["pt2pt"],
            repeat=max(plan.samples, 1), iterations=iterations, build_missing=False,
            allow_missing_baselines=True, exclude_nodes=list(plan.exclude)))
        again += read_results_file(folder / "results.json")
    return again


def confirmations(results: Sequence[Result], history: Optional[History], books: dict, config: GateConfig,
                  report_dir: Path, iterations: Optional[int] = None, exclude_run: Optional[str] = None
                  ) -> tuple[list[Verdict], list[confirm.Confirmation], str]:
    """The history gate's verdicts, the outcome of re-measuring each regression, and the Markdown saying so."""
    first = judge(results, history, books, config, exclude_run=exclude_run)
    samples = max((len(r.samples) or 1 for r in results), default=1)
    first_nodes = {r.key(): r.nodelist for r in results}
    partitions = {r.partition for r in results}
    nodes = partition_nodes(next(iter(partitions))) if len(partitions) == 1 else None
    plan = confirm.remeasure_plan(first, first_nodes, samples, nodes)
    again = _remeasure(results, plan, report_dir, iterations) if plan.series else []
    second = judge(again, history, books, config) if again else []
    pt2pt = {s.benchmark for s in PT2PT.values()}
    outcomes = [c if c.key.benchmark in pt2pt else
                confirm.Confirmation(c.key, confirm.REPRODUCED, f"{c.key.name()} was not measured again (only "
                                     f"point-to-point series are confirmed yet): the history gate's regression stands")
                for c in confirm.confirm(first, second, plan)]
    cost = confirm.cost(plan, len({r.key() for r in results}), samples)
    lines = [f"- {c.outcome}: {c.sentence}" for c in outcomes]
    excluded = ", ".join(plan.exclude) or "none (the partition has no other nodes)"
    text = "\n".join(["### Confirmation in a fresh allocation", "",
                      f"Series the history gate failed: {len(plan.series)}; nodes excluded: {excluded}.", "",
                      *lines, "", f"Cost: {cost.sentence()}.", ""])
    return first, outcomes, text


def run(args: argparse.Namespace) -> int:
    # Rejected input, a failed re-measurement or a cancelled one: --markdown says so, never an old outcome.
    # A signal between two re-measurements ends confirm like one during a run (exit 6, no stale outcome).
    with cancel.signals_cancel(), outputs.replaced_on_failure("confirm", markdown=[args.markdown]):
        return _confirm(args)


def _confirm(args: argparse.Namespace) -> int:
    config = gate_config(args)
    results = read_results_file(args.results)
    books = load_baselines([r.system for r in results], args.baselines_dir or paths.baselines_dir())
    history = open_existing(args.db)
    try:
        first, outcomes, text = confirmations(results, history, books, config, Path(args.report_dir),
                                              args.iterations, args.exclude_run)
    finally:
        if history:
            history.close()
    print(text)
    if args.markdown:
        Path(args.markdown).parent.mkdir(parents=True, exist_ok=True)
        Path(args.markdown).write_text(text)
    return compose.exit_code(compose.compose("schedule", compose.Evidence(history=first, confirmations=outcomes)))
