"""The step watcher (mpiregress step-watch) on real processes: timeout's bound, and the end of a
command that outlives the ranks that marked their exit."""
from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from mpiregress.model import launch
from mpiregress.run import stepwatch


# A stand-in for a stuck srun: each "rank" runs its program under the checks' exit mark, then the
# command itself does not end (srun waiting in its own teardown after every task has gone).
def stuck_after(codes: list[int]) -> list[str]:
    ranks = "; ".join(f"sh -c {launch.exit_mark()[2]} sh -c 'exit {code}'" for code in codes)
    return ["bash", "-c", f"{ranks}; sleep 60"]


def test_a_command_that_ends_keeps_its_exit_code_and_leaves_no_marks_folder(tmp_path: Path) -> None:
    assert stepwatch.run(["sh", "-c", "exit 3"], limit=30, kill_after=1, ranks=2, grace=1, workdir=tmp_path) == 3
    assert stepwatch.run(["sh", "-c", "kill -TERM $$"], limit=30, kill_after=1) == 143
    assert list(tmp_path.iterdir()) == []


def test_a_command_outliving_its_marked_ranks_ends_after_the_grace_with_their_largest_code(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    started = time.monotonic()
    rc = stepwatch.run(stuck_after([0, 5]), limit=60, kill_after=1, ranks=2, grace=1, workdir=tmp_path)
    took = time.monotonic() - started
    assert rc == 5 and took < 30, took
    said = capsys.readouterr().err
    assert "had not returned 1 s after all 2 ranks exited (codes" in said and said.count("\n") == 1
    assert list(tmp_path.iterdir()) == []


def test_fewer_marks_than_ranks_wait_for_the_limit_as_timeout_would(tmp_path: Path) -> None:
    started = time.monotonic()
    assert stepwatch.run(stuck_after([0]), limit=3, kill_after=1, ranks=2, grace=0.5, workdir=tmp_path) == 124
    assert time.monotonic() - started >= 3


def test_a_command_ignoring_sigterm_is_killed_after_kill_after(tmp_path: Path) -> None:
    ignores = ["bash", "-c", "trap '' TERM; sleep 60"]
    assert stepwatch.run(ignores, limit=1, kill_after=1, workdir=tmp_path) == 137


def test_the_cli_says_one_sentence_for_a_missing_command() -> None:
    done = subprocess.run([sys.executable, "-m", "mpiregress", "step-watch", "--limit", "5", "--"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    done = subprocess.run([sys.executable, "-m", "mpiregress", "step-watch", "--limit", "5", "--ranks", "1",
                           "--grace", "0.5", "--", "sh", "-c", launch.exit_mark_script() + "; sleep 30", "sh", "-c",
                           "exit 7"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 7, done.stderr
