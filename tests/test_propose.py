"""Baseline proposals: a diff with provenance that round-trips through baselines.parse; nothing written silently."""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
from datetime import date
from pathlib import Path

import numpy as np
import pytest
import yaml

from mpiregress import cli
from mpiregress.errors import ERROR, OK, InputError
from mpiregress.history import store as history
from mpiregress.model import baselines
from mpiregress.model.results import pt2pt
from mpiregress.verdict.propose import propose


def result(week, value, metric="latency", method="source", placement="same_numa", toolchain="2023b"):
    return pt2pt("iris", "skylake", method, placement, metric, value, samples=[value, value * 1.002, value * 0.998], toolchain=toolchain,
                  time=f"2025-03-{1 + week:02d}T02:00:00+00:00", commit=f"sha{week}", pipeline=f"{100 + week}")


@pytest.fixture
def db(tmp_path):
    with history.open_history(tmp_path / "h.sqlite") as h:
        for week in range(8):
            wobble = 1 + 0.01 * ((week * 3) % 5 - 2)
            runs = [result(week, 2.05 * wobble), result(week, 17400.0 * wobble, "bandwidth")]
            if week >= 5:    # a series too young to propose from
                runs.append(result(week, 4.4, placement="cross_node"))
            h.import_results(runs, run_id=f"w{week}")
        yield h


CURRENT = {
    "schema": baselines.SCHEMA, "system": "iris", "toolchain": "2023b",
    "provenance": {"seed-2025-05": {"description": "May 2025 study, one run", "runs": 1, "collected": "2025-05-21"}},
    "references": {"skylake": {"source": {
        "same_numa": {"bandwidth": {"value": 4700, "tolerance": 0.2, "unit": "MB/s", "provenance": "seed-2025-05"}},
        "cross_node": {"latency": {"value": 7.2, "tolerance": 0.2, "unit": "us", "provenance": "seed-2025-05"}}}}},
}


@pytest.fixture
def baselines_dir(tmp_path):
    directory = tmp_path / "baselines"
    directory.mkdir()
    (directory / "iris.yaml").write_text(yaml.safe_dump(CURRENT, sort_keys=False))
    return directory


def test_proposal_round_trips_and_carries_provenance(db, baselines_dir):
    path = baselines_dir / "iris.yaml"
    proposal = propose(db, "iris", baselines.load(path), path, today=date(2025, 6, 1))
    parsed = baselines.parse(yaml.safe_load(proposal.text), path)
    bw = parsed.lookup_pt2pt("skylake", "source", "same_numa", "bandwidth")
    assert bw.value == pytest.approx(17400, rel=0.02) and 0.03 <= bw.tolerance <= 0.15
    assert bw.provenance == "history-2025-06-01"
    record = parsed.provenance["history-2025-06-01"]
    assert record["runs"] == 8 and str(record["collected"]) == "2025-03-08" and str(record["first"]) == "2025-03-01"
    assert "100" in record["pipelines"] and "sha7" in record["commits"]
    # Untouched series keep their reference and its provenance; young ones are kept and said so.
    assert parsed.lookup_pt2pt("skylake", "source", "cross_node", "latency").value == 7.2
    assert "seed-2025-05" in parsed.provenance
    assert any("cross_node latency: 3 accepted" in line for line in proposal.kept)
    diff = proposal.diff.splitlines()
    # Repository-relative paths, as git writes them (the temp folder has no .git: relative to baselines/).
    assert diff[:3] == ["diff --git a/baselines/iris.yaml b/baselines/iris.yaml", "--- a/baselines/iris.yaml",
                        "+++ b/baselines/iris.yaml"]
    # Provenance says what was used: 8 runs exist, so 8 were used, not "the last 10".
    assert "median of the last 8 accepted 2023b run(s) per series (at most 10)" in record["description"]
    assert record["toolchain"] == "2023b"
    [bw_evidence] = [e for e in proposal.evidence if e.series == "iris/skylake source same_numa bandwidth"]
    assert bw_evidence.runs == 8 and bw_evidence.first_run == "w0" and bw_evidence.last_run == "w7"
    assert bw_evidence.old == {"value": 4700, "tolerance": 0.2, "provenance": "seed-2025-05"}
    assert any(line.startswith("-") and "4700" in line for line in diff)
    # The fixture's file is block style (yaml.safe_dump): the proposal keeps it so, changing single lines.
    assert "+          provenance: history-2025-06-01" in diff and "+          value: 17310" in diff


HAND_WRITTEN = """# Baselines for Iris (hand-written header, kept by proposals).
schema: mpiregress-baselines/1
system: iris
toolchain: "2023b"
provenance:
  seed-2025-05:
    description: >-
      May 2025 study, one run, wrapped the way a person
      wraps it.
    runs: 1
    collected: 2025-05-22
references:
  skylake:
    source:
      same_numa:  # study: bandwidth far below EasyBuild
        bandwidth: {value: 4910.72, tolerance: 0.15, unit: MB/s, provenance: seed-2025-05}
      cross_node:  # study: slower than the other builds
        latency: {value: 7.19, tolerance: 0.15, unit: us, provenance: seed-2025-05}
"""


def test_a_hand_written_file_changes_only_where_the_proposal_does(db, tmp_path):
    path = tmp_path / "iris.yaml"
    path.write_text(HAND_WRITTEN)
    proposal = propose(db, "iris", baselines.load(path), path, today=date(2025, 6, 1))
    removed = [line for line in proposal.diff.splitlines() if line.startswith("-") and not line.startswith("---")]
    assert removed == ["-        bandwidth: {value: 4910.72, tolerance: 0.15, unit: MB/s, provenance: seed-2025-05}"]
    # Comments stay, also on the placement whose value changes.
    assert "      same_numa:  # study: bandwidth far below EasyBuild" in proposal.text
    assert proposal.text.startswith("# Baselines for Iris (hand-written header, kept by proposals).")
    assert "      cross_node:  # study: slower than the other builds" in proposal.text
    assert "      wraps it." in proposal.text


def test_without_a_baselines_file_the_toolchain_must_be_named(db, tmp_path):
    with pytest.raises(Exception, match="--toolchain"):
        propose(db, "iris", None, tmp_path / "iris.yaml")
    proposal = propose(db, "iris", None, tmp_path / "iris.yaml", toolchain="2023b")
    assert "new file mode 100644\n--- /dev/null\n+++ b/baselines/iris.yaml" in proposal.diff


def test_the_command_prints_a_diff_and_rewrites_nothing(db, baselines_dir, tmp_path, capsys):
    path = baselines_dir / "iris.yaml"
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    assert cli.main(["baseline", "propose", "--system", "iris", "--db", str(db.path),
                     "--baselines-dir", str(baselines_dir)]) == OK
    captured = capsys.readouterr()
    assert captured.out.startswith("diff --git a/") and "+++ b/" in captured.out and "history-" in captured.out
    assert "proposed: iris/skylake source same_numa bandwidth: 4700 ±20% ->" in captured.err
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before
    out = tmp_path / "proposed" / "iris.yaml"
    assert cli.main(["baseline", "propose", "--system", "iris", "--db", str(db.path),
                     "--baselines-dir", str(baselines_dir), "--write", str(out)]) == OK
    assert baselines.load(out).lookup_pt2pt("skylake", "source", "same_numa", "latency") is not None
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before


def test_a_baseline_without_provenance_is_refused_with_a_sentence(db, tmp_path, capsys):
    directory = tmp_path / "bad"
    directory.mkdir()
    bad = yaml.safe_load(yaml.safe_dump(CURRENT))
    bad["provenance"] = {}
    (directory / "iris.yaml").write_text(yaml.safe_dump(bad))
    code = cli.main(["baseline", "propose", "--system", "iris", "--db", str(db.path), "--baselines-dir", str(directory)])
    assert code == ERROR
    err = capsys.readouterr().err
    assert "without provenance is not accepted" in err and "seed-2025-05" in err


def test_no_history_is_a_sentence_not_a_new_file(tmp_path, baselines_dir, capsys):
    missing = tmp_path / "missing.sqlite"
    assert cli.main(["baseline", "propose", "--system", "iris", "--db", str(missing),
                     "--baselines-dir", str(baselines_dir)]) == ERROR
    assert "does not exist" in capsys.readouterr().err and not missing.exists()


# -- proposals safe to accept ---------------------------------------------------------------------
STUDY_LIKE = """# Baselines for Iris (test copy; comments must survive a proposal).
schema: mpiregress-baselines/1
system: iris
toolchain: "2023b"
provenance:
  ulhpc-2025-05:
    description: >-
      May 2025 ULHPC study, one run each.
    runs: 1
    collected: 2025-05-22
    pipelines: []
references:
  skylake:
    easybuild:
      same_numa:
        bandwidth: {value: 17483.4, tolerance: 0.15, unit: MB/s, provenance: ulhpc-2025-05}
    eessi:
      same_numa:  # study: genuine problem (EasyBuild reaches 17483 MB/s here)
        bandwidth: {value: 4925.64, tolerance: 0.15, unit: MB/s, provenance: ulhpc-2025-05}
    spack:
      same_numa:
        bandwidth: {value: 17000, tolerance: 0.15, unit: MB/s, provenance: ulhpc-2025-05}
      cross_node:
        latency: {value: 4.4, tolerance: 0.15, unit: us, provenance: ulhpc-2025-05}
    source:
      cross_node:
        latency: {value: 4.4, tolerance: 0.15, unit: us, provenance: ulhpc-2025-05}"""   # no final newline


WEEKS = 30


def anomalous_week(h, rng, week):
    """One week of the anomalous history (see :func:`anomalous`); the spack step stays from week 27 on."""
    def r(method, placement, metric, value):
        value *= float(np.exp(rng.normal(0, 0.01)))
        return pt2pt("iris", "skylake", method, placement, metric, value,
                     samples=[value, value * 1.001, value * 0.999], toolchain="2023b",
                     time=f"2025-{1 + week // 4:02d}-{1 + 7 * (week % 4):02d}T02:00:00+00:00",
                     commit=f"sha{week}", pipeline=f"{100 + week}")
    h.import_results([
        r("easybuild", "same_numa", "bandwidth", 17400.0), r("spack", "same_numa", "bandwidth", 17300.0),
        r("eessi", "same_numa", "bandwidth", 4900.0),
        r("spack", "cross_node", "latency", 4.4 * (1.2 if week >= WEEKS - 3 else 1.0)),
        r("source", "cross_node", "latency", 4.4 * (0.9 if week >= 12 else 1.0)),
    ], run_id=f"w{week:02d}")


@pytest.fixture
def anomalous(tmp_path):
    """30 weeks: EESSI same-NUMA bandwidth 70 % behind the other builds all along; spack cross-node
    latency 20 % worse for the last 3 weeks (unconfirmed); source cross-node latency 10 % better
    from week 12 (confirmed: 18 runs at the new level)."""
    rng = np.random.default_rng(3)
    with history.open_history(tmp_path / "h.sqlite") as h:
        for week in range(WEEKS):
            anomalous_week(h, rng, week)
        yield h


def repo_with(tmp_path, text):
    """A real git repository holding baselines/iris.yaml with ``text``, committed."""
    repo = tmp_path / "repo"
    (repo / "baselines").mkdir(parents=True)
    (repo / "baselines" / "iris.yaml").write_text(text)
    for cmd in (["init", "-q"], ["add", "."], ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "b"]):
        subprocess.run(["git", *cmd], cwd=repo, check=True, capture_output=True)
    return repo


def test_anomalies_are_held_back_with_their_reason(anomalous, tmp_path):
    path = tmp_path / "iris.yaml"
    path.write_text(STUDY_LIKE)
    proposal = propose(anomalous, "iris", baselines.load(path), path, today=date(2025, 9, 1))
    by_series = {e.series: e for e in proposal.evidence}
    eessi = by_series["iris/skylake eessi same_numa bandwidth"]
    assert eessi.proposed is None and eessi.held_back.startswith("cross-method: ")
    assert "eessi" in eessi.held_back and "behind easybuild" in eessi.held_back
    spack = by_series["iris/skylake spack cross_node latency"]
    assert spack.proposed is None and "unconfirmed change point" in spack.held_back
    assert "only 3 run(s) at the new level" in spack.held_back and "commit sha26..sha27" in spack.held_back
    # A confirmed change point: only the runs of the new level are used.
    source = by_series["iris/skylake source cross_node latency"]
    assert source.proposed["value"] == pytest.approx(3.96, rel=0.02) and source.first_run >= "w12"
    assert source.level_since.startswith("new level since run w12 (") and not source.anomalies
    assert "only its runs are used" in source.line()
    assert by_series["iris/skylake easybuild same_numa bandwidth"].proposed["value"] == pytest.approx(17400, rel=0.02)
    parsed = baselines.parse(yaml.safe_load(proposal.text), path)
    assert parsed.lookup_pt2pt("skylake", "eessi", "same_numa", "bandwidth").value == 4925.64
    assert parsed.lookup_pt2pt("skylake", "spack", "cross_node", "latency").value == 4.4
    assert "      same_numa:  # study: genuine problem (EasyBuild reaches 17483 MB/s here)" in proposal.text
    assert any(line.startswith("iris/skylake eessi same_numa bandwidth: held back") for line in proposal.held_back)


def test_accept_anomalies_proposes_them_and_still_names_them(anomalous, tmp_path):
    path = tmp_path / "iris.yaml"
    path.write_text(STUDY_LIKE)
    proposal = propose(anomalous, "iris", baselines.load(path), path, accept_anomalies=True, today=date(2025, 9, 1))
    eessi = next(e for e in proposal.evidence if e.series == "iris/skylake eessi same_numa bandwidth")
    assert not eessi.held_back and eessi.proposed["value"] == pytest.approx(4900, rel=0.02)
    assert eessi.anomalies and "accepted anyway: cross-method" in eessi.line()
    assert "with --accept-anomalies" in proposal.text


def test_the_diff_applies_with_git_in_a_real_repository(anomalous, tmp_path):
    repo = repo_with(tmp_path, STUDY_LIKE)
    path = repo / "baselines" / "iris.yaml"
    proposal = propose(anomalous, "iris", baselines.load(path), path, today=date(2025, 9, 1))
    assert proposal.relpath == "baselines/iris.yaml"
    patch = tmp_path / "proposal.diff"
    patch.write_text(proposal.diff)
    check = subprocess.run(["git", "apply", "--check", str(patch)], cwd=repo, capture_output=True, text=True)
    assert check.returncode == 0, check.stderr
    subprocess.run(["git", "apply", str(patch)], cwd=repo, check=True)
    assert path.read_text() == proposal.text
    # Everything the proposal did not change is byte for byte the same, header comment first.
    assert proposal.text.startswith("# Baselines for Iris (test copy; comments must survive a proposal).\n")
    assert "    description: >-\n      May 2025 ULHPC study, one run each.\n" in proposal.text


def test_nothing_to_change_gives_no_diff_and_the_real_files_round_trip(tmp_path):
    with history.open_history(tmp_path / "empty.sqlite") as h:
        for name in ("iris", "aion", "local"):
            path = Path(__file__).resolve().parent.parent / "baselines" / f"{name}.yaml"
            proposal = propose(h, name, baselines.load(path), path)
            assert proposal.diff == "" and proposal.text == path.read_text()


def test_a_newer_toolchain_holds_series_back_and_generations_are_not_mixed(tmp_path):
    path = tmp_path / "iris.yaml"
    path.write_text(HAND_WRITTEN)
    with history.open_history(tmp_path / "h.sqlite") as h:
        for week in range(12):
            toolchain = "2024a" if week >= 6 else "2023b"
            h.import_results([result(week, 17400.0 * (1 + 0.002 * (week % 3)), "bandwidth", toolchain=toolchain)],
                             run_id=f"w{week}", new_toolchain=week == 6)
        proposal = propose(h, "iris", baselines.load(path), path, today=date(2025, 6, 1))
        [ev] = proposal.evidence
        assert ev.proposed is None and ev.newer_toolchain.startswith("2024a (6 run(s) since")
        assert "--toolchain 2024a" in ev.held_back
        assert proposal.notes == ["toolchain 2024a has accepted runs of 1 series of iris newer than this file's "
                                  "2023b: propose for it with --toolchain 2024a"]
        # Proposing 2024a would leave the 2023b cross-node latency reference in a 2024a file: refused.
        with pytest.raises(InputError, match="generations are not mixed"):
            propose(h, "iris", baselines.load(path), path, toolchain="2024a")


def test_the_command_writes_the_evidence_as_data(anomalous, tmp_path, capsys):
    repo = repo_with(tmp_path, STUDY_LIKE)
    evidence = tmp_path / "evidence.json"
    assert cli.main(["baseline", "propose", "--system", "iris", "--db", str(anomalous.path),
                     "--baselines-dir", str(repo / "baselines"), "--evidence", str(evidence)]) == OK
    captured = capsys.readouterr()
    assert captured.out.startswith("diff --git a/baselines/iris.yaml b/baselines/iris.yaml\n")
    assert "held back: iris/skylake eessi same_numa bandwidth" in captured.err
    assert "2 series held back; --accept-anomalies proposes them anyway" in captured.err
    data = json.loads(evidence.read_text())
    assert data["file"] == "baselines/iris.yaml" and data["accept_anomalies"] is False
    eessi = next(s for s in data["series"] if s["series"] == "iris/skylake eessi same_numa bandwidth")
    assert eessi["old"]["value"] == 4925.64 and eessi["proposed"] is None and eessi["toolchain"] == "2023b"
    assert eessi["held_back"].startswith("cross-method")
    proposed = [s for s in data["series"] if s["proposed"]]
    assert proposed and all(s["runs"] >= 5 and s["first_run"] and s["last_run"] for s in proposed)


# --- baseline propose --merge-request, end to end against the GitLab API double -----------------------------

@pytest.fixture
def gitlab(monkeypatch):
    """The loopback GitLab API double, and this process's CI variables pointing at it (and nothing else)."""
    from gitlab_double import GitLabDouble

    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")
    for name in [k for k in os.environ if k.startswith(("CI_", "MPIREGRESS_GITLAB"))]:
        monkeypatch.delenv(name)
    with GitLabDouble() as double:
        yield double


def propose_mr(monkeypatch, capsys, db, repo, env, *extra):
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    capsys.readouterr()
    code = cli.main(["baseline", "propose", "--system", "iris", "--db", str(db.path),
                     "--baselines-dir", str(repo / "baselines"), "--merge-request", *extra])
    return code, *capsys.readouterr()


def test_merge_request_pushes_the_proposal_and_keeps_one_mr_current(anomalous, tmp_path, gitlab, monkeypatch,
                                                                      capsys):
    repo = repo_with(tmp_path, STUDY_LIKE)
    sha = gitlab.add_branch("main", {"baselines/iris.yaml": STUDY_LIKE}, message="Baselines as seeded")
    description = tmp_path / "mr.md"
    code, out, err = propose_mr(monkeypatch, capsys, anomalous, repo, gitlab.ci_env(CI_COMMIT_SHA=sha),
                                "--description", str(description))
    assert code == OK, err
    assert out.startswith("diff --git a/baselines/iris.yaml b/baselines/iris.yaml\n")
    assert "Opened the baseline proposal merge request for baselines/iris.yaml" in err
    writes = [(c.method, c.path) for c in gitlab.writes()]
    assert writes == [("POST", "/projects/42/repository/commits"), ("POST", "/projects/42/merge_requests")]
    commit = gitlab.writes()[0].body or {}
    assert commit["branch"] == "mpiregress/baselines-iris" and commit["start_sha"] == sha and commit["force"]
    [action] = commit["actions"]
    assert (action["action"], action["file_path"]) == ("update", "baselines/iris.yaml")
    # What was pushed is what the printed diff makes of the checkout: apply the diff and compare.
    patch = tmp_path / "p.diff"
    patch.write_text(out)
    subprocess.run(["git", "apply", str(patch)], cwd=repo, check=True)
    assert action["content"] == (repo / "baselines" / "iris.yaml").read_text()
    subprocess.run(["git", "checkout", "--", "."], cwd=repo, check=True)

    mr = gitlab.state.mrs[1]
    assert (mr["source_branch"], mr["target_branch"], mr["labels"]) == \
        ("mpiregress/baselines-iris", "main", ["mpiregress::proposal"])
    text = mr["description"]
    assert text == description.read_text() and text.startswith("<!-- mpiregress:proposal:iris -->\n")
    # The evidence per series: value proposed against the current one, the runs used, the toolchain ...
    row = next(line for line in text.splitlines() if line.startswith("| iris/skylake source cross_node latency |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[1] == "4.4 us ±15%" and cells[2].startswith("3.9") and cells[3].startswith("-")
    assert cells[4].startswith("10 (w") and cells[5] == "2023b" and cells[6].startswith("new level since run w12")
    # ... and every held-back series with its reason.
    held = text[text.index("### Held back (2)"):]
    assert "| iris/skylake eessi same_numa bandwidth | 4926 MB/s ±15% | 2023b | cross-method:" in held
    assert "| iris/skylake spack cross_node latency |" in held and "unconfirmed change point" in held
    assert f"[this pipeline]({gitlab.project_url}/-/pipelines/500)" in text

    # Seven weeks later the spack step is confirmed (10 runs at its new level): a new commit on the same
    # branch, the same merge request updated in place.
    rng = np.random.default_rng(4)
    for week in range(WEEKS, WEEKS + 7):
        anomalous_week(anomalous, rng, week)
    gitlab.calls.clear()
    code, out, err = propose_mr(monkeypatch, capsys, anomalous, repo,
                                gitlab.ci_env(CI_COMMIT_SHA=sha, CI_PIPELINE_ID=507,
                                              CI_PIPELINE_URL=f"{gitlab.project_url}/-/pipelines/507"))
    assert code == OK and "Updated the baseline proposal merge request" in err and "(new commit)" in err
    assert [(c.method, c.path) for c in gitlab.writes()] == [("POST", "/projects/42/repository/commits"),
                                                            ("PUT", "/projects/42/merge_requests/1")]
    assert len(gitlab.state.mrs) == 1 and gitlab.branch_commit("mpiregress/baselines-iris").parent == sha
    text = gitlab.state.mrs[1]["description"]
    assert "pipelines/507" in text and "### Held back (2)" in text
    # The spack step is no longer "unconfirmed": it is now held back as 35 % behind the source build.
    spack = next(line for line in text.splitlines() if line.startswith("| iris/skylake spack cross_node latency |"))
    assert "cross-method:" in spack and "unconfirmed" not in spack
    pushed = gitlab.branch_files("mpiregress/baselines-iris")["baselines/iris.yaml"]
    assert pushed != action["content"] and "# study: genuine problem (EasyBuild reaches 17483 MB/s here)" in pushed
    assert all(c.status < 400 and c.authenticated for c in gitlab.calls)


def test_merge_request_without_a_token_is_one_sentence_and_the_diff(anomalous, tmp_path, gitlab, monkeypatch,
                                                                     capsys):
    repo = repo_with(tmp_path, STUDY_LIKE)
    gitlab.add_branch("main", {"baselines/iris.yaml": STUDY_LIKE})
    code, out, err = propose_mr(monkeypatch, capsys, anomalous, repo,
                                gitlab.ci_env(MPIREGRESS_GITLAB_TOKEN=None))
    assert code == OK and out.startswith("diff --git a/baselines/iris.yaml")
    assert err.splitlines()[-1] == ("The baseline proposal merge request was not published: the CI/CD variable "
                                    "MPIREGRESS_GITLAB_TOKEN is not set (a project access token with scope api; "
                                    "see docs/pipeline.md).")
    assert "Traceback" not in err and gitlab.calls == []


def test_series_without_a_reference_that_are_not_gated_are_left_to_the_history(db, baselines_dir):
    """The weekly size sweep's series reach the history by the hundred: no first reference for them."""
    for week in range(8):
        runs = []
        for size in (1, 1024, 4194304):
            r = result(week, 1.0 + size / 1e4)
            r.parameters["size"], r.parameters["sweep"] = size, "1:4194304"
            runs.append(r)
        db.import_results(runs, run_id=f"sweep-w{week}")
    path = baselines_dir / "iris.yaml"
    proposal = propose(db, "iris", baselines.load(path), path, today=date(2025, 6, 1))
    assert all("sweep" not in e.series for e in proposal.evidence) and "sweep" not in proposal.text
    assert "3 series of iris in the history have no reference in this file" in proposal.notes[0]
    # The gated series are still proposed, the file's own ones updated.
    assert {e.series for e in proposal.evidence if e.proposed} == {"iris/skylake source same_numa bandwidth",
                                                                    "iris/skylake source same_numa latency"}
