"""A GitLab REST API (v4) test double: a real HTTP server on 127.0.0.1, answering the endpoints mpiregress uses
as GitLab's API documentation specifies them, and recording every call.

Endpoints (paths under /api/v4; ``:id`` is the numeric project id or its URL-encoded path):

- ``GET /user`` (the token's user)
- ``GET /projects/:id``
- ``GET|POST /projects/:id/merge_requests`` (filters ``source_branch``, ``target_branch``, ``state``;
  409 when another open MR has the same source branch), ``GET|PUT /projects/:id/merge_requests/:iid``
- ``GET|POST /projects/:id/merge_requests/:iid/notes`` (``sort``, ``order_by``),
  ``GET|PUT|DELETE /projects/:id/merge_requests/:iid/notes/:note_id``
- ``GET|POST /projects/:id/issues`` (``labels``: all must match; ``state``: opened, closed, all),
  ``GET|PUT /projects/:id/issues/:iid`` (``state_event``: close, reopen)
- ``GET /projects/:id/repository/branches/:branch``
- ``GET /projects/:id/repository/files/:file_path?ref=``
- ``POST /projects/:id/repository/commits`` (actions create, update, delete; ``start_branch``,
  ``start_sha``, ``force``)

As GitLab does: PRIVATE-TOKEN header authentication (401 ``{"message": "401 Unauthorized"}`` when missing
or wrong), 201 on create, 204 on delete, 404 ``{"message": "404 ... Not Found"}`` for unknown resources and
``{"error": "404 Not Found"}`` for unknown routes, 400 for missing required attributes or a body over
1,000,000 characters, offset pagination
(``page``, ``per_page`` default 20 and at most 100) with the ``x-page``, ``x-per-page``, ``x-total``,
``x-total-pages``, ``x-next-page``, ``x-prev-page`` headers and a ``Link`` header (rel prev, next, first,
last) on every list. Lists are sorted by ``created_at`` descending unless asked otherwise.

Tests build state with the ``add_*`` helpers, read it back from the attributes, and assert on
:attr:`GitLabDouble.calls`. :meth:`fail_next` makes the next matching request answer an error status.
"""
from __future__ import annotations

import base64
import hashlib
import itertools
import json
import re
import threading
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Optional
from urllib.parse import parse_qs, unquote, urlencode, urlsplit

BOT = {"id": 101, "username": "project_42_bot_mpiregress", "name": "mpiregress bot", "state": "active",
       "bot": True}
HUMAN = {"id": 7, "username": "alice", "name": "Alice Admin", "state": "active", "bot": False}


@dataclass
class Call:
    """One request the double received."""

    method: str
    path: str                       # decoded, without /api/v4 and without the query
    query: dict[str, str]
    body: Optional[dict[str, Any]]
    status: int
    authenticated: bool


@dataclass
class _Failure:
    method: str
    pattern: re.Pattern[str]
    status: int
    message: str
    times: int


@dataclass
class _Commit:
    id: str
    parent: Optional[str]
    message: str
    files: dict[str, str]
    author: dict[str, Any]
    created_at: str


@dataclass
class _State:
    mrs: dict[int, dict[str, Any]] = field(default_factory=dict)
    notes: dict[int, list[dict[str, Any]]] = field(default_factory=dict)   # MR iid -> notes
    issues: dict[int, dict[str, Any]] = field(default_factory=dict)
    commits: dict[str, _Commit] = field(default_factory=dict)
    branches: dict[str, str] = field(default_factory=dict)                # name -> commit id


class GitLabDouble:
    """The double; use as a context manager (``with GitLabDouble() as gl: ...``) or start()/stop()."""

    def __init__(self, token: str = "glpat-double-token", project_id: int = 42,
                 project_path: str = "hpc/mpiregress", default_branch: str = "main") -> None:
        self.token = token
        self.user = dict(BOT)
        self.project_id = project_id
        self.project_path = project_path
        self.default_branch = default_branch
        self.calls: list[Call] = []
        self.state = _State()
        self._ids = itertools.count(1000)
        self._clock = datetime(2026, 11, 23, 2, 0, tzinfo=timezone.utc)
        self._failures: list[_Failure] = []
        self._lock = threading.RLock()
        self._server: Optional[ThreadingHTTPServer] = None
        self._thread: Optional[threading.Thread] = None

    # --- lifecycle -----------------------------------------------------------------------------------

    def start(self) -> "GitLabDouble":
        handler = type("Handler", (_Handler,), {"double": self})
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="gitlab-double", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None

    def __enter__(self) -> "GitLabDouble":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        """The instance URL (what CI_SERVER_URL holds), e.g. http://127.0.0.1:43123."""
        assert self._server is not None, "start() the double first"
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def project_url(self) -> str:
        return f"{self.url}/{self.project_path}"

    def ci_env(self, **overrides: Any) -> dict[str, str]:
        """GitLab's predefined CI variables for a job of this project, plus the token variable.

        ``overrides`` set variables (``CI_MERGE_REQUEST_IID=3``) or, given None, leave them out.
        """
        env = {"CI_SERVER_URL": self.url, "CI_API_V4_URL": f"{self.url}/api/v4",
               "CI_PROJECT_ID": str(self.project_id), "CI_PROJECT_URL": self.project_url,
               "CI_DEFAULT_BRANCH": self.default_branch, "CI_PIPELINE_ID": "500",
               "CI_PIPELINE_URL": f"{self.project_url}/-/pipelines/500",
               "CI_JOB_URL": f"{self.project_url}/-/jobs/9000",
               "MPIREGRESS_GITLAB_TOKEN": self.token}
        for name, value in overrides.items():
            if value is None:
                env.pop(name, None)
            else:
                env[name] = str(value)
        return env

    # --- state for tests ----------------------------------------------------------------------------

    def _now(self) -> str:
        # A clock that moves one second per write: orderings by created_at/updated_at are strict.
        self._clock += timedelta(seconds=1)
        return self._clock.strftime("%Y-%m-%dT%H:%M:%S.000Z")

    def add_mr(self, iid: int, source_branch: str = "toolchain-bump", target_branch: str = "main",
               title: str = "Toolchain: OpenMPI 4.1.6", author: Optional[dict[str, Any]] = None,
               state: str = "opened", description: str = "") -> dict[str, Any]:
        with self._lock:
            now = self._now()
            mr = {"id": next(self._ids), "iid": iid, "project_id": self.project_id, "title": title,
                  "description": description, "state": state, "created_at": now, "updated_at": now,
                  "merged_at": None, "closed_at": None, "target_branch": target_branch,
                  "source_branch": source_branch, "source_project_id": self.project_id,
                  "target_project_id": self.project_id, "author": self._user(author or HUMAN), "labels": [],
                  "draft": False, "work_in_progress": False, "merge_status": "can_be_merged",
                  "detailed_merge_status": "mergeable", "sha": None, "force_remove_source_branch": False,
                  "references": {"short": f"!{iid}", "full": f"{self.project_path}!{iid}"},
                  "web_url": f"{self.project_url}/-/merge_requests/{iid}"}
            self.state.mrs[iid] = mr
            self.state.notes.setdefault(iid, [])
            return mr

    def add_note(self, mr_iid: int, body: str, author: Optional[dict[str, Any]] = None,
                 system: bool = False) -> dict[str, Any]:
        with self._lock:
            return self._new_note(mr_iid, body, author or HUMAN, system)

    def add_issue(self, title: str, description: str, labels: list[str], author: Optional[dict[str, Any]] = None,
                  state: str = "opened") -> dict[str, Any]:
        with self._lock:
            return self._new_issue(title, description, labels, author or HUMAN, state)

    def add_branch(self, name: str, files: dict[str, str], message: str = "Initial commit",
                   author: Optional[dict[str, Any]] = None, parent: Optional[str] = None) -> str:
        """A branch whose head commit holds ``files``; returns the commit id."""
        with self._lock:
            commit = self._new_commit(parent, message, files, author or HUMAN)
            self.state.branches[name] = commit.id
            return commit.id

    def fail_next(self, method: str, path_regex: str, status: int, message: str = "", times: int = 1) -> None:
        """The next ``times`` requests ``method`` whose decoded path matches ``path_regex`` answer ``status``."""
        self._failures.append(_Failure(method.upper(), re.compile(path_regex), status,
                                       message or f"{status} injected by the test", times))

    def notes_of(self, mr_iid: int) -> list[dict[str, Any]]:
        return list(self.state.notes.get(mr_iid, []))

    def branch_files(self, name: str) -> dict[str, str]:
        return dict(self.state.commits[self.state.branches[name]].files)

    def branch_commit(self, name: str) -> _Commit:
        return self.state.commits[self.state.branches[name]]

    def writes(self) -> list[Call]:
        """The calls that changed something (POST, PUT, DELETE)."""
        return [c for c in self.calls if c.method != "GET"]

    # --- object factories ---------------------------------------------------------------------------

    def _user(self, user: dict[str, Any]) -> dict[str, Any]:
        return {**user, "avatar_url": None, "web_url": f"{self.url}/{user['username']}"}

    def _new_note(self, mr_iid: int, body: str, author: dict[str, Any], system: bool) -> dict[str, Any]:
        now = self._now()
        mr = self.state.mrs[mr_iid]
        note = {"id": next(self._ids), "type": None, "body": body, "attachment": None,
                "author": self._user(author), "created_at": now, "updated_at": now, "system": system,
                "noteable_id": mr["id"], "noteable_type": "MergeRequest", "project_id": self.project_id,
                "noteable_iid": mr_iid, "resolvable": False, "confidential": False, "internal": False,
                "imported": False, "imported_from": "none"}
        self.state.notes[mr_iid].append(note)
        return note

    def _new_issue(self, title: str, description: str, labels: list[str], author: dict[str, Any],
                   state: str) -> dict[str, Any]:
        now = self._now()
        iid = max(self.state.issues, default=0) + 1
        issue = {"id": next(self._ids), "iid": iid, "project_id": self.project_id, "title": title,
                 "description": description, "state": state, "created_at": now, "updated_at": now,
                 "closed_at": now if state == "closed" else None, "closed_by": None, "labels": list(labels),
                 "milestone": None, "assignees": [], "assignee": None, "author": self._user(author),
                 "type": "ISSUE", "issue_type": "issue", "user_notes_count": 0, "confidential": False,
                 "references": {"short": f"#{iid}", "full": f"{self.project_path}#{iid}"},
                 "web_url": f"{self.project_url}/-/issues/{iid}"}
        self.state.issues[iid] = issue
        return issue

    def _new_commit(self, parent: Optional[str], message: str, files: dict[str, str],
                    author: dict[str, Any]) -> _Commit:
        digest = hashlib.sha1(json.dumps([parent, message, sorted(files.items()), next(self._ids)]).encode())
        commit = _Commit(digest.hexdigest(), parent, message, dict(files), author, self._now())
        self.state.commits[commit.id] = commit
        return commit

    def commit_json(self, commit: _Commit) -> dict[str, Any]:
        title = commit.message.splitlines()[0] if commit.message else ""
        who = commit.author
        return {"id": commit.id, "short_id": commit.id[:8], "title": title, "message": commit.message,
                "author_name": who["name"], "author_email": f"{who['username']}@example.org",
                "authored_date": commit.created_at, "committer_name": who["name"],
                "committer_email": f"{who['username']}@example.org", "committed_date": commit.created_at,
                "created_at": commit.created_at, "parent_ids": [commit.parent] if commit.parent else [],
                "trailers": {}, "extended_trailers": {},
                "web_url": f"{self.project_url}/-/commit/{commit.id}"}


# --- the HTTP side ------------------------------------------------------------------------------------

class _Reply(Exception):
    """Raised by a route to answer at once (errors)."""

    def __init__(self, status: int, payload: Any) -> None:
        super().__init__(status)
        self.status = status
        self.payload = payload


def _not_found(what: str) -> _Reply:
    return _Reply(404, {"message": f"404 {what} Not Found"})


def _bad(message: str) -> _Reply:
    return _Reply(400, {"message": message})


def _require(body: dict[str, Any], *names: str) -> None:
    missing = [n for n in names if body.get(n) in (None, "")]
    if missing:
        raise _bad(f"{missing[0]} is missing")


NOTE_LIMIT = 1_000_000     # GitLab's documented limit of a note's body


def _fits(body: dict[str, Any], name: str, what: str) -> None:
    if len(str(body.get(name) or "")) > NOTE_LIMIT:
        raise _bad_fields({what: [f"is too long (maximum is {NOTE_LIMIT} characters)"]})


def _bad_fields(fields: dict[str, list[str]]) -> _Reply:
    return _Reply(400, {"message": fields})


def _labels(value: Any) -> list[str]:
    if isinstance(value, list):
        return [str(v).strip() for v in value if str(v).strip()]
    return [v.strip() for v in str(value or "").split(",") if v.strip()]


def _truthy(value: Any) -> bool:
    return value is True or str(value).lower() in ("true", "1")


class _Handler(BaseHTTPRequestHandler):
    double: GitLabDouble
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:   # noqa: A002 - the base class's name
        pass                                                  # the tests read .calls, not a log

    def do_GET(self) -> None:
        self._serve("GET")

    def do_POST(self) -> None:
        self._serve("POST")

    def do_PUT(self) -> None:
        self._serve("PUT")

    def do_DELETE(self) -> None:
        self._serve("DELETE")

    # --- dispatch ---------------------------------------------------------------------------------

    def _serve(self, method: str) -> None:
        double = self.double
        split = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(split.query, keep_blank_values=True).items()}
        body = self._body()
        raw = split.path
        segments = [unquote(s) for s in raw.split("/")[1:]]
        path = "/" + "/".join(segments[2:]) if segments[:2] == ["api", "v4"] else "/" + "/".join(segments)
        token = self.headers.get("PRIVATE-TOKEN")
        authenticated = token is not None and token == double.token
        status, payload, headers = 500, {"message": "500 Internal Server Error"}, {}
        try:
            with double._lock:
                if segments[:2] != ["api", "v4"]:
                    raise _Reply(404, {"error": "404 Not Found"})
                if not authenticated:
                    raise _Reply(401, {"message": "401 Unauthorized"})
                self._injected(method, path)
                status, payload, headers = self._route(method, segments[2:], query, body or {})
        except _Reply as reply:
            status, payload = reply.status, reply.payload
        double.calls.append(Call(method, path, query, body, status, authenticated))
        self._send(status, payload, headers)

    def _injected(self, method: str, path: str) -> None:
        for failure in self.double._failures:
            if failure.times > 0 and failure.method == method and failure.pattern.search(path):
                failure.times -= 1
                raise _Reply(failure.status, {"message": failure.message})

    def _body(self) -> Optional[dict[str, Any]]:
        length = int(self.headers.get("Content-Length") or 0)
        if not length:
            return None
        raw = self.rfile.read(length)
        kind = self.headers.get("Content-Type", "")
        if "json" in kind:
            data = json.loads(raw or b"{}")
            return data if isinstance(data, dict) else {"_": data}
        return {k: v[-1] for k, v in parse_qs(raw.decode()).items()}

    def _send(self, status: int, payload: Any, headers: dict[str, str]) -> None:
        data = b"" if status == 204 else json.dumps(payload).encode()
        self.send_response(status)
        if status != 204:
            self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def _route(self, method: str, seg: list[str], query: dict[str, str], body: dict[str, Any]
               ) -> tuple[int, Any, dict[str, str]]:
        double = self.double
        if seg == ["user"] and method == "GET":
            return 200, double._user(double.user), {}
        if len(seg) < 2 or seg[0] != "projects":
            raise _Reply(404, {"error": "404 Not Found"})
        if seg[1] not in (str(double.project_id), double.project_path):
            raise _not_found("Project")
        rest = seg[2:]
        if not rest and method == "GET":
            return 200, self._project(), {}
        if rest[:1] == ["merge_requests"]:
            return self._merge_requests(method, rest[1:], query, body)
        if rest[:1] == ["issues"]:
            return self._issues(method, rest[1:], query, body)
        if rest[:2] == ["repository", "branches"] and len(rest) == 3 and method == "GET":
            return 200, self._branch(rest[2]), {}
        if rest[:2] == ["repository", "files"] and len(rest) == 3 and method == "GET":
            return 200, self._file(rest[2], query), {}
        if rest == ["repository", "commits"] and method == "POST":
            return 201, self._commit(body), {}
        raise _Reply(404, {"error": "404 Not Found"})

    # --- resources ---------------------------------------------------------------------------------

    def _project(self) -> dict[str, Any]:
        d = self.double
        name = d.project_path.rsplit("/", 1)[-1]
        return {"id": d.project_id, "name": name, "path": name, "path_with_namespace": d.project_path,
                "default_branch": d.default_branch, "web_url": d.project_url}

    def _page(self, items: list[dict[str, Any]], query: dict[str, str], default_order: str = "created_at"
              ) -> tuple[int, Any, dict[str, str]]:
        order = query.get("order_by", default_order)
        if order not in ("created_at", "updated_at", "id"):
            raise _bad("order_by does not have a valid value")
        reverse = query.get("sort", "desc") != "asc"
        items = sorted(items, key=lambda item: (item.get(order) or "", item["id"]), reverse=reverse)
        try:
            page = max(1, int(query.get("page", "1")))
            per_page = min(100, max(1, int(query.get("per_page", "20"))))
        except ValueError as err:
            raise _bad("page and per_page must be integers") from err
        total = len(items)
        pages = max(1, -(-total // per_page))
        chunk = items[(page - 1) * per_page: page * per_page]
        base = f"{self.double.url}{urlsplit(self.path).path}"

        def link(number: int) -> str:
            return f"{base}?{urlencode({**query, 'page': number, 'per_page': per_page})}"

        links = []
        if page > 1:
            links.append(f'<{link(page - 1)}>; rel="prev"')
        if page < pages:
            links.append(f'<{link(page + 1)}>; rel="next"')
        links += [f'<{link(1)}>; rel="first"', f'<{link(pages)}>; rel="last"']
        headers = {"Link": ", ".join(links), "x-page": str(page), "x-per-page": str(per_page),
                   "x-total": str(total), "x-total-pages": str(pages),
                   "x-next-page": str(page + 1) if page < pages else "",
                   "x-prev-page": str(page - 1) if page > 1 else ""}
        return 200, chunk, headers

    def _merge_requests(self, method: str, rest: list[str], query: dict[str, str], body: dict[str, Any]
                        ) -> tuple[int, Any, dict[str, str]]:
        d = self.double
        if not rest:
            if method == "GET":
                state = query.get("state", "all")
                found = [mr for mr in d.state.mrs.values()
                         if (state == "all" or mr["state"] == state)
                         and all(mr[k] == query[k] for k in ("source_branch", "target_branch") if k in query)]
                return self._page(found, query)
            if method == "POST":
                _require(body, "source_branch", "target_branch", "title")
                if body["source_branch"] not in d.state.branches:
                    raise _bad("Source branch does not exist")   # GitLab validates the branches on create
                clash = [mr for mr in d.state.mrs.values()
                         if mr["state"] == "opened" and mr["source_branch"] == body["source_branch"]]
                if clash:
                    raise _Reply(409, {"message": [f"Another open merge request already exists for this source "
                                                   f"branch: !{clash[0]['iid']}"]})
                mr = d.add_mr(max(d.state.mrs, default=0) + 1, source_branch=body["source_branch"],
                              target_branch=body["target_branch"], title=body["title"],
                              author=d.user, description=body.get("description") or "")
                mr["labels"] = _labels(body.get("labels"))
                mr["force_remove_source_branch"] = _truthy(body.get("remove_source_branch"))
                return 201, mr, {}
            raise _Reply(405, {"message": "405 Method Not Allowed"})
        try:
            iid = int(rest[0])
        except ValueError as err:
            raise _not_found("Merge Request") from err
        mr = d.state.mrs.get(iid)
        if mr is None:
            raise _not_found("Merge Request")
        if len(rest) == 1:
            if method == "GET":
                return 200, mr, {}
            if method == "PUT":
                for name in ("title", "description", "target_branch"):
                    if name in body:
                        mr[name] = body[name]
                if "labels" in body:
                    mr["labels"] = _labels(body["labels"])
                event = body.get("state_event")
                if event == "close":
                    mr["state"], mr["closed_at"] = "closed", d._now()
                elif event == "reopen":
                    mr["state"], mr["closed_at"] = "opened", None
                mr["updated_at"] = d._now()
                return 200, mr, {}
        if rest[1:2] == ["notes"]:
            return self._notes(method, iid, rest[2:], query, body)
        raise _Reply(404, {"error": "404 Not Found"})

    def _notes(self, method: str, iid: int, rest: list[str], query: dict[str, str], body: dict[str, Any]
               ) -> tuple[int, Any, dict[str, str]]:
        d = self.double
        notes = d.state.notes[iid]
        if not rest:
            if method == "GET":
                return self._page(notes, query)
            if method == "POST":
                _require(body, "body")
                _fits(body, "body", "note")
                return 201, d._new_note(iid, body["body"], d.user, False), {}
            raise _Reply(405, {"message": "405 Method Not Allowed"})
        note = next((n for n in notes if str(n["id"]) == rest[0]), None)
        if note is None or len(rest) != 1:
            raise _not_found("Note")
        if method == "GET":
            return 200, note, {}
        if note["author"]["id"] != d.user["id"]:
            raise _Reply(403, {"message": "403 Forbidden"})       # only a note's author may edit or delete it
        if method == "PUT":
            _require(body, "body")
            _fits(body, "body", "note")
            note["body"], note["updated_at"] = body["body"], d._now()
            return 200, note, {}
        if method == "DELETE":
            notes.remove(note)
            return 204, None, {}
        raise _Reply(405, {"message": "405 Method Not Allowed"})

    def _issues(self, method: str, rest: list[str], query: dict[str, str], body: dict[str, Any]
                ) -> tuple[int, Any, dict[str, str]]:
        d = self.double
        if not rest:
            if method == "GET":
                state = query.get("state", "all")
                wanted = _labels(query.get("labels"))
                found = [i for i in d.state.issues.values() if (state == "all" or i["state"] == state)
                         and all(label in i["labels"] for label in wanted)]
                return self._page(found, query)
            if method == "POST":
                _require(body, "title")
                _fits(body, "description", "description")
                issue = d._new_issue(body["title"], body.get("description") or "", _labels(body.get("labels")),
                                     d.user, "opened")
                return 201, issue, {}
            raise _Reply(405, {"message": "405 Method Not Allowed"})
        issue = d.state.issues.get(int(rest[0])) if rest[0].isdigit() else None
        if issue is None or len(rest) != 1:
            raise _not_found("Issue")
        if method == "GET":
            return 200, issue, {}
        if method == "PUT":
            _fits(body, "description", "description")
            for name in ("title", "description"):
                if name in body:
                    issue[name] = body[name]
            if "labels" in body:
                issue["labels"] = _labels(body["labels"])
            event = body.get("state_event")
            if event == "close" and issue["state"] == "opened":
                issue["state"], issue["closed_at"], issue["closed_by"] = "closed", d._now(), d._user(d.user)
            elif event == "reopen" and issue["state"] == "closed":
                issue["state"], issue["closed_at"], issue["closed_by"] = "opened", None, None
            issue["updated_at"] = d._now()
            return 200, issue, {}
        raise _Reply(405, {"message": "405 Method Not Allowed"})

    def _branch(self, name: str) -> dict[str, Any]:
        d = self.double
        if name not in d.state.branches:
            raise _not_found("Branch")
        commit = d.state.commits[d.state.branches[name]]
        return {"name": name, "merged": False, "protected": name == d.default_branch,
                "default": name == d.default_branch, "developers_can_push": False, "developers_can_merge": False,
                "can_push": True, "web_url": f"{d.project_url}/-/tree/{name}", "commit": d.commit_json(commit)}

    def _file(self, file_path: str, query: dict[str, str]) -> dict[str, Any]:
        d = self.double
        ref = query.get("ref")
        if not ref:
            raise _bad("ref is missing")
        sha = d.state.branches.get(ref, ref)
        commit = d.state.commits.get(sha)
        if commit is None or file_path not in commit.files:
            raise _not_found("File")
        content = commit.files[file_path].encode()
        blob = hashlib.sha1(b"blob %d\0" % len(content) + content).hexdigest()
        return {"file_name": file_path.rsplit("/", 1)[-1], "file_path": file_path, "size": len(content),
                "encoding": "base64", "content_sha256": hashlib.sha256(content).hexdigest(), "ref": ref,
                "blob_id": blob, "commit_id": commit.id, "last_commit_id": commit.id, "execute_filemode": False,
                "content": base64.b64encode(content).decode()}

    def _commit(self, body: dict[str, Any]) -> dict[str, Any]:
        d = self.double
        _require(body, "branch", "commit_message", "actions")
        branch = body["branch"]
        if body.get("start_sha"):
            if body["start_sha"] not in d.state.commits:
                raise _bad("Invalid start_sha")
            base: Optional[str] = body["start_sha"]
        elif body.get("start_branch"):
            if body["start_branch"] not in d.state.branches:
                raise _bad("Invalid start_branch")
            base = d.state.branches[body["start_branch"]]
        else:
            base = None
        if branch in d.state.branches and not _truthy(body.get("force")):
            if base is not None and base != d.state.branches[branch]:
                raise _bad(f"A branch called '{branch}' already exists. Switch to that branch in order to "
                           f"make changes")
            base = d.state.branches[branch]
        if base is None:
            raise _bad("You can only create or edit files when you are on a branch")
        files = dict(d.state.commits[base].files)
        for action in body["actions"]:
            kind, path = action.get("action"), action.get("file_path")
            if not path:
                raise _bad("actions[file_path] is missing")
            content = action.get("content")
            if content is not None and action.get("encoding") == "base64":
                content = base64.b64decode(content).decode()
            if kind == "create":
                if path in files:
                    raise _bad("A file with this name already exists")
                files[path] = content or ""
            elif kind == "update":
                if path not in files:
                    raise _bad("A file with this name doesn't exist")
                files[path] = content or ""
            elif kind == "delete":
                if path not in files:
                    raise _bad("A file with this name doesn't exist")
                del files[path]
            else:
                raise _bad("actions[action] does not have a valid value")
        commit = d._new_commit(base, body["commit_message"], files, d.user)
        d.state.branches[branch] = commit.id
        return {**d.commit_json(commit), "stats": {"additions": 0, "deletions": 0, "total": 0}, "status": None}
