"""Shared fixtures: the test session's own local Slurm cluster, and its own PostgreSQL server.

The cluster lives in a temporary state folder with freshly picked ports, so it
runs beside a developer's `mpiregress cluster start` cluster without touching
it, and it is stopped (by the PIDs in its pid files) when the session ends. Under pytest-xdist (ci/test.sh
runs two workers) the session is a worker's: each worker that reaches a test on Slurm starts its own
cluster and its own PostgreSQL server, side by side on the host.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
import warnings
from pathlib import Path
from typing import Iterator

import pytest
from helpers.postgres import PostgresServer, start_server

from mpiregress.cluster.local import REQUIRED_TOOLS, USABLE_STATES, LocalCluster
from mpiregress.errors import InfrastructureError


def pytest_configure(config: pytest.Config) -> None:
    """SIGHUP back to its default when the suite was started under ``nohup``: the cancel tests send it and
    expect a run to end, and every command the suite starts inherits an ignored SIGHUP (a run started
    under nohup rightly keeps ignoring it, and two cancel tests then failed for the invocation, not the code)."""
    if signal.getsignal(signal.SIGHUP) is signal.SIG_IGN:
        signal.signal(signal.SIGHUP, signal.SIG_DFL)


# Tools the tests themselves call on top of what the cluster needs.
_TEST_TOOLS = ("srun", "sbatch", "mpicc")


@pytest.fixture(scope="session")
def local_cluster() -> Iterator[LocalCluster]:
    """A started LocalCluster (munged, slurmctld, slurmd node1 ... nodeN as systems/local.yaml lays them out)
    for the whole session.

    Fails (never skips) when Slurm, munge or OpenMPI are not installed: the
    `local` system is part of what this project must run on this machine.
    """
    missing = [t for t in (*REQUIRED_TOOLS, *_TEST_TOOLS) if not shutil.which(t)]
    if missing:
        pytest.fail(f"the local Slurm cluster cannot run: {', '.join(missing)} not found; run the "
                    f"project's setup script (it installs slurm-wlm, munge, openmpi-bin, "
                    f"libopenmpi-dev, hwloc)", pytrace=False)
    # Laid out as a state folder (<root>/local-cluster) so that tests pointing
    # MPIREGRESS_STATE_DIR at state_dir.parent find this cluster as the default one.
    # Not under pytest's basetemp: that is closed to other users, and munged runs as
    # the munge user. A short path also keeps the unix socket paths within limits.
    root = Path(tempfile.mkdtemp(prefix="mpiregress-", dir="/tmp"))
    root.chmod(0o755)
    cluster = LocalCluster(root / "local-cluster")
    try:
        try:
            cluster.start()
        except InfrastructureError as err:
            pytest.fail(f"the local Slurm cluster did not start: {err}", pytrace=False)
        yield cluster
    finally:
        cluster.stop()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """One private PostgreSQL server (Debian's package, initdb in /tmp, its own port on 127.0.0.1) for the
    whole session, stopped and removed at its end. Fails (never skips) without the package: ci/setup.sh
    installs it, and the shared history is part of what this project must run."""
    try:
        server = start_server()
    except RuntimeError as err:
        pytest.fail(str(err), pytrace=False)
    try:
        yield server
    finally:
        server.destroy()


@pytest.fixture(params=["sqlite", "postgres"])
def store(request, tmp_path) -> str:
    """Where a test's history lives: an SQLite file, or a fresh database on the session's PostgreSQL server."""
    if request.param == "sqlite":
        return str(tmp_path / "h.sqlite")
    return request.getfixturevalue("postgres_server").new_database()


def _slurm(cluster: LocalCluster, *argv: str) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=30,
                          env={**os.environ, **cluster.client_env()})
    return done.stdout


def leftovers(cluster: LocalCluster, wait: float = 60) -> list[str]:
    """Jobs still queued and nodes not usable after a test; cancelled and resumed, each said in a sentence.

    A test that leaves a job running or a node drained would make every later test on the
    session's cluster wait for its own time limit: the suite would hang instead of failing.
    """
    deadline = time.monotonic() + wait
    jobs = _slurm(cluster, "squeue", "-h", "-o", "%i|%T|%j").splitlines()
    while jobs and time.monotonic() < deadline:   # a job of the test may still be completing
        time.sleep(1)
        jobs = _slurm(cluster, "squeue", "-h", "-o", "%i|%T|%j").splitlines()
    said = []
    if jobs:
        _slurm(cluster, "scancel", *[j.split("|")[0] for j in jobs])
        deadline = time.monotonic() + 30
        while _slurm(cluster, "squeue", "-h").strip() and time.monotonic() < deadline:
            time.sleep(0.5)
        said.append(f"the test left Slurm job(s) {', '.join(jobs)} after {wait:.0f} s; cancelled")
    if cluster.faults():
        said.append(f"the test left faults in force ({'; '.join(cluster.faults())}); cleared: "
                    f"{'; '.join(cluster.clear_faults())}")
    states = cluster.nodes()
    resumed = []
    for node in cluster.node_names:
        state = states.get(node, {}).get("state", "missing")
        if state not in USABLE_STATES:
            reasons = dict(line.split("|", 1) for line in
                           _slurm(cluster, "sinfo", "-h", "-N", "-o", "%N|%E").splitlines() if "|" in line)
            _slurm(cluster, "scontrol", "update", f"nodename={node}", "state=resume")
            resumed.append(node)
            said.append(f"the test left {node} {state} ({reasons.get(node, '').strip() or 'no reason'}); resumed")
    # A resumed node is "not responding" (idle*) until it answers the ping that the resume triggers;
    # a test started before that would find it so.
    deadline = time.monotonic() + 30
    while resumed and time.monotonic() < deadline:
        states = cluster.nodes()
        resumed = [n for n in resumed if not states.get(n, {}).get("responding")]
        if resumed:
            time.sleep(0.5)
    if resumed:
        said.append(f"{', '.join(resumed)} still not responding 30 s after being resumed")
    return said


@pytest.fixture(autouse=True)
def session_cluster_left_clean(request: pytest.FixtureRequest) -> Iterator[None]:
    """After every test on the session's cluster: no job left behind, every node usable (else a warning)."""
    yield
    if "local_cluster" in request.fixturenames:
        for sentence in leftovers(request.getfixturevalue("local_cluster")):
            warnings.warn(f"{request.node.nodeid}: {sentence}", stacklevel=1)
