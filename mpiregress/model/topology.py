"""Process placement derived from a partition's detected topology.

Input is ReFrame's processor info (``reframe --detect-host-topology`` format:
CPU masks of cores, NUMA nodes and sockets). Output is the CPU each of the two
ranks is bound to, or the reason the placement cannot exist on that hardware.
Nothing here knows a cluster by name: Iris' ``0,14`` and Aion's ``0,16``/``0,64``
fall out of their topologies.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Optional

from mpiregress.model.names import PLACEMENTS


@dataclass(frozen=True)
class Binding:
    """Where the two ranks go: (node index, CPU id) for rank 0 and rank 1."""

    placement: str
    ranks: tuple[tuple[int, int], tuple[int, int]]

    @property
    def nodes(self) -> int:
        return len({node for node, _ in self.ranks})

    def cpus(self) -> list[int]:
        return [cpu for _, cpu in self.ranks]

    def map_cpu(self) -> str:
        """Slurm ``map_cpu`` list for a one-node step (both ranks on one node)."""
        return ",".join(str(cpu) for cpu in self.cpus())


@dataclass(frozen=True)
class Unavailable:
    """A placement the hardware cannot offer, and why (a ReFrame skip message)."""

    placement: str
    reason: str


def _is_mask(mask: str) -> bool:
    try:
        return int(mask, 16) > 0 and len(mask) <= 4096
    except ValueError:
        return False


def _cpus(mask: str) -> list[int]:
    value = int(mask, 16)
    return [bit for bit in range(value.bit_length()) if value >> bit & 1]


@dataclass(frozen=True)
class Topology:
    """Cores (first hardware thread of each), and which NUMA node and socket each core is in."""

    cores: tuple[int, ...]
    numa_of: dict[int, int]
    socket_of: dict[int, int]

    @classmethod
    def from_processor_info(cls, info: dict[str, Any]) -> "Topology":
        """Build from ReFrame's processor info; raise ValueError when it has no topology."""
        topo = (info or {}).get("topology") or {} if isinstance(info, dict) else None
        if not isinstance(topo, dict):
            raise ValueError("the processor info is not a mapping with a 'topology' mapping")
        if not topo.get("cores"):
            raise ValueError("the processor info has no core topology")
        for key in ("cores", "numa_nodes", "sockets"):
            masks = topo.get(key) or []
            if not isinstance(masks, list) or not all(isinstance(m, str) and _is_mask(m) for m in masks):
                raise ValueError(f"the processor info's topology.{key} is not a list of hexadecimal CPU masks")
        # One CPU per core: ranks on hyperthread siblings would share a core and measure nothing useful.
        cores = tuple(sorted(min(_cpus(mask)) for mask in topo["cores"]))
        numa_masks = topo.get("numa_nodes") or [hex(sum(1 << c for c in cores))]
        socket_masks = topo.get("sockets") or numa_masks

        def owner(masks: list[str]) -> dict[int, int]:
            owners = {}
            for index, mask in enumerate(masks):
                for cpu in _cpus(mask):
                    owners[cpu] = index
            return {core: owners.get(core, 0) for core in cores}

        return cls(cores=cores, numa_of=owner(numa_masks), socket_of=owner(socket_masks))

    def numa_nodes(self) -> dict[int, list[int]]:
        groups: dict[int, list[int]] = {}
        for core in self.cores:
            groups.setdefault(self.numa_of[core], []).append(core)
        return groups

    def sockets(self) -> dict[int, list[int]]:
        groups: dict[int, list[int]] = {}
        for core in self.cores:
            groups.setdefault(self.socket_of[core], []).append(core)
        return groups


def place(placement: str, topology: Topology, num_nodes: int = 2,
          nodes_share_cpus: bool = False) -> Binding | Unavailable:
    """The binding for ``placement`` on ``topology``, or why it is unavailable.

    ``nodes_share_cpus`` is true for the local system, whose two Slurm nodes run
    on one host: cross-node ranks then take different cores so they do not
    time-share one core.
    """
    if placement not in PLACEMENTS:
        raise ValueError(f"unknown placement {placement!r} (known: {', '.join(PLACEMENTS)})")
    numa = topology.numa_nodes()
    sockets = topology.sockets()
    shape = (f"{len(sockets)} socket(s), {len(numa)} NUMA node(s), {len(topology.cores)} core(s)")
    if placement == "same_numa":
        for cores in numa.values():
            if len(cores) >= 2:
                return Binding(placement, ((0, cores[0]), (0, cores[1])))
        return Unavailable(placement, f"no NUMA node has two cores ({shape})")
    if placement == "cross_numa":
        for cores in sockets.values():
            domains = sorted({topology.numa_of[c] for c in cores})
            if len(domains) >= 2:
                first = numa[domains[0]][0]
                second = numa[domains[1]][0]
                return Binding(placement, ((0, first), (0, second)))
        return Unavailable(placement, f"no socket holds two NUMA nodes ({shape}): "
                                      f"same socket/different NUMA does not exist here")
    if placement == "cross_socket":
        if len(sockets) >= 2:
            ids = sorted(sockets)
            return Binding(placement, ((0, sockets[ids[0]][0]), (0, sockets[ids[1]][0])))
        return Unavailable(placement, f"a single socket ({shape}): different sockets do not exist here")
    # cross_node
    if num_nodes < 2:
        return Unavailable(placement, f"the partition has {num_nodes} node(s): different nodes need two")
    first = topology.cores[0]
    second = topology.cores[1] if nodes_share_cpus and len(topology.cores) > 1 else first
    return Binding(placement, ((0, first), (1, second)))


_CPU_BIND_VERBOSE = re.compile(
    r"cpu[-_]bind(?:-\w+)?(?:=|_)(?P<kind>\w+)\s*-\s*(?P<node>\S+),\s*task\s+(?P<task>\d+)\s+(?P<local>\d+)\s+\[\d+\]:\s*mask\s+(?P<mask>0x[0-9a-fA-F]+)\s+set")


def bindings_reported(text: str) -> list[tuple[str, int, list[int]]]:
    """(node, task, CPUs) for each line Slurm's ``--cpu-bind=verbose`` printed in ``text``."""
    return [(m.group("node"), int(m.group("task")), _cpus(m.group("mask")))
            for m in _CPU_BIND_VERBOSE.finditer(text)]


def verify(binding: Binding, text: str, node_names: Optional[list[str]] = None) -> Optional[str]:
    """None when Slurm reported exactly the intended binding in ``text``, else what differed.

    A heterogeneous step numbers its tasks per component, so tasks are matched
    in the order Slurm printed them per node, not by their task id.
    """
    reported = bindings_reported(text)
    if len(reported) != 2:
        return f"expected Slurm to report the binding of 2 ranks (--cpu-bind=verbose), it reported {len(reported)}"
    got = sorted(tuple(cpus) for _, _, cpus in reported)
    want = sorted((cpu,) for cpu in binding.cpus())
    if got != want:
        return (f"binding obtained {[list(c) for c in got]} differs from the {binding.placement} "
                f"binding asked for {[list(c) for c in want]}")
    if node_names is not None:
        nodes = {node for node, _, _ in reported}
        if len(nodes) != binding.nodes:
            return f"{binding.placement} asked for {binding.nodes} node(s), the ranks ran on {sorted(nodes)}"
    return None


def verify_distribution(text: str, nprocs: int, nodes: int, distribution: str, topology: Optional[Topology],
                        overcommitted: bool = False) -> Optional[str]:
    """None when Slurm's ``--cpu-bind=verbose`` report matches ``nprocs`` ranks spread as ``distribution``.

    Across nodes (``block:``) consecutive ranks fill a node before the next; within a
    node, ``:block`` keeps consecutive ranks on one socket, ``:cyclic`` deals them out
    over the sockets in turn. On an overcommitted node several ranks share cores and
    the per-socket check says nothing, so it is left out (the result says it was
    oversubscribed).
    """
    reported = sorted(bindings_reported(text), key=lambda r: r[1])
    if len(reported) != nprocs:
        return (f"expected Slurm to report the binding of {nprocs} ranks (--cpu-bind=verbose), "
                f"it reported {len(reported)}")
    per_node = nprocs // nodes
    # The node of each block of per_node consecutive ranks is the node its first rank ran on.
    hosts = [node for node, task, _ in reported if task % per_node == 0]
    for node, task, _ in reported:
        if node != hosts[task // per_node]:
            return (f"{distribution} asked for blocks of {per_node} consecutive ranks per node; "
                    f"rank {task} ran on {node}")
    if len(set(hosts)) != nodes:
        return f"{distribution} asked for {nodes} node(s), the ranks ran on {sorted(set(hosts))}"
    sockets = topology.sockets() if topology else {}
    if overcommitted or len(sockets) < 2:
        return None
    within = distribution.split(":")[1]
    for node_index in range(nodes):
        mine = [cpus for _, task, cpus in reported if task // per_node == node_index]
        owners = [{topology.socket_of.get(cpu) for cpu in cpus} for cpus in mine] if topology else []
        if any(len(o) != 1 for o in owners):
            return (f"a rank on {hosts[node_index]} is bound across sockets ({distribution} binds each rank "
                    f"to one core)")
        order = [o.pop() for o in owners]
        ids = sorted(sockets)
        if within == "cyclic":
            expected = [ids[i % len(ids)] for i in range(len(order))]
            if order != expected:
                return (f"block:cyclic asked for ranks dealt over sockets {ids} in turn; "
                        f"Slurm placed them on sockets {order}")
        elif order != sorted(order, key=lambda s: -1 if s is None else s):
            return (f"block:block asked for consecutive ranks on one socket before the next; "
                    f"Slurm placed them on sockets {order}")
    return None
