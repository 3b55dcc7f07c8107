"""No stale output (issue 20): compare, report, confirm and ab that fail on their input replace their
outputs with a failure version; an earlier "pass" never survives beside the failure."""
from __future__ import annotations

import json
import os
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from helpers.faults import GOOD_RESULT, cli, sentence

from mpiregress.errors import InputError
from mpiregress.run import outputs

PASS_MD = "## MPI performance: ✅ pass (exit 0)\n"
PASS_JUNIT = '<testsuites><testsuite name="x" tests="1" failures="0"><testcase name="s"/></testsuite></testsuites>\n'
PASS_HTML = "<html><body>pass</body></html>\n"


@pytest.fixture
def env(tmp_path):
    e = dict(os.environ, MPIREGRESS_STATE_DIR=str(tmp_path / "state"))
    e.pop("MPIREGRESS_DEBUG", None)
    return e


def _earlier(*paths: Path) -> None:
    for path in paths:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(PASS_JUNIT if path.suffix == ".xml" else PASS_HTML if path.suffix == ".html" else PASS_MD)


def _assert_failure_versions(command: str, sentence_part: str, markdown=(), junit=(), html=()) -> None:
    for path in markdown:
        text = path.read_text()
        assert text.startswith(f"## mpiregress {command} FAILED (exit 2)") and sentence_part in text, text
        assert "pass" not in text.split("**Why:**")[0]
    for path in junit:
        root = ET.parse(path).getroot()
        error = root.find(".//error")
        assert error is not None and sentence_part in error.get("message", "")
    for path in html:
        text = path.read_text()
        assert f"mpiregress {command} FAILED (exit 2)" in text and ">pass<" not in text


@pytest.fixture
def bad_results(tmp_path) -> Path:
    # Physically impossible: a negative bandwidth (the reader refuses it).
    bad = tmp_path / "bad-results.json"
    bad.write_text(json.dumps([dict(GOOD_RESULT, value=-5.0, samples=[-5.0])]))
    return bad


def test_compare_on_rejected_input_replaces_markdown_and_junit(tmp_path, env, bad_results):
    md, junit = tmp_path / "out" / "local.md", tmp_path / "out" / "local.junit.xml"
    _earlier(md, junit)
    done = cli(["compare", str(bad_results), "--db", str(tmp_path / "none.sqlite"),
                "--markdown", str(md), "--junit", str(junit)], env)
    assert done.returncode == 2, done.stderr
    _assert_failure_versions("compare", str(bad_results), markdown=[md], junit=[junit])


def test_report_on_rejected_input_replaces_its_out_dir(tmp_path, env):
    out = tmp_path / "report"
    _earlier(out / "summary.md", out / "junit.xml", out / "report.html")
    missing = tmp_path / "missing.json"
    done = cli(["report", str(missing), "--db", str(tmp_path / "none.sqlite"), "--out-dir", str(out)], env)
    assert done.returncode == 2, done.stderr
    _assert_failure_versions("report", str(missing), markdown=[out / "summary.md"], junit=[out / "junit.xml"],
                             html=[out / "report.html"])


def test_ab_on_rejected_input_replaces_markdown_and_html(tmp_path, env):
    md, page = tmp_path / "ab.md", tmp_path / "ab.html"
    _earlier(md, page)
    bad = tmp_path / "ab.json"
    bad.write_text('{"not": "a list"}')
    done = cli(["ab", str(bad), "--markdown", str(md), "--html", str(page)], env)
    assert done.returncode == 2, done.stderr
    _assert_failure_versions("ab", "is not a list of result records", markdown=[md], html=[page])


def test_confirm_on_rejected_input_replaces_markdown(tmp_path, env):
    md = tmp_path / "confirm.md"
    _earlier(md)
    bad = tmp_path / "r.json"
    bad.write_text("[1, 2")
    done = cli(["confirm", str(bad), "--db", str(tmp_path / "none.sqlite"), "--report-dir", str(tmp_path / "c"),
                "--markdown", str(md)], env)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in sentence(done)
    _assert_failure_versions("confirm", str(bad), markdown=[md])


def test_the_helper_removes_earlier_outputs_first_and_keeps_what_the_body_wrote(tmp_path):
    md, junit = tmp_path / "a.md", tmp_path / "a.xml"
    _earlier(md, junit)
    with outputs.replaced_on_failure("x", markdown=[md], junit=[junit, None]):
        assert not md.exists() and not junit.exists(), "an earlier verdict must not survive a killed command"
        md.write_text("new verdict\n")
    assert md.read_text() == "new verdict\n" and not junit.exists()


def test_the_helper_writes_failure_versions_and_lets_the_error_travel(tmp_path):
    md, junit, page = tmp_path / "a.md", tmp_path / "a.xml", tmp_path / "p.html"
    with pytest.raises(InputError):
        with outputs.replaced_on_failure("verdict", markdown=[md], junit=[junit], html=[page]):
            raise InputError("results file r.json: bandwidth -5 is not positive")
    _assert_failure_versions("verdict", "bandwidth -5 is not positive", markdown=[md], junit=[junit], html=[page])


def test_the_helper_refuses_an_unknown_kind(tmp_path):
    with pytest.raises(ValueError):
        with outputs.replaced_on_failure("x", pdf=[tmp_path / "a.pdf"]):
            pass
