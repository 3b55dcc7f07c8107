"""Running `mpiregress run` end to end on the test session's local Slurm, with the OSU double's tarball."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from shared import REPO

from helpers.osu_double import make_tarball


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
    """`mpiregress run` on the local Slurm, once: a crashed rank fails the test like any other error."""
    cmd = [sys.executable, "-m", "mpiregress", "run", "--system", system, *args]
    if report_dir is not None:
        cmd += ["--report-dir", str(report_dir)]
    run_env = dict(env, **(extra_env or {}))
    return subprocess.run(cmd, env=run_env, capture_output=True, text=True, timeout=900, cwd=REPO)


def widen_bands(path: Path) -> None:
    """Make every band of the baselines file ``path`` very wide (latency 1000x, bandwidth down to 0.1 %).

    Values and provenance are kept; only the tolerances change.
    """
    import yaml

    def widen(node):
        if isinstance(node, dict):
            if "value" in node and "tolerance" in node:
                node["tolerance"] = 0.999 if "/s" in str(node.get("unit", "")) else 1000.0
            for child in node.values():
                widen(child)
        elif isinstance(node, list):
            for child in node:
                widen(child)

    data = yaml.safe_load(path.read_text())
    widen(data)
    path.write_text(yaml.safe_dump(data, sort_keys=False))


def wide_baselines(directory: Path) -> Path:
    """The repo's baselines with every band made very wide (:func:`widen_bands`), in ``directory``.

    A test about what a run does (builds, placements, reports) must not pass or fail on whether a
    measurement on this shared, loaded machine met the repo's band (issue 20: four tests failed at
    load 40).
    """
    import shutil

    shutil.copytree(REPO / "baselines", directory)
    for path in directory.glob("*.yaml"):
        widen_bands(path)
    return directory
