"""The baseline proposal merge request: one branch and one open MR per proposal, pushed through the API.

The branch is written with the Commits API (``POST /projects/:id/repository/commits`` with actions), so
the runner needs no git credentials: the token does it. Each week's proposal replaces the branch's commit
(``force``, started from the commit the proposal was computed on), and the one open MR whose source is
that branch gets the week's evidence as its description; a new MR is opened only when none is open.

The branch belongs to mpiregress: its commits carry a ``Proposed-by: mpiregress`` trailer. When its head
commit lacks it (a person pushed to the branch) while its merge request is open, nothing is overwritten and
the sentence says so; once that MR is merged or closed, the next proposal replaces the branch.
"""
from __future__ import annotations

import base64
from typing import Any, Optional, Sequence

from mpiregress.report.gitlab.api import Outcome, Say, project, publish, to_stderr
from mpiregress.report.gitlab.changes import Change
from mpiregress.report.gitlab.settings import Settings, check_branch, check_key

TRAILER = "Proposed-by: mpiregress"
LABEL = "mpiregress::proposal"
BRANCH_PREFIX = "mpiregress/baselines-"


def default_branch_name(changes: Sequence[Change]) -> str:
    """``mpiregress/baselines-<system>[-<system>...]`` from the baselines files a proposal changes."""
    systems = sorted({c.path.rsplit("/", 1)[-1].split(".", 1)[0] for c in changes})
    return BRANCH_PREFIX + "-".join(check_key(s, "baselines file") for s in systems)


def propose_merge_request(changes: Sequence[Change], description_markdown: str, title: Optional[str] = None,
                          branch: Optional[str] = None, settings: Optional[Settings] = None,
                          say: Optional[Say] = None) -> Outcome:
    """Push ``changes`` to the proposal branch and open or update its one merge request.

    ``description_markdown`` holds the evidence per series (the caller renders it). No change: nothing is
    pushed or opened. One sentence goes to ``say`` whatever happens; nothing here fails the job.
    """
    settings = settings or Settings.from_env()
    what = "The baseline proposal merge request"
    if not changes:
        outcome = Outcome("skipped", f"{what} was not opened: the proposal changes no file.")
        (say or to_stderr)(outcome.sentence)
        return outcome
    branch = check_branch(branch) if branch else default_branch_name(changes)
    files = ", ".join(c.path for c in changes)
    new_title = title or f"Baselines: proposal for {files}"
    missing_target = None if settings.default_branch else "the target branch is unknown (no CI_DEFAULT_BRANCH)"

    def write(gl: Any) -> Outcome:
        proj = project(gl, settings)
        head = _branch_head(proj, branch)
        mr = _open_mr(proj, branch)
        # A person's commit on the branch of an open proposal is a review in progress: never overwrite it.
        # With no open merge request the branch is a leftover (a closed proposal) and is replaced.
        if head is not None and mr is not None and TRAILER not in (head.get("message") or ""):
            return Outcome("skipped", f"{what} was left as is: branch {branch} has a commit not made by "
                                      f"mpiregress ({head.get('short_id') or head.get('id')}); merge or close "
                                      f"its merge request to get a new proposal.")
        pushed = False
        if head is None or not _branch_has(proj, branch, changes):
            _push(proj, branch, changes, settings)
            pushed = True
        if mr is None:
            mr = proj.mergerequests.create({"source_branch": branch, "target_branch": settings.default_branch,
                                            "title": new_title, "description": description_markdown,
                                            "labels": LABEL, "remove_source_branch": True})
            return Outcome("created", f"Opened {what.lower()} for {files}: {mr.web_url}", mr.web_url)
        # A title a reviewer gave the MR stays unless the caller names one.
        wanted = {"description": description_markdown, **({"title": title} if title else {})}
        edits = {k: v for k, v in wanted.items() if getattr(mr, k, None) != v}
        for name, value in edits.items():
            setattr(mr, name, value)
        if edits:
            mr.save()
        if not edits and not pushed:
            return Outcome("unchanged", f"{what} is already current: {mr.web_url}", mr.web_url)
        return Outcome("updated", f"Updated {what.lower()} for {files}"
                                  f"{' (new commit)' if pushed else ''}: {mr.web_url}", mr.web_url)

    return publish(what, settings, write, say=say, extra_missing=missing_target)


def _branch_head(proj: Any, branch: str) -> Optional[dict[str, Any]]:
    """The branch's head commit (GitLab's commit object), or None when the branch does not exist."""
    import gitlab.exceptions as gle

    try:
        return dict(proj.branches.get(branch).commit)
    except gle.GitlabGetError as err:
        if err.response_code == 404:
            return None
        raise


def _branch_has(proj: Any, branch: str, changes: Sequence[Change]) -> bool:
    """Whether the branch already holds exactly the proposed contents (then no new commit is made)."""
    import gitlab.exceptions as gle

    for change in changes:
        try:
            current: Optional[str] = base64.b64decode(proj.files.get(change.path, ref=branch).content).decode()
        except gle.GitlabGetError as err:
            if err.response_code != 404:
                raise
            current = None
        if current != change.content:
            return False
    return True


def _push(proj: Any, branch: str, changes: Sequence[Change], settings: Settings) -> None:
    """One commit on ``branch`` replacing whatever it held, started from the proposal's own commit."""
    actions = []
    for change in changes:
        action: dict[str, Any] = {"action": change.action, "file_path": change.path}
        if change.content is not None:
            action["content"] = change.content
        actions.append(action)
    start = {"start_sha": settings.commit_sha} if settings.commit_sha else {"start_branch": settings.default_branch}
    pipeline = f" (pipeline {settings.pipeline_url or settings.pipeline_id})" if settings.pipeline_id else ""
    message = (f"Baselines: proposal for {', '.join(c.path for c in changes)}\n\n"
               f"Made by mpiregress baseline propose{pipeline}.\n\n{TRAILER}\n")
    proj.commits.create({"branch": branch, "commit_message": message, "actions": actions, "force": True, **start})


def _open_mr(proj: Any, branch: str) -> Optional[Any]:
    found = list(proj.mergerequests.list(source_branch=branch, state="opened", iterator=True, per_page=100))
    return found[0] if found else None
