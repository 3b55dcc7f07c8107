"""Property tests: every reader of the project's inputs answers bad files with InputError, nothing else.

Hypothesis feeds each reader binary garbage, truncated copies of real files, arbitrary
JSON/YAML values and real files with one field replaced by a value of the wrong type.
A reader may accept the file or refuse it with one sentence naming it; any other
exception (KeyError, TypeError, UnicodeDecodeError, ...) would be a traceback for a user.
"""
from __future__ import annotations

import copy
import json
import tempfile
from pathlib import Path
from typing import Any, Callable

import pytest
import yaml
from helpers.faults import GOOD_RESULT
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from shared import REPO

from mpiregress.errors import InputError
from mpiregress.families.links import sitetopology
from mpiregress.history import store as history
from mpiregress.model import baselines, inputs, manifest, toolchain
from mpiregress.run import reframe_report

SETTINGS = settings(max_examples=25, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=12)

REFRAME_REPORT = json.loads((REPO / "tests" / "data" / "reframe_report_local_pass.json").read_text())
MANIFEST = {"schema": "mpiregress-manifest/1", "method": "source", "toolchain": "2023b", "osu_version": "7.2",
            "target": "x86_64", "prefix": "/p", "bin_dir": "/p/libexec/osu-micro-benchmarks/mpi",
            "env": {"setup": []}, "notes": [], "extra": {}}
TOPOLOGY = json.loads((REPO / "checks" / "topology" / "iris-broadwell" / "processor.json").read_text())


def _results(path: Path) -> Any:
    return inputs.read_results(path)


def _history_results(path: Path) -> Any:
    return history.read_results_file(path)


def _history_db(path: Path) -> Any:
    with history.open_history(path) as db:
        return db.runs()


# Every reader, with a real file it accepts and the text format it reads.
READERS: dict[str, tuple[Callable[[Path], Any], str, str]] = {
    "results": (_results, json.dumps([GOOD_RESULT]), "json"),
    "history results": (_history_results, json.dumps([GOOD_RESULT]), "json"),
    "ReFrame report": (reframe_report.load, json.dumps(REFRAME_REPORT), "json"),
    "manifest": (manifest.read, json.dumps(MANIFEST), "json"),
    "topology": (inputs.read_topology, json.dumps(TOPOLOGY), "json"),
    "baselines": (baselines.load, (REPO / "baselines" / "iris.yaml").read_text(), "yaml"),
    "toolchain": (toolchain.load, (REPO / "toolchains" / "2023b.yaml").read_text(), "yaml"),
    "switch map": (lambda path: sitetopology.load_switches(path, ["node1"]), "switches:\n  node1: s01\n", "yaml"),
}


def _accepts_or_refuses(reader: Callable[[Path], Any], path: Path) -> None:
    try:
        reader(path)
    except InputError as err:
        text = str(err)
        assert "\n" not in text.strip() or "Traceback" not in text, text
        assert str(path) in text or path.name in text, f"the sentence must name the file: {text}"


@pytest.fixture()
def scratch():
    with tempfile.TemporaryDirectory(prefix="mpiregress-prop-") as folder:
        yield Path(folder)


@pytest.mark.parametrize("name", list(READERS))
def test_the_real_file_is_accepted(name, scratch):
    reader, text, _ = READERS[name]
    path = scratch / ("manifest.json" if name == "manifest" else "input")
    path.write_text(text)
    reader(path)


@pytest.mark.parametrize("name", list(READERS))
@SETTINGS
@given(data=st.binary(max_size=600))
def test_binary_garbage_is_refused_in_one_sentence(name, data, scratch):
    path = scratch / "input"
    path.write_bytes(data)
    _accepts_or_refuses(READERS[name][0], path)


@pytest.mark.parametrize("name", list(READERS))
@SETTINGS
@given(cut=st.floats(min_value=0, max_value=1, exclude_max=True))
def test_truncated_file_is_refused_in_one_sentence(name, cut, scratch):
    reader, text, _ = READERS[name]
    path = scratch / "input"
    path.write_text(text[:int(len(text) * cut)])
    _accepts_or_refuses(reader, path)


@pytest.mark.parametrize("name", list(READERS))
@SETTINGS
@given(value=json_values)
def test_any_json_or_yaml_value_is_accepted_or_refused(name, value, scratch):
    reader, _, fmt = READERS[name]
    path = scratch / "input"
    path.write_text(json.dumps(value) if fmt == "json" else yaml.safe_dump(value))
    _accepts_or_refuses(reader, path)


def _paths(node: Any, prefix: tuple = ()) -> list[tuple]:
    """Every key path into a parsed document (to replace one field at a time)."""
    found = [prefix] if prefix else []
    if isinstance(node, dict):
        for key, child in node.items():
            found += _paths(child, prefix + (key,))
    elif isinstance(node, list):
        for index, child in enumerate(node[:3]):
            found += _paths(child, prefix + (index,))
    return found


@pytest.mark.parametrize("name", list(READERS))
@SETTINGS
@given(data=st.data(), value=json_values)
def test_one_field_of_the_wrong_type_is_accepted_or_refused(name, data, value, scratch):
    reader, text, fmt = READERS[name]
    document = json.loads(text) if fmt == "json" else yaml.safe_load(text)
    where = data.draw(st.sampled_from(_paths(document)))
    changed = copy.deepcopy(document)
    node = changed
    for key in where[:-1]:
        node = node[key]
    node[where[-1]] = value
    path = scratch / "input"
    path.write_text(json.dumps(changed) if fmt == "json" else yaml.safe_dump(changed))
    _accepts_or_refuses(reader, path)


@SETTINGS
@given(data=st.binary(min_size=1, max_size=400))
def test_history_file_of_garbage_is_refused_and_left_untouched(data, scratch):
    path = scratch / "history.sqlite"
    path.write_bytes(data)
    _accepts_or_refuses(_history_db, path)
    assert path.read_bytes() == data, "a file that is not a history must never be written"


@SETTINGS
@given(cut=st.integers(min_value=1, max_value=8191))
def test_truncated_history_file_is_refused(cut, scratch):
    path = scratch / "history.sqlite"
    for leftover in scratch.glob("history.sqlite*"):   # the previous example's file
        leftover.unlink()
    with history.open_history(path) as db:
        db.import_results(inputs.read_results(_write(scratch / "r.json", [GOOD_RESULT])))
    whole = path.read_bytes()
    path.write_bytes(whole[:cut])
    _accepts_or_refuses(_history_db, path)


def _write(path: Path, records: list) -> Path:
    path.write_text(json.dumps(records))
    return path


@pytest.mark.parametrize("field,value,said", [
    ("samples", None, "samples must be a list of numbers, found null"),
    ("samples", [1.0, "x"], "samples must hold finite numbers only"),
    ("value", "fast", "value must be a finite number or null"),
    ("metric", "latencyy", "metric 'latencyy' is not one of"),
    ("parameters", {"placement": "same_numa", "size": 8.5}, "parameter 'size' must be text or a whole number"),
    ("parameters", None, "parameters must be a mapping"),
    ("nodelist", "node1", "nodelist must be a list of text"),
    ("status", "ok", "status 'ok' is not one of"),
])
def test_result_field_errors_name_the_field(field, value, said, scratch):
    path = _write(scratch / "r.json", [{**GOOD_RESULT, field: value}])
    with pytest.raises(InputError, match=said):
        inputs.read_results(path)


def test_a_result_with_nan_is_refused(scratch):
    path = scratch / "r.json"
    path.write_text(json.dumps([GOOD_RESULT]).replace("3.0,", "NaN,", 1))
    with pytest.raises(InputError, match="finite number"):
        inputs.read_results(path)
