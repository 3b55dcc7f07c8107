"""The suite's own guard (conftest.leftovers): a job or a drained node left by one test is
cancelled and resumed, with a sentence, so later tests on the session's cluster do not wait on it."""
from __future__ import annotations

import os
import subprocess

import pytest
from conftest import leftovers

from mpiregress.cluster.local import USABLE_STATES, LocalCluster


def slurm(cluster: LocalCluster, *argv: str) -> str:
    return subprocess.run(argv, env={**os.environ, **cluster.client_env()}, capture_output=True, text=True,
                          timeout=30, check=True, cwd="/tmp").stdout


@pytest.mark.slurm
def test_a_left_job_and_a_drained_node_are_cleaned_and_said(local_cluster: LocalCluster) -> None:
    job = slurm(local_cluster, "sbatch", "--parsable", "-N1", "-w", "node1", "-J", "a job name", "-o", "/dev/null",
                "--wrap", "sleep 300").strip()
    slurm(local_cluster, "scontrol", "update", "nodename=node2", "state=drain", "reason=left by a test")
    said = leftovers(local_cluster, wait=0)
    assert said == [f"the test left Slurm job(s) {job}|RUNNING|a job name after 0 s; cancelled",
                    "the test left node2 drained (left by a test); resumed"] or \
        said == [f"the test left Slurm job(s) {job}|PENDING|a job name after 0 s; cancelled",
                 "the test left node2 drained (left by a test); resumed"], said
    assert slurm(local_cluster, "squeue", "-h").strip() == ""
    nodes = local_cluster.nodes()
    states = {n: v["state"] for n, v in nodes.items()}
    assert set(states) == set(local_cluster.node_names) and set(states.values()) <= USABLE_STATES, states
    # Resumed and answering again (not idle*): the next test may use every node at once.
    assert all(v["responding"] for v in nodes.values()), nodes
    assert leftovers(local_cluster, wait=0) == []


def test_a_fault_left_in_force_is_cleared_and_said(local_cluster: LocalCluster) -> None:
    if local_cluster.network_mode != "namespaces":
        pytest.skip("faults need the namespaces layout")
    local_cluster.fault("rate", "node1", rate="100mbit", peer="node2")
    said = leftovers(local_cluster)
    assert said == ["the test left faults in force (link node1--node2 limited to 100mbit both ways); cleared: "
                    "node1: limit removed; node2: limit removed"], said
    assert local_cluster.faults() == []
