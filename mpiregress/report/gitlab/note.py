"""The MR note: one comment per merge request and key (e.g. per system), updated in place on every pipeline.

The comment is found again by its hidden marker (``<!-- mpiregress:verdict:<key> -->``) among the notes the
token's own user wrote, on any page of the MR's notes; a human's reply quoting the comment (marker and all)
is never taken for it. The body is the caller's Markdown (rendered from the verdict); this module decides
nothing about it.
"""
from __future__ import annotations

from typing import Any, Optional

from mpiregress.report.gitlab.api import Outcome, Say, current_user_id, marker, newer_writer, project, publish, stamp
from mpiregress.report.gitlab.settings import Settings, check_key

KIND = "verdict"
WHAT = "The MR note"


def upsert_mr_note(body_markdown: str, key: str, settings: Optional[Settings] = None,
                   say: Optional[Say] = None) -> Outcome:
    """Create or update this MR's comment for ``key`` with ``body_markdown``; one sentence goes to ``say``.

    Settings come from GitLab's CI variables when not given. Outside a merge request pipeline, without a
    token, or when GitLab refuses, nothing fails: the outcome says why in one sentence. ``key`` must be
    1-64 letters, digits, '.', '_' or '-' (ValueError otherwise: a caller's mistake, not GitLab's).
    """
    check_key(key)
    settings = settings or Settings.from_env()
    body = stamp(KIND, key, body_markdown, settings.pipeline_id)
    not_mr = None if settings.mr_iid is not None else "this is not a merge request pipeline (no CI_MERGE_REQUEST_IID)"

    def write(gl: Any) -> Outcome:
        me = current_user_id(gl)
        mr = project(gl, settings).mergerequests.get(settings.mr_iid, lazy=True)
        mine = [note for note in _notes(mr) if _is_ours(note, key, me)]
        if not mine:
            note = mr.notes.create({"body": body})
            return Outcome("created", f"Created the MR note for {key}: {_url(note, settings)}", _url(note, settings))
        note, duplicates = mine[0], mine[1:]
        for extra in duplicates:
            # Two pipelines racing on a first note each created one; one comment per MR and key stays the rule.
            extra.delete()
        newer = newer_writer(note.body, settings.pipeline_id)
        if newer is not None:
            return Outcome("skipped", f"Left the MR note for {key} as pipeline {newer} wrote it: this pipeline "
                                      f"({settings.pipeline_id}) is older.", _url(note, settings))
        if note.body == body:
            return Outcome("unchanged", f"The MR note for {key} is already current: {_url(note, settings)}",
                           _url(note, settings))
        note.body = body
        note.save()
        return Outcome("updated", f"Updated the MR note for {key}: {_url(note, settings)}", _url(note, settings))

    return publish(f"{WHAT} for {key}", settings, write, say=say, extra_missing=not_mr)


def _notes(mr: Any) -> list[Any]:
    """Every note of the MR, oldest first, following GitLab's pages (100 a page, the API's maximum)."""
    return list(mr.notes.list(iterator=True, per_page=100, sort="asc", order_by="created_at"))


def _is_ours(note: Any, key: str, me: int) -> bool:
    author = getattr(note, "author", None) or {}
    return (not getattr(note, "system", False) and author.get("id") == me
            and (getattr(note, "body", "") or "").startswith(marker(KIND, key)))


def _url(note: Any, settings: Settings) -> str:
    """The note's address on the MR page (GitLab's notes carry no web_url; the MR page plus #note_<id> is it)."""
    if settings.project_url:
        return f"{settings.project_url}/-/merge_requests/{settings.mr_iid}#note_{note.id}"
    return f"note {note.id} of merge request !{settings.mr_iid}"
