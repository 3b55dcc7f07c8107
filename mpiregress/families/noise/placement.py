"""The placement experiments of seed 004, as layouts derived from a partition's topology.

``all_cores``: one rank on every core (the seed's 24 tasks per socket);
``one_free_per_socket``: the last core of each socket left to the OS (23 per
socket); ``smt``: one rank per core with the sibling hardware threads left to the
OS (the seed's HyperThreading partition), only where the nodes have SMT.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mpiregress.families.noise.records import LAYOUTS
from mpiregress.model import systems
from mpiregress.model.topology import Topology, _cpus

# FWQ iterations of one experiment: ~3 s of 10 us quanta, a 0.33 Hz spectral resolution, 15 repeats
# of the slowest event sought (200 ms) and 300 of a 100 Hz one.
ITERATIONS = 300_000


@dataclass(frozen=True)
class Layout:
    """Where the ranks of one node go, and the srun options that put them there."""

    layout: str
    cpus: tuple[int, ...]
    srun_options: tuple[str, ...]

    @property
    def tasks_per_node(self) -> int:
        return len(self.cpus)


@dataclass(frozen=True)
class LayoutUnavailable:
    layout: str
    reason: str


def threads_per_core(info: dict[str, Any]) -> int:
    """Hardware threads per core from ReFrame's processor info."""
    cores = (info.get("topology") or {}).get("cores") or []
    if cores:
        return max(len(_cpus(mask)) for mask in cores)
    return int(info.get("num_cpus_per_core") or 1)


def layout(name: str, info: dict[str, Any]) -> Layout | LayoutUnavailable:
    """The layout ``name`` on the nodes described by ``info`` (processor.json), or why it cannot exist."""
    if name not in LAYOUTS:
        raise ValueError(f"unknown FWQ layout {name!r}; known: {', '.join(LAYOUTS)}")
    topology = Topology.from_processor_info(info)
    sockets = topology.sockets()
    per_socket = min(len(c) for c in sockets.values())
    common = ("--nodes=1", "--exclusive")
    if name == "all_cores":
        cpus = topology.cores
        return Layout(name, cpus, common + (f"--ntasks-per-node={len(cpus)}", f"--ntasks-per-socket={per_socket}",
                                            f"--cpu-bind=map_cpu:{_list(cpus)}"))
    if name == "one_free_per_socket":
        if per_socket < 2:
            return LayoutUnavailable(name, f"a socket has {per_socket} core: leaving one free leaves none")
        cpus = tuple(c for cores in sockets.values() for c in cores[:-1])
        return Layout(name, cpus, common + (f"--ntasks-per-node={len(cpus)}",
                                            f"--ntasks-per-socket={per_socket - 1}",
                                            f"--cpu-bind=map_cpu:{_list(cpus)}"))
    threads = threads_per_core(info)
    if threads < 2:
        return LayoutUnavailable(name, f"the nodes have {threads} hardware thread per core (SMT off): "
                                       f"nothing to leave to the OS")
    cpus = topology.cores
    # The first thread of each core: their siblings stay idle for the OS. Slurm's --hint cannot be
    # combined with an explicit --cpu-bind; --threads-per-core=1 says the same to the step layout
    # (one thread of each core) and the map pins it.
    return Layout(name, cpus, common + (f"--ntasks-per-node={len(cpus)}", "--threads-per-core=1",
                                        f"--cpu-bind=map_cpu:{_list(cpus)}"))


def _list(cpus: tuple[int, ...]) -> str:
    return ",".join(str(c) for c in cpus)


def srun_line(result: Layout | LayoutUnavailable, fwq: str = "fwq",
              output: str = "fwq-{layout}.fwq", iterations: int = ITERATIONS) -> str:
    """The srun command of one experiment, or a comment saying why it is skipped."""
    if isinstance(result, LayoutUnavailable):
        return f"# {result.layout}: skipped: {result.reason}"
    return (f"srun {' '.join(result.srun_options)} {fwq} -n {iterations} "
            f"-o {output.format(layout=result.layout)}")


# Fewer iterations than this are under a second of 10 us quanta: no period below a few hertz could recur.
MIN_ITERATIONS = 100_000


@systems.section_check("fwq_iterations", extras=True)
def _check_iterations(value: Any, path: object, key: str) -> None:
    """A partition's ``reframe.extras.fwq_iterations``: how long the noise family's FWQ runs."""
    if isinstance(value, bool) or not isinstance(value, int) or value < MIN_ITERATIONS:
        raise ValueError(f"must be a whole number of FWQ iterations from {MIN_ITERATIONS} (about a second of 10 us "
                         f"quanta), found {value!r}")
