"""Publishing to GitLab (mpiregress.report.gitlab) against the loopback GitLab API double.

Real python-gitlab, real HTTP on 127.0.0.1, GitLab's documented endpoints and shapes: what the double
records is what a GitLab server would have received.
"""
from __future__ import annotations

import difflib
import os
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import pytest
from gitlab_double import GitLabDouble

from mpiregress.errors import InputError
from mpiregress.paths import REPO_ROOT
from mpiregress.report.gitlab import (
    Settings,
    artifact_url,
    changes_from_diff,
    changes_from_files,
    propose_merge_request,
    report_link,
    upsert_mr_note,
    upsert_weekly_issue,
)
from mpiregress.report.gitlab.issue import LABEL

MARKER_IRIS = "<!-- mpiregress:verdict:iris -->"


@pytest.fixture(autouse=True)
def _loopback_only(monkeypatch: pytest.MonkeyPatch) -> None:
    # requests honours proxy variables: the double is on loopback and must be reached directly.
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")


@pytest.fixture
def gl() -> Iterator[GitLabDouble]:
    with GitLabDouble() as double:
        yield double


def settings(gl: GitLabDouble, **env: object) -> Settings:
    return Settings.from_env(gl.ci_env(**env))


def run_note(gl: GitLabDouble, body: str, pipeline: int, key: str = "iris", mr: int = 3):
    said: list[str] = []
    outcome = upsert_mr_note(body, key, settings(gl, CI_MERGE_REQUEST_IID=mr, CI_PIPELINE_ID=pipeline), say=said.append)
    assert len(said) == 1 and "\n" not in said[0], said      # one sentence in the job log, nothing else
    return outcome, said[0]


def bot_notes(gl: GitLabDouble, mr: int = 3, marker: str = MARKER_IRIS) -> list[dict]:
    return [n for n in gl.notes_of(mr) if n["author"]["id"] == gl.user["id"] and n["body"].startswith(marker)]


# --- the MR note ----------------------------------------------------------------------------------------

def test_note_is_created_once_then_updated_in_place_across_three_pipelines(gl: GitLabDouble) -> None:
    gl.add_mr(3)
    gl.add_note(3, "Looks good to me, waiting for the benchmarks.")
    bodies = ["## ❌ regression: 1 series", "## ⚠️ needs a look: 2 findings", "## ✅ pass: 0 findings"]
    outcomes = [run_note(gl, body, pipeline)[0] for pipeline, body in zip((501, 502, 503), bodies)]

    assert [o.action for o in outcomes] == ["created", "updated", "updated"]
    posts = [c for c in gl.calls if c.method == "POST"]
    puts = [c for c in gl.calls if c.method == "PUT"]
    assert [c.path for c in posts] == ["/projects/42/merge_requests/3/notes"]
    note_id = bot_notes(gl)[0]["id"]
    assert [c.path for c in puts] == [f"/projects/42/merge_requests/3/notes/{note_id}"] * 2
    assert not [c for c in gl.calls if c.method == "DELETE"]
    mine = bot_notes(gl)
    assert len(mine) == 1 and len(gl.notes_of(3)) == 2          # the human's note is untouched
    assert mine[0]["body"].startswith(MARKER_IRIS + "\n<!-- mpiregress:pipeline:503 -->\n")
    assert "## ✅ pass: 0 findings" in mine[0]["body"] and "regression" not in mine[0]["body"]
    assert outcomes[2].url == f"{gl.project_url}/-/merge_requests/3#note_{note_id}"
    assert all(c.authenticated for c in gl.calls)


def test_same_body_again_writes_nothing(gl: GitLabDouble) -> None:
    gl.add_mr(3)
    run_note(gl, "## ✅ pass", 501)
    writes = len(gl.writes())
    outcome, sentence = run_note(gl, "## ✅ pass", 501)
    assert outcome.action == "unchanged" and "already current" in sentence
    assert len(gl.writes()) == writes


def test_note_is_found_on_the_second_page_among_other_comments(gl: GitLabDouble) -> None:
    gl.add_mr(3)
    for i in range(120):
        gl.add_note(3, f"review comment {i}")
    gl.add_note(3, "rebased", system=True)
    run_note(gl, "first verdict", 501)                     # the 122nd note: page 2 at 100 a page
    gl.calls.clear()
    outcome, _ = run_note(gl, "second verdict", 502)

    assert outcome.action == "updated"
    listed = [c for c in gl.calls if c.method == "GET" and c.path.endswith("/notes")]
    assert [c.query.get("page", "1") for c in listed] == ["1", "2"]
    assert all(c.query["per_page"] == "100" for c in listed)
    assert not [c for c in gl.calls if c.method == "POST"]
    assert len(bot_notes(gl)) == 1 and "second verdict" in bot_notes(gl)[0]["body"]


def test_a_quote_of_the_note_or_another_key_is_never_taken_for_it(gl: GitLabDouble) -> None:
    gl.add_mr(3)
    gl.add_note(3, f"{MARKER_IRIS}\n> quoted by a reviewer: why is this red?")   # same marker, a human's note
    gl.add_note(3, "<!-- mpiregress:verdict:aion -->\naion's verdict", author=gl.user)
    outcome, _ = run_note(gl, "iris verdict", 501)
    assert outcome.action == "created"
    bodies = [n["body"] for n in gl.notes_of(3)]
    assert bodies[0].endswith("why is this red?") and bodies[1].endswith("aion's verdict")
    assert len(bot_notes(gl)) == 1


def test_an_older_pipeline_never_puts_its_verdict_back(gl: GitLabDouble) -> None:
    gl.add_mr(3)
    run_note(gl, "verdict of pipeline 510", 510)
    writes = len(gl.writes())
    outcome, sentence = run_note(gl, "verdict of pipeline 505", 505)
    assert outcome.action == "skipped"
    assert "pipeline 510" in sentence and "older" in sentence
    assert len(gl.writes()) == writes and "510" in bot_notes(gl)[0]["body"]


def test_racing_first_notes_end_as_one(gl: GitLabDouble) -> None:
    gl.add_mr(3)
    gl.add_note(3, f"{MARKER_IRIS}\nfirst racer", author=gl.user)
    gl.add_note(3, f"{MARKER_IRIS}\nsecond racer", author=gl.user)
    outcome, _ = run_note(gl, "the verdict", 501)
    assert outcome.action == "updated"
    assert len(bot_notes(gl)) == 1 and "the verdict" in bot_notes(gl)[0]["body"]
    assert [c.method for c in gl.writes()] == ["DELETE", "PUT"]


def test_without_a_token_one_sentence_and_no_call_at_all(gl: GitLabDouble) -> None:
    gl.add_mr(3)
    said: list[str] = []
    outcome = upsert_mr_note("body", "iris", settings(gl, CI_MERGE_REQUEST_IID=3, MPIREGRESS_GITLAB_TOKEN=None),
                             say=said.append)
    assert outcome.action == "skipped" and gl.calls == []
    assert said == ["The MR note for iris was not published: the CI/CD variable MPIREGRESS_GITLAB_TOKEN is not "
                    "set (a project access token with scope api; see docs/pipeline.md)."]


def test_outside_a_merge_request_pipeline_no_call_at_all(gl: GitLabDouble) -> None:
    said: list[str] = []
    outcome = upsert_mr_note("body", "iris", settings(gl), say=said.append)
    assert outcome.action == "skipped" and gl.calls == []
    assert len(said) == 1 and "not a merge request pipeline" in said[0]


def test_outside_gitlab_ci_no_call_at_all(gl: GitLabDouble) -> None:
    said: list[str] = []
    outcome = upsert_mr_note("body", "iris", Settings.from_env({}), say=said.append)
    assert outcome.action == "skipped" and gl.calls == []
    assert len(said) == 1 and "not a GitLab CI job" in said[0]


def test_a_wrong_token_is_one_sentence_and_not_a_failure(gl: GitLabDouble) -> None:
    gl.add_mr(3)
    said: list[str] = []
    wrong = settings(gl, CI_MERGE_REQUEST_IID=3, MPIREGRESS_GITLAB_TOKEN="glpat-wrong")
    outcome = upsert_mr_note("body", "iris", wrong, say=said.append)
    assert outcome.action == "failed" and not outcome.published
    assert len(said) == 1 and "\n" not in said[0]
    assert "401" in said[0] and "MPIREGRESS_GITLAB_TOKEN is wrong, expired or revoked" in said[0]
    assert "exit code is unchanged" in said[0] and "Traceback" not in said[0]
    assert [c.status for c in gl.calls] == [401] and not gl.calls[0].authenticated
    assert gl.notes_of(3) == []


def test_a_server_error_on_create_is_one_sentence(gl: GitLabDouble) -> None:
    gl.add_mr(3)
    gl.fail_next("POST", r"/notes$", 500, "500 Internal Server Error")
    outcome, sentence = run_note(gl, "body", 501)
    assert outcome.action == "failed" and "GitLab answered 500" in sentence
    assert gl.notes_of(3) == []
    outcome, _ = run_note(gl, "body", 502)                  # the next pipeline publishes
    assert outcome.action == "created"


def test_an_unknown_merge_request_is_one_sentence(gl: GitLabDouble) -> None:
    outcome, sentence = run_note(gl, "body", 501, mr=99)
    assert outcome.action == "failed" and "404" in sentence and "not found" in sentence


def test_an_unreachable_gitlab_is_one_sentence() -> None:
    with socket.socket() as sock:                    # a loopback port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    said: list[str] = []
    env = {"CI_SERVER_URL": f"http://127.0.0.1:{port}", "CI_PROJECT_ID": "42", "CI_MERGE_REQUEST_IID": "3",
           "MPIREGRESS_GITLAB_TOKEN": "glpat-x"}
    outcome = upsert_mr_note("body", "iris", Settings.from_env(env), say=said.append)
    assert outcome.action == "failed" and len(said) == 1 and "could not be reached" in said[0]


def test_a_body_too_long_for_gitlab_is_cut_saying_so(gl: GitLabDouble) -> None:
    gl.add_mr(3)
    outcome, _ = run_note(gl, "| series | effect |\n" * 120_000, 501)      # 2.2 million characters
    body = bot_notes(gl)[0]["body"]
    assert outcome.action == "created" and len(body) < 1_000_000 and "too long for GitLab" in body


def test_a_key_that_would_break_the_marker_is_refused() -> None:
    with pytest.raises(ValueError, match="letters, digits"):
        upsert_mr_note("body", "iris --> <b>", Settings.from_env({}), say=lambda s: None)


# --- the report link ------------------------------------------------------------------------------------

def test_artifact_url_points_at_this_jobs_artifact_browser() -> None:
    job = "https://gitlab.uni.lu/hpc/mpiregress/-/jobs/123"
    assert artifact_url("reports/iris/index.html", job_url=job) == f"{job}/artifacts/file/reports/iris/index.html"
    assert artifact_url("./reports/my report.html", env={"CI_JOB_URL": job + "/"}) == \
        f"{job}/artifacts/file/reports/my%20report.html"
    assert artifact_url("reports/index.html", env={}) == ""                      # not in CI: no link
    assert artifact_url("../etc/passwd", job_url=job) == "" and artifact_url("/abs", job_url=job) == ""
    assert report_link("r/index.html", job_url=job) == f"[View report]({job}/artifacts/file/r/index.html)"
    assert report_link("r/index.html", env={}) == ""


def test_settings_read_gitlabs_predefined_variables() -> None:
    s = Settings.from_env({"CI_API_V4_URL": "https://example.org/gitlab/api/v4", "CI_SERVER_URL": "https://other",
                           "CI_PROJECT_ID": "42", "CI_MERGE_REQUEST_IID": "7", "CI_PIPELINE_ID": "900",
                           "MPIREGRESS_GITLAB_TOKEN": " glpat-x \n"})
    assert (s.server_url, s.project_id, s.mr_iid, s.pipeline_id, s.token) == \
        ("https://example.org/gitlab", "42", 7, 900, "glpat-x")
    assert Settings.from_env({"CI_SERVER_URL": "https://gitlab.uni.lu/"}).server_url == "https://gitlab.uni.lu"
    assert Settings.from_env({}).mr_iid is None


# --- the weekly issue -----------------------------------------------------------------------------------

def run_week(gl: GitLabDouble, body: str, clean: bool, pipeline: int, system: str = "iris"):
    said: list[str] = []
    outcome = upsert_weekly_issue(system, body, clean=clean, settings=settings(gl, CI_PIPELINE_ID=pipeline),
                                  say=said.append)
    assert len(said) == 1 and "\n" not in said[0], said
    return outcome


def test_weekly_issue_is_created_once_kept_current_closed_when_clean_and_reopened(gl: GitLabDouble) -> None:
    weeks = [("2 change points, 1 noisy node", False), ("1 confirmed regression", False),
             ("nothing to look at", True), ("a bad link node1-node2", False)]
    outcomes = [run_week(gl, body, clean, 600 + i) for i, (body, clean) in enumerate(weeks)]

    assert [o.action for o in outcomes] == ["created", "updated", "updated", "updated"]
    posts = [c for c in gl.writes() if c.method == "POST"]
    assert [c.path for c in posts] == ["/projects/42/issues"]
    assert posts[0].body is not None and posts[0].body["labels"] == LABEL
    puts = [c for c in gl.writes() if c.method == "PUT"]
    assert [c.path for c in puts] == ["/projects/42/issues/1"] * 3
    assert [(c.body or {}).get("state_event") for c in puts] == [None, "close", "reopen"]
    assert len(gl.state.issues) == 1
    issue = gl.state.issues[1]
    assert issue["state"] == "opened" and issue["labels"] == [LABEL]
    assert issue["description"].startswith("<!-- mpiregress:weekly:iris -->\n<!-- mpiregress:pipeline:603 -->")
    assert "a bad link node1-node2" in issue["description"]
    lists = [c for c in gl.calls if c.method == "GET" and c.path == "/projects/42/issues"]
    assert all(c.query["labels"] == LABEL and c.query["state"] == "all" for c in lists)


def test_weekly_issue_is_found_by_label_and_marker_not_by_title(gl: GitLabDouble) -> None:
    run_week(gl, "week 1", False, 600)
    gl.state.issues[1]["title"] = "Iris: perf findings (renamed by an admin)"
    gl.add_issue("mpiregress weekly: iris", "<!-- mpiregress:weekly:iris -->\ncopied by hand", labels=[])
    gl.add_issue("mpiregress weekly: aion", "<!-- mpiregress:weekly:aion -->\naion", labels=[LABEL], author=gl.user)
    gl.add_issue("Slow allreduce", "<!-- mpiregress:weekly:iris -->\nquoted", labels=[LABEL])   # a human's
    outcome = run_week(gl, "week 2", False, 601)
    assert outcome.action == "updated" and outcome.url.endswith("/-/issues/1")
    assert "week 2" in gl.state.issues[1]["description"]
    assert gl.state.issues[1]["title"] == "Iris: perf findings (renamed by an admin)"    # people's title stays
    assert [gl.state.issues[i]["description"].split("\n")[-1] for i in (2, 3, 4)] == ["copied by hand", "aion",
                                                                                       "quoted"]


def test_a_clean_week_with_no_issue_opens_nothing(gl: GitLabDouble) -> None:
    outcome = run_week(gl, "nothing to look at", True, 600)
    assert outcome.action == "skipped" and gl.state.issues == {}
    assert not gl.writes()


def test_weekly_issue_unchanged_and_older_pipeline(gl: GitLabDouble) -> None:
    run_week(gl, "week", False, 610)
    writes = len(gl.writes())
    assert run_week(gl, "week", False, 610).action == "unchanged"
    assert run_week(gl, "an older week", True, 605).action == "skipped"
    assert len(gl.writes()) == writes and gl.state.issues[1]["state"] == "opened"


# --- the baseline proposal merge request ----------------------------------------------------------------

@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """A checkout holding the project's real baselines files."""
    root = tmp_path / "checkout"
    shutil.copytree(REPO_ROOT / "baselines", root / "baselines")
    return root


def proposed(text: str, old: str, new: str) -> str:
    assert old in text
    return text.replace(old, new, 1)


def git_diff(root: Path, path: str, new_text: str, prefixes: bool = True) -> str:
    before = (root / path).read_text()
    a, b = (f"a/{path}", f"b/{path}") if prefixes else (path, path)
    return "".join(difflib.unified_diff(before.splitlines(keepends=True), new_text.splitlines(keepends=True), a, b))


def seed_main(gl: GitLabDouble, root: Path) -> str:
    files = {f"baselines/{p.name}": p.read_text() for p in sorted((root / "baselines").glob("*.yaml"))}
    return gl.add_branch("main", files, message="Baselines as seeded")


def run_proposal(gl: GitLabDouble, changes, description: str, sha: str, pipeline: int = 700):
    said: list[str] = []
    outcome = propose_merge_request(changes, description, settings=settings(gl, CI_COMMIT_SHA=sha,
                                                                             CI_PIPELINE_ID=pipeline),
                                    say=said.append)
    assert len(said) == 1 and "\n" not in said[0], said
    return outcome


def test_proposal_pushes_one_branch_and_keeps_one_merge_request_current(gl: GitLabDouble, checkout: Path) -> None:
    sha = seed_main(gl, checkout)
    path = "baselines/iris.yaml"
    original = (checkout / path).read_text()
    week1 = proposed(original, "{value: 7.19, tolerance: 0.15", "{value: 7.02, tolerance: 0.06")
    changes = changes_from_diff(git_diff(checkout, path, week1), checkout)
    assert [(c.path, c.action) for c in changes] == [(path, "update")] and changes[0].content == week1

    first = run_proposal(gl, changes, "| series | evidence |\n| --- | --- |\n| cross_node latency | 12 runs |", sha)
    assert first.action == "created"
    commits = [c for c in gl.writes() if c.path == "/projects/42/repository/commits"]
    assert len(commits) == 1 and commits[0].status == 201
    sent = commits[0].body or {}
    assert sent["branch"] == "mpiregress/baselines-iris" and sent["start_sha"] == sha and sent["force"] is True
    assert sent["actions"] == [{"action": "update", "file_path": path, "content": week1}]
    assert "Proposed-by: mpiregress" in sent["commit_message"]
    assert gl.branch_files("mpiregress/baselines-iris")[path] == week1
    assert gl.branch_files("main")[path] == original                 # the default branch is never written
    mr = gl.state.mrs[1]
    assert (mr["source_branch"], mr["target_branch"], mr["labels"]) == \
        ("mpiregress/baselines-iris", "main", ["mpiregress::proposal"])
    assert "cross_node latency | 12 runs" in mr["description"] and first.url == mr["web_url"]

    # Same proposal, new evidence: no new commit, the description is updated in place.
    gl.calls.clear()
    second = run_proposal(gl, changes, "| cross_node latency | 13 runs |", sha, 701)
    assert second.action == "updated"
    assert [(c.method, c.path) for c in gl.writes()] == [("PUT", "/projects/42/merge_requests/1")]
    # Nothing new at all: nothing written.
    gl.calls.clear()
    assert run_proposal(gl, changes, "| cross_node latency | 13 runs |", sha, 702).action == "unchanged"
    assert gl.writes() == []
    # A new week's proposal: one new commit on the same branch, the same merge request updated.
    week3 = proposed(original, "{value: 7.19, tolerance: 0.15", "{value: 6.95, tolerance: 0.05")
    changes3 = changes_from_diff(git_diff(checkout, path, week3), checkout)
    gl.calls.clear()
    third = run_proposal(gl, changes3, "| cross_node latency | 14 runs |", sha, 703)
    assert third.action == "updated" and "new commit" in third.sentence
    assert [c.method for c in gl.writes()] == ["POST", "PUT"]
    assert gl.branch_files("mpiregress/baselines-iris")[path] == week3
    assert gl.branch_commit("mpiregress/baselines-iris").parent == sha    # replaced, not stacked
    assert len(gl.state.mrs) == 1 and "14 runs" in gl.state.mrs[1]["description"]
    assert all(c.status < 400 for c in gl.calls)


def test_a_branch_a_person_pushed_to_is_left_alone(gl: GitLabDouble, checkout: Path) -> None:
    sha = seed_main(gl, checkout)
    path = "baselines/iris.yaml"
    new = proposed((checkout / path).read_text(), "{value: 7.19,", "{value: 7.00,")
    changes = changes_from_diff(git_diff(checkout, path, new), checkout)
    run_proposal(gl, changes, "evidence", sha)
    files = gl.branch_files("mpiregress/baselines-iris")
    gl.add_branch("mpiregress/baselines-iris", {**files, path: new + "# tightened by hand\n"},
                  message="Tighten cross_node by hand", parent=gl.state.branches["mpiregress/baselines-iris"])
    gl.calls.clear()
    outcome = run_proposal(gl, changes, "evidence 2", sha, 701)
    assert outcome.action == "skipped" and "not made by mpiregress" in outcome.sentence
    assert gl.writes() == [] and gl.branch_files("mpiregress/baselines-iris")[path].endswith("by hand\n")
    # Once that merge request is closed, the branch is a leftover: the next proposal replaces it.
    gl.state.mrs[1]["state"] = "closed"
    outcome = run_proposal(gl, changes, "evidence 3", sha, 702)
    assert outcome.action == "created" and gl.branch_files("mpiregress/baselines-iris")[path] == new
    assert [mr["state"] for mr in gl.state.mrs.values()] == ["closed", "opened"]


def test_a_merged_proposal_leads_to_a_new_merge_request(gl: GitLabDouble, checkout: Path) -> None:
    sha = seed_main(gl, checkout)
    path = "baselines/aion.yaml"
    text = (checkout / path).read_text()
    line = next(ln for ln in text.splitlines() if "value:" in ln)
    new = text.replace(line, line.replace("tolerance: 0.15", "tolerance: 0.08"), 1)
    assert new != text
    changes = changes_from_files({path: _write(checkout.parent / "aion.yaml", new)}, checkout)
    assert [(c.path, c.action) for c in changes] == [(path, "update")]
    run_proposal(gl, changes, "evidence", sha)
    gl.state.mrs[1]["state"] = "merged"
    del gl.state.branches["mpiregress/baselines-aion"]              # remove_source_branch did its job
    outcome = run_proposal(gl, changes, "evidence", sha, 701)
    assert outcome.action == "created" and sorted(gl.state.mrs) == [1, 2]
    assert gl.state.mrs[2]["source_branch"] == "mpiregress/baselines-aion"


def test_no_change_means_no_call(gl: GitLabDouble, checkout: Path) -> None:
    same = (checkout / "baselines/iris.yaml").read_text()
    assert changes_from_files({"baselines/iris.yaml": _write(checkout.parent / "same.yaml", same)}, checkout) == []
    outcome = run_proposal(gl, [], "evidence", "0" * 40)
    assert outcome.action == "skipped" and gl.calls == []


def test_proposal_without_a_token_makes_no_call(gl: GitLabDouble, checkout: Path) -> None:
    sha = seed_main(gl, checkout)
    path = "baselines/iris.yaml"
    changes = changes_from_diff(git_diff(checkout, path, (checkout / path).read_text() + "# x\n"), checkout)
    said: list[str] = []
    outcome = propose_merge_request(changes, "evidence", settings=settings(gl, CI_COMMIT_SHA=sha,
                                                                           MPIREGRESS_GITLAB_TOKEN=None),
                                    say=said.append)
    assert outcome.action == "skipped" and gl.calls == [] and len(said) == 1


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


# --- reading a diff -------------------------------------------------------------------------------------

def test_diff_without_prefixes_and_a_new_file_apply(checkout: Path) -> None:
    path = "baselines/iris.yaml"
    new = proposed((checkout / path).read_text(), "{value: 2.05,", "{value: 2.01,")
    plain = git_diff(checkout, path, new, prefixes=False)
    created = ("--- /dev/null\n+++ b/baselines/newsys.yaml\n@@ -0,0 +1,2 @@\n"
               "+schema: mpiregress-baselines/1\n+system: newsys\n")
    assert [(c.path, c.action) for c in changes_from_diff(plain, checkout)] == [(path, "update")]
    assert [(c.path, c.action, c.content) for c in changes_from_diff(created, checkout)] == \
        [("baselines/newsys.yaml", "create", "schema: mpiregress-baselines/1\nsystem: newsys\n")]


def test_an_empty_proposal_is_no_change(checkout: Path) -> None:
    assert changes_from_diff("", checkout) == []
    assert changes_from_diff("# no change proposed for baselines/iris.yaml\n", checkout) == []


def test_a_removed_line_that_looks_like_a_header_is_content(tmp_path: Path) -> None:
    (tmp_path / "baselines").mkdir()
    (tmp_path / "baselines/x.yaml").write_text("a: 1\n-- b\nc: 3\n")
    diff = "--- a/baselines/x.yaml\n+++ b/baselines/x.yaml\n@@ -1,3 +1,2 @@\n a: 1\n--- b\n c: 3\n"
    changes = changes_from_diff(diff, tmp_path)
    assert [(c.path, c.content) for c in changes] == [("baselines/x.yaml", "a: 1\nc: 3\n")]


@pytest.mark.parametrize("diff, sentence", [
    ("not a diff at all\n", "is not a unified diff"),
    ("--- /work/main/baselines/iris.yaml\n+++ /work/main/baselines/iris.yaml (proposed)\n@@ -1 +1 @@\n-a\n+b\n",
     "not a clean repository-relative path"),
    ("--- a/.gitlab-ci.yml\n+++ b/.gitlab-ci.yml\n@@ -1 +1 @@\n-a\n+b\n", "only files under baselines/"),
    ("--- a/baselines/../ci/x.sh\n+++ b/baselines/../ci/x.sh\n@@ -1 +1 @@\n-a\n+b\n", "not a clean"),
    ("--- a/baselines/iris.yaml\n+++ b/baselines/iris.yaml\n@@ -1 +1 @@\n-no such line\n+b\n", "does not apply"),
])
def test_a_bad_diff_is_one_sentence(checkout: Path, diff: str, sentence: str) -> None:
    with pytest.raises(InputError, match=re.escape(sentence)):
        changes_from_diff(diff, checkout)


# --- the command line -----------------------------------------------------------------------------------

def cli(*argv: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """The real entry point in its own process, with exactly the CI variables given."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("CI_", "MPIREGRESS_GITLAB"))}
    return subprocess.run([sys.executable, "-m", "mpiregress", "gitlab", *argv], capture_output=True, text=True,
                          timeout=120, env={**clean, "NO_PROXY": "127.0.0.1", **env}, cwd=REPO_ROOT)


def cli_here(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], *argv: str,
             env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """The same CLI in this process (mpiregress.cli.main, its error handling included): quicker."""
    from mpiregress.cli import main

    for name in [k for k in os.environ if k.startswith(("CI_", "MPIREGRESS_GITLAB"))]:
        monkeypatch.delenv(name)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    capsys.readouterr()
    code = main(["gitlab", *argv])
    out, err = capsys.readouterr()
    return subprocess.CompletedProcess(argv, code, out, err)


def test_cli_note_publishes_and_links_the_report(gl: GitLabDouble, tmp_path: Path) -> None:
    gl.add_mr(3)
    body = _write(tmp_path / "note.md", "## ✅ pass\n\nEvery gating series passed.\n")
    done = cli("note", "--key", "iris", "--body", str(body), "--report", "reports/iris/index.html",
               env=gl.ci_env(CI_MERGE_REQUEST_IID=3))
    assert done.returncode == 0 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("Created the MR note for iris")
    note = bot_notes(gl)[0]
    link = f"{gl.project_url}/-/jobs/9000/artifacts/file/reports/iris/index.html"
    assert note["body"].endswith(f"[View report]({link})\n")


def test_cli_exits_0_with_one_sentence_without_token_or_with_a_wrong_one(
        gl: GitLabDouble, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    gl.add_mr(3)
    body = _write(tmp_path / "note.md", "verdict\n")
    for token in (None, "glpat-wrong"):
        done = cli_here(monkeypatch, capsys, "note", "--key", "iris", "--body", str(body),
                        env=gl.ci_env(CI_MERGE_REQUEST_IID=3, MPIREGRESS_GITLAB_TOKEN=token))
        assert done.returncode == 0, done.stderr
        assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr and done.stdout == ""
    assert [c.status for c in gl.calls] == [401]           # no token: not even a call


def test_cli_bad_inputs_exit_2_with_one_sentence(gl: GitLabDouble, tmp_path: Path, checkout: Path,
                                                 monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    empty = _write(tmp_path / "empty.md", "  \n")
    evidence = _write(tmp_path / "evidence.md", "evidence\n")
    bad_diff = _write(tmp_path / "bad.diff", "--- a/.gitlab-ci.yml\n+++ b/.gitlab-ci.yml\n@@ -1 +1 @@\n-a\n+b\n")
    env = gl.ci_env(CI_MERGE_REQUEST_IID=3)
    argvs = [("note", "--key", "iris", "--body", str(tmp_path / "missing.md")),
             ("note", "--key", "iris", "--body", str(empty)),
             ("note", "--key", "no spaces please", "--body", str(evidence)),
             ("weekly-issue", "--system", "iris", "--body", str(tmp_path / "missing.md")),
             ("proposal-mr", "--diff", str(bad_diff), "--description", str(evidence), "--root", str(checkout)),
             ("proposal-mr", "--file", "baselines/iris.yaml", "--description", str(evidence)),
             ("proposal-mr", "--file", f"baselines/iris.yaml={evidence}", "--description", str(evidence),
              "--branch", "bad..branch", "--root", str(checkout))]
    for argv in argvs:
        done = cli_here(monkeypatch, capsys, *argv, env=env)
        assert done.returncode == 2, (argv, done.stderr)
        assert done.stderr.count("\n") == 1 and done.stderr.startswith("mpiregress gitlab: error: "), done.stderr
        assert "Traceback" not in done.stderr
    assert gl.calls == []


def test_cli_weekly_issue_and_proposal(gl: GitLabDouble, tmp_path: Path, checkout: Path,
                                       monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    sha = seed_main(gl, checkout)
    body = _write(tmp_path / "week.md", "## What changed this week\n\n- 1 change point\n")
    done = cli_here(monkeypatch, capsys, "weekly-issue", "--system", "iris", "--body", str(body), env=gl.ci_env())
    assert done.returncode == 0 and done.stderr.startswith("Opened the weekly issue of iris")
    done = cli_here(monkeypatch, capsys, "weekly-issue", "--system", "iris", "--body", str(body), "--clean",
                    env=gl.ci_env(CI_PIPELINE_ID=501))
    assert done.returncode == 0 and "closed" in done.stderr and gl.state.issues[1]["state"] == "closed"

    path = "baselines/iris.yaml"
    diff = _write(tmp_path / "p.diff", git_diff(checkout, path, proposed((checkout / path).read_text(),
                                                                           "{value: 4.13,", "{value: 4.02,")))
    evidence = _write(tmp_path / "evidence.md", "| series | runs |\n| --- | --- |\n| cross_socket latency | 9 |\n")
    done = cli_here(monkeypatch, capsys, "proposal-mr", "--diff", str(diff), "--description", str(evidence),
                    "--root", str(checkout), env=gl.ci_env(CI_COMMIT_SHA=sha))
    assert done.returncode == 0, done.stderr
    assert done.stderr.startswith("Opened the baseline proposal merge request for baselines/iris.yaml")
    nothing = _write(tmp_path / "none.diff", "# no change proposed for baselines/iris.yaml\n")
    calls = len(gl.calls)
    done = cli_here(monkeypatch, capsys, "proposal-mr", "--diff", str(nothing), "--description", str(evidence),
                    "--root", str(checkout), env=gl.ci_env(CI_COMMIT_SHA=sha))
    assert done.returncode == 0 and "changes no file" in done.stderr and len(gl.calls) == calls
    assert "{value: 4.02," in gl.branch_files("mpiregress/baselines-iris")[path]


# --- the double itself answers as GitLab documents -------------------------------------------------------

def test_double_authenticates_pages_and_404s_like_gitlab(gl: GitLabDouble) -> None:
    import requests

    gl.add_mr(3)
    for i in range(45):
        gl.add_note(3, f"n{i}")
    base = f"{gl.url}/api/v4/projects/42/merge_requests/3/notes"
    assert requests.get(base, timeout=10).status_code == 401
    assert requests.get(base, headers={"PRIVATE-TOKEN": "nope"}, timeout=10).json() == {"message": "401 Unauthorized"}
    auth = {"PRIVATE-TOKEN": gl.token}
    first = requests.get(base, headers=auth, timeout=10)
    assert first.status_code == 200 and len(first.json()) == 20           # default per_page
    assert (first.headers["x-page"], first.headers["x-next-page"], first.headers["x-total"],
            first.headers["x-total-pages"], first.headers["x-prev-page"]) == ("1", "2", "45", "3", "")
    assert first.links["next"]["url"].endswith("page=2&per_page=20")
    assert first.json()[0]["body"] == "n44"                                 # created_at, newest first
    last = requests.get(base, headers=auth, params={"page": 3, "per_page": 20}, timeout=10)
    assert len(last.json()) == 5 and last.headers["x-next-page"] == "" and "next" not in last.links
    assert requests.get(base, headers=auth, params={"per_page": 500}, timeout=10).headers["x-per-page"] == "100"
    assert requests.get(f"{gl.url}/api/v4/projects/42/merge_requests/9/notes", headers=auth,
                        timeout=10).json() == {"message": "404 Merge Request Not Found"}
    assert requests.get(f"{gl.url}/api/v4/projects/42/nothing", headers=auth, timeout=10).status_code == 404
    created = requests.post(base, headers=auth, json={"body": "x"}, timeout=10)
    assert created.status_code == 201 and created.json()["author"]["id"] == gl.user["id"]
    assert requests.post(base, headers=auth, json={}, timeout=10).status_code == 400
    human_note = gl.notes_of(3)[0]["id"]
    assert requests.put(f"{base}/{human_note}", headers=auth, json={"body": "y"}, timeout=10).status_code == 403
    assert [c.authenticated for c in gl.calls[:2]] == [False, False]
