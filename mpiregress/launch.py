"""srun command lines for the checks, as pure functions (unit-tested without ReFrame or Slurm).

Every step names its geometry explicitly: inside an existing allocation (the
Jacamar run jobs, ReFrame's ``local`` scheduler) srun would otherwise take the
allocation's. ``--kill-on-bad-exit=1``: a rank that dies (SIGILL, crash) must end
the step, not leave its peers waiting.
"""
from __future__ import annotations

import shlex
from dataclasses import dataclass

from .topology import Binding

KILL_ON_BAD_EXIT = "--kill-on-bad-exit=1"
DISTRIBUTIONS: tuple[str, ...] = ("block:block", "block:cyclic")


@dataclass(frozen=True)
class Step:
    """What a check hands to ReFrame's launcher: srun options, and the executable's own options."""

    options: list[str]
    executable_opts: list[str]


def pt2pt_step(binding: Binding, cpus_per_task: int, executable: str, args: list[str],
               site_options: list[str]) -> Step:
    """Two ranks placed as ``binding`` says.

    Two nodes sharing one host's CPUs (the local system) cannot both bind their rank
    to a different core in an ordinary step, so that case is a heterogeneous step:
    each component gets its own binding and PMIx still forms one MPI_COMM_WORLD. Its
    second component ends half a second late: Slurm 22.05 can hang when both end at
    once (SchedMD 16817).
    """
    options = list(site_options) + [KILL_ON_BAD_EXIT]
    first, second = binding.ranks
    if binding.nodes == 1 or first[1] == second[1]:
        per_node = 2 if binding.nodes == 1 else 1
        cpu = binding.map_cpu() if binding.nodes == 1 else str(first[1])
        options += [f"--nodes={binding.nodes}", "--ntasks=2", f"--ntasks-per-node={per_node}",
                    f"--cpu-bind=verbose,map_cpu:{cpu}"]
        return Step(options, list(args))
    options += ["-w", '"$MPIREGRESS_NODE0"', "-n1", f"-c{cpus_per_task}", f"--cpu-bind=verbose,map_cpu:{first[1]}"]
    late_exit = shlex.quote('"$0" "$@"; rc=$?; sleep 0.5; exit $rc')
    return Step(options, list(args) + [":", "-w", '"$MPIREGRESS_NODE1"', "-n1", f"-c{cpus_per_task}",
                                       f"--cpu-bind=verbose,map_cpu:{second[1]}", "sh", "-c", late_exit,
                                       executable] + list(args))


def collective_step(nprocs: int, nodes: int, distribution: str, site_options: list[str],
                    overcommit: bool = False) -> Step:
    """``nprocs`` ranks over ``nodes`` nodes, ``distribution`` across nodes:within a node, one core each.

    ``overcommit`` lets a node run more ranks than it has cores (the local system's
    8-rank runs on 2 shared cores): correct, never representative, and said so on
    every result.
    """
    if nprocs < 1 or nodes < 1 or nprocs % nodes:
        raise ValueError(f"{nprocs} ranks cannot be spread evenly over {nodes} node(s)")
    if distribution not in DISTRIBUTIONS:
        raise ValueError(f"unknown distribution {distribution!r} (known: {', '.join(DISTRIBUTIONS)})")
    options = list(site_options) + [KILL_ON_BAD_EXIT, f"--nodes={nodes}", f"--ntasks={nprocs}",
                                    f"--ntasks-per-node={nprocs // nodes}", f"--distribution={distribution}",
                                    "--cpu-bind=verbose,cores"]
    if overcommit:
        options.append("--overcommit")
    return Step(options, [])


def linktest_step(nodes: int, ranks_per_node: int, nodelist: str, site_options: list[str],
                  shared_cpus: bool = False) -> Step:
    """The all-pairs link test: ``ranks_per_node`` ranks on each of ``nodes`` nodes (0: the job's nodes,
    as many as Slurm gave it), on ``nodelist`` when one is named.

    ``shared_cpus`` (the local system: its nodes are one host) runs more ranks than the host has
    cores, unbound and overcommitted: the program's serial mode lets the waiting ranks sleep.
    """
    if nodes < 0 or ranks_per_node < 1:
        raise ValueError(f"{nodes} nodes x {ranks_per_node} ranks per node is not a job")
    count = str(nodes) if nodes else '"$SLURM_JOB_NUM_NODES"'
    tasks = str(nodes * ranks_per_node) if nodes else f'"$((SLURM_JOB_NUM_NODES * {ranks_per_node}))"'
    options = list(site_options) + [KILL_ON_BAD_EXIT, f"--nodes={count}", f"--ntasks={tasks}",
                                    f"--ntasks-per-node={ranks_per_node}"]
    if nodelist:
        options.append(f"--nodelist={nodelist}")
    options += ["--overcommit", "--cpu-bind=none"] if shared_cpus else ["--cpu-bind=cores"]
    return Step(options, [])
