"""Launching ReFrame for a run: its environment, command line, check files and topology, and
the run of it under the run's signal handling (its children and Slurm jobs recorded)."""
from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Optional, Sequence

from mpiregress import paths
from mpiregress.cluster.local import slurm_reachable
from mpiregress.errors import CANCELLED, InfrastructureError, InputError
from mpiregress.families.coll import algorithms, plan
from mpiregress.model import systems, toolchain
from mpiregress.run import cancel
from mpiregress.run import folder as run_folder
from mpiregress.run.options import (
    COLL_SUBSETS,
    LINKS_SUBDIR,
    RunOptions,
    log,
)

SITE_CONFIG = paths.checks_dir() / "config" / "site.yaml"


COLL_CHECK_FILE = "osu_coll.py"


def check_files(families: Sequence[str]) -> list[Path]:
    """The check files: every Python file in checks/ that registers a ReFrame test.

    The collective check declares only the sweep subsets of the requested families
    (``MPIREGRESS_COLL_SUBSETS``); without one it declares none and ReFrame would print a
    warning about an undefined parameter in every run's log, so it is not loaded then.
    """
    found = sorted(p for p in paths.checks_dir().glob("*.py") if "@rfm.simple_test" in p.read_text())
    if not any(f in COLL_SUBSETS for f in families):
        found = [p for p in found if p.name != COLL_CHECK_FILE]
    return found


DRYRUN_MODULES = paths.REPO_ROOT / "ci" / "dryrun-modules"


LMOD_INIT = Path("/usr/share/lmod/lmod/init/bash")


def reframe() -> str:
    here = Path(sys.executable).parent / "reframe"
    found = str(here) if here.exists() else shutil.which("reframe")
    if not found:
        raise InfrastructureError("ReFrame is not installed in this environment: run ci/setup.sh")
    return found


def detect_topologies(opts: RunOptions, topology_dir: Path, env: dict[str, str]) -> None:
    """Write this host's topology where ReFrame looks for each partition of the run that says
    ``topology: detect`` (systems/<name>.yaml); partitions with a recorded topology are left alone."""
    for part in systems.get(opts.system).partitions_named(opts.partition):
        if not part.detects_topology:
            continue
        target = topology_dir / part.key / "processor.json"
        target.parent.mkdir(parents=True, exist_ok=True)
        done = subprocess.run([reframe(), f"--detect-host-topology={target}"], env=env,
                              capture_output=True, text=True, timeout=120)
        if done.returncode != 0 or not target.exists():
            raise InfrastructureError(f"could not detect this host's topology: {done.stderr.strip()[-400:]}")


def environment(opts: RunOptions, topology_dir: Path, manifest_dir: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update({
        "MPIREGRESS_MANIFEST_DIR": str(manifest_dir),
        "MPIREGRESS_BASELINES_DIR": str(opts.baselines_dir),
        "MPIREGRESS_TOPOLOGY_DIR": str(topology_dir),
        "MPIREGRESS_CHECKS_DIR": str(paths.checks_dir()),
        "MPIREGRESS_PERFLOG_DIR": str(opts.report_dir / "perflogs"),
        "MPIREGRESS_REFRAME_LOG": str(opts.report_dir / "reframe.log"),
        # Checks that write files of their own (the noise family's spectra) put them under the report.
        "MPIREGRESS_REPORT_DIR": str(opts.report_dir),
        # The check file imports mpiregress from this checkout, whatever the caller's cwd.
        "PYTHONPATH": os.pathsep.join(filter(None, [str(paths.REPO_ROOT), env.get("PYTHONPATH")])),
        "MPIREGRESS_COLL_SUBSETS": ",".join(COLL_SUBSETS[f] for f in opts.families if f in COLL_SUBSETS),
        # The link matrix's artifacts (matrix, heatmap, bad-links CSV), one folder per partition and method.
        "MPIREGRESS_LINKS_DIR": str(opts.report_dir / LINKS_SUBDIR),
    })
    if opts.dry_run:
        env["MODULEPATH"] = os.pathsep.join(filter(None, [env.get("MODULEPATH"), str(DRYRUN_MODULES)]))
    return env


def reframe_command(opts: RunOptions, methods: list[str], env: dict[str, str],
                     staging: Optional[Path] = None, job_options: Sequence[str] = (),
                     extra: Sequence[str] = ()) -> list[str]:
    """ReFrame's command line; its JSON and JUnit reports go to ``staging`` (default: the report folder);
    ``extra`` arguments (an A/B round's series filter and nodes) come after the run's own."""
    system = f"{opts.system}:{opts.partition}" if opts.partition else opts.system
    reports = staging or opts.report_dir
    cmd = [reframe(), "-C", str(SITE_CONFIG), "--system", system,
           "--prefix", str(opts.report_dir / "reframe"),
           "--report-file", str(reports / "reframe-report.json"),
           "--report-junit", str(reports / "junit.xml"),
           *job_options,
           "-t", f"^({'|'.join(methods)})$", "-t", f"^({'|'.join(opts.families)})$",
           "--dry-run" if opts.dry_run else "-r"]
    for chosen in (opts.metrics, opts.placements, opts.collectives, opts.algorithms):
        if chosen:
            cmd += ["-t", f"^({'|'.join(chosen)})$"]
    if opts.iterations:
        cmd += ["-S", f"iterations={opts.iterations}"]
    for setting in opts.setvars:
        cmd += ["-S", setting]
    if opts.exclude_nodes:
        cmd += ["-J", f"exclude={','.join(opts.exclude_nodes)}"]   # ReFrame: #SBATCH --exclude=...
    for check in check_files(opts.families):
        cmd += ["-c", str(check)]
    if opts.repeat > 1:
        cmd += ["--repeat", str(opts.repeat)]
    cmd += list(extra)
    if env.get("MPIREGRESS_IN_ALLOCATION"):
        # One allocation, its nodes shared by every check: benchmarks must not overlap.
        cmd += ["--exec-policy=serial"]
    if systems.get(opts.system).uses_lmod and not env.get("LMOD_CMD") and LMOD_INIT.exists():
        # The clusters' programming environments load modules; a login shell has Lmod
        # ready, a bare CI shell may not.
        return ["bash", "-c", f"source {LMOD_INIT} && exec {shlex.join(cmd)}"]
    return cmd


def check_collective_names(opts: RunOptions, tc: toolchain.Toolchain) -> None:
    """--collectives and --algorithms name what the sweep and the toolchain's OpenMPI have, or one sentence."""

    for kind, chosen, known in (("collective", opts.collectives or [], plan.COLLECTIVES),
                                ("algorithm", opts.algorithms or [],
                                 sorted({name for coll in plan.COLLECTIVES
                                         for name in algorithms.load(tc.mpi["version"]).names(coll)}))):
        unknown = [c for c in chosen if c not in known]
        if unknown:
            raise InputError(f"unknown {kind}(s) {', '.join(unknown)} for OpenMPI {tc.mpi['version']} "
                             f"(known: {', '.join(known)})")


def skipped_check_files(output: str) -> list[str]:
    """Check files ReFrame refused to load, with its one-line reason ("skipping test file 'X': ...")."""
    return [line.split("skipping test file", 1)[1].strip(" :") for line in output.splitlines()
            if "skipping test file" in line]


def check_reachable(env: dict[str, str]) -> None:

    ok, message = slurm_reachable(env)
    if not ok:
        raise InfrastructureError(message)


def cancelled_sentence(err: BaseException) -> str:
    """The report's sentence for a run cancelled by a signal (or Ctrl-C)."""
    said = err.sentence if isinstance(err, cancel.Cancelled) else "interrupted (Ctrl-C or SIGINT)"
    return f"{said}: the run cancelled its Slurm jobs and stopped ReFrame; nothing was judged"


def reframe_run(opts: RunOptions, methods: list[str], env: dict[str, str],
                 folder: run_folder.RunFolder, extra: Sequence[str] = (),
                 lost: Optional[list[str]] = None) -> "subprocess.Popen[str]":
    """Run ReFrame as a child that cannot outlive the run, its reports staged privately and adopted.

    ReFrame writes its JSON and JUnit reports when it ends, also when it is stopped: they go to a
    private folder and are moved into the report folder by the run itself, so nothing reaches the
    folder behind the run's back. On any exit by exception (a signal included) ReFrame's group is
    stopped and the run's Slurm jobs are cancelled by id before the exception travels on. A node lost
    under one of the run's jobs (Slurm's words, appended to ``lost``) stops ReFrame early: the rest of
    the run could only wait on that node.
    """
    record = None if opts.dry_run else folder.path / cancel.JOBS_FILE
    children = cancel.RunChildren(record, env, watch=not opts.dry_run)
    staging = cancel.private_folder(folder.path, cancel.STAGING_NAME, "mpiregress-reframe-")
    cmd = reframe_command(opts, methods, env, staging, children.job_options(), extra)
    log("running " + shlex.join(cmd))
    try:
        with open(opts.report_dir / "reframe.out", "w") as out:
            proc = children.popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                  cwd=paths.REPO_ROOT)
            assert proc.stdout is not None
            for line in proc.stdout:
                sys.stdout.write(line)
                out.write(line)
            proc.wait()
        children.finish()
        if children.lost is not None:
            folder.step(f"ReFrame stopped: {children.lost}")
            if lost is not None:
                lost.append(children.lost)
        return proc
    except BaseException as err:
        if isinstance(err, (cancel.Cancelled, KeyboardInterrupt)):
            # Said before anything that can take seconds: a SIGKILL may follow the signal within seconds.
            folder.fail(cancelled_sentence(err), CANCELLED, state="cancelled")
        for sentence in children.stop():
            folder.step(sentence)
        raise
    finally:
        # ReFrame's reports are the run's to adopt; its JSON is kept either way (nothing measured is lost),
        # its JUnit as reframe-junit.xml: junit.xml is always the run's own (the verdict's, or its failure).
        for name, kept in (("reframe-report.json", "reframe-report.json"), ("junit.xml", "reframe-junit.xml")):
            if (staging / name).exists():
                with contextlib.suppress(OSError):
                    shutil.move(str(staging / name), str(opts.report_dir / kept))
        shutil.rmtree(staging, ignore_errors=True)
