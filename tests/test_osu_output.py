"""The OSU 7.2 output parser, on real outputs (../shared/osu-7.2-outputs), error cases included."""
import pytest
from shared import OSU_OUTPUTS, require

from mpiregress.families import osu_output


def read(name: str) -> str:
    return require(OSU_OUTPUTS / name).read_text()


@pytest.mark.parametrize("name, size, value", [
    ("osu_latency.txt", 8192, 2.90),
    ("osu_bw.txt", 1048576, 11558.87),
    ("spack_osu_latency.txt", 8192, 2.56),
    ("osu_bibw_1MiB.txt", 1048576, 17821.02),
    ("osu_latency_mp.txt", 8192, 3.12),
    ("osu_latency_validate.txt", 8192, 3.06),
    ("osu_bcast_full.txt", 8192, 3.17),
])
def test_single_size_values(name, size, value):
    assert osu_output.parse(read(name)).value(size) == pytest.approx(value)


def test_sweeps_keep_every_size_in_order():
    latency = osu_output.parse(read("osu_latency_sweep.txt"))
    assert list(latency.series())[:3] == [1, 2, 4]
    assert len(latency.rows) == 23
    assert latency.series()[4194304] == pytest.approx(584.64)
    bw = osu_output.parse(read("osu_bw_sweep.txt"))
    assert bw.columns == ["Bandwidth (MB/s)"]
    assert bw.value(4096) == pytest.approx(1698.00)


def test_full_collective_output_has_all_columns():
    out = osu_output.parse(read("osu_allreduce_full.txt"))
    assert out.title == "Allreduce Latency Test" and out.version == "7.2"
    assert out.columns == ["Avg Latency(us)", "Min Latency(us)", "Max Latency(us)", "Iterations"]
    assert out.value(1048576, column=2) == pytest.approx(137.79)
    assert out.value(16384, column=3) == 100


def test_multi_process_preamble_is_kept():
    out = osu_output.parse(read("osu_latency_mp.txt"))
    assert "Number of forked processes in sender: 2" in out.preamble


def test_header_without_data_row_is_a_failure_even_though_osu_exits_0():
    with pytest.raises(osu_output.OsuOutputError, match="header but no data row"):
        osu_output.parse(read("osu_latency_badarg.txt"))


def test_missing_size_names_the_sizes_present():
    with pytest.raises(osu_output.OsuOutputError, match="no row for message size 8192.*1048576"):
        osu_output.parse(read("osu_bw.txt")).value(8192)


def test_one_rank_run_says_why():
    with pytest.raises(osu_output.OsuOutputError, match="exactly two MPI processes"):
        osu_output.parse(read("osu_latency_one_rank.txt"))


def test_help_text_is_not_a_measurement():
    with pytest.raises(osu_output.OsuOutputError, match="no OSU benchmark header"):
        osu_output.parse(read("osu_latency_help.txt"))


def test_mpirun_sigill_reads_as_illegal_instruction():
    text = read("mpirun_rank_sigill.txt")
    deaths = osu_output.rank_deaths(text)
    assert [(d.rank, d.node, d.signal) for d in deaths] == [("1", "vm", 4)]
    assert deaths[0].illegal_instruction
    reason = osu_output.failure_reason(text)
    assert "illegal instruction" in reason and "rank 1 on vm" in reason
    with pytest.raises(osu_output.OsuOutputError, match="illegal instruction"):
        osu_output.parse(text)


def test_srun_sigill_reads_as_illegal_instruction():
    text = "srun: error: node1: task 1: Illegal instruction (core dumped)\n"
    assert "illegal instruction" in osu_output.failure_reason(text)


def test_other_signals_are_not_called_illegal_instruction():
    text = read("mpirun_rank_sigill.txt").replace("signal 4 (Illegal instruction)", "signal 11 (Segmentation fault)")
    reason = osu_output.failure_reason(text)
    assert "Segmentation fault" in reason and "illegal" not in reason


def test_failed_validation_is_a_failure():
    text = read("osu_latency_validate.txt").replace("Pass", "Fail")
    with pytest.raises(osu_output.OsuOutputError, match="validation failed at message size"):
        osu_output.parse(text)


def test_clean_output_has_no_failure_reason():
    assert osu_output.failure_reason(read("osu_latency.txt")) is None


def test_slurm_time_limit_reads_as_a_timeout():
    text = "slurmstepd: error: *** JOB 42 ON node1 CANCELLED AT 2026-11-22T05:00:00 DUE TO TIME LIMIT ***\n"
    reason = osu_output.failure_reason(text)
    assert reason.startswith("Slurm killed the job at its time limit") and "node1" in reason
    with pytest.raises(osu_output.OsuOutputError, match="time limit"):
        osu_output.parse(text)


SIGILL_THEN_CANCELLED = """\
srun: error: node1: task 1: Illegal instruction
srun: launch/slurm: _step_signal: Terminating StepId=33941013.1
slurmstepd-node1: error: *** STEP 33941013.1 ON node1 CANCELLED AT 2026-11-23T06:54:31 ***
srun: error: node1: task 0: Terminated
"""


def test_a_rank_dying_of_its_own_is_the_cause_not_the_step_slurm_then_cancelled():
    reason = osu_output.failure_reason(SIGILL_THEN_CANCELLED)
    assert reason.startswith("rank 1 on node1 died of an illegal instruction")
    assert not osu_output.is_infrastructure(reason)


def test_a_step_slurm_cancelled_with_only_terminated_ranks_is_infrastructure():
    text = ("slurmstepd-node1: error: *** STEP 5.1 ON node1 CANCELLED AT 2026-11-23T06:54:31 ***\n"
            "srun: error: node1: task 0: Terminated\n")
    reason = osu_output.failure_reason(text)
    assert reason.startswith("Slurm killed the step") and osu_output.is_infrastructure(reason)


def test_a_node_failure_explains_a_crash_after_it():
    text = (SIGILL_THEN_CANCELLED.replace("CANCELLED AT 2026-11-23T06:54:31", "CANCELLED AT 2026-11-23T06:54:31 "
                                          "DUE TO NODE FAILURE"))
    assert osu_output.failure_reason(text).startswith("node lost: ")
