"""Cancelling a run: a signal becomes one exception, and everything the run started goes with it.

SIGTERM (what GitLab Runner, Jacamar and a job time-out send), SIGINT (Ctrl-C) and SIGHUP (a closed
terminal), sent to the run's PID or to its whole process group, end a run the same way:

1. :func:`signals_cancel` turns the first of them into :class:`Cancelled` in the main thread; later ones
   are noted and ignored, so the clean-up that follows cannot be interrupted half-way.
2. The runner writes its "cancelled" status and report at once (a SIGKILL may follow within seconds:
   GitLab's grace can be short), then :class:`RunChildren` stops what the run started, in this order:
   the run's ``sbatch`` is fenced (ReFrame submits through a wrapper on its PATH that refuses once the
   run is cancelled, and that cancels a job it submitted in flight when the run is cancelled or gone),
   every Slurm job the run recorded is cancelled by id in one ``scancel``, ReFrame (in a session of its
   own: a signal to the run's group does not reach it behind the run's back) is asked to stop with
   SIGTERM and killed with its whole group after a grace, and the queue is read once more for any job
   under the run's token. Every job is tagged (``--comment``) with the run's token (in CI, the token
   names the CI job: ``mpiregress cancel`` in the after_script finds the job's Slurm jobs without any
   file) and recorded in ``slurm-jobs.txt`` of the report folder the moment sbatch returns, so a run
   killed outright (SIGKILL) is cleaned up afterwards by ``mpiregress cancel`` or by the next run in
   the same folder.
3. Then the run completes its report with what was stopped and releases its locks (the runner's order).

ReFrame dies with the run (PR_SET_PDEATHSIG): a run killed outright leaves no ReFrame behind.
"""
from __future__ import annotations

import contextlib
import ctypes
import fcntl
import os
import shlex
import shutil
import signal
import subprocess
import tempfile
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
# Seconds to wait for an sbatch in flight when the run is cancelled (it then cancels its own job).
FENCE_WAIT = 10.0
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
    (``confirm`` runs several runs, and the CLI holds one around every command from its first line, so a
    signal during the imports and option checks before a run installs its own is not lost) keep the
    outer one's state. A SIGHUP its starter ignored (``nohup``) stays ignored.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.getsignal(s) for s in CANCEL_SIGNALS}
    # SIGHUP ignored by whoever started us (nohup: "survive the terminal's hangup") stays ignored.
    handled = [s for s in CANCEL_SIGNALS if not (s == signal.SIGHUP and previous[s] is signal.SIG_IGN)]
    outer = all(previous[s] is _on_signal for s in handled)
    if not outer:
        _STATE.raised, _STATE.later = None, []
    for s in handled:
        signal.signal(s, _on_signal)
    try:
        yield
    finally:
        if not outer:
            for s, handler in previous.items():
                signal.signal(s, handler)


def only_main_thread_takes_cancel_signals() -> None:
    """Called first in every thread a run starts: the cancel signals are blocked in it.

    Python runs signal handlers in the main thread only, but the kernel hands a process-directed signal to
    any thread that does not block it. Taken by this thread, a SIGTERM would leave the main thread blocked
    in its read of ReFrame's output until ReFrame printed its next line, minutes away in a long step: the
    run did not answer (seen once in the suite under load; 29 of 40 signals in a bench of a thread that
    forks while the main thread reads, 0 of 40 with this). Children this thread starts (squeue) inherit
    the mask: each has a timeout and is killed by SIGKILL.
    """
    signal.pthread_sigmask(signal.SIG_BLOCK, CANCEL_SIGNALS)


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


def ci_prefix(env: Optional[dict[str, str]] = None) -> str:
    """The start of every token of the runs of one CI job (``mpiregress-ci<CI_JOB_ID>-``), or '' outside CI."""
    job = (os.environ if env is None else env).get("CI_JOB_ID", "")
    return f"mpiregress-ci{job}-" if job.isdigit() else ""


def new_token() -> str:
    """A tag naming one run's Slurm jobs (their --comment); in CI it starts with the CI job's prefix."""
    return f"{ci_prefix() or 'mpiregress-'}{uuid.uuid4().hex[:16]}"


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
            elif (line.isdigit() or line.replace("_", "").isdigit()) and line not in jobs:
                jobs.append(line)
        return cls(token=head.get("token", ""), pid=int(head.get("pid", "0") or 0),
                   slurm_conf=head.get("slurm_conf", ""), jobs=jobs)

    def header(self) -> str:
        return (f"# Slurm jobs of one mpiregress run (cancel them with `mpiregress cancel`)\n"
                f"token={self.token}\npid={self.pid}\nslurm_conf={self.slurm_conf}\n")


def scancel(jobs: Sequence[str], env: dict[str, str], timeout: float = 10) -> None:
    """One ``scancel`` of ``jobs`` by id, without reading the queue first (the run recorded each one itself)."""
    if jobs:
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            subprocess.run(["scancel", *jobs], env=env, capture_output=True, timeout=timeout)


def cancel_jobs(jobs: Sequence[str], token: str, env: dict[str, str], wait: float = QUEUE_GRACE,
                trust_record: bool = False, prefix: str = "") -> tuple[list[str], list[str]]:
    """Cancel, by job id, the ``jobs`` still queued under ``token`` and any other job with that token
    (or, with ``prefix``, any job whose token starts with it: every run of one CI job).

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
        ours = sorted({j for j in jobs if queue.get(j) == token} | {j for j, c in queue.items() if c == token}
                      | {j for j, c in queue.items() if prefix and c.startswith(prefix)},
                      key=lambda j: int(j.split("_")[0]) if j.split("_")[0].isdigit() else 0)
    if not ours:
        return [], []
    scancel(ours, env, timeout=30)
    deadline = time.monotonic() + wait
    left = ours
    while left and time.monotonic() < deadline:
        time.sleep(0.5)
        queue = queued_jobs(env)
        if queue is None:
            break
        left = [j for j in ours if j in queue]
    return ours, left


# The run's sbatch (a bash script on ReFrame's PATH): submits through the real sbatch while the run is
# not cancelled, records the job id the moment sbatch returns, and cancels that job itself when the run
# was cancelled or is gone meanwhile (a submission in flight when the signal came). The shared flock is
# held across the submission: the run, cancelling, takes it exclusively to know none is in flight.
FENCE_SCRIPT = """#!/bin/bash
# Written by mpiregress for one run: its sbatch, closed once the run is cancelled.
exec 9>>{lock}
flock -s 9
if [ -e {mark} ] || ! kill -0 {pid} 2>/dev/null; then
    echo "sbatch: error: the mpiregress run (PID {pid}) was cancelled: no new job is submitted" >&2
    exit 1
fi
out=$({sbatch} "$@")
rc=$?
printf '%s\\n' "$out"
id=$(printf '%s\\n' "$out" | grep -oE '^(Submitted batch job )?[0-9]+' | grep -oE '[0-9]+$' | head -n 1)
if [ -n "$id" ]; then
    echo "$id" >> {record}
    if [ -e {mark} ] || ! kill -0 {pid} 2>/dev/null; then
        {scancel} "$id" >/dev/null 2>&1
    fi
fi
exit $rc
"""


# The run's private folders live in its own report folder (owned names, folder.OWNED): a run killed outright
# cannot remove them, and the next run there does; in /tmp each such run left its two behind. The run's
# sbatch, and ReFrame's reports until the run adopts them (reframe_launch.reframe_run).
FENCE_NAME = ".mpiregress-sbatch"
STAGING_NAME = ".reframe-staging"


def private_folder(report_dir: Optional[Path], name: str, prefix: str) -> Path:
    """An empty folder ``report_dir/name`` for this run's private files (what an earlier run killed there
    left is removed first), or a fresh one in the temporary folder where there is no report folder or its
    path cannot stand in PATH (it holds os.pathsep)."""
    if report_dir is None or os.pathsep in str(report_dir):
        return Path(tempfile.mkdtemp(prefix=prefix))
    folder = report_dir / name
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(mode=0o700)
    return folder


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
        self._fence: Optional[Path] = None
        # Slurm's words for a node lost under one of this run's jobs (nodeloss), once seen; ReFrame is
        # then asked to stop, and writes its report with what finished.
        self.lost: Optional[str] = None
        if record is not None:
            earlier = _own_record(record)
            if earlier is not None:
                # A later ReFrame of the same run (an A/B round): one token, one record for all of them.
                self.token, self.jobs = earlier.token, list(earlier.jobs)
            else:
                rec = JobRecord(self.token, os.getpid(), env.get("SLURM_CONF", ""))
                record.write_text(rec.header())

    def job_options(self) -> list[str]:
        """ReFrame options that tag every job it submits with this run's token."""
        return ["-J", f"comment={self.token}"]

    def _fenced_env(self, env: dict[str, str]) -> dict[str, str]:
        """``env`` with this run's sbatch first on PATH (:data:`FENCE_SCRIPT`); unchanged without sbatch."""
        real = shutil.which("sbatch", path=env.get("PATH"))
        if real is None or not self._watch:
            return env
        self._fence = private_folder(self.record.parent if self.record else None, FENCE_NAME, "mpiregress-sbatch-")
        record = self.record or self._fence / JOBS_FILE
        script = self._fence / "sbatch"
        script.write_text(FENCE_SCRIPT.format(
            lock=shlex.quote(str(self._fence / "lock")), mark=shlex.quote(str(self._fence / "cancelled")),
            pid=os.getpid(), sbatch=shlex.quote(real), record=shlex.quote(str(record)),
            scancel=shlex.quote(shutil.which("scancel", path=env.get("PATH")) or "scancel")))
        script.chmod(0o755)
        return {**env, "PATH": os.pathsep.join(filter(None, [str(self._fence), env.get("PATH")]))}

    def popen(self, cmd: Sequence[str], **kwargs: Any) -> "subprocess.Popen[Any]":
        """Start ReFrame (or another child) in a session of its own that dies with the run."""
        kwargs["env"] = self._fenced_env(dict(kwargs.get("env") or os.environ))
        self.proc = subprocess.Popen(list(cmd), start_new_session=True, preexec_fn=_die_with_parent, **kwargs)
        if self._watch:
            self._thread = threading.Thread(target=self._watch_queue, name="mpiregress-jobs", daemon=True)
            self._thread.start()
        return self.proc

    def recorded(self) -> list[str]:
        """Every job id this run recorded (by the queue watch, and by its sbatch as it submitted)."""
        with self._lock:
            found = list(self.jobs)
            for path in filter(None, [self.record, self._fence and self._fence / JOBS_FILE]):
                with contextlib.suppress(OSError):
                    found += [j for j in JobRecord.read(path).jobs if j not in found]
            self.jobs = found
            return list(found)

    def _note(self, found: list[str]) -> None:
        known = self.recorded()
        with self._lock:
            new = [j for j in found if j not in known]
            if not new:
                return
            self.jobs += new
            if self.record is not None:
                with contextlib.suppress(OSError), open(self.record, "a") as out:
                    out.write("".join(f"{j}\n" for j in new))
                    out.flush()
                    os.fsync(out.fileno())

    def _watch_queue(self) -> None:
        only_main_thread_takes_cancel_signals()
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
        """After the child ended on its own: stop watching the queue, remove the run's sbatch."""
        self._stop_watch.set()
        if self._thread is not None:
            self._thread.join(timeout=WATCH_PERIOD + 25)
        if self._fence is not None:
            self.recorded()   # what the run's sbatch recorded outside the report folder (no record given)
            shutil.rmtree(self._fence, ignore_errors=True)
            self._fence = None

    def _close_fence(self, wait: float) -> bool:
        """No new submission from now on; True once no sbatch of the run is in flight (within ``wait`` s)."""
        if self._fence is None:
            return True
        with contextlib.suppress(OSError):
            (self._fence / "cancelled").touch()
        try:
            fd = os.open(self._fence / "lock", os.O_RDWR | os.O_CREAT, 0o600)
        except OSError:
            return False
        try:
            deadline = time.monotonic() + wait
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    return True
                except OSError:
                    if time.monotonic() > deadline:
                        return False
                    time.sleep(0.05)
        finally:
            os.close(fd)

    def stop(self, grace: float = REFRAME_GRACE) -> list[str]:
        """End everything the run started, most urgent first (a SIGKILL may follow within seconds): fence
        the run's sbatch, cancel every recorded Slurm job by id in one scancel, SIGTERM ReFrame's group
        (ReFrame stops and writes its report), wait for an sbatch in flight and cancel what it submitted,
        then ReFrame's group and every process it started in a session of its own are killed after
        ``grace``, and the queue is read for any job left under the run's token. Returns sentences
        saying what was done."""
        done: list[str] = []
        proc = self.proc
        alive = proc is not None and proc.poll() is None
        # Taken before anything dies: an orphan is re-parented and could no longer be found.
        tree = descendants(proc.pid) if proc is not None and alive else []
        if self._fence is not None:
            with contextlib.suppress(OSError):
                (self._fence / "cancelled").touch()
        first = self.recorded() if self._watch else []
        scancel(first, self.env)
        if proc is not None and alive:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGTERM)
        if first:
            done.append(f"Slurm job(s) {', '.join(first)} cancelled by id at once")
        if not self._close_fence(min(grace, FENCE_WAIT)):
            done.append(f"an sbatch of the run still in flight after {min(grace, FENCE_WAIT):g} s (it cancels "
                        "its own job when it returns)")
        late = [j for j in (self.recorded() if self._watch else []) if j not in first]
        scancel(late, self.env)
        if late:
            done.append(f"Slurm job(s) {', '.join(late)} submitted while the run was cancelled, cancelled by id")
        if proc is not None and alive:
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
            others = [j for j in cancelled if j not in first + late]
            if others:
                done.append(f"Slurm job(s) {', '.join(others)} cancelled by id"
                            + (f"; not yet seen leaving the queue: {', '.join(left)}" if left else ""))
            elif left:
                done.append(f"not yet seen leaving the queue: {', '.join(left)}")
            if not (first or late or cancelled):
                done.append(f"no Slurm job of this run left in the queue ({len(self.jobs)} recorded in {JOBS_FILE})")
        return done


def _own_record(record: Path) -> Optional[JobRecord]:
    """The record this very process wrote earlier at ``record`` (same PID), or None."""
    try:
        earlier = JobRecord.read(record)
    except OSError:
        return None
    return earlier if earlier.pid == os.getpid() and earlier.token else None


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
