"""The srun command lines of the checks: pure functions, checked without Slurm."""
import pytest

from mpiregress.model import launch
from mpiregress.model.topology import Binding


def test_same_node_pair_binds_both_ranks_with_map_cpu():
    step = launch.pt2pt_step(Binding("cross_socket", ((0, 0), (0, 14))), 14, "/x/osu_latency", ["-m", "8:8"],
                             ["--mpi=pmix"])
    assert step.options == ["--mpi=pmix", "--kill-on-bad-exit=1", "--nodes=1", "--ntasks=2",
                            "--ntasks-per-node=2", "--cpu-bind=verbose,map_cpu:0,14"]
    assert step.executable_opts == ["-m", "8:8"]


def test_two_real_nodes_use_one_ordinary_step():
    step = launch.pt2pt_step(Binding("cross_node", ((0, 0), (1, 0))), 28, "/x/osu_bw", [], [])
    assert "--nodes=2" in step.options and "--ntasks-per-node=1" in step.options
    assert "--cpu-bind=verbose,map_cpu:0" in step.options and ":" not in step.executable_opts


def test_nodes_sharing_cpus_get_a_heterogeneous_step_with_a_late_second_exit():
    step = launch.pt2pt_step(Binding("cross_node", ((0, 0), (1, 1))), 2, "/x/osu_bw", ["-i", "10"], [])
    assert step.options[-6:-3] == ["-n1", "-c2", "--cpu-bind=verbose,map_cpu:0"]
    colon = step.executable_opts.index(":")
    assert step.executable_opts[:colon] == ["-i", "10"]
    assert "--cpu-bind=verbose,map_cpu:1" in step.executable_opts
    assert step.executable_opts[-3:] == ["/x/osu_bw", "-i", "10"] and "sleep 0.5" in " ".join(step.executable_opts)


def test_both_ranks_of_a_heterogeneous_step_mark_their_exit_for_the_step_watcher():
    step = launch.pt2pt_step(Binding("cross_node", ((0, 0), (1, 1))), 2, "/x/osu_bw", ["-i", "10"], [])
    line = " ".join(step.options + ["/x/osu_bw"] + step.executable_opts)
    assert line.count(launch.MARKS_ENV) == 4 and step.marked_ranks == 2
    assert step.options[-3:-1] == ["sh", "-c"] and "sleep" not in step.options[-1]
    ordinary = launch.pt2pt_step(Binding("cross_node", ((0, 0), (1, 0))), 28, "/x/osu_bw", [], [])
    assert ordinary.marked_ranks == 0 and launch.MARKS_ENV not in " ".join(ordinary.options)


def test_a_step_is_bounded_by_timeout_unless_its_ranks_mark_their_exit_and_a_grace_is_named():
    assert launch.step_bound("/v/python", 109, 10) == ["timeout", "-k", "10", "109"]
    assert launch.step_bound("/v/python", 109, 10, 2, None) == ["timeout", "-k", "10", "109"]
    assert launch.step_bound("/v w/python", 109, 10, 2, 5.0) == [
        "'/v w/python'", "-m", "mpiregress", "step-watch", "--limit", "109", "--kill-after", "10", "--ranks", "2",
        "--grace", "5", "--"]


@pytest.mark.parametrize("nprocs, nodes, distribution, per_node", [
    (256, 2, "block:block", 128), (8, 1, "block:cyclic", 8), (2, 2, "block:block", 1)])
def test_collective_steps_name_their_whole_geometry(nprocs, nodes, distribution, per_node):
    step = launch.collective_step(nprocs, nodes, distribution, ["--mpi=pmix"])
    assert step.options == ["--mpi=pmix", "--kill-on-bad-exit=1", f"--nodes={nodes}", f"--ntasks={nprocs}",
                            f"--ntasks-per-node={per_node}", f"--distribution={distribution}",
                            "--cpu-bind=verbose,cores"]


def test_oversubscribed_collective_steps_say_so_to_slurm():
    assert launch.collective_step(8, 2, "block:block", [], overcommit=True).options[-1] == "--overcommit"


@pytest.mark.parametrize("nprocs, nodes, distribution, message", [
    (7, 2, "block:block", "cannot be spread evenly"), (0, 1, "block:block", "cannot be spread evenly"),
    (4, 2, "cyclic:fcyclic", "unknown distribution")])
def test_impossible_collective_geometry_is_refused_with_a_sentence(nprocs, nodes, distribution, message):
    with pytest.raises(ValueError, match=message):
        launch.collective_step(nprocs, nodes, distribution, [])
