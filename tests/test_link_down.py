"""A link taken down mid-run (issue 22, item 3): the run ends as infrastructure (exit 3) in Slurm's
words, soon, and keeps what finished.

A namespaces cluster of its own (2 nodes, under /tmp): `mpiregress run` measures cross_node latency
then bandwidth with the OSU test double (built by the run itself, through the source path); once the
latency job has finished and the bandwidth job runs, `mpiregress cluster fault down node2` sets
node2's veth down. Slurm flags node2 as not responding; the run sees it under its own job, stops
ReFrame (which writes its report) and ends with exit 3, the latency measurement kept. How long it
takes is printed by benchmarks/link_down.py, not asserted here (the host is shared and loaded).
"""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Iterator

import pytest
from helpers.e2e import wide_baselines
from helpers.linkdown import cli, run_with_link_down
from helpers.osu_double import make_tarball

from mpiregress.cluster import netns

pytestmark = [pytest.mark.slurm, pytest.mark.slow]


@pytest.fixture(scope="module")
def ns_env() -> Iterator[dict]:
    why = netns.unavailable()
    if why:
        pytest.skip(f"no namespaces cluster here: {why}")
    root = Path(tempfile.mkdtemp(prefix="mpr-ld-", dir="/tmp"))
    root.chmod(0o755)   # munged runs as the munge user
    _, sha256 = make_tarball(root / "mirror")
    env = dict(os.environ, MPIREGRESS_STATE_DIR=str(root / "state"), MPIREGRESS_LOCAL_CLUSTER_DIR=str(root / "c"),
               MPIREGRESS_BASELINES_DIR=str(wide_baselines(root / "baselines")),
               OSU_SOURCE_MIRROR=str(root / "mirror"), OSU_SHA256=sha256)
    env.pop("MPIREGRESS_IN_ALLOCATION", None)
    started = cli(env, "cluster", "start", "--nodes", "2", "--network", "namespaces", "--state-dir", str(root / "c"))
    try:
        assert started.returncode == 0, started.stderr
        yield env
    finally:
        cli(env, "cluster", "stop", "--force", "--state-dir", str(root / "c"))
        shutil.rmtree(root, ignore_errors=True)


def test_a_link_down_mid_run_ends_it_as_infrastructure_keeping_what_finished(ns_env, tmp_path):
    found = run_with_link_down(ns_env, tmp_path / "r", nodes=2, restore=False)
    assert found.exit_code == 3, found.line()
    # The run stopped ReFrame on Slurm's words, rather than waiting for the rest of the run.
    assert any(step.startswith("ReFrame stopped: node lost: Slurm reports node node2") for step in found.steps), \
        found.steps
    assert found.errors == 1 and found.reasons[0].startswith("node lost: Slurm reports node node2 "), found.reasons
    assert "infrastructure" in found.verdict
    # The latency measurement finished before the fault: it is in the results, as a series in full.
    assert found.series == 1 and found.kept == 1, found.line()
