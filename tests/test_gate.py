"""The MR gate: verdicts on constructed data, fallbacks, toolchains, and the compare command's exit codes."""
from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml

from mpiregress import cli
from mpiregress.errors import ERROR, NEEDS_A_LOOK, OK, REGRESSION
from mpiregress.history import store as history
from mpiregress.model.baselines import SCHEMA, Reference
from mpiregress.model.results import Result, dump, pt2pt, pt2pt_key
from mpiregress.verdict import compose
from mpiregress.verdict import history_gate as gate
from mpiregress.verdict.history_gate import GateConfig, judge_values

LAT = pt2pt_key("iris", "skylake", "source", "same_numa", "latency")
BW = pt2pt_key("iris", "skylake", "source", "same_numa", "bandwidth")
# Ten quiet weeks around 2.00 us (±1 %), three samples each.
QUIET = [[2.00 + 0.02 * ((i * 7) % 5 - 2) / 2, 2.01, 2.02] for i in range(10)]


def result(samples, metric="latency", toolchain="2023b", status="pass", reason="", week=20, method="source",
           placement="same_numa", conditions=None) -> Result:
    return pt2pt("iris", "skylake", method, placement, metric, samples[0] if samples else None, status=status,
                 reason=reason, samples=list(samples), conditions=dict(conditions or {}),
                  toolchain=toolchain, time=f"2025-{1 + week // 4:02d}-{1 + (week % 4) * 7:02d}T00:00:00+00:00",
                  commit=f"c{week}", pipeline=f"p{week}")


def test_same_level_passes():
    v = judge_values(LAT, [2.01, 2.02, 2.00], QUIET)
    assert v.verdict == "pass" and v.basis == "history" and abs(v.effect) < 0.01
    assert not v.gates


def test_step_beyond_the_band_on_the_hurting_side_is_a_regression():
    v = judge_values(LAT, [2.30, 2.31, 2.29], QUIET)
    assert v.verdict == "regression" and v.gates
    assert v.effect == pytest.approx((2.30 - v.reference) / v.reference)
    assert v.reference == pytest.approx(2.01, abs=0.01)
    assert "worse" in v.reason and "last 10 accepted runs" in v.reason


def test_the_good_side_is_an_improvement_that_says_the_history_is_stale():
    v = judge_values(LAT, [1.60, 1.61, 1.62], QUIET)
    assert v.verdict == "improvement" and not v.gates
    assert "stale" in v.reason


def test_bandwidth_is_one_sided_the_other_way():
    hist = [[15000.0 + 30 * (i % 3), 15010.0, 14990.0] for i in range(10)]
    assert judge_values(BW, [13000.0, 13010.0, 12990.0], hist).verdict == "regression"
    assert judge_values(BW, [17000.0, 17010.0, 16990.0], hist).verdict == "improvement"


def test_minimum_effect_keeps_a_very_quiet_series_from_failing_on_trifles():
    flat = [[2.0, 2.0, 2.0]] * 10
    no_prior = GateConfig(prior_noise={"latency": 0.0, "bandwidth": 0.0})
    assert judge_values(LAT, [2.04, 2.04, 2.04], flat, no_prior).verdict == "pass"       # 2 % < 3 % minimum
    assert judge_values(LAT, [2.08, 2.08, 2.08], flat, no_prior).verdict == "regression"


def test_a_short_quiet_history_is_widened_toward_the_prior_noise():
    flat = [[2.0, 2.0, 2.0]] * 5
    v = judge_values(LAT, [2.08, 2.08, 2.08], flat)
    assert v.verdict == "pass" and v.band > 0.04          # five identical weeks do not prove 0 % noise
    assert judge_values(LAT, [2.3, 2.3, 2.3], flat).verdict == "regression"


def test_a_series_that_varies_wildly_is_noisy_not_passed():
    wild = [[v, v, v] for v in (1.0, 2.0, 1.2, 2.5, 0.9, 1.9, 1.1, 2.4, 1.0, 2.2)]
    v = judge_values(LAT, [1.5, 1.5, 1.5], wild)
    assert v.verdict == "noisy" and "vary" in v.reason


def test_new_samples_that_scatter_are_noisy_unless_even_the_best_is_too_slow():
    assert judge_values(LAT, [1.8, 2.0, 2.6, 3.0, 2.2], QUIET).verdict == "noisy"
    assert judge_values(LAT, [2.5, 2.9, 3.6, 4.0, 3.1], QUIET).verdict == "regression"


def test_too_few_new_samples_is_an_error():
    v = judge_values(LAT, [2.0, 2.0], QUIET)
    assert v.verdict == "error" and "at least 3" in v.reason


def test_short_history_falls_back_to_the_baseline_band_and_says_so():
    ref = Reference(value=2.0, tolerance=0.10, unit="us", provenance="seed-2025-05", metric="latency")
    v = judge_values(LAT, [2.3, 2.3, 2.3], QUIET[:3], baseline=ref)
    assert v.verdict == "regression" and v.basis == "baseline" and v.limit == pytest.approx(2.2)
    assert "fewer than 5" in v.reason and "baselines band" in v.reason and "seed-2025-05" in v.reason
    assert judge_values(LAT, [2.1, 2.1, 2.1], QUIET[:3], baseline=ref).verdict == "pass"


def test_history_decides_but_says_when_the_baseline_disagrees():
    ref = Reference(value=1.0, tolerance=0.10, unit="us", provenance="seed-2025-05", metric="latency")
    v = judge_values(LAT, [2.01, 2.02, 2.00], QUIET, baseline=ref)
    assert v.verdict == "pass" and v.basis == "history"
    assert "outside the baselines band" in v.reason and "seed-2025-05" in v.reason
    assert "outside" not in judge_values(LAT, [2.01, 2.02, 2.00], QUIET,
                                         baseline=Reference(2.0, 0.1, "us", "p", "latency")).reason


def test_short_history_and_no_baseline_is_an_error():
    v = judge_values(LAT, [2.0, 2.0, 2.0], QUIET[:2])
    assert v.verdict == "error" and "too few samples" in v.reason and "no baseline" in v.reason


def test_exit_codes_gate_on_regression_and_error_only():
    def verdict(name):
        return gate.Verdict(key=LAT, verdict=name, reason="")
    assert compose.exit_code_of_history([verdict("pass"), verdict("skip")]) == OK
    # An improvement (stale history) and a noisy series do not gate: they need a look (exit 5).
    assert compose.exit_code_of_history([verdict("pass"), verdict("improvement"), verdict("noisy")]) == NEEDS_A_LOOK
    assert compose.exit_code_of_history([verdict("pass"), verdict("regression")]) == REGRESSION
    assert compose.exit_code_of_history([verdict("regression"), verdict("error")]) == ERROR


@pytest.fixture
def db(store):
    with history.open_history(store) as h:
        for week, samples in enumerate(QUIET):
            h.import_results([result(samples, week=week), result([15000.0, 15010.0, 14990.0], "bandwidth",
                                                                  week=week)], run_id=f"w{week}")
        yield h


def test_judge_reads_the_series_from_the_history(db):
    verdicts = gate.judge([result([2.4, 2.4, 2.4]), result([15000.0, 15005.0, 14995.0], "bandwidth")], db, {})
    assert {v.key.metric: v.verdict for v in verdicts} == {"latency": "regression", "bandwidth": "pass"}
    assert all(v.history_runs == 10 for v in verdicts)


def test_a_failed_check_is_an_error_with_its_reason_and_a_skip_is_a_skip(db):
    verdicts = gate.judge([result([], status="error", reason="rank 1 died of signal 4 (illegal instruction)"),
                           result([], "bandwidth", status="skip", reason="placement not offered")], db, {})
    by_metric = {v.key.metric: v for v in verdicts}
    assert by_metric["latency"].verdict == "error" and "illegal instruction" in by_metric["latency"].reason
    assert by_metric["bandwidth"].verdict == "skip"


def test_a_new_toolchain_is_not_judged_against_the_old_one(db):
    [v] = gate.judge([result([2.0, 2.0, 2.0], toolchain="2024a")], db, {})
    assert v.verdict == "error"
    assert "'2023b'" in v.reason and "'2024a'" in v.reason and "not mixed" in v.reason


def test_a_run_already_imported_is_not_compared_with_itself(db):
    db.import_results([result([3.0, 3.0, 3.0], week=30)], run_id="now")
    [v] = gate.judge([result([3.0, 3.0, 3.0], week=30)], db, {}, GateConfig(last_runs=1, min_runs=1))
    assert v.verdict == "pass"
    [v] = gate.judge([result([3.0, 3.0, 3.0], week=30)], db, {}, GateConfig(last_runs=1, min_runs=1),
                     exclude_run="now")
    assert v.verdict == "regression"


# -- the compare command -------------------------------------------------------

def write_results(path: Path, results) -> Path:
    path.write_text(dump(results))
    return path


def test_compare_exits_1_on_a_regression_and_writes_markdown_and_junit(db, tmp_path, capsys):
    results = write_results(tmp_path / "results.json", [result([2.4, 2.4, 2.4]),
                                                        result([15000.0, 15000.0, 15000.0], "bandwidth")])
    md, xml = tmp_path / "summary.md", tmp_path / "junit.xml"
    code = cli.main(["compare", str(results), "--db", str(db.location), "--baselines-dir", str(tmp_path / "none"),
                     "--markdown", str(md), "--junit", str(xml)])
    assert code == REGRESSION
    out = capsys.readouterr().out
    assert "regression" in out and "iris/skylake source same_numa latency" in out
    assert "| ❌ regression | iris/skylake source same_numa latency |" in md.read_text()
    suite = ET.parse(xml).getroot().find("testsuite")
    assert suite.get("tests") == "2" and suite.get("failures") == "1"


def test_compare_exits_2_when_a_check_crashed(db, tmp_path):
    results = write_results(tmp_path / "results.json", [result([], status="error", reason="timed out")])
    assert cli.main(["compare", str(results), "--db", str(db.location),
                     "--baselines-dir", str(tmp_path / "none")]) == ERROR


def test_compare_without_history_uses_baselines_and_says_so(tmp_path, capsys):
    baselines = tmp_path / "baselines"
    baselines.mkdir()
    (baselines / "iris.yaml").write_text(yaml.safe_dump({
        "schema": SCHEMA, "system": "iris", "toolchain": "2023b",
        "provenance": {"seed": {"description": "May 2025 study", "runs": 1, "collected": "2025-05-21"}},
        "references": {"skylake": {"source": {"same_numa": {"latency": {
            "value": 2.05, "tolerance": 0.15, "unit": "us", "provenance": "seed"}}}}}}))
    results = write_results(tmp_path / "results.json", [result([2.0, 2.1, 2.05])])
    assert cli.main(["compare", str(results), "--db", str(tmp_path / "absent.sqlite"),
                     "--baselines-dir", str(baselines)]) == OK
    out = capsys.readouterr().out
    assert "does not exist" in out and "baseline" in out
    assert not (tmp_path / "absent.sqlite").exists()     # judging never creates a history


def test_compare_refuses_a_baseline_without_provenance_with_a_sentence(tmp_path, capsys):
    baselines = tmp_path / "baselines"
    baselines.mkdir()
    (baselines / "iris.yaml").write_text(yaml.safe_dump({
        "schema": SCHEMA, "system": "iris", "toolchain": "2023b", "provenance": {},
        "references": {"skylake": {"source": {"same_numa": {"latency": {
            "value": 2.05, "tolerance": 0.15, "unit": "us", "provenance": "hand-set"}}}}}}))
    results = write_results(tmp_path / "results.json", [result([2.0, 2.1, 2.05])])
    code = cli.main(["compare", str(results), "--db", str(tmp_path / "h.sqlite"), "--baselines-dir", str(baselines)])
    assert code == ERROR
    err = capsys.readouterr().err
    assert "without provenance is not accepted" in err and "iris.yaml" in err


def test_a_series_measured_without_a_baseline_on_purpose_is_recorded_until_history_can_judge_it():
    unjudged = result([2.0, 2.1, 2.0], conditions={"baseline": "none"})
    (v,) = gate.judge([unjudged], None, {})
    assert v.verdict == "skip" and v.reason.startswith("recorded, not judged yet: no baseline")
    (plain,) = gate.judge([result([2.0, 2.1, 2.0])], None, {})
    assert plain.verdict == "error"            # an ordinary series without any reference is still an error
