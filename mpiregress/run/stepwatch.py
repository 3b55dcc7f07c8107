"""A bounded srun that also ends once every rank has exited: the launcher modifier of steps with a time limit.

Without marks it is ``timeout -k KILL_AFTER LIMIT``: srun gets SIGTERM at the limit and SIGKILL
``kill_after`` seconds later (exit 124, or 137 when SIGKILL was needed).

With marks, each rank's wrapper (:func:`mpiregress.model.launch.exit_mark`) writes its exit code to a file
in a folder this watcher names in ``MARKS_ENV`` just before it exits. When ``ranks`` such files exist
and srun still runs ``grace`` seconds later, srun is stuck in its own teardown: Slurm 22.05 can hang
a heterogeneous PMIx step there after both slurmstepds are done (SchedMD 16817; its srun then waits
in the mpi/pmix plugin's abort-agent shutdown; benchmarks/het_step_hang.py). The watcher then ends
srun (SIGKILL: a hung srun does not end on SIGTERM) and exits as srun would have, with the
largest of the ranks' exit codes, after one sentence on stderr.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Optional, Sequence

from mpiregress.model.launch import MARKS_ENV

TIMED_OUT = 124  # timeout(1)'s codes, kept so that a bounded step reads the same either way
KILLED = 137
POLL_S = 0.5  # how often the marks are counted: well inside any grace


def _exit_codes(marks: Path) -> list[int]:
    codes = []
    for path in marks.iterdir():
        text = path.read_text().strip()
        if text.isdigit():  # a rank's mark is written in one short write; a partial one is read next poll
            codes.append(int(text))
    return codes


def _reap(proc: subprocess.Popen, ended: threading.Event) -> None:
    proc.wait()
    ended.set()


def _stop(proc: subprocess.Popen, ended: threading.Event, kill_after: float) -> int:
    proc.send_signal(signal.SIGTERM)
    if ended.wait(kill_after):
        return TIMED_OUT
    proc.kill()
    ended.wait()
    return KILLED


def run(argv: Sequence[str], limit: float, kill_after: float, ranks: int = 0, grace: float = 5.0,
        workdir: Optional[Path] = None) -> int:
    """Run ``argv`` (srun ...) bounded by ``limit`` seconds; with ``ranks`` > 0, end it ``grace``
    seconds after that many ranks have marked their exit. Returns the exit code to hand on."""
    marks = Path(tempfile.mkdtemp(prefix=".mpiregress-step-", dir=workdir or Path.cwd())) if ranks else None
    env = dict(os.environ)
    if marks:
        env[MARKS_ENV] = str(marks)
    proc = subprocess.Popen(list(argv), env=env)
    forward = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)}
    for sig in forward:  # a cancelled job's signal reaches srun, as through timeout(1)
        signal.signal(sig, lambda signum, frame: proc.send_signal(signum))
    # A thread blocks in wait(): srun's end is seen at once, and the watcher wakes only every POLL_S
    # (Popen.wait with a timeout polls every 50 ms, beside the benchmark it bounds).
    ended = threading.Event()
    threading.Thread(target=_reap, args=(proc, ended), daemon=True).start()
    deadline = time.monotonic() + limit
    all_marked: Optional[float] = None
    try:
        while True:
            if ended.wait(POLL_S):
                rc = proc.returncode
                return rc if rc >= 0 else 128 - rc  # a signal's death as the shell reports it
            now = time.monotonic()
            if now >= deadline:
                return _stop(proc, ended, kill_after)
            if marks is None:
                continue
            codes = _exit_codes(marks)
            if len(codes) < ranks:
                continue
            if all_marked is None:
                all_marked = now
            elif now - all_marked >= grace:
                proc.kill()
                ended.wait()
                print(f"mpiregress step-watch: srun had not returned {grace:g} s after all {ranks} ranks "
                      f"exited (codes {', '.join(map(str, codes))}); it was stopped and their largest "
                      "code is the step's (the Slurm 22.05 heterogeneous step hang, SchedMD 16817)",
                      file=sys.stderr, flush=True)
                return max(codes)
    finally:
        for sig, handler in forward.items():
            signal.signal(sig, handler)
        if marks:
            shutil.rmtree(marks, ignore_errors=True)
