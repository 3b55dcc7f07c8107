"""A run's reports folder: owned by one run at a time, cleared at its start, written atomically.

A report must never show an earlier run's verdict. So a run locks its folder (a
second run on it is refused with one sentence), removes every file a run writes
there before anything else happens, marks the folder "running", writes each
report through a temporary file and a rename, and, when it fails, leaves a
summary, a JUnit file and ``status.json`` that say it failed, why, and what ran.

A run touches only what is its own. The folder keeps a list of the entries runs wrote there
(``.mpiregress-owned``); a run removes only those. It refuses, with one sentence and before it
writes anything: a folder that is a symlink or holds one leading out of it, a folder in a system
location (/etc, /usr, ...), and a folder holding, under a name a run writes, an entry no run
recorded as its own (it would have to remove someone else's file).
"""
from __future__ import annotations

import contextlib
import datetime as _dt
import fcntl
import json
import os
import shutil
from pathlib import Path
from typing import Any, Optional

from mpiregress.cluster import locks
from mpiregress.errors import CANCELLED, InputError
from mpiregress.run import outputs
from mpiregress.run.cancel import FENCE_NAME, JOBS_FILE, STAGING_NAME, JobRecord, cancel_jobs

LOCK_NAME = ".mpiregress-run.lock"
# The entries of the folder that runs wrote (one name a line): the only ones a run removes.
OWNED_LIST = ".mpiregress-owned"
# Everything a run writes in its folder (by the runner, ReFrame or a check): removed at the start when
# a run recorded it as its own, else the run is refused.
OWNED = ("results.json", "summary.md", "junit.xml", "reframe-junit.xml", "reframe-report.json", "reframe.out",
         "reframe.log", "status.json", "report.html", "html", "perflogs", "reframe", "planned-manifests",
         "ab-samples.json", "ab-a.json", "slurm-jobs.txt", "links", "noise", "verdict.json",
         STAGING_NAME, FENCE_NAME)
# Where no report folder may be: the system's own folders (a run there would write into /etc).
SYSTEM_FOLDERS = ("/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/libx32", "/proc", "/run", "/sbin",
                  "/sys", "/usr", "/var/lib", "/var/log", "/var/spool", "/var/cache", "/var/run", "/var/mail")
# Folders that hold other people's folders (a run would claim every entry named like a report of its own
# beside them): never a report folder themselves, though a folder inside them may be. A person's home
# folder (a direct child of /home, and $HOME) is refused the same way.
SHARED_FOLDERS = ("/home", "/root", "/opt", "/srv", "/mnt", "/media", "/tmp", "/var", "/var/tmp", "/snap", "/scratch",
                  "/work", "/data", "/gpfs", "/lustre", "/nfs")


def refuse_place(path: Path) -> Optional[str]:
    """Why ``path`` cannot be a run's report folder (one sentence), or None.

    A symlink (the folder itself, or an entry of it leading out of it) and a system folder are refused.
    """
    path = Path(os.path.abspath(path))
    if path.is_symlink():
        return (f"report folder {path} is a symlink (to {os.readlink(path)}): a run writes only into a folder "
                "of its own; give the real folder or another --report-dir")
    real = path.resolve()
    if real == Path("/") or any(real == Path(s) or Path(s) in real.parents for s in SYSTEM_FOLDERS):
        return f"report folder {path} is in the system folder {real}: choose a --report-dir of your own"
    if str(real) in SHARED_FOLDERS or real.parent == Path("/home") or real == Path.home().resolve():
        return (f"report folder {path} is {real}, a folder that holds other people's folders: choose a folder "
                "of its own inside it as --report-dir")
    if path.is_dir():
        for entry in sorted(path.iterdir()):
            if entry.is_symlink():
                target = entry.resolve()
                if target != real and real not in target.parents:
                    return (f"report folder {path} holds {entry.name}, a symlink leading out of it (to "
                            f"{os.readlink(entry)}): a run touches only its own files; remove the link or "
                            "choose another --report-dir")
    return None


def dead_run(path: Path) -> Optional[dict[str, Any]]:
    """The status of the run that last wrote ``path`` when it died without finishing (status "running",
    its lock free: the kernel drops a dead holder's flock), else None. The lock is only tested, not kept."""
    path = Path(path)
    try:
        status = json.loads((path / "status.json").read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(status, dict) or status.get("state") != "running":
        return None
    try:
        fd = os.open(path / LOCK_NAME, os.O_RDWR)
    except OSError:
        return status        # no lock file: no run can be holding it
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        return None          # a live run holds it
    finally:
        os.close(fd)
    return status


def mark_killed(path: Path, status: dict[str, Any], message: str) -> None:
    """Leave the folder of a run killed outright saying so: status.json "cancelled" (exit 6), summary.md and
    junit.xml (best effort: a folder that cannot be written must not hide the caller's own work)."""
    path = Path(path)
    ran = [s for s in status.get("steps") or [] if isinstance(s, str)]
    summary = [f"# MPI regression run CANCELLED (exit {CANCELLED})", "", f"**Why:** {message}", "",
               f"Command: `{status.get('command', '?')}`", f"Started: {status.get('started', '?')}", "",
               "## What ran", "", *([f"- {step}" for step in ran] or ["- nothing recorded"]), "",
               "No verdict: nothing of this run was judged."]
    record = {**status, "state": "cancelled", "exit_code": CANCELLED, "message": message, "ended": _now()}
    for name, text in (("summary.md", "\n".join(summary) + "\n"),
                       ("junit.xml", outputs.failure_junit("run", message, CANCELLED, ran)),
                       ("status.json", json.dumps(record, indent=2) + "\n")):
        try:
            write_atomic(path / name, text)
        except InputError:
            continue


# Seconds of slack on "changed after the previous run ended": its status.json's "ended" has whole seconds.
END_SLACK = 2.0


def _remove_run_files(folder: Path, ended: Optional[float], root: Path) -> list[str]:
    """Remove what a run wrote under ``folder``: every file unless ``ended`` is known, then every file not
    changed after it (nothing of a run writes into its folder after it ended); the files a person put
    there later are kept, with the folders that hold them. Returns the kept files, relative to ``root``."""
    if ended is None:
        shutil.rmtree(folder)
        return []
    kept: list[str] = []
    for here, dirs, files in os.walk(folder, topdown=False):
        for name in files + [d for d in dirs if os.path.islink(os.path.join(here, d))]:
            path = Path(here) / name
            if path.lstat().st_mtime > ended + END_SLACK:
                kept.append(str(path.relative_to(root)))
            else:
                path.unlink()
        for name in dirs:
            path = Path(here) / name
            if not path.is_symlink():
                with contextlib.suppress(OSError):
                    path.rmdir()      # kept when it still holds a kept file
    with contextlib.suppress(OSError):
        folder.rmdir()
    return sorted(kept)


def _cancel_recorded(record: Path) -> str:
    """Cancel the jobs a dead run recorded (by id, under its token); what was done, as a clause."""
    try:
        rec = JobRecord.read(record)
    except OSError:
        return f"it left no {JOBS_FILE}, so no Slurm job of it could be cancelled"
    env = dict(os.environ)
    if rec.slurm_conf and Path(rec.slurm_conf).exists():
        env["SLURM_CONF"] = rec.slurm_conf
    cancelled, left = cancel_jobs(rec.jobs, rec.token, env, wait=15, trust_record=True)
    if cancelled:
        return (f"its Slurm job(s) {', '.join(cancelled)} were cancelled by id"
                + (f" (still leaving the queue: {', '.join(left)})" if left else ""))
    return f"none of its {len(rec.jobs)} recorded Slurm job(s) was still queued"


def _plain_names(text: str) -> set[str]:
    """The names of an owned list: plain entry names only (never a path leading elsewhere)."""
    return {n for n in (line.strip() for line in text.splitlines())
            if n and "/" not in n and n not in (".", "..", LOCK_NAME, OWNED_LIST)}


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def write_atomic(path: Path, text: str) -> Path:
    """Write ``text`` to ``path`` through a temporary file in the same folder and a rename.

    A reader sees the old file or the new one, never half of one; a failure names the file.
    """
    path = Path(path)
    try:
        outputs.write_text_atomic(path, text)
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
        self._foreign: set[str] = set()         # entries that were there, not a run's: never touched
        self.state = ""                         # the state status.json says (write_status)

    # -- owning the folder ----------------------------------------------
    def __enter__(self) -> "RunFolder":
        refused = refuse_place(self.path)
        if refused:
            raise InputError(refused)
        try:
            self.path.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise InputError(f"report folder {self.path} cannot be created: {err.strerror or err}") from None
        if not self.path.is_dir():
            raise InputError(f"report folder {self.path} is not a folder")
        had_lock_file = (self.path / LOCK_NAME).exists()
        self._take_lock()
        try:
            self._set_aside_dead_run()
            self._clear()
            self.write_status("running")
        except BaseException:
            if not had_lock_file and not (self.path / OWNED_LIST).exists():
                # Refused in someone else's folder: leave it exactly as it was.
                (self.path / LOCK_NAME).unlink(missing_ok=True)
            self._release()
            raise
        return self

    def __exit__(self, *exc: Any) -> None:
        try:
            if self.state == "running":
                # Whoever used the folder wrote no final state: it still must not claim a run is running.
                with contextlib.suppress(InputError):
                    self.write_status("finished" if exc[0] is None else "failed", None,
                                      "" if exc[0] is None else f"ended by {exc[0].__name__}")
            self._record_owned()
        finally:
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

    def _owned_before(self) -> set[str]:
        try:
            return _plain_names((self.path / OWNED_LIST).read_text(errors="replace"))
        except FileNotFoundError:
            return set()
        except OSError as err:
            raise InputError(f"report folder {self.path}: {OWNED_LIST} cannot be read ({err.strerror or err})") \
                from None

    def _record_owned(self, extra: tuple[str, ...] = ()) -> None:
        """Write the list of entries this run owns: what is there now and was not someone else's."""
        try:
            present = {p.name for p in self.path.iterdir()}
        except OSError:
            return
        owned = (present | set(extra)) - self._foreign - {LOCK_NAME, OWNED_LIST}
        try:
            write_atomic(self.path / OWNED_LIST, "".join(f"{n}\n" for n in sorted(owned)))
        except InputError:
            pass

    def _set_aside_dead_run(self) -> None:
        """A run that died here without finishing (status "running", and this run holds the lock it held):
        cancel the Slurm jobs it recorded, move its files into ``killed-run-<its start>/`` (kept, never a
        run's to remove), and say so in one sentence before this run starts."""
        try:
            status = json.loads((self.path / "status.json").read_text())
        except (OSError, ValueError):
            return
        if not isinstance(status, dict) or status.get("state") != "running":
            return
        said = _cancel_recorded(self.path / JOBS_FILE)
        stamp = "".join(c for c in str(status.get("started")) or _now() if c.isalnum())[:15]
        aside = self.path / f"killed-run-{stamp}"
        n = 1
        while aside.exists():
            n += 1
            aside = self.path / f"killed-run-{stamp}-{n}"
        owned = self._owned_before() | {"status.json", JOBS_FILE}
        aside.mkdir()
        for name in sorted(owned):
            if (self.path / name).exists() or (self.path / name).is_symlink():
                try:
                    os.replace(self.path / name, aside / name)
                except OSError as err:
                    raise InputError(f"report folder {self.path}: the killed run's {name} cannot be moved into "
                                     f"{aside} ({err.strerror or err})") from None
        sentence = (f"the run that started here at {status.get('started', '?')} (PID {status.get('pid', '?')}) "
                    f"died without finishing: {said}, and its files were moved to {aside}")
        # Its own folder says what became of it: no status.json claims a dead run is running.
        mark_killed(aside, status, f"killed outright: the run (PID {status.get('pid', '?')}) ended without "
                                   f"finishing; the next run in {self.path} found it so: {said}")
        print(f"mpiregress: {sentence}", flush=True)
        self.step(sentence)

    def _clear(self) -> None:
        """Remove what earlier runs wrote (their owned list); refuse an entry a run would overwrite
        that no run recorded as its own."""
        before = self._owned_before()
        present = {p.name for p in self.path.iterdir()} - {LOCK_NAME, OWNED_LIST}
        foreign = sorted(n for n in present if n in OWNED and n not in before)
        if foreign:
            raise InputError(f"report folder {self.path} holds {', '.join(foreign)}, which no mpiregress run "
                             f"recorded as its own ({OWNED_LIST}): a run would have to remove them; move them away "
                             "or choose another --report-dir")
        self._foreign = present - before
        ended = self._previous_end()
        # Claimed before anything is written: a run killed outright still owns what it started to write.
        self._record_owned(extra=OWNED)
        kept: list[str] = []
        for name in sorted(before):
            target = self.path / name
            try:
                if target.is_dir() and not target.is_symlink():
                    kept += _remove_run_files(target, ended, self.path)
                elif target.exists() or target.is_symlink():
                    target.unlink()
            except OSError as err:
                raise InputError(f"report folder {self.path}: the previous run's {name} cannot be removed "
                                 f"({err.strerror or err}), so this run could not own the folder") from None
        if kept:
            sentence = (f"kept {len(kept)} file(s) in the report folder that no run wrote (changed after the "
                        f"previous run ended): {', '.join(kept[:5])}{' ...' if len(kept) > 5 else ''}")
            print(f"mpiregress: {sentence}", flush=True)
            self.step(sentence)

    def _previous_end(self) -> Optional[float]:
        """When the previous run here ended (its status.json, else its owned list's last write), or None."""
        try:
            status = json.loads((self.path / "status.json").read_text())
            return _dt.datetime.fromisoformat(status["ended"]).timestamp()
        except (OSError, ValueError, KeyError, TypeError):
            pass
        try:
            return (self.path / OWNED_LIST).stat().st_mtime
        except OSError:
            return None

    # -- writing --------------------------------------------------------
    def write(self, name: str, text: str) -> Path:
        """Write one report file atomically."""
        return write_atomic(self.path / name, text)

    def step(self, what: str) -> None:
        """Record that ``what`` was done (shown when the run fails)."""
        self.steps.append(what)

    def write_status(self, state: str, exit_code: Optional[int] = None, message: str = "") -> None:
        self.state = state
        self.write("status.json", json.dumps({
            "state": state, "exit_code": exit_code, "message": message, "started": self.started,
            "ended": _now() if state != "running" else None, "pid": os.getpid(),
            "command": self.description, "steps": self.steps}, indent=2) + "\n")

    def fail(self, message: str, exit_code: int, what_ran: Optional[list[str]] = None, state: str = "failed") -> None:
        """Leave reports that say the run failed (``state``: "failed" or "cancelled"), why, and what ran;
        never an earlier verdict.

        Best effort: a folder that cannot be written any more must not hide ``message``.
        """
        ran = list(self.steps) + list(what_ran or [])
        headline = "CANCELLED" if state == "cancelled" else "FAILED"
        lines = [f"# MPI regression run {headline} (exit {exit_code})", "",
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
                lambda: self.write("junit.xml", outputs.failure_junit("run", message, exit_code, ran)),
                lambda: self.write_status(state, exit_code, message)):
            try:
                action()
            except (OSError, InputError):
                continue

