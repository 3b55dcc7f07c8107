"""No stale output: a command that fails leaves failure versions of its outputs, never an earlier verdict.

Every command that writes reports (``run`` through its RunFolder, ``compare``, ``report``, ``confirm``,
``ab``, and the ``verdict`` command) wraps its work in :func:`replaced_on_failure`::

    with outputs.replaced_on_failure("compare", markdown=[args.markdown], junit=[args.junit]):
        ...   # judge and write the outputs

On entry the named outputs that exist are removed (a command killed outright leaves nothing stale);
when the body raises (bad input, Slurm, a signal, a bug), each named output is written as a failure
version saying which command failed and why (Markdown, JUnit with one ``<error>``, an HTML page), and
the exception travels on unchanged to the command line's one sentence and exit code. Writing the
failure versions is best effort: an unwritable output must not hide the reason.
"""
from __future__ import annotations

import contextlib
import html
import os
import tempfile
from pathlib import Path
from typing import Iterator, Optional, Sequence

from mpiregress.errors import CANCELLED, ERROR, MpiRegressError
from mpiregress.run.cancel import Cancelled

KINDS = ("markdown", "junit", "html")


def failure_markdown(command: str, message: str, exit_code: int, ran: Sequence[str] = ()) -> str:
    """The Markdown of a failed command: its state, why, and what ran."""
    state = "CANCELLED" if exit_code == CANCELLED else "FAILED"
    lines = [f"## mpiregress {command} {state} (exit {exit_code})", "", f"**Why:** {message}", ""]
    if ran:
        lines += ["What ran:", "", *[f"- {step}" for step in ran], ""]
    lines += ["No verdict: nothing was judged by this invocation; an earlier verdict is not shown.", ""]
    return "\n".join(lines)


def failure_junit(command: str, message: str, exit_code: int, ran: Sequence[str] = ()) -> str:
    """JUnit XML with one testcase in error: CI's test view shows the failure, never "0 failures"."""
    quoted = html.escape(message, quote=True)
    body = html.escape("\n".join(ran) or "nothing ran")
    name = html.escape(command, quote=True)
    return ('<?xml version="1.0" encoding="utf-8"?>\n'
            f'<testsuites><testsuite name="mpiregress {name}" tests="1" errors="1" failures="0">\n'
            f'<testcase classname="mpiregress" name="{name}"><error message="{quoted}" type="exit {exit_code}">'
            f'{body}</error></testcase>\n</testsuite></testsuites>\n')


def failure_html(command: str, message: str, exit_code: int, ran: Sequence[str] = ()) -> str:
    """A self-contained HTML page (or fragment) saying the command failed and why."""
    state = "CANCELLED" if exit_code == CANCELLED else "FAILED"
    steps = "".join(f"<li>{html.escape(s)}</li>" for s in ran)
    return (f'<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>mpiregress {html.escape(command)} '
            f'{state}</title></head><body>\n<h2>mpiregress {html.escape(command)} {state} (exit {exit_code})</h2>\n'
            f'<p><strong>Why:</strong> {html.escape(message)}</p>\n'
            + (f"<ul>{steps}</ul>\n" if steps else "")
            + "<p>No verdict: nothing was judged by this invocation; an earlier verdict is not shown.</p>\n"
            "</body></html>\n")


RENDER = {"markdown": failure_markdown, "junit": failure_junit, "html": failure_html}


def write_text_atomic(path: Path, text: str) -> None:
    """Through a temporary file and a rename: a reader sees the old file or the new one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_failure(command: str, message: str, exit_code: int, ran: Sequence[str] = (),
                  **named: Sequence[Optional[Path]]) -> list[Path]:
    """Write the failure version of each named output (``markdown=[...]``, ``junit=[...]``, ``html=[...]``);
    return the ones written. Best effort: an output that cannot be written is skipped."""
    written = []
    for kind, paths in named.items():
        for path in paths or ():
            if path is None:
                continue
            with contextlib.suppress(OSError):
                write_text_atomic(Path(path), RENDER[kind](command, message, exit_code, ran))
                written.append(Path(path))
    return written


def _reason(err: BaseException) -> tuple[str, int]:
    if isinstance(err, MpiRegressError):
        return str(err), err.exit_code
    if isinstance(err, Cancelled):
        return err.sentence, CANCELLED
    if isinstance(err, KeyboardInterrupt):
        return "interrupted (Ctrl-C)", CANCELLED
    if isinstance(err, OSError):
        where = f"{err.filename}: " if err.filename is not None else ""
        return f"cannot use {where}{err.strerror or err}", ERROR
    return f"unexpected {type(err).__name__}: {' '.join(str(err).split())[:200]}", ERROR


@contextlib.contextmanager
def replaced_on_failure(command: str, ran: Optional[list[str]] = None,
                        **named: Sequence[Optional[Path]]) -> Iterator[None]:
    """Remove the named outputs now; if the body raises, write their failure versions, then re-raise.

    ``named``: ``markdown=``, ``junit=``, ``html=`` lists of paths (None entries are options not given).
    ``ran``: a list the body may append steps to, shown in the failure versions.
    """
    unknown = set(named) - set(KINDS)
    if unknown:
        raise ValueError(f"unknown output kind(s) {sorted(unknown)}; known: {KINDS}")
    for paths in named.values():
        for path in paths or ():
            if path is not None and Path(path).is_file():
                with contextlib.suppress(OSError):
                    Path(path).unlink()
    try:
        yield
    except BaseException as err:
        if not isinstance(err, (SystemExit, GeneratorExit)):
            message, code = _reason(err)
            write_failure(command, message, code, ran or (), **named)
        raise
