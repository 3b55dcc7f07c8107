"""The collective sweep file (weekly and MR subsets) expanded into job steps per partition."""
import pytest

from mpiregress.errors import InputError
from mpiregress.families.coll import algorithms, plan

TUNED = algorithms.load("4.1.6")


def test_process_counts_powers_of_two_then_full_node_then_two_nodes():
    keys = ["powers_of_two", "full_node", "two_nodes"]
    assert plan.process_counts(keys, 28) == [(2, 1), (4, 1), (8, 1), (16, 1), (28, 1), (56, 2)]
    assert plan.process_counts(keys, 128) == [(2, 1), (4, 1), (8, 1), (16, 1), (32, 1), (64, 1), (128, 1), (256, 2)]


def test_weekly_sweep_covers_every_algorithm_count_and_distribution():
    subsets = plan.load()
    steps = plan.steps(subsets["weekly"], TUNED, 128)
    bcast = {s.algorithm for s in steps if s.collective == "bcast"}
    assert bcast == set(TUNED.names("bcast"))
    assert {s.distribution for s in steps} == {"block:block", "block:cyclic"}
    assert {s.nprocs for s in steps if s.algorithm == "two_proc"} == {2}
    ranges = {(s.sizes.low, s.sizes.high) for s in steps if s.collective == "bcast"}
    assert ranges == {(1, 8192), (16384, 1048576)}                           # one invocation per -i/-x range
    assert {s.sizes.high for s in steps if s.collective == "alltoall"} == {8192, 65536}
    big = next(s for s in steps if s.collective == "bcast" and s.sizes.low == 16384 and s.algorithm == "pipeline")
    assert big.osu_args() == ["-f", "-m", "16384:1048576", "-i", "20", "-x", "2"]
    assert big.env(TUNED)["OMPI_MCA_coll_tuned_bcast_algorithm"] == "3"
    assert big.env(TUNED)["OMPI_MCA_coll_tuned_bcast_algorithm_segmentsize"] == "8192"
    assert list(big.parameters(65536)) == ["nprocs", "nodes", "distribution", "algorithm", "size"]
    scatter = next(s for s in steps if s.collective == "scatter" and s.algorithm == "binomial")
    assert scatter.env(TUNED) == {"OMPI_MCA_coll_tuned_use_dynamic_rules": "1", "OMPI_MCA_coll_tuned_scatter_algorithm": "2"}
    assert next(s for s in steps if s.algorithm == "default").env(TUNED) == {}


def test_mr_subset_is_default_only_full_and_two_nodes_a_few_sizes():
    steps = plan.steps(plan.load()["mr"], TUNED, 28)
    assert {s.algorithm for s in steps} == {"default"}
    assert {(s.nprocs, s.nodes) for s in steps} == {(28, 1), (56, 2)}
    assert sorted({s.sizes.low for s in steps if s.collective == "bcast"}) == [8, 8192, 1048576]
    assert all(s.sizes.low == s.sizes.high and s.repeats == 3 for s in steps)
    assert {s.sizes.low for s in steps if s.collective == "alltoall"} == {8, 8192}


def write(tmp_path, text):
    path = tmp_path / "sweep.yaml"
    path.write_text(text)
    return path


@pytest.mark.parametrize("text, message", [
    ("collectives: [bcast]\nsubsets: {}\n", "defines no subsets: the sweep is empty"),
    ("subsets: {w: {}}\n", "lists no collectives"),
    ("collectives: [gather]\nsubsets: {w: {}}\n", "unknown collective"),
    ("collectives: [bcast]\nsubsets: {w: {algorithms: [], nprocs: [2], distributions: [block:block], message_sizes: '1:8'}}\n",
     "algorithms must be"),
    ("collectives: [bcast]\nsubsets: {w: {algorithms: all, nprocs: [1], distributions: [block:block], message_sizes: '1:8'}}\n",
     "neither a count >= 2"),
    ("collectives: [bcast]\nsubsets: {w: {algorithms: all, nprocs: [2], distributions: [cyclic], message_sizes: '1:8'}}\n",
     "distributions must be"),
    ("collectives: [bcast]\nsubsets: {w: {algorithms: all, nprocs: [2], distributions: [block:block], message_sizes: 'abc'}}\n",
     "message size range 'abc'"),
    ("collectives: [bcast]\nsubsets: {w: {algorithms: all, nprocs: [2], distributions: [block:block], message_sizes: '1:8', segsize: big}}\n",
     "segsize: 'big' is not a segment size"),
    ("collectives: [bcast\n", "not valid YAML"),
])
def test_bad_sweep_files_are_one_sentence(tmp_path, text, message):
    with pytest.raises(InputError, match=message):
        plan.load(write(tmp_path, text))


def test_unknown_algorithm_and_rank_counts_the_partition_cannot_offer(tmp_path):
    path = write(tmp_path, "collectives: [bcast]\nsubsets:\n  w: {algorithms: [default, turbo], nprocs: [2], "
                           "distributions: [block:block], message_sizes: '1:8'}\n"
                           "  big: {algorithms: [default], nprocs: [512], distributions: [block:block], message_sizes: '1:8'}\n")
    subsets = plan.load(path)
    with pytest.raises(InputError, match="no bcast algorithm named 'turbo'"):
        plan.steps(subsets["w"], TUNED, 28)
    with pytest.raises(InputError, match="asks for 512 ranks but the partition offers 2 x 28 cores"):
        plan.steps(subsets["big"], TUNED, 28)
    with pytest.raises(InputError, match="offers 1 node"):
        plan.process_counts(["two_nodes"], 28, max_nodes=1)


def test_iterations_at_follow_osu_defaults_unless_set():
    assert plan.SizeRange(1, 1048576).iterations_at(8192) == (1000, 200)
    assert plan.SizeRange(1, 1048576).iterations_at(16384) == (100, 10)
    assert plan.SizeRange(16384, 1048576, 20, 2).iterations_at(16384) == (20, 2)
