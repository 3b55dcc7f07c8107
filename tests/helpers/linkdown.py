"""A link taken down under a running `mpiregress run` on a namespaces cluster (test and benchmark alike).

The run measures cross_node latency ``measurements`` times, one Slurm job each; once the first has
finished, the link of a node the running job uses is taken down with the product's own command
(`mpiregress cluster fault down NODE`). What comes back: the exit code, the seconds from the fault to
the exit, the finished measurements the results kept, and the run's sentence (status.json).
"""
from __future__ import annotations

import json
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from shared import REPO

# Nothing here may wait forever: a run that outlives this after the fault has failed the requirement.
AFTER_FAULT_S = 240


@dataclass
class LinkDownRun:
    exit_code: int
    seconds: float          # from the fault command's return to the run's exit
    kept: int               # finished measurements in results.json (samples, or the value of a one-sample series)
    series: int             # series measured in full (status pass or regression)
    errors: int             # results with status error
    node: str               # the node whose link went down
    verdict: str            # the run's verdict line (summary.md)
    reasons: list[str]      # the error results' reasons (Slurm's words first)
    steps: list[str]        # the run's steps (status.json)

    def line(self) -> str:
        return (f"exit {self.exit_code} {self.seconds:.1f} s after {self.node}'s link went down; "
                f"{self.kept} finished measurement(s) kept ({self.series} series in full), {self.errors} error(s): "
                f"{self.reasons[0] if self.reasons else self.verdict}")


def cli(env: dict, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mpiregress", *args], env=env, capture_output=True, text=True,
                          timeout=timeout, cwd=REPO)


def slurm_env(env: dict) -> dict:
    """``env`` with the cluster's SLURM_CONF (what `mpiregress cluster env` prints)."""
    state = env["MPIREGRESS_LOCAL_CLUSTER_DIR"]
    return dict(env, SLURM_CONF=str(Path(state) / "etc" / "slurm.conf"))


def _jobs(report_dir: Path) -> list[str]:
    """The Slurm job ids the run submitted so far, in order (its slurm-jobs.txt)."""
    try:
        lines = (report_dir / "slurm-jobs.txt").read_text().split()
    except OSError:
        return []
    return [line for line in lines if line.isdigit()]


def _running_nodes(env: dict, job: str) -> list[str]:
    """The nodes of ``job`` while it runs ([] before and after)."""
    out = subprocess.run(["squeue", "-h", "-j", job, "-t", "R", "-o", "%N"], env=slurm_env(env),
                         capture_output=True, text=True, timeout=30).stdout.split()
    if not out:
        return []
    return subprocess.run(["scontrol", "show", "hostnames", *out], env=slurm_env(env), capture_output=True,
                          text=True, timeout=30).stdout.split()


def wait_idle(env: dict, nodes: int, timeout: float = 120) -> None:
    """Until every node of the cluster is idle again (after `fault clear`)."""
    deadline = time.monotonic() + timeout
    states: list[str] = []
    while time.monotonic() < deadline:
        states = subprocess.run(["sinfo", "-h", "-N", "-o", "%T"], env=slurm_env(env), capture_output=True,
                                text=True, timeout=30).stdout.split()
        if len(states) == nodes and all(s.rstrip("*~#") == "idle" for s in states):
            return
        time.sleep(1)
    raise AssertionError(f"the cluster's nodes did not come back idle in {timeout:.0f} s: {states}")


def run_with_link_down(env: dict, report_dir: Path, repeat: int = 1, nodes: int = 4,
                       start_timeout: float = 600, restore: bool = True) -> LinkDownRun:
    """One run (cross_node latency then bandwidth, ``repeat`` times each), one link down once its first
    measurement finished; the link is restored afterwards (``restore``: and the nodes awaited idle, for
    the next run)."""
    state = env["MPIREGRESS_LOCAL_CLUSTER_DIR"]
    cmd = [sys.executable, "-m", "mpiregress", "run", "--system", "local", "--families", "pt2pt",
           "--placements", "cross_node", "--metrics", "latency,bandwidth", "--methods", "source",
           "--repeat", str(repeat), "--report-dir", str(report_dir)]
    began = time.monotonic()
    proc = subprocess.Popen(cmd, env=env, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    node = ""
    try:
        deadline = time.monotonic() + start_timeout
        while proc.poll() is None and time.monotonic() < deadline:
            # The second job runs: the first measurement has finished.
            jobs = _jobs(report_dir)
            running = _running_nodes(env, jobs[1]) if len(jobs) >= 2 else []
            if len(running) >= 2:
                node = running[-1]
                break
            time.sleep(0.2)
        if not node:
            proc.kill()
            out, err = proc.communicate(timeout=60)
            raise AssertionError(f"no second measurement ran on two nodes (exit {proc.returncode}): {err[-1500:]}")
        print(f"link_down: {time.monotonic() - began:.1f} s after the run started, {node}'s link goes down",
              flush=True)
        faulted = cli(env, "cluster", "fault", "down", node, "--state-dir", state)
        assert faulted.returncode == 0, faulted.stderr
        start = time.monotonic()
        out, err = proc.communicate(timeout=AFTER_FAULT_S)
        seconds = time.monotonic() - start
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=60)
        cli(env, "cluster", "fault", "clear", "--state-dir", state)
    if restore:
        try:
            wait_idle(env, nodes)
        except AssertionError:
            pass   # the next run's cluster start says what is wrong
    found = []
    if (report_dir / "results.json").is_file():
        found = json.loads((report_dir / "results.json").read_text())
    summary = (report_dir / "summary.md").read_text() if (report_dir / "summary.md").is_file() else ""
    verdict = next((ln.removeprefix("## ") for ln in summary.splitlines() if ln.startswith("## MPI performance")),
                   (err.strip().splitlines() or [""])[-1])
    errors = [r for r in found if r.get("status") == "error"]
    try:
        steps = [str(step) for step in json.loads((report_dir / "status.json").read_text()).get("steps") or []]
    except (OSError, ValueError):
        steps = []
    return LinkDownRun(steps=steps, exit_code=proc.returncode, seconds=seconds, node=node,
                       kept=sum(len(r.get("samples") or ([1] if r.get("value") is not None else [])) for r in found),
                       series=sum(1 for r in found if r.get("status") in ("pass", "regression")),
                       errors=len(errors), verdict=verdict, reasons=[str(r.get("reason")) for r in errors])
