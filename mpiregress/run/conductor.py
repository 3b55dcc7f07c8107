"""``mpiregress run``: prepare the system, run the ReFrame checks, judge the results.

The same function runs on a laptop's one-host Slurm, in CI and on Iris/Aion;
only the system name and the environment differ.
"""
from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import Any, Optional

from mpiregress import paths
from mpiregress.cluster.local import LocalCluster
from mpiregress.errors import CANCELLED, ERROR, InfrastructureError, InputError, MpiRegressError
from mpiregress.history import url as history_url
from mpiregress.history.store import open_history
from mpiregress.model import baselines, results, systems, toolchain
from mpiregress.model.systems import get
from mpiregress.report import summary, verdict_text
from mpiregress.run import cancel, reframe_report
from mpiregress.run import folder as run_folder
from mpiregress.run.ab.looks import (
    ab_more_rounds,
    ab_verdict,
    adopt_junit,
    prepare_ab,
)
from mpiregress.run.infrastructure import classify_infrastructure, slurm_faults
from mpiregress.run.on_demand_builds import check_binaries, ensure_builds, planned_manifests
from mpiregress.run.options import (
    RunOptions,
    check_options,
    commit,
    log,
)
from mpiregress.run.reframe_launch import (
    cancelled_sentence,
    check_collective_names,
    check_reachable,
    detect_topologies,
    environment,
    reframe_run,
    skipped_check_files,
)
from mpiregress.verdict import band, compose, cross_method
from mpiregress.verdict import node_noise as nodehistory
from mpiregress.verdict.ab import evidence as ab_evidence
from mpiregress.verdict.history_gate import GateConfig


def run(opts: RunOptions) -> int:
    """Run the checks for ``opts.system`` and return the exit code of the verdict.

    The run owns its report folder (locked, cleared, written atomically); a failure
    leaves reports that say so. Infrastructure faults (Slurm's words) exit 3.
    """
    description = "mpiregress " + shlex.join(sys.argv[1:] if sys.argv[1:2] == ["run"] else
                                             ["run", "--system", opts.system])
    with cancel.signals_cancel(), run_folder.RunFolder(opts.report_dir, description) as folder:
        cluster = None
        try:
            methods = check_options(opts)
            folder.step("options checked")
            if systems.get(opts.system).managed_cluster and not opts.dry_run:

                cluster = LocalCluster(system=opts.system)
                cluster.claim(f"report folder {opts.report_dir}")
            return _run(opts, methods, folder, cluster)
        except MpiRegressError as err:
            folder.fail(str(err), err.exit_code)
            raise
        except (cancel.Cancelled, KeyboardInterrupt) as err:
            # ReFrame and the Slurm jobs are already stopped (reframe_run): the report again, with what was
            # stopped, then the locks.
            folder.fail(cancelled_sentence(err), CANCELLED, state="cancelled")
            raise
        except Exception as err:
            folder.fail(f"unexpected {type(err).__name__}: {err}", ERROR)
            raise
        finally:
            if cluster is not None:
                cluster.release()


def _run(opts: RunOptions, methods: list[str], folder: run_folder.RunFolder, cluster: Optional[Any]) -> int:
    """The run's steps, top to bottom: inputs, the machine ready, ReFrame, then the judgement and its reports."""
    tc, refs = _read_inputs(opts, folder)
    notes = _choose_repeat(opts, folder)
    env, manifest_dir, unavailable = _ready(opts, tc, methods, folder, cluster, notes)
    found_a = prepare_ab(opts, methods, env, manifest_dir, folder) if opts.ab_against else None
    loaded, lost = _measure(opts, methods, env, folder, tc)
    if found_a is not None and not opts.dry_run:
        loaded, rounds = ab_more_rounds(loaded, opts, methods, env, folder, tc.name)
        return ab_verdict(loaded, opts, folder, env, found_a, rounds)
    found = results.aggregate(loaded)
    folder.step(f"ReFrame report read: {len(found)} result(s)")
    if opts.dry_run:
        code = _dry_run_verdict(found, opts)
        folder.write_status("finished", code, "dry run: job scripts written, nothing submitted")
        return code
    classify_infrastructure(found, env, lost[0] if lost else None)
    judged, problems = _judge(found, refs, opts, unavailable)
    return _report(found, judged, problems, opts, folder, notes)


def _read_inputs(opts: RunOptions, folder: run_folder.RunFolder) -> tuple[toolchain.Toolchain, baselines.Baselines]:
    """The toolchain and the system's baselines, which must name the same toolchain."""
    tc = toolchain.load(opts.toolchain_file)
    check_collective_names(opts, tc)
    refs = baselines.for_system(opts.system, opts.baselines_dir)
    if refs.toolchain != tc.name:
        raise InputError(f"baselines file {refs.path}: toolchain: is {refs.toolchain!r} but the run uses "
                         f"toolchain {tc.name!r} ({tc.path})")
    folder.step(f"read toolchain {tc.path} and baselines {refs.path}")
    return tc, refs


def _choose_repeat(opts: RunOptions, folder: run_folder.RunFolder) -> list[str]:
    """``--repeat auto`` resolved from the nodes' noise; the run's notes so far."""
    notes: list[str] = []
    if opts.repeat_auto:
        opts.repeat, why = choose_repeat(opts)
        notes.append(f"--repeat auto: {opts.repeat} repetition(s): {why}")
        log(notes[-1])
        folder.step(notes[-1])
    return notes


def _ready(opts: RunOptions, tc: toolchain.Toolchain, methods: list[str], folder: run_folder.RunFolder,
           cluster: Optional[Any], notes: list[str]) -> tuple[dict[str, str], Path, dict[str, str]]:
    """The machine ready to run: ReFrame's environment, the topologies, the project's Slurm up, the builds
    there (built on demand where the system says so) and checked; the methods that cannot build here."""
    topology_dir = paths.checks_dir() / "topology"
    manifest_dir = opts.manifest_dir
    env = environment(opts, topology_dir, manifest_dir)
    detect_topologies(opts, topology_dir, env)
    if cluster is not None:
        cluster.start()
        env.update(cluster.client_env())
        log(f"the project's Slurm is up (SLURM_CONF={env.get('SLURM_CONF')})")
        folder.step(f"the project's Slurm up ({cluster.state_dir})")
    unavailable: dict[str, str] = {}
    if systems.get(opts.system).builds_on_demand and opts.build_missing and not opts.dry_run:
        unavailable = ensure_builds(opts, tc, methods)
        notes += list(unavailable.values())
        folder.step(f"builds of OSU ready (systems/{opts.system}.yaml methods)")
    if opts.dry_run:
        manifest_dir = planned_manifests(opts, tc, methods)
        env["MPIREGRESS_MANIFEST_DIR"] = str(manifest_dir)
    else:
        check_binaries(manifest_dir, methods, opts)
        folder.step(f"build manifests in {manifest_dir} checked: their binaries exist and are executable")
        check_reachable(env)
    return env, manifest_dir, unavailable


def _measure(opts: RunOptions, methods: list[str], env: dict[str, str], folder: run_folder.RunFolder,
             tc: toolchain.Toolchain) -> tuple[list[results.Result], list[str]]:
    """ReFrame run and its report read; the nodes Slurm lost under the run's jobs (Slurm's words)."""
    report = opts.report_dir / "reframe-report.json"
    lost: list[str] = []
    proc = reframe_run(opts, methods, env, folder, lost=lost)
    folder.step(f"ReFrame ran (exit {proc.returncode}; its output is in reframe.out)")
    if not report.exists():
        fault = None if opts.dry_run else (lost[0] if lost else slurm_faults(env, {"*"}))
        if fault:
            raise InfrastructureError(f"ReFrame exited with code {proc.returncode} and wrote no report: {fault}")
        raise MpiRegressError(f"ReFrame exited with code {proc.returncode} and wrote no report; "
                              f"see {opts.report_dir / 'reframe.out'}")
    unloaded = skipped_check_files((opts.report_dir / "reframe.out").read_text(errors="replace"))
    if unloaded:
        # ReFrame only warns; a check file that did not load would silently measure nothing.
        raise InputError(f"ReFrame could not load {unloaded[0]}; see {opts.report_dir / 'reframe.out'}")
    loaded = reframe_report.load(report, tc.name, opts.commit or commit(), opts.pipeline, dry_run=opts.dry_run)
    return loaded, lost


def _judge(found: list[results.Result], refs: baselines.Baselines, opts: RunOptions,
           unavailable: dict[str, str]) -> tuple[compose.PipelineVerdict, list[str]]:
    """The run's one verdict: every value against its band, the methods against each other, causes from the
    run's own evidence; the problems of methods asked for that measured nothing."""
    band.apply_baselines(found, refs, opts.allow_missing_baselines, node_noise=_node_noise(found))
    # A method with no baseline yet is held against the others that measured the series (not an error).
    cross_method.adopt_unbaselined(found)
    # A method the system lists that cannot build on this machine (no Spack on PATH) is skipped with its
    # reason (the notes), not an error of a run that asked for the system's methods.
    problems = summary.require_methods(found, [m for m in opts.methods or [] if m not in unavailable])
    return compose.of_run(found, problems, opts.event, causes=ab_evidence.run_causes(found)), problems


def _report(found: list[results.Result], judged: compose.PipelineVerdict, problems: list[str], opts: RunOptions,
            folder: run_folder.RunFolder, notes: list[str]) -> int:
    """The verdict's reports written, the summary first; the exit code."""
    code = compose.exit_code(judged, opts.measure_only)
    title = f"MPI regression: {opts.system}" + (f":{opts.partition}" if opts.partition else "")
    print()
    print(summary.text_table(found))
    # The summary first: if results.json cannot be written, the table still survives.
    top = verdict_text.markdown(judged, heading="##", measure_only=opts.measure_only)
    folder.write("summary.md", summary.markdown(found, title, [], notes, top=top))
    adopt_junit(folder, opts, judged)
    try:
        folder.write("results.json", results.dump(found))
    except InputError as err:
        raise InputError(f"{err}; the {len(found)} result(s) are in {opts.report_dir / 'summary.md'} and "
                         f"{opts.report_dir / 'reframe-report.json'}") from None
    folder.write("verdict.json", json.dumps(judged.to_dict(), indent=2) + "\n")
    for problem in problems:
        print(f"mpiregress run: error: {problem}", file=sys.stderr)
    print(verdict_text.headline(judged, opts.measure_only))
    folder.write_status("finished", code)
    log(f"reports in {opts.report_dir} (reframe-report.json, junit.xml, results.json, summary.md, verdict.json); "
        f"exit {code}")
    return code


def _node_noise(found: list[results.Result]) -> dict[tuple[str, str], dict[str, list[float]]]:
    """Each measured partition's node noise history ({} per partition without a history file)."""

    partitions = sorted({(r.system, r.partition) for r in found})
    db = history_url.resolve(None)
    if not history_url.exists(db):
        return {where: {} for where in partitions}
    try:
        with open_history(db) as history:
            return {where: nodehistory.node_efficiencies(history, *where) for where in partitions}
    except (InputError, InfrastructureError) as err:
        # The measurements matter more than the noise rule: judge them without it, and say so.
        log(f"node noise history not read, so no result is reclassified as noisy: {err}")
        return {where: {} for where in partitions}


def choose_repeat(opts: RunOptions) -> tuple[int, str]:
    """``--repeat auto``: repetitions from the latest noise of the partitions' nodes in the history, and why."""

    tolerance = GateConfig().min_effect["latency"]
    db = history_url.resolve(None)
    partitions = [opts.partition] if opts.partition else [p.name for p in get(opts.system).partitions]
    latest: dict[str, float] = {}
    if history_url.exists(db):
        with open_history(db) as history:
            for partition in partitions:
                for node, values in nodehistory.node_efficiencies(history, opts.system, partition).items():
                    latest[f"{partition}/{node}"] = values[-1]
    return nodehistory.auto_repeats(latest, tolerance, history_url.display(db))


def _dry_run_verdict(found: list[results.Result], opts: RunOptions) -> int:
    scripts = sorted((opts.report_dir / "reframe" / "stage").rglob("rfm_job.sh"))
    errors = [r for r in found if r.status == "error"]
    log(f"dry run: {len(scripts)} job script(s) written under {opts.report_dir / 'reframe' / 'stage'}, "
         f"{sum(r.status == 'skip' for r in found)} skipped, {len(errors)} error(s)")
    for r in errors:
        print(f"mpiregress run: error: {r.key().name()}: {r.reason}", file=sys.stderr)
    return 2 if errors else (0 if scripts else 4)


# -- A/B run of a toolchain MR (issue 13) ---------------------------------------------------------


