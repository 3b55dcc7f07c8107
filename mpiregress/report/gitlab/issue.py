"""The weekly issue: one GitLab issue per system, kept current by the schedule pipeline.

Found again by its label (``mpiregress::weekly``) and its hidden marker (``<!-- mpiregress:weekly:<system> -->``)
in an issue the token's own user opened, never by its title (people retitle issues). Created once, then
updated in place.

Open means "something to look at": a clean week (the caller says so, from the verdict) closes the issue with
that week's body, and the next week with a finding reopens it, which GitLab notifies to everyone taking part.
A clean week with no issue yet creates nothing.
"""
from __future__ import annotations

from typing import Any, Optional

from mpiregress.report.gitlab.api import Outcome, Say, current_user_id, marker, newer_writer, project, publish, stamp
from mpiregress.report.gitlab.settings import Settings, check_key

KIND = "weekly"
LABEL = "mpiregress::weekly"


def upsert_weekly_issue(system: str, body_markdown: str, clean: bool, title: Optional[str] = None,
                        settings: Optional[Settings] = None, say: Optional[Say] = None) -> Outcome:
    """Create or update the weekly issue of ``system``; close it when ``clean``, reopen it when not.

    ``clean``: the week's verdict had nothing to look at (the caller decides; this module renders nothing).
    ``title`` is used when the issue is opened; an existing issue's title changes only when one is given.
    One sentence goes to ``say`` whatever happens; nothing here fails the job.
    """
    check_key(system, "system")
    settings = settings or Settings.from_env()
    body = stamp(KIND, system, body_markdown, settings.pipeline_id)
    new_title = title or f"mpiregress weekly: {system}"
    what = f"The weekly issue of {system}"

    def write(gl: Any) -> Outcome:
        me = current_user_id(gl)
        proj = project(gl, settings)
        found = _find(proj, system, me)
        if found is None:
            if clean:
                return Outcome("skipped", f"{what} was not opened: a clean week, and no earlier issue to update.")
            issue = proj.issues.create({"title": new_title, "description": body, "labels": LABEL})
            return Outcome("created", f"Opened {what.lower()}: {issue.web_url}", issue.web_url)
        newer = newer_writer(found.description or "", settings.pipeline_id)
        if newer is not None:
            return Outcome("skipped", f"Left {what.lower()} as pipeline {newer} wrote it: this pipeline "
                                      f"({settings.pipeline_id}) is older.", found.web_url)
        changes: dict[str, Any] = {}
        if (found.description or "") != body:
            changes["description"] = body
        if title is not None and found.title != title:      # a title people gave it stays, unless asked
            changes["title"] = title
        if clean and found.state == "opened":
            changes["state_event"] = "close"
        elif not clean and found.state == "closed":
            changes["state_event"] = "reopen"
        if not changes:
            return Outcome("unchanged", f"{what} is already current: {found.web_url}", found.web_url)
        for name, value in changes.items():
            setattr(found, name, value)
        found.save()
        verb = {"close": "Updated and closed (a clean week)", "reopen": "Updated and reopened"}.get(
            changes.get("state_event", ""), "Updated")
        return Outcome("updated", f"{verb} {what.lower()}: {found.web_url}", found.web_url)

    return publish(what, settings, write, say=say)


def _find(proj: Any, system: str, me: int) -> Optional[Any]:
    """This system's weekly issue (open or closed; the most recently updated if several), or None."""
    wanted = marker(KIND, system)
    found = [issue for issue in proj.issues.list(labels=[LABEL], state="all", iterator=True, per_page=100,
                                                 order_by="updated_at", sort="desc")
             if (issue.author or {}).get("id") == me and (issue.description or "").startswith(wanted)]
    return found[0] if found else None
