"""``mpiregress cancel``: cancel the Slurm jobs a run recorded, when the run could not (killed outright).

A run records every Slurm job it submits in ``slurm-jobs.txt`` of its report folder, each tagged with
the run's token (:mod:`mpiregress.run.cancel`). The pipeline's run, A/B, link, noise and sweep jobs call
this in their ``after_script``, which GitLab runs also for a cancelled or timed-out job: the run gets
``--wait`` seconds to end on its own (it cancels its jobs itself on SIGTERM), then every recorded job
still queued under the run's token is cancelled by id. A job id now carrying another comment is never
touched. In CI (``CI_JOB_ID`` set) every queued job whose token names this CI job is cancelled too, found
without any record (an after_script whose checkout lost the reports still ends them). A run killed
outright (status.json "running", its folder's lock free) is marked cancelled (exit 6) in its folder.
Exit 0, also when there was nothing to cancel; 3 when Slurm cannot be asked.
"""
from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

from mpiregress import paths
from mpiregress.errors import INFRASTRUCTURE, OK
from mpiregress.run import folder as run_folder
from mpiregress.run.cancel import JOBS_FILE, JobRecord, cancel_jobs, ci_prefix, queued_jobs


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("cancel", help="cancel the Slurm jobs recorded by runs under report folders "
                                      "(the pipeline's after_script)")
    p.add_argument("folders", type=Path, nargs="*",
                   help=f"report folders to search for {JOBS_FILE} (default: $MPIREGRESS_REPORTS_DIR or reports/)")
    p.add_argument("--wait", type=float, default=30.0,
                   help="seconds a run still running gets to end (and cancel its own jobs) first (default 30)")
    p.set_defaults(func=run)


def _running(folder: Path, pid: int) -> bool:
    """Whether the run that wrote ``folder``'s record is still alive and says so in its status.json."""
    try:
        status = json.loads((folder / "status.json").read_text())
        os.kill(pid, 0)
    except (OSError, ValueError):
        return False
    return status.get("state") == "running" and status.get("pid") == pid


def _ci_jobs(prefix: str, env: dict[str, str]) -> int:
    """Cancel every queued job whose token names this CI job (``prefix``): found without any record, so
    an after_script whose checkout lost the reports still ends them."""
    queue = queued_jobs(env, timeout=60)
    if queue is None:
        print(f"mpiregress cancel: error: Slurm ({env.get('SLURM_CONF') or 'default configuration'}) cannot be "
              f"asked about the jobs of CI job {os.environ.get('CI_JOB_ID')}")
        return INFRASTRUCTURE
    mine = [j for j, c in queue.items() if c.startswith(prefix)]
    if mine:
        cancelled, left = cancel_jobs(mine, "", env, prefix=prefix)
        print(f"mpiregress cancel: cancelled Slurm job(s) {', '.join(cancelled)} of CI job "
              f"{os.environ.get('CI_JOB_ID')}" + (f"; still in the queue: {', '.join(left)}" if left else ""))
    return OK


def _conf(record: Path) -> str:
    try:
        return JobRecord.read(record).slurm_conf
    except OSError:
        return ""


def _mark_dead(folder: Path, said: str) -> None:
    """A run killed outright (status running, lock free) gets a folder that says cancelled, and why."""
    status = run_folder.dead_run(folder)
    if status is not None:
        message = (f"killed outright: the run (PID {status.get('pid', '?')}) ended without finishing; "
                   f"mpiregress cancel {said}")
        run_folder.mark_killed(folder, status, message)
        print(f"mpiregress cancel: {folder}: the run there was killed outright; its status.json now says cancelled")


def _files_named(roots: list[Path], name: str) -> list[Path]:
    """Every file ``name`` in one of ``roots`` or below it, sorted."""
    return sorted({p for root in roots if Path(root).is_dir()
                   for p in [*Path(root).glob(name), *Path(root).rglob(f"*/{name}")]})


def run(args: argparse.Namespace) -> int:
    roots = args.folders or [paths.reports_dir()]
    records = _files_named(roots, JOBS_FILE)
    prefix = ci_prefix()
    code = OK
    if prefix:
        # Where this CI job's runs submitted: the recorded Slurm configurations, else the caller's.
        confs = {c for c in (_conf(p) for p in records) if c and Path(c).exists()}
        for conf in sorted(confs) or [os.environ.get("SLURM_CONF", "")]:
            code = max(code, _ci_jobs(prefix, {**os.environ, **({"SLURM_CONF": conf} if conf else {})}))
    # A run killed before it recorded any job (still reading its inputs, building) left a status.json that
    # says "running" and nothing to cancel: its folder says cancelled all the same.
    for status in _files_named(roots, "status.json"):
        if not (status.parent / JOBS_FILE).exists():
            _mark_dead(status.parent, "it had submitted no Slurm job")
    if not records:
        print(f"mpiregress cancel: no {JOBS_FILE} under {', '.join(map(str, roots))}: nothing to cancel")
        return code
    for path in records:
        record = JobRecord.read(path)
        deadline = time.monotonic() + max(args.wait, 0.0)
        while _running(path.parent, record.pid) and time.monotonic() < deadline:
            time.sleep(1)
        env = dict(os.environ)
        if record.slurm_conf and Path(record.slurm_conf).exists():
            env["SLURM_CONF"] = record.slurm_conf
        if queued_jobs(env, timeout=60) is None:
            print(f"mpiregress cancel: error: Slurm cannot be asked about the jobs of {path}; "
                  f"recorded: {', '.join(record.jobs) or 'none'}")
            code = INFRASTRUCTURE
            _mark_dead(path.parent, f"could not ask Slurm about its recorded job(s) {', '.join(record.jobs) or 'none'}")
            continue
        cancelled, left = cancel_jobs(record.jobs, record.token, env)
        if cancelled:
            said = f"cancelled its Slurm job(s) {', '.join(cancelled)}"
            print(f"mpiregress cancel: {path}: cancelled Slurm job(s) {', '.join(cancelled)}"
                  + (f"; still in the queue: {', '.join(left)}" if left else ""))
        else:
            said = f"found none of its {len(record.jobs)} recorded Slurm job(s) still queued"
            print(f"mpiregress cancel: {path}: no job of this run is queued ({len(record.jobs)} recorded)")
        _mark_dead(path.parent, said)
    return code
