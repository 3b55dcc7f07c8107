"""What a proposal changes: repository files and their new contents, from a unified diff or from files.

A proposal may change only files under ``baselines/`` (a pipeline token that can push must not be
handed arbitrary paths), each named relative to the repository. A diff is applied with ``git apply`` to
copies of the checked-out files, so it must apply exactly as a reviewer's ``git apply`` would.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Mapping, Optional

from mpiregress.errors import InputError

ALLOWED_PREFIX = "baselines/"


@dataclass(frozen=True)
class Change:
    """One file of a proposal: its repository path, new content (None: deleted), and whether it existed."""

    path: str
    content: Optional[str]
    existed: bool

    @property
    def action(self) -> str:
        """The Commits API action for this change: create, update or delete."""
        if self.content is None:
            return "delete"
        return "update" if self.existed else "create"


def check_path(path: str, source: str) -> str:
    """``path`` when it is a clean repository-relative path under baselines/; else InputError naming ``source``."""
    pure = PurePosixPath(path)
    if not path or pure.is_absolute() or ".." in pure.parts or path != str(pure) or any(c.isspace() for c in path):
        raise InputError(f"{source} names {path!r}, which is not a clean repository-relative path "
                         f"(e.g. baselines/iris.yaml)")
    if not path.startswith(ALLOWED_PREFIX):
        raise InputError(f"{source} changes {path}: a baseline proposal may change only files under "
                         f"{ALLOWED_PREFIX}")
    return path


_HEADER = re.compile(r"^(---|\+\+\+) ([^\t\n]+)")
_HUNK = re.compile(r"^@@ -\d+(?:,(\d+))? \+\d+(?:,(\d+))? @@")


def diff_paths(diff: str, source: str) -> tuple[list[str], int]:
    """The repository paths a unified diff touches and the ``-p`` strip level it needs (1 for a/ b/, else 0).

    File headers are read only between hunks (a removed line "-- x" reads "--- x" inside one).
    """
    olds: list[str] = []
    news: list[str] = []
    old_left = new_left = 0
    for line in diff.splitlines():
        if old_left > 0 or new_left > 0:
            tag = line[:1]
            if tag in (" ", ""):
                old_left, new_left = old_left - 1, new_left - 1
            elif tag == "-":
                old_left -= 1
            elif tag == "+":
                new_left -= 1
            continue          # "\\ No newline at end of file" and the rest: not headers
        hunk = _HUNK.match(line)
        if hunk:
            old_left = int(hunk.group(1)) if hunk.group(1) is not None else 1
            new_left = int(hunk.group(2)) if hunk.group(2) is not None else 1
            continue
        found = _HEADER.match(line)
        if found:
            (olds if found.group(1) == "---" else news).append(found.group(2).strip())
    if not news or len(olds) != len(news):
        raise InputError(f"{source} is not a unified diff (no '--- old' / '+++ new' file headers)")
    named_old = [p for p in olds if p != "/dev/null"]
    named_new = [p for p in news if p != "/dev/null"]
    git_style = all(p.startswith("a/") for p in named_old) and all(p.startswith("b/") for p in named_new)
    strip = 1 if git_style else 0
    paths = sorted({"/".join(p.split("/")[strip:]) for p in named_old + named_new})
    for path in paths:
        check_path(path, source)
    return paths, strip


def changes_from_diff(diff: str, root: Path, source: str = "the diff") -> list[Change]:
    """Apply ``diff`` (repository-relative paths) to copies of the files under ``root``; the changed files.

    An empty diff, or one holding only '#' comment lines (``baseline propose`` prints "# no change
    proposed for ..."), proposes nothing: no change, not an error.
    """
    if all(not line.strip() or line.startswith("#") for line in diff.splitlines()):
        return []
    paths, strip = diff_paths(diff, source)
    git = shutil.which("git")
    if git is None:
        raise InputError(f"{source} cannot be applied here: git is not installed")
    with tempfile.TemporaryDirectory(prefix="mpiregress-proposal-") as tmp:
        work = Path(tmp) / "tree"
        work.mkdir()
        before: dict[str, Optional[str]] = {}
        for path in paths:
            original = root / path
            before[path] = original.read_text() if original.is_file() else None
            if before[path] is not None:
                (work / path).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(original, work / path)
        patch = Path(tmp) / "proposal.diff"
        patch.write_text(diff if diff.endswith("\n") else diff + "\n")
        # GIT_CEILING_DIRECTORIES: git must not find a repository above the temporary folder (it would
        # then apply relative to that repository's top).
        env = {**os.environ, "GIT_CEILING_DIRECTORIES": tmp}
        done = subprocess.run([git, "apply", f"-p{strip}", "--whitespace=nowarn", str(patch)], cwd=work,
                              capture_output=True, text=True, env=env, timeout=60)
        if done.returncode != 0:
            why = (done.stderr.strip().splitlines() or ["git apply failed"])[0]
            raise InputError(f"{source} does not apply to the files under {root}: {why}")
        changes = []
        for path in paths:
            after = (work / path).read_text() if (work / path).is_file() else None
            if after != before[path]:
                changes.append(Change(path, after, before[path] is not None))
    return changes


def changes_from_files(files: Mapping[str, Path], root: Path) -> list[Change]:
    """Changes from new file contents (repository path -> local file); unchanged files are left out."""
    changes = []
    for path, local in sorted(files.items()):
        check_path(path, f"--file {path}={local}")
        try:
            content = Path(local).read_text()
        except OSError as err:
            raise InputError(f"cannot read {local} (proposed content of {path}): {err.strerror or err}") from err
        original = root / path
        before = original.read_text() if original.is_file() else None
        if content != before:
            changes.append(Change(path, content, before is not None))
    return changes
