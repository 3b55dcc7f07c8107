"""What only an SQLite history file needs before SQLAlchemy opens it: refusal of foreign or damaged
files (never written to), the journal mode for its file system, and the in-place upgrade of a
schema-1 file (with a backup copy), which predates Alembic.
"""
from __future__ import annotations

import sqlite3
import sys
import time as _time
from pathlib import Path
from typing import Callable, TypeVar

from mpiregress.errors import InputError
from mpiregress.history import journal as history_journal

SCHEMA = "mpiregress-history/2"
# Older schemas this code upgrades in place (after a backup copy), and how.
UPGRADABLE = ("mpiregress-history/1",)
SQLITE_MAGIC = b"SQLite format 3\x00"

# How long one import keeps trying while other writers hold the lock.
BUSY_TIMEOUT_S = 30.0
RETRY_DEADLINE_S = 120.0

# The schema-2 layout, as the schema-1 upgrade creates it (the Alembic revision 0002 is the same).
_DDL = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS runs (
    run_id      TEXT PRIMARY KEY,
    kind        TEXT NOT NULL,
    accepted    INTEGER NOT NULL,
    digest      TEXT NOT NULL,
    imported_at TEXT NOT NULL,
    time        TEXT NOT NULL,
    commit_sha  TEXT NOT NULL,
    pipeline    TEXT NOT NULL,
    source      TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS measurements (
    id           INTEGER PRIMARY KEY,
    run_id       TEXT NOT NULL REFERENCES runs(run_id),
    system       TEXT NOT NULL,
    partition    TEXT NOT NULL,
    target       TEXT NOT NULL,
    method       TEXT NOT NULL,
    benchmark    TEXT NOT NULL,
    params       TEXT NOT NULL,
    metric       TEXT NOT NULL,
    sample       INTEGER NOT NULL,
    value        REAL,
    unit         TEXT NOT NULL,
    toolchain    TEXT NOT NULL,
    commit_sha   TEXT NOT NULL,
    pipeline     TEXT NOT NULL,
    nodelist     TEXT NOT NULL,
    time         TEXT NOT NULL,
    status       TEXT NOT NULL,
    reason       TEXT NOT NULL,
    conditions   TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX IF NOT EXISTS measurements_series
    ON measurements(system, partition, method, benchmark, params, metric);
CREATE INDEX IF NOT EXISTS measurements_run ON measurements(run_id);
CREATE INDEX IF NOT EXISTS measurements_series_time
    ON measurements(system, partition, method, benchmark, params, metric, time, id);
"""

T = TypeVar("T")


def is_busy(err: BaseException) -> bool:
    """True for SQLite's "database is locked/busy" (bare or wrapped by SQLAlchemy)."""
    orig = getattr(err, "orig", err)
    if not isinstance(orig, sqlite3.OperationalError):
        return False
    text = str(orig).lower()
    return "locked" in text or "busy" in text


def retry(action: Callable[[], T], where: str) -> T:
    """Run ``action`` again while another writer holds the lock past the busy timeout."""
    deadline = _time.monotonic() + RETRY_DEADLINE_S
    delay = 0.05
    while True:
        try:
            return action()
        except Exception as err:
            if not is_busy(err):
                raise
            if _time.monotonic() > deadline:
                raise InputError(f"history file {where} stayed locked by another writer for "
                                 f"{RETRY_DEADLINE_S:.0f} s; try again") from None
            _time.sleep(delay)
            delay = min(delay * 2, 1.0)


def corrupt(path: Path, detail: str) -> InputError:
    return InputError(
        f"history file {path} {detail}; it was left untouched: move it aside "
        f"(e.g. mv {path} {path}.broken) and re-import the runs, or restore it from a backup")


def prepare(path: Path) -> tuple[history_journal.Journal, str]:
    """Check the file at ``path`` before it is opened for real: (its journal, a sentence when it was upgraded).

    A file that is not an SQLite database, is someone else's database, has an unknown schema or
    is damaged is refused (InputError) and never written to.
    """
    _refuse_if_not_sqlite(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    journal = history_journal.choose(path)
    try:
        db = sqlite3.connect(str(path), timeout=BUSY_TIMEOUT_S, isolation_level=None)
    except sqlite3.Error as err:
        raise InputError(f"history file {path} cannot be opened: {err}") from None
    try:
        upgraded = _check(db, path)
        # WAL lets readers (reports) run while a CI job imports; on a network file system it is
        # unsafe and the rollback journal is used (history_journal says which, and why).
        retry(lambda: db.execute(f"PRAGMA journal_mode={journal.mode}"), str(path))
    finally:
        db.close()
    return journal, upgraded


def _refuse_if_not_sqlite(path: Path) -> None:
    """Read the header before SQLite touches the file, so a foreign file is never written."""
    if not path.exists() or path.stat().st_size == 0:
        return
    if path.is_dir():
        raise InputError(f"history file {path} is a directory")
    with open(path, "rb") as handle:
        if handle.read(16) != SQLITE_MAGIC:
            raise corrupt(path, "is not an SQLite database")


def _check(db: sqlite3.Connection, path: Path) -> str:
    try:
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if not tables:
            return ""
        if "meta" not in tables:
            raise corrupt(path, "is an SQLite database but not an mpiregress history (no 'meta' table)")
        row = db.execute("SELECT value FROM meta WHERE key='schema'").fetchone()
        if not row or (row[0] != SCHEMA and row[0] not in UPGRADABLE):
            raise corrupt(path, f"has schema {row[0] if row else None!r}, expected {SCHEMA!r}")
        problems = [r[0] for r in db.execute("PRAGMA quick_check")]
        if problems != ["ok"]:
            raise corrupt(path, f"is damaged (SQLite quick_check: {problems[0]})")
        if row[0] != SCHEMA:
            return retry(lambda: _upgrade_v1(db, path, row[0]), str(path))
    except sqlite3.DatabaseError as err:
        if is_busy(err):
            raise
        raise corrupt(path, f"is damaged ({err})") from None
    return ""


def _upgrade_v1(db: sqlite3.Connection, path: Path, old: str) -> str:
    """Upgrade a ``mpiregress-history/1`` file in place, after a backup copy, keeping every row and run.

    Schema 1 keyed point-to-point series by placement and message size; schema 2
    keeps them as the ordered parameters {placement, size} of the open series model.
    """
    backup = path.with_name(f"{path.name}.{old.replace('/', '-')}.bak")
    if not backup.exists():
        # SQLite's online backup: a consistent copy even while another job reads the file.
        with sqlite3.connect(str(backup)) as copy:
            db.backup(copy)
        copy.close()
    db.execute("BEGIN IMMEDIATE")
    try:
        schema = db.execute("SELECT value FROM meta WHERE key='schema'").fetchone()[0]
        if schema == SCHEMA:       # another process upgraded it while we waited for the lock
            db.execute("ROLLBACK")
            return ""
        runs = db.execute("SELECT COUNT(*) FROM runs").fetchone()[0]
        rows = db.execute("SELECT COUNT(*) FROM measurements").fetchone()[0]
        db.execute("ALTER TABLE measurements RENAME TO measurements_v1")
        db.execute("DROP INDEX IF EXISTS measurements_series")
        db.execute("DROP INDEX IF EXISTS measurements_run")
        for statement in filter(None, (x.strip() for x in _DDL.split(";"))):
            db.execute(statement)
        db.execute(
            "INSERT INTO measurements(id, run_id, system, partition, target, method, benchmark, params, metric, "
            "sample, value, unit, toolchain, commit_sha, pipeline, nodelist, time, status, reason, conditions) "
            "SELECT id, run_id, system, partition, target, method, benchmark, "
            "json_object('placement', placement, 'size', message_size), metric, sample, value, unit, toolchain, "
            "commit_sha, pipeline, nodelist, time, status, reason, '{}' FROM measurements_v1")
        moved = db.execute("SELECT COUNT(*) FROM measurements").fetchone()[0]
        if moved != rows:
            raise InputError(f"history file {path}: the upgrade from {old} moved {moved} of {rows} rows; "
                             f"nothing was changed")
        db.execute("DROP TABLE measurements_v1")
        db.execute("UPDATE meta SET value=? WHERE key='schema'", (SCHEMA,))
        db.execute("COMMIT")
    except BaseException:
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise
    upgraded = (f"history file {path} upgraded from {old} to {SCHEMA}: {runs} run(s) and "
                f"{rows} measurement row(s) kept; the old file is backed up as {backup}")
    print(f"mpiregress: {upgraded}", file=sys.stderr)
    return upgraded
