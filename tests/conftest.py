"""Shared fixtures: the test session's own local Slurm cluster.

The cluster lives in a temporary state folder with freshly picked ports, so it
runs beside a developer's `mpiregress cluster start` cluster without touching
it, and it is stopped (by the PIDs in its pid files) when the session ends.
"""
from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Iterator

import pytest

from mpiregress.errors import InfrastructureError
from mpiregress.local_cluster import REQUIRED_TOOLS, LocalCluster

# Tools the tests themselves call on top of what the cluster needs.
_TEST_TOOLS = ("srun", "sbatch", "mpicc")


@pytest.fixture(scope="session")
def local_cluster() -> Iterator[LocalCluster]:
    """A started LocalCluster (munged, slurmctld, slurmd node1/node2) for the whole session.

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
