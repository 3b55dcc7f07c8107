"""The local cluster's namespaces layout: nodes with their own hostnames, addresses and links, and real faults.

A cluster of its own (4 nodes, under /tmp), started and stopped here; its bridge,
veths and namespaces carry the mpr-<tag> prefix and must be gone after ``stop``.
Nothing is routed anywhere but these namespaces.
"""
from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Iterator

import pytest

from mpiregress import cli
from mpiregress.cluster import netns
from mpiregress.cluster.local import LocalCluster
from mpiregress.model import launch, systems
from mpiregress.model.topology import Binding

pytestmark = [pytest.mark.slurm,
              pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root")]

PP_SOURCE = r"""
#include <mpi.h>
#include <stdio.h>
#include <unistd.h>
int main(int argc, char **argv) {
    int rank; char host[64], buf[1 << 20]; double t0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    gethostname(host, sizeof host);
    for (int i = 0; i < 21; i++) {
        if (i == 1) t0 = MPI_Wtime();
        if (rank == 0) MPI_Send(buf, sizeof buf, MPI_CHAR, 1, 0, MPI_COMM_WORLD);
        else if (rank == 1) MPI_Recv(buf, sizeof buf, MPI_CHAR, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 1) printf("MB/s %.0f\n", 20.0 * sizeof buf / (MPI_Wtime() - t0) / 1e6);
    printf("rank %d host %s\n", rank, host);
    MPI_Finalize();
    return 0;
}
"""


# A PMIx fence without data (OpenMPI's last barrier in MPI_Init is one) is a barrier: no rank may
# leave it before the last one, rank 0 after a 2 s sleep, has entered it. Wall-clock times compare
# across the nodes: they are namespaces of one kernel.
FENCE_SOURCE = r"""
#include <pmix.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>
static double now(void) { struct timespec t; clock_gettime(CLOCK_REALTIME, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
int main(void) {
    pmix_proc_t me; char host[64]; double entered, left; pmix_status_t rc;
    if (PMIx_Init(&me, NULL, 0) != PMIX_SUCCESS) return 2;
    gethostname(host, sizeof host);
    if (me.rank == 0) sleep(2);
    entered = now();
    rc = PMIx_Fence(NULL, 0, NULL, 0);
    left = now();
    printf("rank %u host %s entered %.6f left %.6f status %d\n", me.rank, host, entered, left, rc);
    PMIx_Finalize(NULL, 0);
    return rc == PMIX_SUCCESS ? 0 : 1;
}
"""


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    root = Path(tempfile.mkdtemp(prefix="mpr-ns-", dir="/tmp"))
    root.chmod(0o755)
    found = LocalCluster(root / "local-cluster", nodes=4, network="namespaces")
    try:
        found.start()
        yield found
    finally:
        found.stop(force=True)
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def pingpong(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("pp")
    (folder / "pp.c").write_text(PP_SOURCE)
    subprocess.run(["mpicc", "-O2", "-o", "pp", "pp.c"], cwd=folder, check=True, capture_output=True, timeout=120)
    return folder / "pp"


@pytest.fixture(scope="module")
def fence(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("fence")
    (folder / "fence.c").write_text(FENCE_SOURCE)
    flags = subprocess.run(["pkg-config", "--cflags", "--libs", "pmix"], capture_output=True, text=True,
                           check=True).stdout.split()
    subprocess.run(["gcc", "-O2", "-o", "fence", "fence.c", *flags], cwd=folder, check=True, capture_output=True,
                   timeout=120)
    return folder / "fence"


def srun(cluster: LocalCluster, *argv: str, timeout: float = 120) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    env.update(cluster.client_env(), OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_mpi_yield_when_idle="1")
    return subprocess.run(["srun", *argv], env=env, capture_output=True, text=True, timeout=timeout)


def test_each_node_has_its_own_hostname_address_and_slurmd(cluster: LocalCluster,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    status = cluster.status()
    assert status["up"] and status["network"] == "namespaces", status["message"]
    assert {n: (s["hostname"], s["addr"]) for n, s in status["nodes"].items()} == {
        n: (n, cluster.network.address(n)) for n in ("node1", "node2", "node3", "node4")}
    assert len({s["addr"] for s in status["nodes"].values()}) == 4
    done = srun(cluster, "-N4", "hostname")
    assert done.returncode == 0 and sorted(done.stdout.split()) == ["node1", "node2", "node3", "node4"], done.stderr
    assert socket.gethostname() not in done.stdout.split()
    assert cli.main(["cluster", "--state-dir", str(cluster.state_dir), "status"]) == 0
    said = capsys.readouterr().out
    assert re.search(r"^node3 +idle, hostname node3, address 10\.\d+\.\d+\.13,", said, re.M), said


def test_mpi_runs_across_nodes_with_no_transport_workaround(cluster: LocalCluster, pingpong: Path) -> None:
    # Two ranks per node: shared memory inside a node, TCP between nodes, chosen by OpenMPI itself.
    done = srun(cluster, "--mpi=pmix", "-N4", "-n8", str(pingpong))
    assert done.returncode == 0, done.stderr
    hosts = dict(re.findall(r"^rank (\d+) host (\S+)$", done.stdout, re.M))
    assert sorted(hosts.values()) == ["node1", "node1", "node2", "node2", "node3", "node3", "node4", "node4"]


@pytest.mark.parametrize("nodes", [2, 4])
def test_a_pmix_fence_without_data_waits_for_every_node(cluster: LocalCluster, fence: Path, nodes: int) -> None:
    """Slurm's tree fence completes on each node alone when a step has fewer nodes than TreeWidth; the
    cluster's mpi.conf sends every fence through the ring (ci/local-cluster/mpi.conf says why)."""
    done = srun(cluster, "--mpi=pmix", f"-N{nodes}", f"-n{nodes}", str(fence))
    assert done.returncode == 0, done.stderr
    rows = re.findall(r"^rank (\d+) host (\S+) entered (\S+) left (\S+) status 0$", done.stdout, re.M)
    assert len(rows) == nodes and len({host for _, host, _, _ in rows}) == nodes, done.stdout
    last_in = max(float(entered) for _, _, entered, _ in rows)
    early = [f"rank {rank} on {host} left at {float(left) - last_in:+.3f} s"
             for rank, host, _, left in rows if float(left) < last_in]
    assert not early, f"left the fence before the last rank (rank 0, after its sleep) entered it: {early}"


def test_a_rate_fault_is_real_and_clear_undoes_it(cluster: LocalCluster, pingpong: Path) -> None:
    """1 MiB messages node1 -> node2 under a 200 Mbit/s limit on node2 cannot beat 25 MB/s (the
    token bucket's rate); the bound is the kernel's, not a measured band."""
    try:
        assert cluster.fault("rate", "node2", rate="200mbit") == "node2 limited to 200mbit both ways"
        assert cluster.status()["faults"] == ["node2 limited to 200mbit both ways"]
        done = srun(cluster, "--mpi=pmix", "-w", "node1,node2", "-N2", "-n2", str(pingpong))
        assert done.returncode == 0, done.stderr
        rate = float(re.search(r"^MB/s (\d+)", done.stdout, re.M).group(1))
        assert rate <= 25 * 1.1, done.stdout
    finally:
        undone = cluster.clear_faults()
    assert "node2: limit removed" in undone and cluster.status()["faults"] == []


def test_link_down_and_slurmd_stop_are_undone_by_clear(cluster: LocalCluster) -> None:
    try:
        assert cluster.fault("down", "node3") == "node3's link down"
        assert cluster.fault("stop", "node4").startswith("node4's slurmd stopped (PID ")
        status = cluster.status()
        assert not status["up"] and "slurmd-node4 is not running" in status["message"]
        assert not status["daemons"]["slurmd-node4"]["alive"]
    finally:
        undone = cluster.clear_faults()
    assert "node3: link up" in undone and "node4: slurmd started again" in undone
    deadline = time.monotonic() + 60
    while not cluster.status()["up"] and time.monotonic() < deadline:
        time.sleep(1)
    assert cluster.status()["up"], cluster.status()["message"]


def test_bad_fault_words_are_one_sentence(cluster: LocalCluster, capsys: pytest.CaptureFixture[str]) -> None:
    where = ["cluster", "--state-dir", str(cluster.state_dir), "fault"]
    assert cli.main([*where, "rate", "node9", "1mbit"]) == 2
    assert cli.main([*where, "rate", "node1", "fast"]) == 2
    assert cli.main([*where, "sideways", "node1"]) == 2
    said = capsys.readouterr().err
    assert "no node 'node9' in this cluster (its nodes: node1, node2, node3, node4)" in said
    assert "rate 'fast' is not a tc rate" in said and "'cluster fault sideways node1' is not a fault" in said


def test_faults_need_the_namespaces_layout(capsys: pytest.CaptureFixture[str]) -> None:
    """A one-host cluster (chosen by hand) has no link of its own to fault: one sentence, exit 4."""
    root = Path(tempfile.mkdtemp(prefix="mpr-1h-", dir="/tmp"))
    root.chmod(0o755)
    one_host = LocalCluster(root / "local-cluster", nodes=2, network="one-host")
    try:
        one_host.start()
        assert cli.main(["cluster", "--state-dir", str(one_host.state_dir), "fault", "down", "node1"]) == 4
        assert "runs its nodes on this host's network" in capsys.readouterr().err
    finally:
        one_host.stop()
        shutil.rmtree(root, ignore_errors=True)


def test_stop_removes_every_namespace_veth_and_bridge_it_made() -> None:
    root = Path(tempfile.mkdtemp(prefix="mpr-ns-", dir="/tmp"))
    root.chmod(0o755)
    other = LocalCluster(root / "local-cluster", nodes=2, network="namespaces")
    try:
        other.start()
        network = other.network
        assert network is not None and network.exists()
        made = [network.namespace(n) for n in network.nodes]
        assert all((netns.NETNS_DIR / ns).exists() for ns in made)
        other.fault("rate", "node1", rate="100mbit", peer="node2")
    finally:
        other.stop(force=True)
        shutil.rmtree(root, ignore_errors=True)
    assert not network.exists()
    assert not any((netns.NETNS_DIR / ns).exists() for ns in made)
    links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    assert f"{netns.PREFIX}{network.tag}-" not in links


def test_the_cross_node_step_marks_each_ranks_exit_for_the_step_watcher(cluster: LocalCluster, pingpong: Path,
                                                                      tmp_path: Path) -> None:
    """The checks' heterogeneous step (launch.pt2pt_step) writes both ranks' exit codes where the step
    watcher looks, from each node; a rank a signal killed is still reported by Slurm as killed so."""
    step = launch.pt2pt_step(Binding("cross_node", ((0, 0), (1, 1))), 2, str(pingpong), [], ["--mpi=pmix"])
    marks = tmp_path / "marks"
    marks.mkdir()
    srun_pid = tmp_path / "srun.pid"
    # srun in the background with its PID written: the Slurm 22.05 teardown hang this marking exists for
    # (SchedMD 16817) can keep srun running after both ranks have marked, and the test then ends it as the
    # step watcher would, by that PID, so that salloc releases the nodes.
    step_line = " ".join(["srun"] + step.options + [str(pingpong)] + step.executable_opts)
    command = " ".join(["salloc", "-N2", "--exclusive", "env", f"{launch.MARKS_ENV}={marks}",
                        "MPIREGRESS_NODE0=node1", "MPIREGRESS_NODE1=node2", "bash", "-c",
                        shlex.quote(f"{step_line} & echo $! > {srun_pid}; wait $!")])
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    env.update(cluster.client_env(), OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    alloc = subprocess.Popen(["bash", "-c", command], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
    grace = systems.get("local").partitions[0].reframe["extras"]["step_end_grace"]
    deadline = time.monotonic() + 120
    both_marked = None
    while alloc.poll() is None and time.monotonic() < deadline:
        if both_marked is None and len(list(marks.iterdir())) == 2:
            both_marked = time.monotonic()
        if both_marked is not None and time.monotonic() - both_marked > grace:
            os.kill(int(srun_pid.read_text()), signal.SIGKILL)   # the hung srun ignores SIGTERM
            break
        time.sleep(0.5)
    try:
        _, stderr = alloc.communicate(timeout=max(1.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        alloc.kill()
        _, stderr = alloc.communicate()
    if not list(marks.iterdir()):
        pytest.fail(f"the step's ranks marked nothing (exit {alloc.returncode}): {stderr}", pytrace=False)
    written = sorted((p.name.split(".")[0], p.read_text().strip()) for p in marks.iterdir())
    assert written == [("node1", "0"), ("node2", "0")], stderr
    assert step.marked_ranks == 2
    killed = srun(cluster, "--mpi=none", "-w", "node1", "-n1", "sh", "-c", launch.exit_mark_script(),
                  "sh", "-c", "kill -SEGV $$")
    assert killed.returncode != 0 and "Segmentation fault" in killed.stderr, killed.stderr
