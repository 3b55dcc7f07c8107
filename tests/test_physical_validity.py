"""Physical validity at every reader (issue 20): a value no measurement can have is refused in one
sentence (exit 2) by the results reader (compare, report, confirm), the history import and
the history itself; so is a results file holding one series twice."""
from __future__ import annotations

import json
import math
import os

import pytest
from helpers.faults import GOOD_RESULT, cli, sentence
from hypothesis import given, settings
from hypothesis import strategies as st

from mpiregress.errors import InputError
from mpiregress.history import store as history
from mpiregress.model import inputs
from mpiregress.model.names import METRICS
from mpiregress.model.results import Result

BANDWIDTH = dict(GOOD_RESULT, metric="bandwidth", benchmark="osu_bw", unit="MB/s", value=9000.0, samples=[9000.0],
                 parameters={"placement": "same_numa", "size": 1048576})
EFFICIENCY = dict(GOOD_RESULT, metric="efficiency", benchmark="fwq", unit="", value=0.98, samples=[0.98],
                  parameters={"node": "node1", "layout": "all_cores"})

impossible_rate = st.one_of(st.floats(max_value=0.0, allow_nan=False), st.just(math.nan), st.just(math.inf),
                            st.just(-math.inf))
impossible_efficiency = st.one_of(st.floats(max_value=0.0, allow_nan=False),
                                  st.floats(min_value=1.0, exclude_min=True, allow_infinity=True), st.just(math.nan))


def _write(tmp_path, records, name="r.json"):
    path = tmp_path / name
    # allow_nan: the writer may be anything; the reader must refuse NaN and Infinity itself.
    path.write_text(json.dumps(records, allow_nan=True))
    return path


@settings(max_examples=60, deadline=None)
@given(value=impossible_rate, base=st.sampled_from([GOOD_RESULT, BANDWIDTH]),
       where=st.sampled_from(["value", "sample", "reference"]))
def test_a_latency_or_bandwidth_that_is_not_positive_and_finite_is_refused(tmp_path_factory, value, base, where):
    record = dict(base)
    if where == "value":
        record.update(value=value, samples=[])
    elif where == "sample":
        record["samples"] = [base["value"], value]
    else:
        record["reference"] = value
    path = _write(tmp_path_factory.mktemp("r"), [record])
    with pytest.raises(InputError) as err:
        inputs.read_results(path)
    said = str(err.value)
    assert said.startswith(f"results file {path}: result #0") and "\n" not in said
    if math.isfinite(value):
        assert f"{base['metric']} {value:g} {base['unit']} is impossible: it must be above zero" in said
    else:   # refused already as a field that must hold finite numbers
        assert "finite number" in said


@settings(max_examples=40, deadline=None)
@given(value=impossible_efficiency)
def test_an_efficiency_outside_zero_to_one_is_refused(tmp_path_factory, value):
    path = _write(tmp_path_factory.mktemp("r"), [dict(EFFICIENCY, value=value, samples=[])])
    with pytest.raises(InputError, match=r"result #0"):
        inputs.read_results(path)


@settings(max_examples=40, deadline=None)
@given(latency=st.floats(min_value=1e-3, max_value=1e7), bandwidth=st.floats(min_value=1e-3, max_value=1e7),
       efficiency=st.floats(min_value=1e-6, max_value=1.0))
def test_every_possible_value_is_accepted(tmp_path_factory, latency, bandwidth, efficiency):
    path = _write(tmp_path_factory.mktemp("r"), [dict(GOOD_RESULT, value=latency, samples=[latency]),
                                                 dict(BANDWIDTH, value=bandwidth, samples=[bandwidth]),
                                                 dict(EFFICIENCY, value=efficiency, samples=[efficiency])])
    assert [r.metric for r in inputs.read_results(path)] == ["latency", "bandwidth", "efficiency"]


@settings(max_examples=25, deadline=None)
@given(copies=st.integers(min_value=2, max_value=400), at=st.integers(min_value=0, max_value=3))
def test_a_series_repeated_in_one_results_file_is_refused(tmp_path_factory, copies, at):
    others = [dict(GOOD_RESULT, parameters={"placement": p, "size": 8192})
              for p in ("cross_numa", "cross_socket", "cross_node")]
    records = others[:at] + [GOOD_RESULT] * copies + others[at:]
    path = _write(tmp_path_factory.mktemp("r"), records)
    with pytest.raises(InputError) as err:
        inputs.read_results(path)
    assert f"result #{at + 1} repeats the series local/batch source" in str(err.value)
    assert f"of result #{at} ({copies} records of it)" in str(err.value)


def test_ab_samples_of_one_series_are_not_duplicates(tmp_path):
    samples = [dict(GOOD_RESULT, conditions={"ab_side": side, "ab_pair": pair, "ab_position": 2 * pair + (side == "B")})
               for pair in range(3) for side in "AB"]
    assert len(inputs.read_results(_write(tmp_path, samples))) == 6
    with pytest.raises(InputError, match="repeats the series"):
        inputs.read_results(_write(tmp_path, samples + samples[:1], "dup.json"))


def test_the_history_refuses_an_impossible_value_from_any_caller(tmp_path):
    bad = Result(**dict(BANDWIDTH, value=-5.0, samples=[-5.0]))
    with history.open_history(tmp_path / "h.sqlite") as db:
        with pytest.raises(InputError, match="bandwidth -5 MB/s is impossible: it must be above zero"):
            db.import_results([bad], run_id="r1")
        assert db.export_csv(open(os.devnull, "w")) == 0


@pytest.mark.parametrize("record, said", [
    (dict(BANDWIDTH, value=-5.0, samples=[-5.0]), "bandwidth -5 MB/s is impossible: it must be above zero"),
    (dict(EFFICIENCY, value=1.5, samples=[1.5]), "efficiency 1.5 is impossible: it must be at most 1"),
])
def test_history_import_and_compare_refuse_in_one_sentence(tmp_path, record, said):
    env = dict(os.environ, MPIREGRESS_STATE_DIR=str(tmp_path / "state"))
    env.pop("MPIREGRESS_DEBUG", None)
    path = _write(tmp_path, [record])
    for argv in (["history", "import", "--db", str(tmp_path / "h.sqlite"), str(path)],
                 ["compare", str(path), "--db", str(tmp_path / "h.sqlite")]):
        done = cli(argv, env)
        assert done.returncode == 2, done.stdout + done.stderr
        assert said in sentence(done) and "Traceback" not in done.stderr
        assert len([ln for ln in done.stderr.splitlines() if ln.strip()]) == 1


def test_history_import_refuses_a_file_holding_one_result_many_times(tmp_path):
    env = dict(os.environ, MPIREGRESS_STATE_DIR=str(tmp_path / "state"))
    path = _write(tmp_path, [GOOD_RESULT] * 5000)
    done = cli(["history", "import", "--db", str(tmp_path / "h.sqlite"), str(path)], env)
    assert done.returncode == 2 and "(5000 records of it)" in sentence(done), done.stderr


def test_every_metric_has_a_physical_rule():
    assert all(spec.impossible(-1.0) for spec in METRICS.values())
    assert all(spec.impossible(math.nan) for spec in METRICS.values())


@pytest.mark.parametrize("argv", [["ab"], ["coll", "verify"]])
def test_the_ab_and_collective_readers_refuse_an_impossible_value_too(tmp_path, argv):
    env = dict(os.environ, MPIREGRESS_STATE_DIR=str(tmp_path / "state"))
    env.pop("MPIREGRESS_DEBUG", None)
    record = dict(GOOD_RESULT, value=-5.0, samples=[-5.0], conditions={"ab_side": "A", "ab_pair": 0})
    path = _write(tmp_path, [record])
    done = cli([*argv, str(path)], env)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "#0: value: latency -5 us is impossible: it must be above zero" in sentence(done)


@pytest.mark.parametrize("record, said", [
    (dict(GOOD_RESULT, value=1e308, samples=[1e308]), "latency 1e+308 us is impossible: it must be at most "
                                                      "3.6e+09 us (an hour)"),
    (dict(BANDWIDTH, value=2e7, samples=[2e7]), "bandwidth 2e+07 MB/s is impossible: it must be at most 1e+07 MB/s"),
])
def test_a_value_beyond_physical_sense_is_refused_by_the_history_import_and_compare(tmp_path, record, said):
    env = dict(os.environ, MPIREGRESS_STATE_DIR=str(tmp_path / "state"))
    env.pop("MPIREGRESS_DEBUG", None)
    path = _write(tmp_path, [record])
    for argv in (["history", "import", "--db", str(tmp_path / "h.sqlite"), str(path)],
                 ["verdict", str(path), "--event", "run", "--out-dir", str(tmp_path / "out"),
                  "--db", str(tmp_path / "h.sqlite")]):
        done = cli(argv, env)
        assert done.returncode == 2, done.stdout + done.stderr
        assert said in sentence(done) and "Traceback" not in done.stderr


@pytest.mark.parametrize("label, value, code, state", [
    ("pass", 1e6, 1, "regression"),     # a second per 8 KiB message, labelled pass: the band says regression
    ("skip", 1e6, 1, "regression"),     # a value labelled skipped is still a measurement
    ("fail", 4.0, 0, "pass"),           # a fail label on a value well inside the band is a pass
])
def test_the_verdict_judges_the_values_not_the_status_a_results_file_carries(tmp_path, label, value, code, state):
    env = dict(os.environ, MPIREGRESS_STATE_DIR=str(tmp_path / "state"))
    env.pop("MPIREGRESS_DEBUG", None)
    env.pop("CI_PIPELINE_SOURCE", None)
    path = _write(tmp_path, [dict(GOOD_RESULT, status=label, value=value, samples=[value],
                                  toolchain="2023b")])
    out = tmp_path / "out"
    done = cli(["verdict", str(path), "--event", "run", "--out-dir", str(out), "--db", str(tmp_path / "h.sqlite")],
               env)
    assert done.returncode == code, done.stdout + done.stderr
    verdict = json.loads((out / "verdict.json").read_text())
    assert verdict["state"] == state, verdict


def test_the_verdicts_ab_reader_refuses_a_value_beyond_physical_sense(tmp_path):
    env = dict(os.environ, MPIREGRESS_STATE_DIR=str(tmp_path / "state"))
    env.pop("MPIREGRESS_DEBUG", None)
    folder = tmp_path / "ab"
    folder.mkdir()
    _write(folder, [dict(GOOD_RESULT, value=1e308, samples=[1e308], conditions={})] +
           [dict(GOOD_RESULT, value=v, samples=[v], ab_side=side, ab_pair=0)
            for side, v in (("A", 3.0), ("B", 1e308))], "ab-samples.json")
    done = cli(["verdict", str(_write(tmp_path, [GOOD_RESULT])), "--ab", str(folder), "--event", "run",
                "--out-dir", str(tmp_path / "out"), "--db", str(tmp_path / "h.sqlite")], env)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "record #0: value: latency 1e+308 us is impossible: it must be at most 3.6e+09 us (an hour)" in \
        sentence(done)
