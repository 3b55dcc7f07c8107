"""Where the GitLab API is and which pipeline this is: GitLab's predefined CI variables, read once.

Nothing here talks to GitLab. A job that is not a GitLab CI job (a laptop, gitlab-ci-local without the
variables) simply has no server or project, and publishing says so in one sentence.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Mapping, Optional
from urllib.parse import quote

# The masked CI/CD variable holding a project access token (scope `api`); see docs/pipeline.md.
TOKEN_VARIABLE = "MPIREGRESS_GITLAB_TOKEN"

# A key becomes part of an HTML comment and of a branch name: keep it to characters safe in both.
_KEY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


@dataclass(frozen=True)
class Settings:
    """The GitLab instance, project and pipeline a job belongs to, and the token to publish with."""

    server_url: str = ""            # e.g. https://gitlab.uni.lu (no /api/v4)
    project_id: str = ""            # numeric id, or a namespace/project path
    token: str = ""
    mr_iid: Optional[int] = None    # set only in merge request pipelines
    pipeline_id: Optional[int] = None
    pipeline_url: str = ""
    project_url: str = ""           # the project's web page, e.g. https://gitlab.uni.lu/hpc/mpiregress
    job_url: str = ""
    commit_sha: str = ""
    default_branch: str = ""

    @classmethod
    def from_env(cls, env: Optional[Mapping[str, str]] = None) -> "Settings":
        """Read GitLab's predefined variables (CI_API_V4_URL or CI_SERVER_URL, CI_PROJECT_ID, ...)."""
        env = os.environ if env is None else env
        server = env.get("CI_API_V4_URL", "").strip()
        if server:
            # python-gitlab wants the instance URL and adds /api/v4 itself; keep a relative URL root.
            server = re.sub(r"/api/v4/?$", "", server.rstrip("/"))
        else:
            server = env.get("CI_SERVER_URL", "").strip().rstrip("/")
        return cls(server_url=server,
                   project_id=env.get("CI_PROJECT_ID", "").strip(),
                   token=env.get(TOKEN_VARIABLE, "").strip(),
                   mr_iid=_int(env.get("CI_MERGE_REQUEST_IID")),
                   pipeline_id=_int(env.get("CI_PIPELINE_ID")),
                   pipeline_url=env.get("CI_PIPELINE_URL", "").strip(),
                   project_url=env.get("CI_PROJECT_URL", "").strip().rstrip("/"),
                   job_url=env.get("CI_JOB_URL", "").strip().rstrip("/"),
                   commit_sha=env.get("CI_COMMIT_SHA", "").strip(),
                   default_branch=env.get("CI_DEFAULT_BRANCH", "").strip())

    def missing(self, what: str) -> Optional[str]:
        """The one sentence saying why ``what`` (e.g. 'the MR note') is not published, or None when it can be.

        Checked in the order a reader would ask: is this a GitLab job at all, is there a token.
        """
        if not self.server_url or not self.project_id:
            return (f"{what} was not published: this is not a GitLab CI job "
                    f"(CI_SERVER_URL or CI_API_V4_URL and CI_PROJECT_ID are not set).")
        if not self.token:
            return (f"{what} was not published: the CI/CD variable {TOKEN_VARIABLE} is not set "
                    f"(a project access token with scope api; see docs/pipeline.md).")
        return None


def _int(text: Optional[str]) -> Optional[int]:
    try:
        return int(str(text).strip())
    except ValueError:
        return None


def check_key(key: str, what: str = "key") -> str:
    """``key`` when it is safe inside an HTML comment marker and a branch name; else ValueError with a sentence."""
    if not _KEY.match(key or ""):
        raise ValueError(f"{what} {key!r} must be 1-64 letters, digits, '.', '_' or '-', starting with a letter "
                         f"or digit")
    return key


_BRANCH = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/-]{0,99}$")


def check_branch(name: str) -> str:
    """``name`` when it is a plain branch name (letters, digits, '.', '_', '-', '/'); else ValueError."""
    if not _BRANCH.match(name or "") or ".." in name or "//" in name or name.endswith(("/", ".lock")):
        raise ValueError(f"branch name {name!r} must be letters, digits, '.', '_', '-' and single '/' "
                         f"(e.g. mpiregress/baselines-iris)")
    return name


def artifact_url(path: str, job_url: Optional[str] = None, env: Optional[Mapping[str, str]] = None) -> str:
    """The URL that shows ``path`` (relative to the project folder) from a job's artifacts, or '' outside CI.

    GitLab's artifact browser: ``<job URL>/artifacts/file/<path>``; an HTML file is rendered in the browser
    when GitLab Pages is enabled, otherwise offered for download. The job's own URL (not the
    ``/-/jobs/artifacts/<ref>/...`` "latest successful job" form) is used on purpose: that form can point at
    an earlier pipeline's report while this one is still running, and a report must never show an
    earlier run's verdict.
    """
    if job_url is None:
        job_url = (os.environ if env is None else env).get("CI_JOB_URL", "")
    job_url = job_url.strip().rstrip("/")
    clean = path.strip()
    while clean.startswith("./"):
        clean = clean[2:]
    if not job_url or not clean or clean.startswith("/") or ".." in clean.split("/"):
        return ""
    return f"{job_url}/artifacts/file/{quote(clean, safe='/')}"


def report_link(path: str, job_url: Optional[str] = None, env: Optional[Mapping[str, str]] = None,
                text: str = "View report") -> str:
    """A Markdown link ``[View report](<artifact URL>)``, or '' when there is no job URL to link to."""
    url = artifact_url(path, job_url=job_url, env=env)
    return f"[{text}]({url})" if url else ""
