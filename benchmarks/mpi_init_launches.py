"""MPI_Init crashes per launch on the namespaces cluster, with Slurm's default PMIx fences and with the cluster's own.

Starts its own local cluster (``--network namespaces``, in a fresh folder under /tmp), builds a
trivial MPI program (MPI_Init, one message, a barrier, MPI_Finalize) and launches it ``--launches``
times per setting, the settings alternating launch by launch so both see the same load:

- ``slurm-default``: ``SLURM_PMIX_FENCE=mixed`` in the step's environment, which overrides the
  cluster's mpi.conf with Slurm's default: fences without data go through the tree collective,
  which for a step of fewer nodes than TreeWidth completes on each node alone (ci/local-cluster/mpi.conf);
- ``cluster``: the cluster as `mpiregress cluster start` makes it (mpi.conf: ``PMIxCollFence=ring``).

Each launch is ``srun --mpi=pmix -N NODES -n NODES*RANKS_PER_NODE -O --cpu-bind=none
--kill-on-bad-exit=1`` with OMPI_MCA_mpi_yield_when_idle=1, as the link matrix and the collectives
launch here. A launch whose stderr says "Segmentation fault" is a crash (its srun lines are
printed); any other failure is counted apart. Prints a table; asserts nothing.

    python benchmarks/mpi_init_launches.py --launches 300

2026-11-25, this 2-core VM shared with another session (load average after each launch 4.1-11.2,
median 8.8), 4 nodes x 2 ranks, 746 s:

    setting        launches crashes other crashes/launch
    slurm-default       300       7     0      7/300
    cluster             300       0     0      0/300

Each crash: one or both ranks of one node died of SIGSEGV in MPI_Init (a call through a NULL pointer
from the TCP BTL's receive handler, while the rank waited in the modex fence), the others were
killed. A loop of the same launches by hand (srun with the pingpong of tests/test_local_cluster_netns.py)
gave 3/200 with Slurm's default and 0/300 with SLURM_PMIX_FENCE=ring.

The cluster, its namespaces and its bridge are stopped and removed at the end, whatever happens.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

from _cluster import mpi_env, own_cluster

from mpiregress.cluster.local import LocalCluster

SOURCE = r"""
#include <mpi.h>
int main(int argc, char **argv) {
    int rank, size, token = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (rank == 0) MPI_Send(&token, 1, MPI_INT, size - 1, 0, MPI_COMM_WORLD);
    else if (rank == size - 1) MPI_Recv(&token, 1, MPI_INT, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    return 0;
}
"""
# The step environment of each setting (the cluster's own mpi.conf applies where nothing overrides it).
SETTINGS = {"slurm-default": {"SLURM_PMIX_FENCE": "mixed"}, "cluster": {}}


def build(work: Path) -> Path:
    (work / "init.c").write_text(SOURCE)
    subprocess.run(["mpicc", "-O2", "-o", "init", "init.c"], cwd=work, check=True, capture_output=True, timeout=120)
    return work / "init"


def launch(cluster: LocalCluster, binary: Path, nodes: int, ranks: int, env: dict[str, str], cwd: Path
           ) -> subprocess.CompletedProcess:
    full = mpi_env(cluster, OMPI_MCA_mpi_yield_when_idle="1", **env)
    argv = ["srun", "--mpi=pmix", f"-N{nodes}", f"-n{ranks}", "-O", "--cpu-bind=none", "--kill-on-bad-exit=1",
            str(binary)]
    return subprocess.run(argv, env=full, capture_output=True, text=True, timeout=300, cwd=cwd)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--launches", type=int, default=300, help="launches per setting")
    parser.add_argument("--nodes", type=int, default=4)
    parser.add_argument("--ranks-per-node", type=int, default=2)
    parser.add_argument("--settings", default=",".join(SETTINGS), help=f"comma-separated, of {', '.join(SETTINGS)}")
    args = parser.parse_args()
    chosen = args.settings.split(",")
    unknown = [s for s in chosen if s not in SETTINGS]
    if unknown:
        print(f"unknown setting {unknown[0]!r} (known: {', '.join(SETTINGS)})", file=sys.stderr)
        return 2
    ranks = args.nodes * args.ranks_per_node
    print(f"# {args.nodes} nodes x {args.ranks_per_node} ranks, {args.launches} launches per setting")
    tally = {s: {"launches": 0, "crashes": 0, "other": 0} for s in chosen}
    loads: list[float] = []
    started = time.monotonic()
    with own_cluster(args.nodes, "init") as (cluster, work):
        binary = build(work)
        cluster.start()
        for i in range(args.launches):
            for setting in chosen:
                done = launch(cluster, binary, args.nodes, ranks, SETTINGS[setting], work)
                loads.append(os.getloadavg()[0])
                tally[setting]["launches"] += 1
                if done.returncode == 0:
                    continue
                kind = "crashes" if "Segmentation fault" in done.stderr else "other"
                tally[setting][kind] += 1
                said = [ln for ln in done.stderr.splitlines() if ln.startswith("srun: error")]
                print(f"{setting} launch {i + 1}: exit {done.returncode}, {kind}: {' | '.join(said[:4])}", flush=True)
    if loads:
        loads.sort()
        print(f"# {time.monotonic() - started:.0f} s; load average (1 min) after each launch: min {loads[0]:.1f}, "
              f"median {loads[len(loads) // 2]:.1f}, max {loads[-1]:.1f}")
    print(f"{'setting':<14} {'launches':>8} {'crashes':>7} {'other':>5} {'crashes/launch':>14}")
    for setting, t in tally.items():
        print(f"{setting:<14} {t['launches']:>8} {t['crashes']:>7} {t['other']:>5} "
              f"{t['crashes']:>6}/{t['launches']:<7}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
