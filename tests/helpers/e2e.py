"""Running `mpiregress run` end to end on the test session's local Slurm, with the OSU double's tarball."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

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
    """`mpiregress run` on the local Slurm; run once more only after a rank segfaulted in the MPI library.

    OpenMPI 4.1.4 over TCP on two fake nodes sharing two cores has crashed a rank with SIGSEGV
    once in many hundred runs (CI, osu_scatter, no forced algorithm; 190 runs by hand did not
    reproduce it). The product reports that correctly (exit 2, "rank N on nodeX died:
    Segmentation fault"), but a test about something else must not be decided by it. A second
    crash fails the test as before, and so does any other error.
    """
    cmd = [sys.executable, "-m", "mpiregress", "run", "--system", system, *args]
    if report_dir is not None:
        cmd += ["--report-dir", str(report_dir)]
    run_env = dict(env, **(extra_env or {}))
    done = subprocess.run(cmd, env=run_env, capture_output=True, text=True, timeout=900, cwd=REPO)
    if report_dir is not None and only_library_segfaults(done, Path(report_dir)):
        warnings.warn(f"a rank segfaulted in the MPI library; ran again: {done.stdout[-300:]}", stacklevel=2)
        done = subprocess.run(cmd, env=run_env, capture_output=True, text=True, timeout=900, cwd=REPO)
    return done


def only_library_segfaults(done: subprocess.CompletedProcess, report_dir: Path) -> bool:
    """True when the run erred (exit 2) and every error it recorded is a rank that died of SIGSEGV."""
    results = report_dir / "results.json"
    if done.returncode != 2 or not results.is_file():
        return False
    errors = [r for r in json.loads(results.read_text()) if r.get("status") == "error"]
    return bool(errors) and all(r.get("reason", "").endswith("died: Segmentation fault") for r in errors)


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
