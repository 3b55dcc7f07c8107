"""A run's reports folder: owned by one run at a time, cleared at its start, written atomically.

A report must never show an earlier run's verdict. So a run locks its folder (a
second run on it is refused with one sentence), removes every file a run writes
there before anything else happens, marks the folder "running", writes each
report through a temporary file and a rename, and, when it fails, leaves a
summary, a JUnit file and ``status.json`` that say it failed, why, and what ran.
"""
from __future__ import annotations

import datetime as _dt
import html
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Optional

from . import locks
from .errors import InputError

LOCK_NAME = ".mpiregress-run.lock"
# Everything a run writes in its folder (by the runner or by ReFrame): removed at the start.
OWNED = ("results.json", "summary.md", "junit.xml", "reframe-junit.xml", "reframe-report.json", "reframe.out",
         "reframe.log", "status.json", "report.html", "html", "perflogs", "reframe", "planned-manifests",
         "ab-samples.json", "ab-a.json")


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def write_atomic(path: Path, text: str) -> Path:
    """Write ``text`` to ``path`` through a temporary file in the same folder and a rename.

    A reader sees the old file or the new one, never half of one; a failure names the file.
    """
    path = Path(path)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        try:
            with os.fdopen(fd, "w") as handle:
                handle.write(text)
            # mkstemp makes the file private; reports are artifacts for everyone to read.
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(tmp, 0o666 & ~umask)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except OSError as err:
        raise InputError(f"cannot write {path}: {err.strerror or err}") from None
    return path


class RunFolder:
    """The reports folder of one run; use as a context manager (lock, clear, mark running)."""

    def __init__(self, path: Path, description: str) -> None:
        self.path = Path(path)
        self.description = description          # e.g. the command line, for the failure report
        self.started = _now()
        self.steps: list[str] = []              # what ran so far, in order, for a failure report
        self._lock: Optional[int] = None

    # -- owning the folder ----------------------------------------------
    def __enter__(self) -> "RunFolder":
        try:
            self.path.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise InputError(f"report folder {self.path} cannot be created: {err.strerror or err}") from None
        if not self.path.is_dir():
            raise InputError(f"report folder {self.path} is not a folder")
        self._take_lock()
        try:
            self._clear()
            self.write_status("running")
        except BaseException:
            self._release()
            raise
        return self

    def __exit__(self, *exc: Any) -> None:
        self._release()

    def _take_lock(self) -> None:
        try:
            self._lock = locks.hold(self.path / LOCK_NAME, f"PID {os.getpid()} since {self.started}",
                                    lambda holder: f"report folder {self.path} is in use by another mpiregress "
                                                   f"run ({holder}); wait for it to end or choose another "
                                                   "--report-dir")
        except OSError as err:
            raise InputError(f"report folder {self.path} cannot be written: {err.strerror or err}") from None

    def _release(self) -> None:
        if self._lock is not None:
            os.close(self._lock)   # closing drops the flock; the file stays for the next run
            self._lock = None

    def _clear(self) -> None:
        for name in OWNED:
            target = self.path / name
            try:
                if target.is_dir() and not target.is_symlink():
                    shutil.rmtree(target)
                elif target.exists() or target.is_symlink():
                    target.unlink()
            except OSError as err:
                raise InputError(f"report folder {self.path}: the previous run's {name} cannot be removed "
                                 f"({err.strerror or err}), so this run could not own the folder") from None

    # -- writing --------------------------------------------------------
    def write(self, name: str, text: str) -> Path:
        """Write one report file atomically."""
        return write_atomic(self.path / name, text)

    def step(self, what: str) -> None:
        """Record that ``what`` was done (shown when the run fails)."""
        self.steps.append(what)

    def write_status(self, state: str, exit_code: Optional[int] = None, message: str = "") -> None:
        self.write("status.json", json.dumps({
            "state": state, "exit_code": exit_code, "message": message, "started": self.started,
            "ended": _now() if state != "running" else None, "pid": os.getpid(),
            "command": self.description, "steps": self.steps}, indent=2) + "\n")

    def fail(self, message: str, exit_code: int, what_ran: Optional[list[str]] = None) -> None:
        """Leave reports that say the run failed, why, and what ran; never an earlier verdict.

        Best effort: a folder that cannot be written any more must not hide ``message``.
        """
        ran = list(self.steps) + list(what_ran or [])
        lines = [f"# MPI regression run FAILED (exit {exit_code})", "",
                 f"**Why:** {message}", "", f"Command: `{self.description}`", f"Started: {self.started}", "",
                 "## What ran", ""]
        lines += [f"- {step}" for step in ran] or ["- nothing: the run failed before any step"]
        lines += ["", "No verdict: nothing of this run was judged. Its files are in this folder "
                  "(reframe.out and reframe-report.json when ReFrame got that far)."]
        def keep_reframe_junit() -> None:
            if (self.path / "junit.xml").exists():
                os.replace(self.path / "junit.xml", self.path / "reframe-junit.xml")

        for action in (
                lambda: self.write("summary.md", "\n".join(lines) + "\n"),
                keep_reframe_junit,
                lambda: self.write("junit.xml", _failure_junit(message, exit_code, ran)),
                lambda: self.write_status("failed", exit_code, message)):
            try:
                action()
            except (OSError, InputError):
                continue


def _failure_junit(message: str, exit_code: int, ran: list[str]) -> str:
    quoted = html.escape(message, quote=True)
    body = html.escape("\n".join(ran) or "nothing ran")
    return ('<?xml version="1.0" encoding="utf-8"?>\n'
            '<testsuites><testsuite name="mpiregress run" tests="1" errors="1" failures="0">\n'
            f'<testcase classname="mpiregress" name="run"><error message="{quoted}" type="exit {exit_code}">'
            f'{body}</error></testcase>\n</testsuite></testsuites>\n')
