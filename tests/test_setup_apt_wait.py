"""ci/setup.sh waits for another apt/dpkg's package lock, bounded and saying so (issue 20).

The lock files are the test's own (MPIREGRESS_APT_LOCKS): the machine's real dpkg lock is never held.
"""
from __future__ import annotations

import fcntl
import os
import subprocess
import threading
import time

from shared import REPO

WAIT = REPO / "ci" / "apt-wait.sh"


def _run(locks, limit):
    env = dict(os.environ, MPIREGRESS_APT_LOCKS=" ".join(map(str, locks)), MPIREGRESS_APT_LOCK_WAIT=str(limit))
    started = time.monotonic()
    done = subprocess.run(["bash", str(WAIT)], env=env, capture_output=True, text=True, timeout=120)
    return done, time.monotonic() - started


def _hold(path):
    fd = os.open(path, os.O_RDWR | os.O_CREAT)
    fcntl.lockf(fd, fcntl.LOCK_EX)
    return fd


def test_free_locks_pass_at_once_and_quietly(tmp_path):
    (tmp_path / "lock").touch()
    done, _ = _run([tmp_path / "lock", tmp_path / "absent"], 30)
    assert done.returncode == 0 and done.stdout == "" and done.stderr == ""


def test_a_held_lock_is_waited_for_and_the_wait_is_said_once(tmp_path):
    fd = _hold(tmp_path / "lock-frontend")
    threading.Timer(3, os.close, [fd]).start()
    done, took = _run([tmp_path / "lock-frontend"], 60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("waiting for it (up to 60 s)") == 1
    assert took >= 2.5


def test_a_lock_held_too_long_ends_in_one_sentence_and_exit_3(tmp_path):
    fd = _hold(tmp_path / "lock")
    try:
        done, took = _run([tmp_path / "lock"], 2)
    finally:
        os.close(fd)
    assert done.returncode == 3
    assert done.stderr.strip().count("\n") == 0
    assert "still holds the package lock after 2 s" in done.stderr
    assert took < 30
