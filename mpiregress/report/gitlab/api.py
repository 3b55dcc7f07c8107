"""The one door to GitLab: a python-gitlab connection, the outcome of a publication, and the rule that a
failure to publish is one sentence and never changes a job's exit code.

Every publication (MR note, weekly issue, proposal MR) runs through :func:`publish`: it checks the settings
(no GitLab job or no token: one sentence, no call at all), opens the connection, and turns any API or
network error into one sentence. The verdict decides exit codes; publishing only reports.
"""
from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from typing import Any, Callable, Optional

from mpiregress.report.gitlab.settings import Settings

# Seconds per request: a GitLab that hangs must not hold a verdict job until its time limit.
TIMEOUT = 30


@dataclass(frozen=True)
class Outcome:
    """What a publication did, in one sentence for the job log.

    ``action``: created, updated, unchanged, skipped (nothing to do or not possible here: no call made, or
    a decision not to write), failed (GitLab or the network refused; the job's exit code is unchanged).
    """

    action: str
    sentence: str
    url: str = ""

    @property
    def published(self) -> bool:
        return self.action in ("created", "updated", "unchanged")


def to_stderr(sentence: str) -> None:
    """The default place for a publication's sentence: the job log, beside the command's own messages."""
    print(sentence, file=sys.stderr)


Say = Callable[[str], None]


def connect(settings: Settings) -> Any:
    """A python-gitlab client for ``settings`` (no request is made until the first call)."""
    import gitlab

    # keep_base_url: pagination links GitLab builds from its external_url are rewritten to the URL this
    # job reaches GitLab by (a runner may use an internal name), instead of warning and following them.
    # No retries of 5xx: python-gitlab's back-off can wait minutes; the next pipeline writes the same
    # note, issue or proposal again, so one sentence now is the better trade.
    return gitlab.Gitlab(settings.server_url, private_token=settings.token, timeout=TIMEOUT,
                         keep_base_url=True, retry_transient_errors=False)


def project(gl: Any, settings: Settings) -> Any:
    """The project object, lazily (no GET of the project itself)."""
    return gl.projects.get(settings.project_id, lazy=True)


def current_user_id(gl: Any) -> int:
    """The id of the token's user (a project access token's bot): what this project wrote is what it wrote."""
    gl.auth()
    return int(gl.user.id)


def publish(what: str, settings: Settings, action: Callable[[Any], Outcome], say: Optional[Say] = None,
            extra_missing: Optional[str] = None) -> Outcome:
    """Run ``action(gl)`` when the settings allow it; every way it ends is one sentence passed to ``say``.

    ``what`` names the publication for the sentences ("the MR note"); ``extra_missing`` is a reason to skip
    that only the caller knows (e.g. not a merge request pipeline), checked after the GitLab job itself.
    """
    say = say or to_stderr
    reason = settings.missing(what)
    if reason is None and extra_missing:
        reason = f"{what} was not published: {extra_missing}."
    if reason is not None:
        outcome = Outcome("skipped", reason)
    else:
        try:
            outcome = action(connect(settings))
        except Exception as err:  # noqa: BLE001 - publishing never fails the job; one sentence instead
            outcome = Outcome("failed", f"{what} was not published: {describe(err)}; the job's exit code "
                                        f"is unchanged.")
    say(outcome.sentence)
    return outcome


def describe(err: BaseException) -> str:
    """One clause for an API or network error: status, GitLab's message, and what it usually means."""
    import gitlab.exceptions as gle
    import requests

    if isinstance(err, gle.GitlabError):
        code = err.response_code
        message = _one_line(str(err.error_message or ""))
        hint = {401: "the token in MPIREGRESS_GITLAB_TOKEN is wrong, expired or revoked",
                403: "the token's role or scope does not allow this (scope api; Reporter for notes and issues, "
                     "Developer for the proposal merge request)",
                404: "the project, merge request or branch was not found, or the token cannot see it"}.get(code or 0)
        status = f"GitLab answered {code}" if code else "GitLab answered with an error"
        text = f"{status} ({message})" if message else status
        return f"{text}: {hint}" if hint else text
    if isinstance(err, requests.exceptions.Timeout):
        return f"GitLab did not answer within {TIMEOUT} s"
    if isinstance(err, requests.exceptions.RequestException):
        return f"GitLab could not be reached ({_one_line(type(err).__name__)})"
    return f"unexpected {type(err).__name__} ({_one_line(str(err))})"


def _one_line(text: str, limit: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit - 1] + "…"


# --- markers: how a comment, issue or commit written by mpiregress is found again ------------------------

def marker(kind: str, key: str) -> str:
    """The hidden HTML comment naming what a body is, e.g. ``<!-- mpiregress:verdict:iris -->``."""
    return f"<!-- mpiregress:{kind}:{key} -->"


_PIPELINE = re.compile(r"<!-- mpiregress:pipeline:(\d+) -->")


# GitLab refuses a note or description over 1,000,000 characters; keep well inside it.
MAX_BODY = 900_000


def stamp(kind: str, key: str, body: str, pipeline_id: Optional[int]) -> str:
    """``body`` with its marker first and, when known, the pipeline that wrote it (hidden, second line).

    A body longer than GitLab accepts is cut, saying so, rather than refused whole.
    """
    lines = [marker(kind, key)]
    if pipeline_id is not None:
        lines.append(f"<!-- mpiregress:pipeline:{pipeline_id} -->")
    text = body.strip("\n")
    if len(text) > MAX_BODY:
        text = text[:MAX_BODY].rsplit("\n", 1)[0] + "\n\n*(cut here: too long for GitLab; the report has it all)*"
    return "\n".join(lines) + "\n" + text + "\n"


def written_by_pipeline(body: str) -> Optional[int]:
    """The pipeline id a stamped body says wrote it, or None."""
    found = _PIPELINE.search(body or "")
    return int(found.group(1)) if found else None


def newer_writer(existing_body: str, pipeline_id: Optional[int]) -> Optional[int]:
    """The pipeline that wrote ``existing_body`` when it is newer than ``pipeline_id`` (then keep it), else None.

    Pipeline ids only grow on a GitLab instance: an older pipeline finishing late must not put an earlier
    verdict back over a newer one.
    """
    previous = written_by_pipeline(existing_body)
    if previous is not None and pipeline_id is not None and previous > pipeline_id:
        return previous
    return None
