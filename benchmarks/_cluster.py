"""A benchmark's own local cluster: 4 (or N) nodes in network namespaces, in fresh folders under /tmp.

The benchmarks that inject faults or count launches start a cluster of their own, never the
developer's or the test session's, and must leave nothing behind however they end: the cluster
is stopped (by its PIDs, its namespaces and bridge removed) and both folders deleted on a normal
end, an exception or a SIGTERM.
"""
from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path
from typing import Iterator

from reframe.utility.cpuinfo import cpuinfo

from mpiregress.cluster.local import LocalCluster
from mpiregress.families.noise import placement
from mpiregress.model.launch import KILL_ON_BAD_EXIT


def _stop_on_term(signum: int, frame: object) -> None:
    """A SIGTERM ends the benchmark through own_cluster's ``finally``."""
    raise SystemExit(f"stopped by signal {signum}")


@contextlib.contextmanager
def own_cluster(nodes: int, name: str) -> Iterator[tuple[LocalCluster, Path]]:
    """A namespaces cluster of ``nodes`` (not yet started: the caller builds first, then starts and may
    time it) and a work folder ``/tmp/mpr-bench-<name>-*``; stopped and removed whatever happens."""
    signal.signal(signal.SIGTERM, _stop_on_term)
    state = Path(tempfile.mkdtemp(prefix="mpr-bench-", dir="/tmp"))
    state.chmod(0o755)  # munged runs as the munge user
    work = Path(tempfile.mkdtemp(prefix=f"mpr-bench-{name}-", dir="/tmp"))
    cluster = LocalCluster(state / "local-cluster", nodes=nodes, network="namespaces")
    try:
        yield cluster, work
    finally:
        cluster.stop(force=True)
        shutil.rmtree(state, ignore_errors=True)
        shutil.rmtree(work, ignore_errors=True)


def mpi_env(cluster: LocalCluster, **extra: str) -> dict[str, str]:
    """This process's environment for srun/salloc on ``cluster``: no inherited Slurm or OpenMPI MCA
    settings (they would name another cluster or change the transport), run as root allowed, ``extra`` last."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "OMPI_MCA_"))}
    env.update(cluster.client_env(), OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", **extra)
    return env


def start_announced(argv: list[str], banner: str, what: str) -> "subprocess.Popen[str]":
    """Start a helper process (a noise injector) that prints ``banner...`` once it runs; exit if it does not.
    The banner line is kept as the process's ``banner`` attribute."""
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = proc.stdout.readline() if proc.stdout else ""
    if not line.startswith(banner):
        raise SystemExit(f"the {what} did not start: {line}{proc.stderr.read() if proc.stderr else ''}")
    proc.banner = line.strip()  # type: ignore[attr-defined]
    return proc


def stop_process(proc: "subprocess.Popen[str]") -> None:
    """SIGTERM to a helper process started here, and wait for it."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=10)


def fwq_argv(fwq: Path, out: Path, prefix: list[str], node: str, iterations: int = placement.ITERATIONS) -> list[str]:
    """The noise check's launch (checks/fwq.py set_launch: every core of ``node``, one job of its own)."""
    placed = placement.layout("all_cores", cpuinfo())
    if isinstance(placed, placement.LayoutUnavailable):
        raise SystemExit(placed.reason)
    options = [o for o in placed.srun_options if o != "--exclusive"]
    return (["salloc", "-N1", "-w", node, "--exclusive", "--time=5", "srun", "--mpi=pmix", KILL_ON_BAD_EXIT,
             f"--ntasks={placed.tasks_per_node}", *options] + prefix
            + [str(fwq), "-n", str(iterations), "-o", str(out)])
