"""From ReFrame's JSON report to records, verdicts, the summary table and the exit code."""
import pytest
from shared import REPO

from mpiregress import errors
from mpiregress.model import baselines, results
from mpiregress.model.results import pt2pt
from mpiregress.report import summary
from mpiregress.run import reframe_report
from mpiregress.verdict import band as verdict
from mpiregress.verdict import compose

DATA = REPO / "tests" / "data"


def test_real_local_report_becomes_records_with_skip_reasons():
    found = reframe_report.load(DATA / "reframe_report_local_pass.json", toolchain="2023b")
    by_key = {(r.placement, r.metric): r for r in found}
    assert len(found) == 8
    lat = by_key[("same_numa", "latency")]
    assert lat.status == "pass" and lat.value == pytest.approx(4.31) and lat.unit == "us"
    assert lat.benchmark == "osu_latency" and lat.parameters == {"placement": "same_numa", "size": 8192}
    assert lat.target == "x86_64_v4"
    assert by_key[("cross_node", "bandwidth")].nodelist == ["node1", "node2"]
    skipped = by_key[("cross_socket", "latency")]
    assert skipped.status == "skip" and "a single socket" in skipped.reason


def test_sigill_report_is_an_error_with_the_reason():
    (case,) = reframe_report.load(DATA / "reframe_report_local_sigill.json")
    assert case.status == "error" and case.value is None
    assert case.reason.startswith("rank 1 on node1 died of an illegal instruction")


def test_a_missing_or_foreign_report_is_named(tmp_path):
    with pytest.raises(errors.InputError, match="does not exist"):
        reframe_report.load(tmp_path / "nope.json")
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(errors.InputError, match="not valid JSON"):
        reframe_report.load(tmp_path / "bad.json")
    (tmp_path / "other.json").write_text('{"tests": []}')
    with pytest.raises(errors.InputError, match="not a ReFrame 4 report"):
        reframe_report.load(tmp_path / "other.json")


def case(placement="same_numa", metric="latency", value=3.0, **kw):
    base = dict(partition="batch", method="source", status="pass", reference=3.0, tolerance=0.5)
    base.update(kw)
    return pt2pt("local", base.pop("partition"), base.pop("method"), placement, metric, value, **base)


def test_repeats_fold_into_the_median_and_are_judged_once_against_the_baselines():
    refs = baselines.for_system("local", REPO / "baselines")
    ref = refs.lookup_pt2pt("batch", "source", "same_numa", "latency")
    (folded,) = results.aggregate([case(value=v) for v in (ref.value, ref.value * 1.1, 10 * ref.value)])
    assert folded.value == pytest.approx(ref.value * 1.1) and len(folded.samples) == 3 and folded.status == "pass"
    slow_values = [ref.limit() * f for f in (1.1, 1.2, 1.3)]
    slow = results.aggregate([case(value=v) for v in slow_values])
    verdict.apply_baselines(slow, refs)
    assert slow[0].status == "fail" and f"median {slow_values[1]:.4g} us is above the limit" in slow[0].reason
    (crashed,) = results.aggregate([case(value=3.0), case(value=None, status="error", reason="rank died")])
    assert crashed.status == "error" and "1 of 2 repeats failed: rank died" in crashed.reason


def test_a_measurement_without_baseline_is_an_error_unless_allowed(tmp_path):
    refs = baselines.for_system("local", REPO / "baselines")
    orphan = [case(partition="nowhere", reference=None, tolerance=None)]
    verdict.apply_baselines(orphan, refs)
    assert orphan[0].status == "error"
    assert "no baseline for local/nowhere source same_numa latency" in orphan[0].reason
    allowed = [case(partition="nowhere", reference=None, tolerance=None)]
    verdict.apply_baselines(allowed, refs, allow_missing=True)
    assert allowed[0].status == "pass"


def test_old_results_files_with_placement_and_message_size_still_load():
    (old,) = results.from_data([{"system": "local", "partition": "batch", "method": "source",
                                 "placement": "cross_node", "metric": "bandwidth", "benchmark": "osu_bw",
                                 "message_size": 1048576, "unit": "MB/s", "value": 4000.0, "status": "pass"}])
    assert old.key() == pt2pt("local", "batch", "source", "cross_node", "bandwidth", 1.0).key()


@pytest.mark.parametrize("statuses, problems, code", [
    (["pass", "skip"], [], errors.OK),
    (["pass", "fail"], [], errors.REGRESSION),
    (["fail", "error"], [], errors.ERROR),
    (["pass"], ["method spack was asked for but produced no measurement"], errors.ERROR),
    (["skip", "skip"], [], errors.SKIPPED),
    ([], [], errors.SKIPPED),
])
def test_exit_code_gates_error_over_regression_and_never_passes_nothing(statuses, problems, code):
    assert compose.exit_code_of_run([case(status=s) for s in statuses], problems) == code


def test_requested_method_with_only_skips_is_a_problem():
    found = [case(method="spack", status="skip", value=None, reason="no spack build here")]
    assert summary.require_methods(found, ["spack"]) == [
        "method spack was asked for but produced no measurement: no spack build here"]
    assert summary.require_methods([case()], ["source"]) == []


def test_summary_table_and_markdown_show_value_baseline_and_verdict():
    found = [case(value=3.2, reference=3.0, tolerance=0.5),
             case(metric="bandwidth", value=500.0, reference=1000.0, tolerance=0.2, status="fail",
                  reason="too slow"),
             case(placement="cross_socket", status="skip", value=None, reference=None, reason="a single socket")]
    table = summary.text_table(found)
    assert "3.20 us" in table and "3.00 (<= 4.50)" in table and "1000 (>= 800)" in table
    assert "regression" in table
    assert "skipped: a single socket (1 check(s): source/cross_socket/latency)" in table
    md = summary.markdown(found, "MPI regression: local", [])
    assert "| local:batch | same_numa | source | bandwidth | 500 MB/s | 1000 (>= 800) | **regression** | too slow |" in md
    assert md.startswith("# MPI regression: local\n\nPer series against its baseline: 1 pass, 1 regression, 1 skipped")
    assert "- a single socket (1 check(s): source/cross_socket/latency)" in md


COLL_CASE = {"system": "local", "partition": "batch", "build_method": "source", "name": "OsuCollCheck_x",
             "benchmark": "osu_bcast", "metric": "latency", "result": "pass",
             "series_parameters": {"nprocs": 8, "nodes": 2, "distribution": "block:block", "algorithm": "binomial",
                                   "sizes": "1:4"},
             "conditions": {"oversubscribed": True}}


def test_a_sweep_is_one_series_per_size_and_missing_sizes_are_an_error_beside_them():
    point = {"nprocs": 8, "nodes": 2, "distribution": "block:block", "algorithm": "binomial"}
    case = dict(COLL_CASE, measured=[{"benchmark": "osu_bcast", "parameters": {**point, "size": size},
                                      "metric": "latency", "value": v} for size, v in ((1, 2.5), (2, 2.6))],
                problems=["OSU Bcast Latency Test printed 2 of the 3 message sizes asked (1:4); missing: 4"])
    found = reframe_report.case_to_results(case)
    measured = [r for r in found if r.status == "pass"]
    assert [(r.parameters["size"], r.value) for r in measured] == [(1, 2.5), (2, 2.6)]
    assert all(r.conditions == {"oversubscribed": True} for r in found)
    (gap,) = [r for r in found if r.status == "error"]
    assert "missing: 4" in gap.reason and gap.parameters["sizes"] == "1:4"
    assert compose.exit_code_of_run(found, []) == errors.ERROR


def test_a_forced_algorithm_that_tuned_does_not_run_is_a_skip_with_the_reason():
    case = dict(COLL_CASE, result="fail", fail_phase="sanity",
                fail_reason="sanity error: not applicable: coll/hcoll (priority 90) outranks coll/tuned")
    (skipped,) = reframe_report.case_to_results(case)
    assert skipped.status == "skip" and skipped.reason.startswith("coll/hcoll (priority 90) outranks")
    rejected = dict(COLL_CASE, result="fail", fail_phase="sanity",
                    fail_reason="sanity error: OpenMPI rejected coll_tuned_bcast_algorithm=12")
    assert reframe_report.case_to_results(rejected)[0].status == "error"
