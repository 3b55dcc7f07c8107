"""Placement from topology: the seed teams' hand-written CPU maps fall out of the recorded topologies."""
import json

import pytest
from shared import REPO

from mpiregress.model import topology

TOPOLOGIES = REPO / "checks" / "topology"


def load(name: str) -> topology.Topology:
    return topology.Topology.from_processor_info(json.loads((TOPOLOGIES / name / "processor.json").read_text()))


@pytest.mark.parametrize("partition", ["iris-broadwell", "iris-skylake"])
def test_iris_bindings_match_the_seed_maps_and_cross_numa_is_skipped(partition):
    topo = load(partition)
    assert topology.place("same_numa", topo).map_cpu() == "0,1"
    assert topology.place("cross_socket", topo).map_cpu() == "0,14"
    missing = topology.place("cross_numa", topo)
    assert isinstance(missing, topology.Unavailable)
    assert "no socket holds two NUMA nodes" in missing.reason


def test_aion_bindings_match_the_seed_maps():
    topo = load("aion-batch")
    assert topology.place("same_numa", topo).map_cpu() == "0,1"
    assert topology.place("cross_numa", topo).map_cpu() == "0,16"
    assert topology.place("cross_socket", topo).map_cpu() == "0,64"


def test_cross_node_uses_one_rank_per_node_and_separate_cores_on_a_shared_host():
    topo = load("aion-batch")
    remote = topology.place("cross_node", topo, num_nodes=2)
    assert remote.ranks == ((0, 0), (1, 0)) and remote.nodes == 2
    shared = topology.place("cross_node", topo, num_nodes=2, nodes_share_cpus=True)
    assert shared.ranks == ((0, 0), (1, 1))
    single = topology.place("cross_node", topo, num_nodes=1)
    assert isinstance(single, topology.Unavailable) and "1 node(s)" in single.reason


def test_one_socket_two_core_host_offers_same_numa_and_cross_node_only():
    info = {"topology": {"numa_nodes": ["0x3"], "sockets": ["0x3"], "cores": ["0x1", "0x2"]}}
    topo = topology.Topology.from_processor_info(info)
    assert topology.place("same_numa", topo).map_cpu() == "0,1"
    assert isinstance(topology.place("cross_numa", topo), topology.Unavailable)
    socket = topology.place("cross_socket", topo)
    assert isinstance(socket, topology.Unavailable) and "single socket" in socket.reason


def test_hyperthread_siblings_are_never_paired():
    # 2 cores x 2 threads: CPUs 0 and 2 share core 0, 1 and 3 share core 1.
    info = {"topology": {"numa_nodes": ["0xf"], "sockets": ["0xf"], "cores": ["0x5", "0xa"]}}
    binding = topology.place("same_numa", topology.Topology.from_processor_info(info))
    assert binding.map_cpu() == "0,1"


def test_missing_topology_is_an_error_not_a_guess():
    with pytest.raises(ValueError, match="no core topology"):
        topology.Topology.from_processor_info({})


def test_unknown_placement_is_rejected():
    with pytest.raises(ValueError, match="unknown placement"):
        topology.place("same_rack", load("aion-batch"))


VERBOSE = """cpu-bind=MAP  - node1, task  0  0 [4242]: mask 0x1 set
cpu-bind=MAP  - node1, task  1  1 [4243]: mask 0x2 set
"""


def test_binding_obtained_is_verified_against_slurm_verbose_output():
    binding = topology.Binding("same_numa", ((0, 0), (0, 1)))
    assert topology.bindings_reported(VERBOSE) == [("node1", 0, [0]), ("node1", 1, [1])]
    assert topology.verify(binding, VERBOSE) is None
    wrong = topology.Binding("cross_socket", ((0, 0), (0, 14)))
    assert "differs" in topology.verify(wrong, VERBOSE)
    assert "reported 0" in topology.verify(binding, "no binding lines here")


def _verbose(tasks):
    """Slurm's --cpu-bind=verbose lines for (node, task, cpus) tuples."""
    return "\n".join(f"cpu-bind-cores=MASK - {node}, task {task:2d} {task % 4:2d} [{100 + task}]: "
                     f"mask {hex(sum(1 << c for c in cpus))} set" for node, task, cpus in tasks)


TWO_SOCKETS = topology.Topology(cores=tuple(range(8)), numa_of={c: c // 4 for c in range(8)},
                                socket_of={c: c // 4 for c in range(8)})


def test_block_block_fills_a_node_and_a_socket_before_the_next():
    text = _verbose([("n1", t, [t]) for t in range(4)] + [("n2", t, [t - 4]) for t in range(4, 8)])
    assert topology.verify_distribution(text, 8, 2, "block:block", TWO_SOCKETS) is None
    assert "consecutive ranks on one socket" in topology.verify_distribution(
        _verbose([("n1", 0, [0]), ("n1", 1, [4]), ("n1", 2, [1]), ("n1", 3, [5])]), 4, 1, "block:block", TWO_SOCKETS)


def test_block_cyclic_deals_ranks_over_the_sockets():
    text = _verbose([("n1", 0, [0]), ("n1", 1, [4]), ("n1", 2, [1]), ("n1", 3, [5])])
    assert topology.verify_distribution(text, 4, 1, "block:cyclic", TWO_SOCKETS) is None
    wrong = _verbose([("n1", t, [t]) for t in range(4)])
    assert "dealt over sockets" in topology.verify_distribution(wrong, 4, 1, "block:cyclic", TWO_SOCKETS)


def test_ranks_on_the_wrong_node_or_missing_are_named():
    text = _verbose([("n1", 0, [0]), ("n2", 1, [1]), ("n1", 2, [2]), ("n2", 3, [3])])
    assert "rank 1 ran on n2" in topology.verify_distribution(text, 4, 2, "block:block", TWO_SOCKETS)
    assert "reported 3" in topology.verify_distribution(_verbose([("n1", t, [t]) for t in range(3)]), 4, 1,
                                                        "block:block", TWO_SOCKETS)


def test_oversubscribed_nodes_are_checked_for_nodes_only():
    shared = _verbose([("n1", t, [0, 1]) for t in range(4)] + [("n2", t, [0, 1]) for t in range(4, 8)])
    assert topology.verify_distribution(shared, 8, 2, "block:cyclic", TWO_SOCKETS, overcommitted=True) is None
    assert "bound across sockets" in topology.verify_distribution(
        _verbose([("n1", 0, [0, 4]), ("n1", 1, [1])]), 2, 1, "block:block", TWO_SOCKETS)
