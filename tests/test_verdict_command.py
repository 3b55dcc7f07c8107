"""`mpiregress verdict`: the pipeline's one verdict job, from the measurement jobs' files to every surface
and the MR note (the GitLab API double on loopback)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Iterator

import numpy as np
import pytest
from gitlab_double import GitLabDouble
from shared import REPO

from mpiregress.model.results import dump, pt2pt

BASE = {"latency": 2.0, "bandwidth": 10000.0}


def run_results(step: float = 0.0) -> list:
    """One run job's results: two series judged against their band (10 %), as --measure-only leaves them."""
    out = []
    for metric in ("latency", "bandwidth"):
        value = BASE[metric] * ((1 + step) if metric == "latency" else (1 - step))
        limit = BASE[metric] * (1.1 if metric == "latency" else 0.9)
        failed = value > limit if metric == "latency" else value < limit
        out.append(pt2pt("iris", "skylake", "source", "same_numa", metric, value, samples=[value] * 3,
                         status="fail" if failed else "pass", reference=BASE[metric], tolerance=0.1,
                         reason=f"beyond the limit {limit:g}" if failed else "", toolchain="2023b"))
    return out


def ab_samples(step: float, pairs: int = 6, seed: int = 3) -> list[dict]:
    """An A/B job's kept samples: B worse than A by ``step`` on every pair, on the same nodes."""
    rng = np.random.default_rng(seed)
    records = []
    for index, placement in enumerate(("same_numa", "cross_socket", "cross_node")):
        for metric in ("latency", "bandwidth"):
            for pair in range(pairs):
                for side in "AB":
                    jitter = float(np.exp(abs(rng.standard_t(3)) * 0.005))
                    value = BASE[metric] * (jitter if metric == "latency" else 1 / jitter)
                    if side == "B" and index == 0:
                        value *= (1 + step) if metric == "latency" else (1 - step)
                    records.append(dict(system="iris", partition="skylake", method="source", placement=placement,
                                        metric=metric, value=value, status="pass", ab_side=side, ab_pair=pair,
                                        nodelist=["n1", "n2"] if placement == "cross_node" else ["n1"],
                                        target="skylake", toolchain="2023b"))
    return records


@pytest.fixture
def gl(monkeypatch: pytest.MonkeyPatch) -> Iterator[GitLabDouble]:
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    with GitLabDouble() as double:
        double.add_mr(7)
        yield double


def verdict(tmp_path: Path, results: list, samples: list[dict] | None, env: dict[str, str], *extra: str):
    (tmp_path / "run").mkdir(exist_ok=True)
    (tmp_path / "run" / "results.json").write_text(dump(results))
    args = [str(tmp_path / "run" / "results.json"), "--db", str(tmp_path / "none.sqlite"),
            "--out-dir", str(tmp_path / "out"), "--min-samples", "3", *extra]
    if samples is not None:
        (tmp_path / "ab").mkdir(exist_ok=True)
        (tmp_path / "ab" / "ab-samples.json").write_text(json.dumps(samples))
        args += ["--ab", str(tmp_path / "ab")]
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("CI_", "MPIREGRESS_GITLAB"))}
    # The job's checkout: the report's link in the note is its path from here.
    project = {"CI_PROJECT_DIR": str(tmp_path)} if env else {}
    return subprocess.run([sys.executable, "-m", "mpiregress", "verdict", *args], capture_output=True, text=True,
                          cwd=REPO, env={**clean, "NO_PROXY": "127.0.0.1,localhost", **project, **env}, timeout=300)


def mr_env(gl: GitLabDouble, pipeline: int, **more: str) -> dict[str, str]:
    return gl.ci_env(CI_PIPELINE_SOURCE="merge_request_event", CI_MERGE_REQUEST_IID=7, CI_PIPELINE_ID=pipeline,
                     **more)


def test_a_toolchain_mr_with_a_paired_regression_is_red_everywhere_and_the_note_says_why(tmp_path, gl):
    done = verdict(tmp_path, run_results(), ab_samples(step=0.6), mr_env(gl, 601), "--changed",
                   str(_changed(tmp_path, "toolchains/2023b.yaml")))
    assert done.returncode == 1, done.stderr
    out = tmp_path / "out"
    record = json.loads((out / "verdict.json").read_text())
    assert record["event"] == "toolchain_mr" and record["state"] == "regression" and record["exit_code"] == 1
    gating = [f for f in record["findings"] if f["state"] == "regression"]
    assert {f["judge"] for f in gating} == {"paired A/B"} and all("same_numa" in f["subject"] for f in gating)
    assert all("Holm p" in f["sentence"] for f in gating), gating
    headline = (out / "summary.md").read_text().splitlines()[0]
    assert headline.startswith("## MPI performance: ❌ regression: 2 regressions")
    suite = ET.parse(out / "junit.xml").getroot().find("testsuite")
    assert suite.get("name").endswith(headline.removeprefix("## MPI performance: "))
    assert suite.get("failures") == "2"
    assert "❌ regression" in (out / "report.html").read_text()
    [note] = [n for n in gl.notes_of(7) if n["author"]["id"] == gl.user["id"]]
    assert headline.removeprefix("## ") in note["body"]
    assert "[Full report](http" in note["body"] and "/-/jobs/9000/artifacts/file/out/report.html)" in note["body"]


def test_a_comment_only_toolchain_mr_stays_green_although_the_band_fails(tmp_path, gl):
    # The run job's own allocation was slow (band fail); A and B on the same nodes agree: not the MR.
    done = verdict(tmp_path, run_results(step=0.3), ab_samples(step=0.0), mr_env(gl, 602),
                   "--changed", str(_changed(tmp_path, "toolchains/2023b.yaml")))
    record = json.loads((tmp_path / "out" / "verdict.json").read_text())
    assert record["state"] in ("pass", "needs a look"), record
    assert done.returncode in (0, 5) and not [f for f in record["findings"] if f["state"] == "regression"]
    evidence = [f for f in record["findings"] if f["state"] == "evidence" and f["judge"] == "baseline band"]
    assert evidence and all("A/B on the same nodes says pass" in f["sentence"] for f in evidence), record


def test_the_note_is_updated_in_place_on_the_next_pipeline_and_absent_without_a_token(tmp_path, gl):
    changed = str(_changed(tmp_path, "toolchains/2023b.yaml"))
    verdict(tmp_path, run_results(), ab_samples(step=0.6), mr_env(gl, 603), "--changed", changed)
    verdict(tmp_path, run_results(), ab_samples(step=0.0), mr_env(gl, 604), "--changed", changed)
    notes = [n for n in gl.notes_of(7) if n["author"]["id"] == gl.user["id"]]
    assert len(notes) == 1 and "regression: 2 regressions" not in notes[0]["body"]
    calls = len(gl.calls)
    done = verdict(tmp_path, run_results(), ab_samples(step=0.6), mr_env(gl, 605, MPIREGRESS_GITLAB_TOKEN=""),
                   "--changed", changed)
    assert done.returncode == 1 and len(gl.calls) == calls
    said = [line for line in (done.stdout + done.stderr).splitlines() if "MPIREGRESS_GITLAB_TOKEN" in line]
    assert len(said) == 1 and "Traceback" not in done.stdout + done.stderr


def test_a_baselines_mr_gates_on_the_changed_file_and_a_missing_ab_folder_is_one_sentence(tmp_path, gl):
    done = verdict(tmp_path, run_results(step=0.3), None, mr_env(gl, 606), "--changed",
                   str(_changed(tmp_path, "baselines/iris.yaml")))
    record = json.loads((tmp_path / "out" / "verdict.json").read_text())
    assert done.returncode == 1 and record["event"] == "baselines_mr", done.stdout
    assert {f["judge"] for f in record["findings"] if f["state"] == "regression"} == {"baseline band"}
    missing = subprocess.run([sys.executable, "-m", "mpiregress", "verdict", str(tmp_path / "run" / "results.json"),
                              "--ab", str(tmp_path / "nowhere"), "--out-dir", str(tmp_path / "out2")],
                             capture_output=True, text=True, cwd=REPO, timeout=120)
    assert missing.returncode == 2 and "has no ab-samples.json" in missing.stderr
    assert "Traceback" not in missing.stderr


def _changed(tmp_path: Path, *paths: str) -> Path:
    listing = tmp_path / "changed.txt"
    listing.write_text("\n".join(paths) + "\n")
    return listing


def test_the_schedule_keeps_the_weekly_issue_with_the_week_and_the_held_back_proposals(tmp_path, gl):
    """The schedule's verdict writes the system's weekly issue: the verdict, what changed this week, and
    the series the weekly proposal holds back with why (the EESSI anomaly of the seed study)."""
    from test_propose import STUDY_LIKE, WEEKS, anomalous_week

    from mpiregress.history import store as history

    rng = np.random.default_rng(3)
    with history.open_history(tmp_path / "h.sqlite") as h:
        for week in range(WEEKS):
            anomalous_week(h, rng, week)

    class Capture:
        def import_results(self, results, run_id):
            self.results = results
    this_week = Capture()
    anomalous_week(this_week, rng, WEEKS)
    (tmp_path / "baselines").mkdir()
    (tmp_path / "baselines" / "iris.yaml").write_text(STUDY_LIKE)
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "results.json").write_text(dump(this_week.results))
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("CI_", "MPIREGRESS_GITLAB"))}
    env = gl.ci_env(CI_PIPELINE_SOURCE="schedule", CI_PIPELINE_ID=800, CI_PROJECT_DIR=str(tmp_path))
    done = subprocess.run([sys.executable, "-m", "mpiregress", "verdict", str(tmp_path / "run" / "results.json"),
                           "--db", str(tmp_path / "h.sqlite"), "--baselines-dir", str(tmp_path / "baselines"),
                           "--out-dir", str(tmp_path / "out"), "--min-samples", "3"],
                          capture_output=True, text=True, cwd=REPO, timeout=300,
                          env={**clean, "NO_PROXY": "127.0.0.1,localhost", **env})
    assert done.returncode in (0, 1, 5), done.stderr
    assert json.loads((tmp_path / "out" / "verdict.json").read_text())["event"] == "schedule"
    [issue] = gl.state.issues.values()
    body = issue["description"]
    assert "mpiregress::weekly" in issue["labels"]
    assert body.index("MPI performance:") < body.index("### What changed this week")
    held = body[body.index("### Baseline proposals held back"):]
    lines = {line.split(": held back")[0]: line for line in held.splitlines() if ": held back" in line}
    eessi = lines["- iris: iris/skylake eessi same_numa bandwidth"]
    assert "cross-method: " in eessi and "eessi" in eessi and "behind easybuild" in eessi
    assert "- iris: iris/skylake spack cross_node latency" in lines
    assert "- iris: iris/skylake easybuild same_numa bandwidth" not in lines


def ab_job_results(tmp_path, samples) -> None:
    """The A/B job's results.json in ``tmp_path/ab``: every sample a record of its side and pair."""
    kept = [pt2pt(s["system"], s["partition"], s["method"], s["placement"], s["metric"], s["value"],
                  nodelist=s["nodelist"], toolchain="2023b",
                  conditions={"ab_side": s["ab_side"], "ab_pair": s["ab_pair"]}) for s in samples]
    (tmp_path / "ab").mkdir()
    (tmp_path / "ab" / "results.json").write_text(dump(kept))


def test_the_ab_jobs_b_side_is_the_mrs_measurement_when_no_run_job_ran(tmp_path, gl):
    samples = ab_samples(step=0.0)
    ab_job_results(tmp_path, samples)
    # No run job on a toolchain MR (ci/jobs/verdict.sh passes an empty results file).
    done = verdict(tmp_path, [], samples, mr_env(gl, 603), "--changed", str(_changed(tmp_path, "toolchains/x.yaml")))
    assert done.returncode in (0, 5), done.stdout[-2000:] + done.stderr[-2000:]
    judged = json.loads((tmp_path / "out" / "results.json").read_text())
    assert len(judged) == 6, judged
    b = [s["value"] for s in samples if s["ab_side"] == "B" and s["placement"] == "same_numa"
         and s["metric"] == "latency"]
    [row] = [r for r in judged if r["parameters"]["placement"] == "same_numa" and r["metric"] == "latency"]
    assert row["samples"] == pytest.approx(b) and "ab_side" not in row["conditions"]
    record = json.loads((tmp_path / "out" / "verdict.json").read_text())
    assert record["measured"] == 6 and not [f for f in record["findings"] if f["state"] == "regression"]


def test_a_baselines_mr_measured_by_its_ab_job_alone_gates_on_the_changed_band(tmp_path, gl):
    samples = ab_samples(step=0.0)
    ab_job_results(tmp_path, samples)
    books = tmp_path / "baselines"
    books.mkdir()
    # The MR's new band: same_numa latency 0.5 us +- 10 %, which B's 2 us does not meet.
    (books / "iris.yaml").write_text(
        "schema: mpiregress-baselines/1\nsystem: iris\ntoolchain: \"2023b\"\nprovenance:\n  mr:\n"
        "    description: by hand\n    runs: 1\n    collected: 2026-11-26\n    pipelines: []\nreferences:\n"
        "  skylake:\n    source:\n      same_numa:\n"
        "        latency: {value: 0.5, tolerance: 0.1, unit: us, provenance: mr}\n")
    done = verdict(tmp_path, [], samples, mr_env(gl, 607), "--changed", str(_changed(tmp_path, "baselines/iris.yaml")),
                   "--baselines-dir", str(books))
    record = json.loads((tmp_path / "out" / "verdict.json").read_text())
    assert done.returncode == 1 and record["event"] == "baselines_mr", done.stdout[-2000:] + done.stderr[-2000:]
    [gating] = [f for f in record["findings"] if f["state"] == "regression"]
    assert gating["judge"] == "baseline band" and "same_numa latency" in gating["subject"]
