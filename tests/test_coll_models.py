"""Seed 002's latency models (pipeline, linear, binary/binomial tree) on the project's topologies."""
import json

import pytest

from mpiregress import paths
from mpiregress.errors import InputError
from mpiregress.families.coll import algorithms, models
from mpiregress.model.topology import Topology

# Seed 002, table 2 (EPYC 7H12, the same CPU as Aion), in us.
SEED_TABLE_2 = {"same_numa": 0.34, "cross_numa": 0.36, "cross_socket": 0.65, "cross_node": 1.82}


def topology(name: str) -> Topology:
    info = json.loads((paths.checks_dir() / "topology" / name / "processor.json").read_text())
    return Topology.from_processor_info(info)


AION = topology("aion-batch")


def test_block_layout_fills_a_node_core_by_core_then_the_next_node():
    ranks = models.layout(AION, 256, 2, "block:block")
    assert ranks[:3] == [(0, 0), (0, 1), (0, 2)] and ranks[127] == (0, 127) and ranks[128] == (1, 0)


def test_cyclic_layout_alternates_sockets():
    ranks = models.layout(AION, 4, 1, "block:cyclic")
    assert ranks == [(0, 0), (0, 64), (0, 1), (0, 65)]
    assert models.region(AION, ranks[0], ranks[1]) == "cross_socket"


def test_pipeline_is_the_sum_of_consecutive_hops():
    # 32 ranks on one Aion node, block: 31 hops, one crossing of a 16-core NUMA boundary.
    assert models.predict("pipeline", AION, 32, 1, "block:block", SEED_TABLE_2) == pytest.approx(30 * 0.34 + 0.36)
    # 256 ranks on two nodes: 252 same-NUMA hops, 2 x 3 NUMA crossings, 2 socket crossings, 1 node crossing.
    expected = 248 * 0.34 + 6 * 0.36 + 0.65 * 1 + 0.65 + 1.82
    assert models.predict("pipeline", AION, 256, 2, "block:block", SEED_TABLE_2) == pytest.approx(expected, rel=1e-2)


def test_map_by_socket_makes_the_pipeline_slower_as_in_the_seeds_table_1():
    core = models.predict("pipeline", AION, 128, 1, "block:block", SEED_TABLE_2)
    socket = models.predict("pipeline", AION, 128, 1, "block:cyclic", SEED_TABLE_2)
    assert socket > 1.5 * core


def test_linear_sums_the_roots_messages_with_an_optional_discount():
    t = models.Pt2pt(AION, models.layout(AION, 4, 1, "block:block"), SEED_TABLE_2)
    assert models.linear(t, 4) == pytest.approx(3 * 0.34)
    assert models.linear(t, 4, discount=lambda i: 1 / i) == pytest.approx(0.34 * (1 + 1 / 2 + 1 / 3))


def test_tree_levels_take_their_slowest_message_plus_penalties():
    t = models.Pt2pt(AION, models.layout(AION, 8, 1, "block:block"), SEED_TABLE_2)
    assert models.tree(t, 8, "binary") == pytest.approx(3 * 0.34)          # 0->1,2 ; 1,2->3..6 ; 3->7
    assert models.tree(t, 8, "binomial") == pytest.approx(3 * 0.34)
    assert models.tree(t, 8, "binary", n_proc_pen=1.0, comm_pen=0.5) == pytest.approx(1.0 + 3 * 0.34 * 1.5)
    two_nodes = models.Pt2pt(AION, models.layout(AION, 256, 2, "block:block"), SEED_TABLE_2)
    assert models.tree(two_nodes, 256, "binomial") == pytest.approx(1.82 + 0.65 + 0.36 + 0.36 + 4 * 0.34)


def test_model_errors_and_far_points():
    tuned = algorithms.load("4.1.4")
    models_of = {(c, a.name): a.model for c in algorithms.COLLECTIVES for a in tuned.collective(c).algorithms}
    measured = {("bcast", "pipeline", 32, 1, "block:block", 4): 11.4,            # model ~10.6: close
                ("bcast", "binomial", 32, 1, "block:block", 4): 5.0,             # model 4 x 0.34 + 0.36 = 1.72: far
                ("bcast", "knomial", 32, 1, "block:block", 4): 3.0}              # no model: left out
    points = models.compare(measured, models_of, AION, SEED_TABLE_2)
    assert [(p.algorithm, p.model) for p in points] == [("binomial", "binomial"), ("pipeline", "pipeline")]
    assert points[1].error == pytest.approx((30 * 0.34 + 0.36 - 11.4) / 11.4)
    far = models.far_from_model(points, limit=0.5)
    assert far == ["bcast binomial, 32 ranks (1 node, block:block), 4 B: measured 5.00 us, binomial model 1.72 us (-66 %)"]


def test_region_without_a_latency_and_impossible_layouts_are_sentences():
    iris = topology("iris-broadwell")
    with pytest.raises(InputError, match="no point-to-point latency for region cross_socket"):
        models.predict("pipeline", iris, 28, 1, "block:block", {"same_numa": 0.3})
    with pytest.raises(InputError, match="do not fit the 28 cores"):
        models.layout(iris, 64, 1, "block:block")
    with pytest.raises(InputError, match="do not split evenly"):
        models.layout(iris, 7, 2, "block:block")
    with pytest.raises(InputError, match="unknown latency model"):
        models.predict("ring", iris, 4, 1, "block:block", SEED_TABLE_2)
