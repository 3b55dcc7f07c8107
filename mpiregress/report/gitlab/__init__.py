"""Publishing to GitLab: the MR note, the weekly issue per system, the baseline proposal merge request.

The only code in the project that talks to GitLab, through python-gitlab, with a project access token from
the masked CI/CD variable ``MPIREGRESS_GITLAB_TOKEN`` and GitLab's predefined CI variables for the rest.
Each function takes Markdown the caller rendered from the verdict, writes it, and returns an
:class:`Outcome` after passing its one sentence to the job log. Nothing here changes an exit code: without
a token, outside a merge request pipeline, or when GitLab refuses, the sentence says so and the job goes on.
"""
from __future__ import annotations

from mpiregress.report.gitlab.api import Outcome
from mpiregress.report.gitlab.changes import Change, changes_from_diff, changes_from_files
from mpiregress.report.gitlab.issue import LABEL as WEEKLY_LABEL
from mpiregress.report.gitlab.issue import upsert_weekly_issue
from mpiregress.report.gitlab.note import upsert_mr_note
from mpiregress.report.gitlab.proposal import propose_merge_request
from mpiregress.report.gitlab.settings import TOKEN_VARIABLE, Settings, artifact_url, report_link

__all__ = ["Change", "Outcome", "Settings", "TOKEN_VARIABLE", "WEEKLY_LABEL", "artifact_url", "changes_from_diff",
           "changes_from_files", "propose_merge_request", "report_link", "upsert_mr_note", "upsert_weekly_issue"]
