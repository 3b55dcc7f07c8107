"""The `local` system: a real Slurm (munged, slurmctld, a slurmd per node: systems/local.yaml's layout) on this host.

Everything here runs the real daemons and a real OpenMPI program; nothing is mocked.
"""
from __future__ import annotations

import os
import re
import shlex
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from mpiregress import cli
from mpiregress.cluster import proctrack
from mpiregress.cluster.local import LocalCluster, host_topology, slurm_reachable
from mpiregress.model.microarch import host_target

# One binary for both jobs: an Allreduce proves the ranks share one MPI_COMM_WORLD,
# sched_getcpu() shows the binding the rank really got; with "sigill" rank 1
# executes ud2 (SIGILL on x86) while rank 0 waits for it, as osu_latency would.
MPI_SOURCE = r"""
#define _GNU_SOURCE
#include <mpi.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
int main(int argc, char **argv) {
    int rank, size, sum, buf = 0;
    const char *node = getenv("SLURMD_NODENAME");
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc > 1 && strcmp(argv[1], "sigill") == 0) {
        printf("rank %d up\n", rank);
        fflush(stdout);
        if (rank == 1) __builtin_trap();
        if (rank == 0) MPI_Recv(&buf, 1, MPI_INT, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else {
        MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        printf("rank %d size %d sum %d node %s cpu %d\n", rank, size, sum, node ? node : "?", sched_getcpu());
    }
    MPI_Finalize();
    return 0;
}
"""
RANK_LINE = re.compile(r"^rank (\d+) size (\d+) sum (\d+) node (\S+) cpu (\d+)$", re.M)
# What --cpu-bind=verbose prints on stderr, one line per task, e.g.
# "cpu-bind=MAP  - node1, task  1  1 [12345]: mask 0x2 set"
BIND_LINE = re.compile(r"^cpu-bind=MAP\s+- (\S+), task\s+(\d+)\s+(\d+) \[\d+\]: mask (0x[0-9a-f]+) set$", re.M)


def slurm_env(cluster: LocalCluster) -> dict[str, str]:
    """Environment for Slurm clients of ``cluster``: no SLURM_* of an outer job, OpenMPI allowed as root."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    env.update(cluster.client_env(), OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    return env


def run(cluster: LocalCluster, argv: list[str], timeout: float = 60, **kw) -> subprocess.CompletedProcess:
    """Run a Slurm client against ``cluster``; a hang fails the test with what it printed so far."""
    try:
        return subprocess.run(argv, env=slurm_env(cluster), capture_output=True, text=True,
                              timeout=timeout, **kw)
    except subprocess.TimeoutExpired as err:
        pytest.fail(f"{shlex.join(argv)} did not end within {timeout:g} s; stdout: {err.stdout!r}; "
                    f"stderr: {err.stderr!r}", pytrace=False)


# Slurm before 24.05.4 (Debian 12 ships 22.05.8) can leave srun hanging forever after
# every task of a heterogeneous mpi/pmix step has ended: srun's per-component threads
# race on one static "abort agent" (SchedMD ticket 16817, fixed in 24.05.4: "mpi/pmix
# fix race conditions with het jobs at step start/end which could make srun to hang").
# Measured here: about 1 step in 10 when both components end at the same instant,
# about 1 in 50 when one component ends 0.5 s later (the end race is avoided, the
# start race is not).
KNOWN_HET_HANG = ("srun hung after both ranks had finished: the Slurm < 24.05.4 race on the "
                  "mpi/pmix abort agent in heterogeneous steps (SchedMD ticket 16817)")


def het_step(binary: Path) -> list[str]:
    """The cross-node step: one rank per fake node, each bound to its own CPU, one MPI_COMM_WORLD.

    The second component ends 0.5 s after its program, which avoids the end
    half of the srun race described at KNOWN_HET_HANG.
    """
    staggered = ["sh", "-c", '"$0" "$@"; rc=$?; sleep 0.5; exit $rc', str(binary)]
    return ["srun", "--mpi=pmix", "-w", "node1", "-n1", "-c2", "--cpu-bind=verbose,map_cpu:0", str(binary),
            ":", "-w", "node2", "-n1", "-c2", "--cpu-bind=verbose,map_cpu:1", *staggered]


def wait_for(ended, ranks_done, timeout: float = 60, grace: float = 10) -> bool:
    """Poll until ``ended()``; True if it did, False if it did not within ``grace`` s after
    ``ranks_done()`` (the known srun hang). Fails the test at ``timeout``."""
    deadline, done_at = time.monotonic() + timeout, None
    while not ended():
        now = time.monotonic()
        if done_at is None and ranks_done():
            done_at = now
        if done_at is not None and now > done_at + grace:
            return False
        if now > deadline:
            pytest.fail(f"the step did not end within {timeout:g} s and its ranks did not finish", pytrace=False)
        time.sleep(0.2)
    return True


@pytest.fixture(scope="module")
def mpi_binary(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("mpi")
    (folder / "ranks.c").write_text(MPI_SOURCE)
    subprocess.run(["mpicc", "-O1", "-o", "ranks", "ranks.c"], cwd=folder, check=True,
                   capture_output=True, text=True, timeout=120)
    return folder / "ranks"


def running(pid: int) -> bool:
    """True when ``pid`` exists and is not a zombie (init may reap an ended daemon late)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def ranks(stdout: str) -> dict[int, dict]:
    return {int(r): {"size": int(s), "sum": int(t), "node": n, "cpu": int(c)}
            for r, s, t, n, c in RANK_LINE.findall(stdout)}


@pytest.mark.slurm
def test_cluster_is_up_with_all_daemons(local_cluster: LocalCluster) -> None:
    status = local_cluster.status()
    assert status["up"], status["message"]
    assert set(status["daemons"]) == {"munged", "slurmctld", *(f"slurmd-{n}" for n in local_cluster.node_names)}
    assert all(d["alive"] and d["pid"] for d in status["daemons"].values()), status["daemons"]
    ok, said = slurm_reachable(local_cluster.client_env())
    assert ok and "is UP" in said, said
    conf = local_cluster.slurm_conf.read_text()
    # The munge socket is our own, not the host's.
    assert f"AuthInfo=socket={local_cluster.munge_socket}" in conf
    assert local_cluster.munge_socket.is_socket()


@pytest.mark.slurm
def test_sinfo_shows_both_nodes_idle_with_features(local_cluster: LocalCluster) -> None:
    out = run(local_cluster, ["sinfo", "-h", "-N", "-p", "batch", "-o", "%N %T %f %c %X %Y %Z"])
    assert out.returncode == 0, out.stderr
    rows = {line.split()[0]: line.split()[1:] for line in out.stdout.splitlines()}
    assert set(rows) == set(local_cluster.node_names), out.stdout
    topo = host_topology()
    for node, (state, features, cpus, sockets, cores, threads) in rows.items():
        assert state == "idle", f"{node} is {state}"
        assert set(features.split(",")) == {host_target(), "local"}
        assert (int(cpus), int(sockets), int(cores), int(threads)) == (
            topo["cpus"], topo["sockets"], topo["cores_per_socket"], topo["threads_per_core"])


@pytest.mark.slurm
def test_srun_on_both_nodes(local_cluster: LocalCluster) -> None:
    out = run(local_cluster, ["srun", "-N2", "-l", "sh", "-c", 'echo "$SLURMD_NODENAME $(hostname)"'])
    assert out.returncode == 0, out.stderr
    lines = sorted(out.stdout.split("\n")[:-1])
    # Each node its own hostname (namespaces layout), or all this host's (one-host).
    own = local_cluster.network_mode == "namespaces"
    host = socket.gethostname()
    assert lines == [f"0: node1 {'node1' if own else host}", f"1: node2 {'node2' if own else host}"], out.stdout


@pytest.mark.slurm
def test_start_again_changes_nothing(local_cluster: LocalCluster) -> None:
    before = {k: d["pid"] for k, d in local_cluster.status()["daemons"].items()}
    conf_before = local_cluster.slurm_conf.read_text()
    assert local_cluster.start() is False
    assert {k: d["pid"] for k, d in local_cluster.status()["daemons"].items()} == before
    assert local_cluster.slurm_conf.read_text() == conf_before


@pytest.mark.slurm
def test_start_leaves_nodes_the_scheduler_has_planned_for_a_job(local_cluster: LocalCluster,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """Slurm 22.05 shows a node "planned" for a pending job, and for a moment after a job ends:
    the cluster is up, and a run's start() must not restart it under the jobs in its queue."""
    real = local_cluster.nodes()
    monkeypatch.setattr(local_cluster, "nodes", lambda: {n: {**v, "state": "planned"} for n, v in real.items()})
    before = {k: d["pid"] for k, d in local_cluster.status()["daemons"].items()}
    assert local_cluster.status()["up"], local_cluster.status()["message"]
    assert local_cluster.start() is False
    assert {k: d["pid"] for k, d in local_cluster.status()["daemons"].items()} == before


@pytest.mark.slurm
def test_two_mpi_ranks_on_one_node_bound_to_cpus_0_and_1(local_cluster: LocalCluster, mpi_binary: Path) -> None:
    out = run(local_cluster, ["srun", "--mpi=pmix", "-N1", "-n2", "--cpu-bind=verbose,map_cpu:0,1", str(mpi_binary)])
    assert out.returncode == 0, out.stderr
    got = ranks(out.stdout)
    assert got == {0: {"size": 2, "sum": 1, "node": "node1", "cpu": 0},
                   1: {"size": 2, "sum": 1, "node": "node1", "cpu": 1}}, out.stdout
    binds = sorted((node, int(task), mask) for node, task, _, mask in BIND_LINE.findall(out.stderr))
    assert binds == [("node1", 0, "0x1"), ("node1", 1, "0x2")], out.stderr


def _assert_cross_node(stdout: str, stderr: str) -> None:
    got = ranks(stdout)
    assert got == {0: {"size": 2, "sum": 1, "node": "node1", "cpu": 0},
                   1: {"size": 2, "sum": 1, "node": "node2", "cpu": 1}}, stdout + stderr
    # In a heterogeneous step the task ids are per component: both are "task 0".
    binds = sorted((node, int(task), mask) for node, task, _, mask in BIND_LINE.findall(stderr))
    assert binds == [("node1", 0, "0x1"), ("node2", 0, "0x2")], stderr


# A hung step is tried once more before the test says so: with two test workers (two clusters side by side)
# the hang came in 2 of 4 suite runs, and a test whose step hung has asserted the ranks only.
ATTEMPTS = 2


def _het_step_alone(cluster: LocalCluster, binary: Path, folder: Path) -> tuple[bool, subprocess.Popen]:
    """(did the step end, its srun) of one cross-node step without an allocation, its ranks asserted."""
    out, err = folder / "out", folder / "err"
    with open(out, "w") as o, open(err, "w") as e:
        proc = subprocess.Popen(het_step(binary), env=slurm_env(cluster), stdout=o, stderr=e)
    try:
        ended = wait_for(lambda: proc.poll() is not None, lambda: len(ranks(out.read_text())) == 2)
    finally:
        if proc.poll() is None:
            proc.kill()  # our own srun; its job is cancelled when srun goes
        proc.wait()
    _assert_cross_node(out.read_text(), err.read_text())
    return ended, proc


@pytest.mark.slurm
def test_heterogeneous_step_across_nodes_without_allocation(local_cluster: LocalCluster, mpi_binary: Path,
                                                            tmp_path: Path) -> None:
    for attempt in range(ATTEMPTS):
        folder = tmp_path / f"attempt{attempt}"
        folder.mkdir()
        ended, proc = _het_step_alone(local_cluster, mpi_binary, folder)
        if ended:
            assert proc.returncode == 0, (folder / "err").read_text()
            return
    pytest.xfail(f"{KNOWN_HET_HANG}, {ATTEMPTS} times")


def _het_step_in_sbatch(cluster: LocalCluster, binary: Path, folder: Path) -> tuple[bool, str, list[str]]:
    """(did the job end, its id, the job states seen) of one cross-node step in a batch job, its ranks asserted."""
    # --exclusive: with CR_Core a plain `sbatch -N2` owns one core per node and the
    # -c2 components are refused ("More processors requested than permitted").
    script, out, err = folder / "job.sh", folder / "out", folder / "err"
    # exec: srun is the batch task itself, so a cancel reaches it even if it hangs.
    script.write_text("#!/bin/sh\nexec " + shlex.join(het_step(binary)) + "\n")
    script.chmod(0o755)
    submitted = run(cluster, ["sbatch", "--parsable", "-N2", "--exclusive", "--time=1",
                              "-o", str(out), "-e", str(err), str(script)], cwd=folder)
    assert submitted.returncode == 0, submitted.stderr
    job_id = submitted.stdout.strip().split(";")[0]
    # Poll as ReFrame's `squeue` scheduler does, plus `-t all`: without accounting a
    # finished job drops out of plain `squeue -j` and is visible only with `-t all`.
    seen: list[str] = []

    def job_ended() -> bool:
        state = run(cluster, ["squeue", "-h", "-t", "all", "-j", job_id, "-o", "%T"]).stdout.strip()
        if not seen or seen[-1] != state:
            seen.append(state)
        return state not in ("PENDING", "CONFIGURING", "RUNNING", "COMPLETING")

    try:
        ended = wait_for(job_ended, lambda: out.exists() and len(ranks(out.read_text())) == 2)
    finally:
        run(cluster, ["scancel", job_id])  # no-op when it ended
    _assert_cross_node(out.read_text(), err.read_text())
    return ended, job_id, seen


@pytest.mark.slurm
def test_heterogeneous_step_inside_sbatch_allocation(local_cluster: LocalCluster, mpi_binary: Path,
                                                     tmp_path: Path) -> None:
    hung: list[list[str]] = []
    for attempt in range(ATTEMPTS):
        folder = tmp_path / f"attempt{attempt}"
        folder.mkdir()
        ended, job_id, seen = _het_step_in_sbatch(local_cluster, mpi_binary, folder)
        if ended:
            assert seen[-1] == "COMPLETED", f"states seen: {seen}; {(folder / 'err').read_text()}"
            assert set(seen) <= {"PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "COMPLETED"}, seen
            assert run(local_cluster, ["squeue", "-h", "-j", job_id, "-o", "%i|%T|%N|%r"]).stdout.strip() == ""
            return
        hung.append(seen)
    pytest.xfail(f"{KNOWN_HET_HANG}, {ATTEMPTS} times; job states seen {hung}")


@pytest.mark.slurm
def test_rank_dying_of_sigill_is_reported_by_srun(local_cluster: LocalCluster, mpi_binary: Path) -> None:
    out = run(local_cluster, ["srun", "--mpi=pmix", "-n2", str(mpi_binary), "sigill"], timeout=60)
    assert out.returncode != 0
    # The signal is named; srun's own exit code is not 128+4 (the other rank is killed after).
    assert re.search(r"^srun: error: node[12]: task 1: Illegal instruction$", out.stderr, re.M), out.stderr
    assert "rank 1 up" in out.stdout


@pytest.mark.slurm
def test_second_cluster_coexists_then_stops_by_pid(local_cluster: LocalCluster) -> None:
    # Under /tmp, not tmp_path: munged (as the munge user) cannot enter pytest's basetemp.
    state_dir = Path(tempfile.mkdtemp(prefix="mpiregress-lc-", dir="/tmp"))
    other = LocalCluster(state_dir)
    try:
        try:
            assert other.start() is True
            ports, other_ports = local_cluster.status()["ports"], other.status()["ports"]
            assert not set(ports.values()) & set(other_ports.values())
            out = run(other, ["srun", "-N2", "hostname"])
            assert out.returncode == 0 and len(out.stdout.split()) == 2, out.stderr
            pids = {k: d["pid"] for k, d in other.status()["daemons"].items()}
            assert all(pids.values()), pids
        finally:
            stopped = other.stop()
        assert sorted(stopped) == sorted(pids.values())
        assert not [pid for pid in pids.values() if running(pid)]
        assert not any(d["alive"] for d in other.status()["daemons"].values())
        ok, sentence = slurm_reachable(other.client_env(), timeout=10)
        assert not ok
        assert sentence == ("Slurm is not reachable: scontrol ping says 'Slurmctld(primary) at "
                            f"{socket.gethostname().split('.')[0]} is DOWN'; for the local system run "
                            "'mpiregress cluster start'")
        assert other.status()["up"] is False
        assert other.stop() == []  # nothing left to stop
    finally:
        shutil.rmtree(state_dir, ignore_errors=True)
    # The session's cluster did not notice.
    assert local_cluster.status()["up"]


def processes_named(marker: str) -> list[int]:
    """PIDs of live processes whose command line holds ``marker``."""
    found = []
    for entry in os.listdir("/proc"):
        try:
            if entry.isdigit() and marker.encode() in Path(f"/proc/{entry}/cmdline").read_bytes():
                found += [int(entry)] if running(int(entry)) else []
        except OSError:
            continue
    return found


@pytest.mark.slurm
def test_a_process_whose_parent_died_ends_with_its_cancelled_job(local_cluster: LocalCluster,
                                                                tmp_path: Path) -> None:
    """The leftover a cancelled run's step-watch once was: re-parented to PID 1 before the cancel, out of
    reach of Slurm's parentage tracking (proctrack/linuxproc). The step's freezer cgroup still holds it."""
    if not proctrack.freezer_mounted():
        pytest.skip(f"no cgroup v1 freezer at {proctrack.FREEZER}: the cluster tracks steps by parentage")
    assert "ProctrackType=proctrack/cgroup" in local_cluster.slurm_conf.read_text()
    marker = f"orphan-{os.getpid()}-{time.monotonic_ns()}"
    script = tmp_path / "job.sh"
    # The inner bash exits at once: its sleep is re-parented (to PID 1) while the job still runs.
    script.write_text(f"#!/bin/sh\nbash -c 'exec -a {marker} sleep 300 &'\nsleep 300\n")
    job = run(local_cluster, ["sbatch", "--parsable", "-N1", "-w", "node1", "-o", "/dev/null", str(script)],
              cwd=tmp_path).stdout.strip()
    try:
        deadline = time.monotonic() + 60
        while not processes_named(marker) and time.monotonic() < deadline:
            time.sleep(0.2)
        orphans = processes_named(marker)
        assert orphans, "the job's detached process never started"
        assert all(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1] != str(os.getpid())
                   for pid in orphans)
        run(local_cluster, ["scancel", job])
        deadline = time.monotonic() + 60
        while processes_named(marker) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert processes_named(marker) == [], "a process of a cancelled job outlived it"
    finally:
        for pid in processes_named(marker):
            os.kill(pid, 9)


@pytest.mark.slurm
def test_cli_status_and_env(local_cluster: LocalCluster, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert cli.main(["cluster", "status", "--state-dir", str(local_cluster.state_dir)]) == 0
    assert "node1" in capsys.readouterr().out
    assert cli.main(["cluster", "env", "--state-dir", str(local_cluster.state_dir)]) == 0
    assert capsys.readouterr().out == f"export SLURM_CONF={local_cluster.slurm_conf}\n"
    assert cli.main(["cluster", "status", "--state-dir", str(tmp_path / "never")]) == 3
    err = capsys.readouterr().err
    assert err.startswith("Slurm is not reachable:") and "mpiregress cluster start --state-dir" in err


def test_slurm_reachable_without_scontrol_is_a_sentence() -> None:
    ok, sentence = slurm_reachable({"PATH": "/nonexistent"})
    assert not ok
    assert sentence.startswith("Slurm is not reachable: scontrol is not installed")
    assert "mpiregress cluster start" in sentence
