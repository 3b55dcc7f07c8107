"""Cancelling a real `mpiregress run` on the local Slurm: start it, signal it, see what is left.

Shared by ``tests/test_cancel.py`` and ``benchmarks/fault_matrix.py``. The run is started in a
session of its own, so "its process group" is exactly the run and what it started in its group.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from mpiregress.run.cancel import JOBS_FILE, JobRecord, cancel_jobs, process_group_members, queued_jobs

REPO = Path(__file__).resolve().parent.parent.parent

# Long enough that a job is RUNNING when the signal lands (one cross-node ping-pong: ~10-20 us).
LONG_RUN = ["--methods", "source", "--families", "pt2pt", "--metrics", "latency", "--placements", "cross_node",
            "--iterations", "20000000", "--no-build"]


@dataclass
class Cancellation:
    """What a signal to a running run left behind."""

    signal_name: str
    to_group: bool
    code: Optional[int]
    queue_empty_s: Optional[float]     # seconds from the signal until no job of the run is queued
    exit_s: Optional[float]            # seconds from the signal until the run exited
    left_processes: list[int]          # PIDs still in the run's process group
    left_anywhere: list[int]           # PIDs anywhere on the host working in the run's folder (its jobs' steps)
    state: str                         # status.json's state
    summary: str                       # summary.md's first line
    junit_error: bool                  # junit.xml holds the run's error
    changed_after: list[str]           # files of the folder that changed after the run exited
    jobs: list[str]                    # the job ids the run recorded
    output: str = ""


def start(env: dict, report_dir: Path, *args: str) -> subprocess.Popen:
    """`mpiregress run --system local ARGS` in a session of its own, its output to a file beside the folder."""
    report_dir.parent.mkdir(parents=True, exist_ok=True)
    out = open(report_dir.parent / f"{report_dir.name}.out", "w+")
    proc = subprocess.Popen([sys.executable, "-m", "mpiregress", "run", "--system", "local",
                             "--report-dir", str(report_dir), *args],
                            env=env, cwd=REPO, stdout=out, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    proc.log = out  # type: ignore[attr-defined]
    return proc


def token(report_dir: Path) -> str:
    try:
        return JobRecord.read(report_dir / JOBS_FILE).token
    except OSError:
        return ""


def run_jobs(slurm_env: dict, report_dir: Path, running_only: bool = False) -> Optional[list[str]]:
    """The queued jobs (RUNNING only, when asked) that carry the run's token; None when Slurm did not
    answer in time (a loaded machine: ask again)."""
    tag = token(report_dir)
    if not tag:
        return []
    argv = ["squeue", "-h", "-o", "%i|%k|%T"]
    try:
        done = subprocess.run(argv, env=slurm_env, capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        return None
    if done.returncode != 0:
        return None
    out = done.stdout
    rows = [line.split("|") for line in out.splitlines() if line.count("|") == 2]
    return [job for job, comment, state in rows if comment == tag and (not running_only or state == "RUNNING")]


def queued(slurm_env: dict, report_dir: Path, timeout: float = 300) -> list[str]:
    """The run's queued jobs, asking Slurm again until it answers (a loaded controller is slow)."""
    deadline = time.monotonic() + timeout
    while True:
        jobs = run_jobs(slurm_env, report_dir)
        if jobs is not None:
            return jobs
        if time.monotonic() > deadline:
            raise AssertionError(f"squeue did not answer within {timeout:.0f} s")
        time.sleep(1)


def wait_running(proc: subprocess.Popen, slurm_env: dict, report_dir: Path, timeout: float = 600) -> str:
    """The id of the run's first job once it has been RUNNING a few seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"the run ended (exit {proc.returncode}) before any job ran: {output(proc)[-800:]}")
        jobs = run_jobs(slurm_env, report_dir, running_only=True)
        if jobs:   # None (Slurm slow to answer) or []: not yet
            time.sleep(2)
            return jobs[0]
        time.sleep(0.5)
    raise AssertionError(f"no job of the run reached RUNNING within {timeout:.0f} s")


def output(proc: subprocess.Popen) -> str:
    proc.log.flush()  # type: ignore[attr-defined]
    return Path(proc.log.name).read_text(errors="replace")  # type: ignore[attr-defined]


def processes_in(folder: Path) -> list[int]:
    """Live processes on the host whose working folder is ``folder`` or under it: what the run's Slurm jobs
    started (a job's steps work in its stage folder), whoever their parent is now."""
    root = str(folder.resolve())
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cwd = os.readlink(f"/proc/{entry}/cwd")
            with open(f"/proc/{entry}/stat") as f:
                zombie = f.read().rsplit(")", 1)[1].split()[0] == "Z"
        except OSError:
            continue
        if not zombie and (cwd == root or cwd.startswith(root + "/")):
            found.append(int(entry))
    return found


def snapshot(folder: Path) -> dict[str, tuple[int, int]]:
    """Every file under ``folder``: (size, mtime in ns)."""
    found = {}
    for path in folder.rglob("*"):
        try:
            st = path.lstat()
        except OSError:
            continue
        if not path.is_dir():
            found[str(path.relative_to(folder))] = (st.st_size, st.st_mtime_ns)
    return found


def cancel(proc: subprocess.Popen, sig: signal.Signals, to_group: bool, slurm_env: dict, report_dir: Path,
           settle: float = 5.0, timeout: float = 120) -> Cancellation:
    """Send ``sig`` to the run (or its group), then measure: queue, exit, processes, report, later writes."""
    sent = time.monotonic()
    (os.killpg if to_group else os.kill)(proc.pid, sig)
    queue_empty = None
    code = None
    while time.monotonic() - sent < timeout:
        if queue_empty is None and run_jobs(slurm_env, report_dir) == []:
            queue_empty = round(time.monotonic() - sent, 1)
        if proc.poll() is not None and queue_empty is not None:
            break
        time.sleep(0.2)
    exit_s = None
    try:
        code = proc.wait(timeout=max(1.0, timeout - (time.monotonic() - sent)))
        exit_s = round(time.monotonic() - sent, 1)
    except subprocess.TimeoutExpired:
        pass
    left = process_group_members(proc.pid)
    before = snapshot(report_dir)
    time.sleep(settle)
    anywhere = processes_in(report_dir)
    after = snapshot(report_dir)
    changed = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
    try:
        state = json.loads((report_dir / "status.json").read_text()).get("state", "?")
    except (OSError, ValueError):
        state = "no status.json"
    try:
        summary = (report_dir / "summary.md").read_text().splitlines()[0]
    except (OSError, IndexError):
        summary = "no summary.md"
    try:
        junit_error = "<error" in (report_dir / "junit.xml").read_text()
    except OSError:
        junit_error = False
    try:
        jobs = JobRecord.read(report_dir / JOBS_FILE).jobs
    except OSError:
        jobs = []
    return Cancellation(sig.name, to_group, code, queue_empty, exit_s, left, anywhere, state, summary, junit_error,
                        changed, jobs, output(proc))


def queue_ok(slurm_env: dict) -> bool:
    return queued_jobs(slurm_env) is not None


def ensure_ended(proc: subprocess.Popen, slurm_env: dict, report_dir: Path) -> None:
    """After a test, whatever happened: the run is waited for (killed by its group after a while) and its
    jobs cancelled by id, so a failed test leaves neither a run holding the cluster nor a job behind."""
    try:
        proc.wait(timeout=180)
    except subprocess.TimeoutExpired:
        # A run that never answered its signal: where each of its threads sat (the CLI's SIGUSR2 faulthandler)
        # goes into its output, and pytest shows it with the failure (issue 32's rare non-answer under load).
        try:
            os.kill(proc.pid, signal.SIGUSR2)
            time.sleep(1)
            print(f"the run did not end: its threads' stacks, from {report_dir.name}.out:\n{output(proc)[-6000:]}")
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(timeout=30)
    tag = token(report_dir)
    if tag:
        cancel_jobs(JobRecord.read(report_dir / JOBS_FILE).jobs, tag, slurm_env)
