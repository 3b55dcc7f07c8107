"""Running `mpiregress run` end to end on the test session's local Slurm, with the OSU double's tarball."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from helpers.osu_double import make_tarball
from shared import REPO


@pytest.fixture(scope="module")
def pipeline(local_cluster, tmp_path_factory):
    """Environment for `mpiregress run` sharing the session's local cluster, and an OSU mirror."""
    mirror = tmp_path_factory.mktemp("mirror")
    _, sha256 = make_tarball(mirror)
    env = dict(os.environ)
    env.update({
        "MPIREGRESS_LOCAL_CLUSTER_DIR": str(local_cluster.state_dir),
        "MPIREGRESS_STATE_DIR": str(tmp_path_factory.mktemp("state")),
        "OSU_SOURCE_MIRROR": str(mirror),
        "OSU_SHA256": sha256,
    })
    env.pop("OSU_DOUBLE_ILLEGAL_INSTRUCTION", None)
    return env


def mpiregress(env, *args, report_dir=None, extra_env=None, system="local"):
    cmd = [sys.executable, "-m", "mpiregress", "run", "--system", system, *args]
    if report_dir is not None:
        cmd += ["--report-dir", str(report_dir)]
    run_env = dict(env, **(extra_env or {}))
    return subprocess.run(cmd, env=run_env, capture_output=True, text=True, timeout=900, cwd=REPO)
