"""srun command lines for the checks, as pure functions (unit-tested without ReFrame or Slurm).

Every step names its geometry explicitly: inside an existing allocation (the
Jacamar run jobs, ReFrame's ``local`` scheduler) srun would otherwise take the
allocation's. ``--kill-on-bad-exit=1``: a rank that dies (SIGILL, crash) must end
the step, not leave its peers waiting.
"""
from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Optional

from mpiregress.model.topology import Binding

KILL_ON_BAD_EXIT = "--kill-on-bad-exit=1"
LATE_EXIT_S = 0.5  # the second component of a heterogeneous step ends this late (pt2pt_step)
MARKS_ENV = "MPIREGRESS_STEP_MARKS"  # the step watcher's folder for the ranks' exit codes (mpiregress.run.stepwatch)
DISTRIBUTIONS: tuple[str, ...] = ("block:block", "block:cyclic")


@dataclass(frozen=True)
class Step:
    """What a check hands to ReFrame's launcher: srun options, and the executable's own options.

    ``marked_ranks``: how many of its ranks mark their exit for the step watcher (:func:`exit_mark`)."""

    options: list[str]
    executable_opts: list[str]
    marked_ranks: int = 0


def exit_mark_script(late_s: float = 0.0) -> str:
    """The shell text of :func:`exit_mark`, unquoted (for an argv that no shell reads)."""
    wait = f"sleep {late_s:g}; " if late_s else ""
    mark = f'[ -z "${MARKS_ENV}" ] || echo $rc > "${MARKS_ENV}/$SLURMD_NODENAME.$$"'
    return f'"$0" "$@"; rc=$?; {wait}{mark}; [ $rc -gt 128 ] && kill -$((rc - 128)) $$; exit $rc'


def exit_mark(late_s: float = 0.0) -> list[str]:
    """``sh -c WRAPPER`` for a job-script line, to put before a rank's program: it runs the program, waits
    ``late_s``, writes the program's exit code where the step watcher looks (mpiregress.run.stepwatch) and
    exits as the program did; a program a signal killed is reported to Slurm as killed by that signal."""
    return ["sh", "-c", shlex.quote(exit_mark_script(late_s))]


def step_bound(python: str, limit_s: int, kill_after_s: int, marked_ranks: int = 0,
               end_grace_s: Optional[float] = None) -> list[str]:
    """The launcher modifier bounding a step to ``limit_s`` seconds: ``timeout``, or the step watcher
    when ranks mark their exit and the partition names how long srun may outlive them."""
    if not marked_ranks or end_grace_s is None:
        return ["timeout", "-k", str(kill_after_s), str(limit_s)]
    return [shlex.quote(python), "-m", "mpiregress", "step-watch", "--limit", str(limit_s),
            "--kill-after", str(kill_after_s), "--ranks", str(marked_ranks), "--grace", f"{end_grace_s:g}", "--"]


def pt2pt_step(binding: Binding, cpus_per_task: int, executable: str, args: list[str],
               site_options: list[str]) -> Step:
    """Two ranks placed as ``binding`` says.

    Two nodes sharing one host's CPUs (the local system) cannot both bind their rank
    to a different core in an ordinary step, so that case is a heterogeneous step:
    each component gets its own binding and PMIx still forms one MPI_COMM_WORLD. Its
    second component ends half a second late: Slurm 22.05 can hang when both end at
    once (SchedMD 16817); it still does now and then, after both ranks have exited, so
    each rank marks its exit for the step watcher (:func:`exit_mark`, :func:`step_bound`).
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
    options += exit_mark()
    return Step(options, list(args) + [":", "-w", '"$MPIREGRESS_NODE1"', "-n1", f"-c{cpus_per_task}",
                                       f"--cpu-bind=verbose,map_cpu:{second[1]}"] + exit_mark(LATE_EXIT_S)
                + [executable] + list(args), marked_ranks=2)


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
