"""coll/tuned algorithm data: ids and names checked against real ompi_info output, validation, forced env."""
import re

import pytest
from shared import OSU_OUTPUTS, require

from mpiregress.errors import InputError
from mpiregress.families.coll import algorithms

_VALID = re.compile(r'parameter "coll_tuned_(?P<coll>\w+)_algorithm" .*?\n\s*.*?\n\s*Valid values: (?P<values>[^\n]+)')


def ompi_info_algorithms() -> dict[str, dict[int, str]]:
    text = require(OSU_OUTPUTS / "ompi_info_coll_tuned_4.1.4.txt").read_text()
    out = {}
    for m in _VALID.finditer(text):
        out[m.group("coll")] = {int(i): name for i, name in re.findall(r'(\d+):"([^"]+)"', m.group("values"))}
    return out


@pytest.mark.parametrize("collective", algorithms.COLLECTIVES)
def test_ids_and_names_match_ompi_info_of_4_1_4(collective):
    tuned = algorithms.load("4.1.4")
    real = ompi_info_algorithms()[collective]
    assert real.pop(0) == "ignore"
    assert {a.id: a.name for a in tuned.collective(collective).algorithms} == real


def test_series_file_covers_the_toolchain_version_and_names_default_first():
    tuned = algorithms.load("4.1.6")
    assert "4.1.6" in tuned.versions
    assert tuned.names("scatter") == ["default", "basic_linear", "binomial", "linear_nb"]
    assert tuned.collective("bcast").rules_id == 7 and tuned.collective("scatter").rules_id == 15


def test_forced_env_for_a_segmenting_algorithm_uses_the_default_segment_size():
    tuned = algorithms.load("4.1.4")
    assert algorithms.forced_env(tuned, "bcast", "pipeline") == {
        "OMPI_MCA_coll_tuned_use_dynamic_rules": "1",
        "OMPI_MCA_coll_tuned_bcast_algorithm": "3",
        "OMPI_MCA_coll_tuned_bcast_algorithm_segmentsize": "8192",
    }
    assert algorithms.forced_env(tuned, "bcast", 6, segsize="65536")["OMPI_MCA_coll_tuned_bcast_algorithm_segmentsize"] == "65536"
    assert algorithms.forced_env(tuned, "scatter", "binomial") == {
        "OMPI_MCA_coll_tuned_use_dynamic_rules": "1", "OMPI_MCA_coll_tuned_scatter_algorithm": "2"}


def test_default_forces_nothing():
    assert algorithms.forced_env(algorithms.load("4.1.4"), "allreduce", "default") == {}


def test_unknown_algorithm_id_is_one_sentence():
    with pytest.raises(InputError, match=r"no bcast algorithm 12 \(valid: 1 basic_linear, .*9 scatter_allgather_ring\)"):
        algorithms.forced_env(algorithms.load("4.1.4"), "bcast", 12)


def test_unknown_algorithm_name_is_one_sentence():
    with pytest.raises(InputError, match="no scatter algorithm named 'pipeline'"):
        algorithms.forced_env(algorithms.load("4.1.4"), "scatter", "pipeline")


@pytest.mark.parametrize("segsize", ["abc", "8k", "-1", 1.5, True])
def test_segment_size_that_is_not_a_number_is_refused(segsize):
    with pytest.raises(InputError, match="segment size"):
        algorithms.forced_env(algorithms.load("4.1.4"), "bcast", "binomial", segsize=segsize)


def test_segment_size_for_an_algorithm_that_does_not_segment_is_refused():
    with pytest.raises(InputError, match="does not segment"):
        algorithms.forced_env(algorithms.load("4.1.4"), "scatter", "binomial", segsize=8192)


def test_two_proc_alltoall_refuses_other_process_counts():
    tuned = algorithms.load("4.1.4")
    assert algorithms.forced_env(tuned, "alltoall", "two_proc", nprocs=2)["OMPI_MCA_coll_tuned_alltoall_algorithm"] == "5"
    with pytest.raises(InputError, match="only on 2 processes, not 4"):
        algorithms.forced_env(tuned, "alltoall", "two_proc", nprocs=4)


def test_openmpi_series_without_data_says_which_exist():
    with pytest.raises(InputError, match=r"no coll/tuned algorithm data for OpenMPI 5.0.3 .*described series: 4.1"):
        algorithms.load("5.0.3")
    with pytest.raises(InputError, match="not a version number"):
        algorithms.load("latest")


def test_broken_algorithm_file_is_one_sentence(tmp_path):
    (tmp_path / "openmpi-4.1.yaml").write_text("openmpi: '4.1'\nversions: []\nmca: {}\ndefault_segsize: x\ncollectives: {}\n")
    with pytest.raises(InputError, match="default_segsize"):
        algorithms.load("4.1.4", tmp_path)
    (tmp_path / "openmpi-4.1.yaml").write_text("collectives: [\n")
    with pytest.raises(InputError, match="not valid YAML"):
        algorithms.load("4.1.4", tmp_path)
