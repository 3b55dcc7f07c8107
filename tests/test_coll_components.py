"""Which coll component OpenMPI selected, and a forced algorithm OpenMPI rejected (real outputs)."""
from shared import OSU_OUTPUTS, REPO, require

from mpiregress.families.coll import components


def read(name: str) -> str:
    return require(OSU_OUTPUTS / name).read_text()


def test_real_verbose_output_shows_tuned_in_charge_of_comm_world():
    text = read("osu_bcast_coll_base_verbose.txt")
    found = components.selections(text)
    assert len(found) == 2                                   # two ranks
    assert {s.winner for s in found} == {"tuned"}
    assert found[0].priority("tuned") == 30
    assert ("basic", 10) in found[0].enabled and not any(n == "sm" for n, _ in found[0].enabled)
    assert components.tuned_problem(text, "bcast") is None


def test_comm_self_selection_is_not_mistaken_for_comm_world():
    text = read("osu_bcast_coll_base_verbose.txt")
    assert {s.winner for s in components.selections(text, "MPI_COMM_SELF")} == {"self"}


def _with_component(text: str, name: str, priority: int) -> str:
    """The real output with one more component enabled on MPI_COMM_WORLD, as an hcoll/ucc build prints it."""
    out = []
    for line in text.splitlines():
        out.append(line)
        if "comm_select: selecting       tuned, priority  30, Enabled" in line:
            proc = line.split("]")[0] + "]"
            out.append(f"{proc} coll:base:comm_select: selecting {name:>11}, priority {priority:3d}, Enabled")
    return "\n".join(out)


def test_a_higher_priority_component_makes_forcing_meaningless():
    text = _with_component(read("osu_bcast_coll_base_verbose.txt"), "hcoll", 90)
    problem = components.tuned_problem(text, "bcast")
    assert problem is not None
    assert problem.startswith("coll/hcoll (priority 90) outranks coll/tuned (priority 30) on MPI_COMM_WORLD")
    assert "forced coll/tuned algorithms do not apply" in problem


def test_a_lower_priority_component_does_not():
    text = _with_component(read("osu_bcast_coll_base_verbose.txt"), "han", 0)
    assert components.tuned_problem(text, "scatter") is None


def test_tuned_missing_from_the_selection():
    text = read("osu_bcast_coll_base_verbose.txt").replace("selecting       tuned, priority  30, Enabled",
                                                           "selecting       tuned, priority  30, Disabled")
    assert "coll/tuned is not enabled on MPI_COMM_WORLD" in components.tuned_problem(text, "bcast")


def test_no_verbose_output_cannot_vouch_for_tuned():
    assert "printed no coll component selection" in components.tuned_problem(read("osu_bcast.txt"), "bcast")


def test_invalid_forced_algorithm_is_an_error_sentence_not_a_result():
    text = read("osu_bcast_alg12_invalid.txt")
    (bad,) = components.invalid_values(text)
    assert (bad.variable, bad.value) == ("coll_tuned_bcast_algorithm", "12")
    assert bad.valid.startswith('0:"ignore", 1:"basic_linear"')
    problem = components.forced_run_problem(text)
    assert problem.startswith("OpenMPI rejected coll_tuned_bcast_algorithm=12 (valid: 0:\"ignore\"")
    assert problem.endswith("this run measured the default, not the forced algorithm")


def test_valid_forced_run_has_no_problem():
    assert components.forced_run_problem(read("osu_bcast_alg6_binomial_full.txt")) is None


def test_a_warning_mpirun_lost_is_not_taken_for_a_clean_forced_run():
    """Real mpirun 4.1.4 output (the OSU double's osu_bcast, coll_tuned_bcast_algorithm=12) where the warning was lost."""
    text = (REPO / "tests" / "data" / "mpirun_lost_warning_osu_double_bcast_alg12.txt").read_text()
    assert "invalid value" not in text
    problem = components.forced_run_problem(text)
    assert problem and problem.startswith("mpirun lost a warning message of a rank (ORTE_ERROR_LOG in show_help.c)")


def test_a_selection_line_glued_to_another_process_unfinished_line_still_counts():
    # Real mpirun 4.1 output on a loaded 2-core host (CI): process 26613's line was cut off by
    # the chunked forwarding and process 26612's selection header continued on the same line.
    text = "\n".join([
        "[vm:26613] coll:base:comm_select: new communicator: MPI_COMM_WORLD (cid 0)",
        "[vm:26613] coll:base:comm_select: selecting      libnbc, priority  10, Enabled",
        "[vm:26613] coll:base:comm_select: selecting       tuned, priority  30, Enabled",
        "[vm:26613] mca: base: close: unloading compone"
        "[vm:26612] coll:base:comm_select: new communicator: MPI_COMM_WORLD (cid 0)",
        "[vm:26612] coll:base:comm_select: Checking all available modules",
        "[vm:26612] coll:base:comm_select: selecting      libnbc, priority  10, Enabled",
        "nt monitoring",
        "[vm:26612] coll:base:comm_select: selecting       tuned, priority  30, Enabled",
    ])
    found = components.selections(text)
    assert [(s.process, s.winner) for s in found] == [("vm:26613", "tuned"), ("vm:26612", "tuned")]
    assert components.tuned_problem(text, "bcast") is None
