"""Issue 8 on the real local Slurm: failure detection settings, leftovers, Slurm's words.

The slow faults (slurmd or slurmctld killed under a running benchmark, time limits)
run in benchmarks/fault_matrix.py; here are the parts that take seconds.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from mpiregress.cluster.local import LocalCluster, _alive
from mpiregress.families import osu_output
from mpiregress.run import reframe_report

# Slurm's own lines, as the local cluster printed them when the faults were injected.
NODE_FAILURE = ("slurmstepd-node1: error: *** STEP 58631000.1+0 ON node1 CANCELLED AT 2026-11-23T05:16:27 DUE TO "
                "NODE FAILURE, SEE SLURMCTLD LOG FOR DETAILS ***\nsrun: error: node1: task 0: Terminated\n")
SBATCH_FAILURE = ("spawned process error: command 'sbatch rfm_job.sh' failed with exit code 1:\n"
                  "--- stdout ---\n--- stdout ---\n--- stderr ---\n"
                  "sbatch: error: Batch job submission failed: Unable to contact slurm controller (connect failure)\n"
                  "--- stderr ---\n")


def test_a_node_failure_is_infrastructure_not_a_dead_rank():
    reason = osu_output.failure_reason(NODE_FAILURE)
    assert reason.startswith("node lost: ") and "DUE TO NODE FAILURE" in reason, reason
    assert osu_output.is_infrastructure(reason)
    assert not osu_output.is_infrastructure("rank 0 on node1 died: Terminated")


def test_sbatch_failure_keeps_its_cause():
    case = {"result": "fail", "fail_phase": "run", "fail_reason": SBATCH_FAILURE}
    reason = reframe_report._reason(case, "error")
    assert reason.startswith("Slurm controller unreachable: ")
    assert "Unable to contact slurm controller (connect failure)" in reason


def test_scancel_and_time_limit_read_as_slurm_killing_the_job():
    cancelled = osu_output.failure_reason("slurmstepd: error: *** JOB 7 ON node1 CANCELLED AT 2026-11-23T05:35:23 ***")
    assert cancelled.startswith("Slurm killed the job: ") and osu_output.is_infrastructure(cancelled)
    limit = osu_output.failure_reason("*** STEP 7.0 ON node2 CANCELLED AT 2026-11-23T06:00:30 DUE TO TIME LIMIT ***")
    assert "at its time limit" in limit and osu_output.is_infrastructure(limit)


@pytest.mark.slurm
def test_local_cluster_notices_a_lost_node_within_a_minute(local_cluster: LocalCluster):
    config = subprocess.run(["scontrol", "show", "config"], env={**os.environ, **local_cluster.client_env()},
                            capture_output=True, text=True, timeout=30).stdout
    settings = {line.split("=")[0].strip(): line.split("=", 1)[1].strip() for line in config.splitlines()
                if "=" in line}
    assert settings["SlurmdTimeout"] == "20 sec"     # Slurm's default is 300 s
    assert settings["JobRequeue"] == "0"             # a job on a lost node ends, it does not wait for the node


@pytest.mark.slurm
@pytest.mark.slow
def test_stop_ends_step_daemons_that_outlived_slurmctld():
    """slurmctld dies under a running job: `stop` still ends the step daemons and their children, by PID."""
    root = Path(tempfile.mkdtemp(prefix="mpiregress-left-", dir="/tmp"))
    root.chmod(0o755)
    cluster = LocalCluster(root / "local-cluster")
    env = {**os.environ, **cluster.client_env()}
    try:
        cluster.start()
        marker = root / "child.pid"
        subprocess.run(["sbatch", "-N1", "-o", str(root / "job.out"), "--wrap",
                        f"srun -n1 sh -c 'echo $$ > {marker}; exec sleep 600'"],
                       env=env, check=True, capture_output=True, timeout=30)
        deadline = time.monotonic() + 60
        while not (marker.exists() and marker.read_text().strip()) and time.monotonic() < deadline:
            time.sleep(0.2)
        child = int(marker.read_text())
        assert cluster.step_daemons(), "the job's step daemons should be running"
        os.kill(cluster._pid("slurmctld"), signal.SIGKILL)
        stopped = cluster.stop()
        assert child in stopped, "the step's own process is ended by PID"
        assert cluster.step_daemons() == []
        assert not _alive(child)
    finally:
        cluster.stop(force=True)
        shutil.rmtree(root, ignore_errors=True)


def test_status_json_of_a_cluster_never_started(tmp_path):
    cluster = LocalCluster(tmp_path / "never")
    assert cluster.step_daemons() == [] and cluster.user() is None
    assert json.loads(json.dumps(cluster.status()))["up"] is False
