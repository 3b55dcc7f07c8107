"""Cancelling a run: a signal becomes one exception, and everything the run started goes with it.

SIGTERM (what GitLab Runner, Jacamar and a job time-out send), SIGINT (Ctrl-C) and SIGHUP (a closed
terminal), sent to the run's PID or to its whole process group, end a run the same way:

1. :func:`signals_cancel` turns the first of them into :class:`Cancelled` in the main thread; later ones
   are noted and ignored, so the clean-up that follows cannot be interrupted half-way.
2. :class:`RunChildren` stops what the run started: ReFrame runs in a session of its own (a signal to
   the run's group does not reach it behind the run's back), is asked to stop with SIGTERM (it then
   cancels its own jobs), killed with its whole group after a grace, and every Slurm job this run
   submitted is cancelled by job id. The jobs are tagged (``--comment``) with the run's token and
   recorded, as they appear in the queue, in ``slurm-jobs.txt`` of the report folder, so a run killed
   outright (SIGKILL) is cleaned up afterwards by ``mpiregress cancel`` (the pipeline's after_script).
3. Only then does the run write its "cancelled" report and release its locks (the runner's order).

ReFrame dies with the run (PR_SET_PDEATHSIG): a run killed outright leaves no ReFrame behind.
"""
from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any, Iterator, Optional, Sequence

from mpiregress.cluster.nodeloss import lost_node

CANCEL_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
# The record of this run's Slurm jobs in its report folder (read by `mpiregress cancel`).
JOBS_FILE = "slurm-jobs.txt"
# Seconds ReFrame gets after SIGTERM to cancel its own jobs before its group is killed.
REFRAME_GRACE = float(os.environ.get("MPIREGRESS_CANCEL_GRACE", "15"))
# Seconds to wait, after scancel, for the run's jobs to leave the queue.
QUEUE_GRACE = 30.0
# How often the queue is read for new jobs of this run.
WATCH_PERIOD = 2.0


class Cancelled(BaseException):
    """The run was cancelled by a signal. A BaseException: no ``except Exception`` may swallow it."""

    def __init__(self, signum: int) -> None:
        self.signum = signum
        super().__init__(self.sentence)

    @property
    def sentence(self) -> str:
        return f"cancelled by {signal.Signals(self.signum).name}"


@dataclass
class _SignalState:
    raised: Optional[int] = None                  # the signal that raised Cancelled
    later: list[int] = field(default_factory=list)  # signals that came after it (ignored)


_STATE = _SignalState()


def _on_signal(signum: int, frame: Optional[FrameType]) -> None:
    if _STATE.raised is not None:
        _STATE.later.append(signum)
        return
    _STATE.raised = signum
    raise Cancelled(signum)


@contextlib.contextmanager
def signals_cancel() -> Iterator[None]:
    """Within: SIGTERM, SIGINT and SIGHUP raise :class:`Cancelled` once; later ones are ignored.

    Outside the main thread (no signal handlers can be set there) this does nothing. Nested uses
    (``confirm`` runs several runs) keep the outer one's state.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.getsignal(s) for s in CANCEL_SIGNALS}
    outer = all(h is _on_signal for h in previous.values())
    if not outer:
        _STATE.raised, _STATE.later = None, []
    for s in CANCEL_SIGNALS:
        signal.signal(s, _on_signal)
    try:
        yield
    finally:
        if not outer:
            for s, handler in previous.items():
                signal.signal(s, handler)


def cancelled_by() -> Optional[int]:
    """The signal that cancelled the current run, or None."""
    return _STATE.raised


def _die_with_parent() -> None:
    """In the child before exec: killed (SIGKILL) when the run dies, and in a session of its own."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)   # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def new_token() -> str:
    """A tag naming one run's Slurm jobs (their --comment)."""
    return f"mpiregress-{uuid.uuid4().hex[:16]}"


def queued_jobs(env: dict[str, str], timeout: float = 20) -> Optional[dict[str, str]]:
    """Job id -> comment of every job in the queue, or None when Slurm cannot say."""
    try:
        done = subprocess.run(["squeue", "-h", "-o", "%i|%k"], env=env, capture_output=True, text=True,
                              timeout=timeout)
    except (OSError, subprocess.SubprocessError):
        return None
    if done.returncode != 0:
        return None
    jobs = {}
    for line in done.stdout.splitlines():
        job, _, comment = line.strip().partition("|")
        if job:
            jobs[job] = comment.strip()
    return jobs


@dataclass
class JobRecord:
    """What ``slurm-jobs.txt`` holds: the run's token, its PID, its Slurm config and its job ids."""

    token: str
    pid: int
    slurm_conf: str = ""
    jobs: list[str] = field(default_factory=list)

    @classmethod
    def read(cls, path: Path) -> "JobRecord":
        head: dict[str, str] = {}
        jobs: list[str] = []
        for line in Path(path).read_text(errors="replace").splitlines():
            line = line.strip()
            if "=" in line and not line.startswith("#"):
                key, _, value = line.partition("=")
                head[key.strip()] = value.strip()
            elif line.isdigit() or line.replace("_", "").isdigit():
                jobs.append(line)
        return cls(token=head.get("token", ""), pid=int(head.get("pid", "0") or 0),
                   slurm_conf=head.get("slurm_conf", ""), jobs=jobs)

    def header(self) -> str:
        return (f"# Slurm jobs of one mpiregress run (cancel them with `mpiregress cancel`)\n"
                f"token={self.token}\npid={self.pid}\nslurm_conf={self.slurm_conf}\n")


def cancel_jobs(jobs: Sequence[str], token: str, env: dict[str, str], wait: float = QUEUE_GRACE,
                trust_record: bool = False) -> tuple[list[str], list[str]]:
    """Cancel, by job id, the ``jobs`` still queued under ``token`` and any other job with that token.

    Returns (cancelled ids, ids still in the queue after ``wait`` seconds). A job id whose comment is
    not the token is never touched: an id Slurm gave to someone else's job after ours ended stays theirs.
    When Slurm does not answer (a loaded controller), ``trust_record`` cancels the recorded ids as they
    are: the run itself recorded each one under its token moments ago.
    """
    queue = queued_jobs(env)
    if queue is None:
        queue = queued_jobs(env, timeout=60)   # once more, patiently
    if queue is None:
        if not (trust_record and jobs):
            return [], []
        ours = list(jobs)
    else:
        ours = sorted({j for j in jobs if queue.get(j) == token} | {j for j, c in queue.items() if c == token},
                      key=lambda j: int(j.split("_")[0]) if j.split("_")[0].isdigit() else 0)
    if not ours:
        return [], []
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        subprocess.run(["scancel", *ours], env=env, capture_output=True, timeout=30)
    deadline = time.monotonic() + wait
    left = ours
    while left and time.monotonic() < deadline:
        time.sleep(0.5)
        queue = queued_jobs(env)
        if queue is None:
            break
        left = [j for j in ours if j in queue]
    return ours, left


class RunChildren:
    """The processes and Slurm jobs one run starts; :meth:`stop` ends them all."""

    def __init__(self, record: Optional[Path], env: dict[str, str], watch: bool = True) -> None:
        self.record = record
        self.env = env
        self.token = new_token()
        self.jobs: list[str] = []
        self.proc: Optional[subprocess.Popen[Any]] = None
        self._watch = watch
        self._stop_watch = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._lock = threading.Lock()
        # Slurm's words for a node lost under one of this run's jobs (nodeloss), once seen; ReFrame is
        # then asked to stop, and writes its report with what finished.
        self.lost: Optional[str] = None
        if record is not None:
            rec = JobRecord(self.token, os.getpid(), env.get("SLURM_CONF", ""))
            record.write_text(rec.header())

    def job_options(self) -> list[str]:
        """ReFrame options that tag every job it submits with this run's token."""
        return ["-J", f"comment={self.token}"]

    def popen(self, cmd: Sequence[str], **kwargs: Any) -> "subprocess.Popen[Any]":
        """Start ReFrame (or another child) in a session of its own that dies with the run."""
        self.proc = subprocess.Popen(list(cmd), start_new_session=True, preexec_fn=_die_with_parent, **kwargs)
        if self._watch:
            self._thread = threading.Thread(target=self._watch_queue, name="mpiregress-jobs", daemon=True)
            self._thread.start()
        return self.proc

    def _note(self, found: list[str]) -> None:
        with self._lock:
            new = [j for j in found if j not in self.jobs]
            if not new:
                return
            self.jobs += new
            if self.record is not None:
                with contextlib.suppress(OSError), open(self.record, "a") as out:
                    out.write("".join(f"{j}\n" for j in new))
                    out.flush()
                    os.fsync(out.fileno())

    def _watch_queue(self) -> None:

        while not self._stop_watch.wait(WATCH_PERIOD):
            queue = queued_jobs(self.env)
            if queue:
                self._note([j for j, c in queue.items() if c == self.token])
            if self.lost is None and self.jobs:
                self.lost = lost_node(self.env, self.token)
                if self.lost is not None and self.proc is not None and self.proc.poll() is None:
                    # SIGTERM is ReFrame's "stop": it cancels its jobs and writes its report (what finished).
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.kill(self.proc.pid, signal.SIGTERM)

    def finish(self) -> None:
        """After the child ended on its own: stop watching the queue."""
        self._stop_watch.set()
        if self._thread is not None:
            self._thread.join(timeout=WATCH_PERIOD + 25)

    def stop(self, grace: float = REFRAME_GRACE) -> list[str]:
        """End the child's whole process group (SIGTERM, then SIGKILL after ``grace``), every process it
        started in a session of its own (ReFrame's local scheduler does), and cancel this run's Slurm jobs
        by id; return sentences saying what was done."""
        done: list[str] = []
        proc = self.proc
        # Taken before anything dies: an orphan is re-parented and could no longer be found.
        tree = descendants(proc.pid) if proc is not None and proc.poll() is None else []
        if proc is not None and proc.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=grace)
                done.append(f"ReFrame (PID {proc.pid}) stopped on SIGTERM")
            except subprocess.TimeoutExpired:
                done.append(f"ReFrame (PID {proc.pid}) killed after {grace:g} s")
        if proc is not None:
            # Whatever of its group is left (srun, a launcher step): no child outlives the run.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=10)
        orphans = [pid for pid, started in tree if _start_time(pid) == started]
        for pid in orphans:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                group = os.getpgid(pid)
                if group != os.getpgrp():   # never the run's own group
                    os.killpg(group, signal.SIGKILL)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        if orphans:
            done.append(f"{len(orphans)} process(es) ReFrame left behind killed (PIDs "
                        f"{', '.join(map(str, orphans))})")
        self.finish()
        if self._watch:
            cancelled, left = cancel_jobs(self.jobs, self.token, self.env, trust_record=True)
            self._note(cancelled)
            if cancelled:
                done.append(f"Slurm job(s) {', '.join(cancelled)} cancelled by id"
                            + (f"; not yet seen leaving the queue: {', '.join(left)}" if left else ""))
            else:
                done.append(f"no Slurm job of this run left in the queue ({len(self.jobs)} recorded in {JOBS_FILE})")
        return done


def _stat(pid: int) -> Optional[list[str]]:
    """The fields of /proc/PID/stat after the command name (state first), or None."""
    try:
        return (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def _start_time(pid: int) -> Optional[str]:
    """When ``pid`` started (clock ticks since boot): tells a process from a later one with its PID."""
    fields = _stat(pid)
    return fields[19] if fields and len(fields) > 19 and fields[0] != "Z" else None


def descendants(pid: int) -> list[tuple[int, Optional[str]]]:
    """Every living descendant of ``pid`` with its start time, whatever its session or group."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            fields = _stat(int(entry.name))
            if fields and len(fields) > 1:
                children.setdefault(int(fields[1]), []).append(int(entry.name))
    found, todo = [], list(children.get(pid, []))
    while todo:
        child = todo.pop()
        found.append((child, _start_time(child)))
        todo += children.get(child, [])
    return found


def process_group_members(pgid: int) -> list[int]:
    """PIDs whose process group is ``pgid`` (from /proc), for checks that nothing was left behind."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if len(fields) > 3 and int(fields[2]) == pgid and fields[0] != "Z":
            found.append(int(entry.name))
    return found
