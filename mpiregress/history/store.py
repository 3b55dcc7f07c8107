"""The history of results: an embedded SQLite store, one row per measurement.

Why SQLite: DESIGN.md principle 4 ("history decides, single runs don't") needs
every scheduled and merged run kept, queried by series, on a laptop, in CI and
on the clusters alike, with no server to run.

Layout: a ``runs`` table (one row per imported run: its id, kind, whether it is
*accepted*, a digest of its content) and a ``measurements`` table (one row per
measured sample, or one row with no value for a failed/skipped check). A run is
*accepted* when it is a scheduled or merged run: those form the reference history
that the MR gate, the change-point scan and baseline proposals read. MR runs are
kept too, but only count once ``accept`` is called for them (after the merge).

Concurrency: several CI jobs (Iris and Aion, several methods) import into the
same file at once. The file is in WAL mode, every connection waits for locks
(busy timeout) and each import is one ``BEGIN IMMEDIATE`` transaction, retried
with back-off while another writer holds the lock: an import is all or nothing,
and nothing is lost.

Safety: a file that is not an SQLite database, or is damaged, or is someone else's
database, is refused with one sentence and is never written to: the user moves it
aside. Import is idempotent per run id, and refuses to mix toolchains in a series
unless asked to start the new toolchain deliberately.
"""
from __future__ import annotations

import csv
import errno
import hashlib
import json
import os
import sqlite3
import stat
import statistics
import sys
import time as _time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, Iterable, Iterator, Optional, Sequence

from mpiregress.errors import InputError
from mpiregress.history import journal as history_journal
from mpiregress.model import inputs
from mpiregress.model.names import METHODS, METRICS, PLACEMENTS, SYSTEMS
from mpiregress.model.results import STATUSES, Result
from mpiregress.model.series import SeriesKey, params_from_json, params_json

SCHEMA = "mpiregress-history/2"
# Older schemas this code upgrades in place (after a backup copy), and how.
UPGRADABLE = ("mpiregress-history/1",)
SQLITE_MAGIC = b"SQLite format 3\x00"

# Which kinds of run form the reference history (the rest wait for ``accept``).
KINDS: tuple[str, ...] = ("schedule", "merge", "mr", "manual")
ACCEPTED_KINDS = frozenset({"schedule", "merge"})

# How long one import keeps trying while other writers hold the lock.
BUSY_TIMEOUT_S = 30.0
RETRY_DEADLINE_S = 120.0

# The columns of a measurement row, in export order (CSV header).
COLUMNS: tuple[str, ...] = (
    "run_id", "kind", "accepted", "system", "partition", "target", "method", "benchmark",
    "parameters", "metric", "sample", "value", "unit", "toolchain", "commit",
    "pipeline", "nodelist", "time", "status", "reason", "conditions",
)

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
    params       TEXT NOT NULL,     -- the series' ordered parameters as compact JSON (series.params_json)
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
-- A series' newest row without sorting its history: the toolchain check of every import asks it
-- once per series (30 -> 16 ms per import after a year of weekly runs).
CREATE INDEX IF NOT EXISTS measurements_series_time
    ON measurements(system, partition, method, benchmark, params, metric, time, id);
"""

@dataclass(frozen=True)
class Row:
    """One measurement as stored: a sample of one metric of one check in one run."""

    run_id: str
    kind: str
    accepted: bool
    system: str
    partition: str
    target: str
    method: str
    benchmark: str
    params: str          # compact JSON, as stored
    metric: str
    sample: int
    value: Optional[float]
    unit: str
    toolchain: str
    commit: str
    pipeline: str
    nodelist: str
    time: str
    status: str
    reason: str
    conditions: str

    def key(self) -> SeriesKey:
        return SeriesKey(self.system, self.partition, self.method, self.benchmark, params_from_json(self.params),
                         self.metric)


@dataclass(frozen=True)
class RunPoint:
    """One run of one series: its measured samples and where they came from."""

    run_id: str
    time: str
    commit: str
    pipeline: str
    toolchain: str
    kind: str
    accepted: bool
    nodelist: str
    samples: tuple[float, ...]

    @property
    def median(self) -> float:
        return statistics.median(self.samples)


@dataclass(frozen=True)
class RunInfo:
    """One imported run, as ``history list`` shows it."""

    run_id: str
    kind: str
    accepted: bool
    time: str
    commit: str
    pipeline: str
    source: str
    rows: int
    toolchains: tuple[str, ...]


@dataclass(frozen=True)
class ImportSummary:
    run_id: str
    rows: int
    created: bool          # False: this run id was already imported with the same content
    accepted: bool


def read_results_file(path: Path) -> list[Result]:
    """The results.json at ``path`` as Result records, or one sentence saying why not."""
    return inputs.read_results(Path(path))


def _now() -> str:
    return datetime.now(timezone.utc).replace(microsecond=0).isoformat()


def _digest(results: Sequence[Result]) -> str:
    canonical = json.dumps(sorted((r.to_dict() for r in results), key=lambda d: json.dumps(d, sort_keys=True)),
                           sort_keys=True)
    return hashlib.sha256(canonical.encode()).hexdigest()


def _validate(result: Result, index: int, path_hint: str) -> None:
    """Names are checked against names.py so a typo cannot open a new series."""
    where = f"{path_hint}result #{index}"
    checks = (("system", result.system, SYSTEMS), ("method", result.method, METHODS),
              ("metric", result.metric, tuple(METRICS)), ("status", result.status, STATUSES))
    for field_name, value, known in checks:
        if value not in known:
            raise InputError(f"{where}: {field_name} {value!r} is not one of {', '.join(known)}")
    if not result.partition:
        raise InputError(f"{where}: partition is empty")
    if not result.benchmark:
        raise InputError(f"{where}: benchmark is empty")
    if not isinstance(result.parameters, dict):
        raise InputError(f"{where}: parameters must be a mapping, found {result.parameters!r}")
    placement = result.parameters.get("placement")
    if placement is not None and placement not in PLACEMENTS:
        raise InputError(f"{where}: placement {placement!r} is not one of {', '.join(PLACEMENTS)}")
    for sample in result.samples:
        if isinstance(sample, bool) or not isinstance(sample, (int, float)):
            raise InputError(f"{where}: sample {sample!r} is not a number")
    inputs.check_physical(result.metric, result.value, result.samples, result.reference, where)


def _rows_of(result: Result) -> Iterator[tuple[int, Optional[float]]]:
    """(sample index, value) of every measurement a Result carries."""
    if result.samples:
        for i, value in enumerate(result.samples):
            yield i, float(value)
    else:
        yield 0, (None if result.value is None else float(result.value))


_SERIES_WHERE = ("m.system=? AND m.partition=? AND m.method=? AND m.benchmark=? AND m.params=? "
                 "AND m.metric=?")
# The toolchain of a series' newest accepted row (index measurements_series_time).
NEWEST_TOOLCHAIN_SQL = ("SELECT m.toolchain FROM measurements m JOIN runs USING(run_id) WHERE runs.accepted=1 AND "
                        f"{_SERIES_WHERE} ORDER BY m.time DESC, m.id DESC LIMIT 1")


def _series_args(key: SeriesKey) -> list:
    return [key.system, key.partition, key.method, key.benchmark, params_json(key.parameters), key.metric]


def _is_busy(err: sqlite3.OperationalError) -> bool:
    text = str(err).lower()
    return "locked" in text or "busy" in text


class History:
    """An open history file. Use :func:`open_history` (a context manager)."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.upgraded = ""     # a sentence when opening upgraded the file's schema
        check_db_path(self.path, creating=True)
        self._refuse_if_not_sqlite()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.journal = history_journal.choose(self.path)
        try:
            # isolation_level=None: transactions are explicit (BEGIN IMMEDIATE below).
            self._db = sqlite3.connect(str(self.path), timeout=BUSY_TIMEOUT_S, isolation_level=None)
        except sqlite3.Error as err:
            raise InputError(f"history file {self.path} cannot be opened: {err}") from None
        try:
            self._check_and_init()
        except BaseException:
            self._db.close()
            raise

    # -- opening ---------------------------------------------------------
    def _corrupt(self, detail: str) -> InputError:
        return InputError(
            f"history file {self.path} {detail}; it was left untouched: move it aside "
            f"(e.g. mv {self.path} {self.path}.broken) and re-import the runs, or restore it from a backup")

    def _refuse_if_not_sqlite(self) -> None:
        """Read the header before SQLite touches the file, so a foreign file is never written."""
        if not self.path.exists() or self.path.stat().st_size == 0:
            return
        if self.path.is_dir():
            raise InputError(f"history file {self.path} is a directory")
        with open(self.path, "rb") as handle:
            if handle.read(16) != SQLITE_MAGIC:
                raise self._corrupt("is not an SQLite database")

    def _check_and_init(self) -> None:
        try:
            tables = {r[0] for r in self._db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
            if tables:
                if "meta" not in tables:
                    raise self._corrupt("is an SQLite database but not an mpiregress history (no 'meta' table)")
                row = self._db.execute("SELECT value FROM meta WHERE key='schema'").fetchone()
                if not row or (row[0] != SCHEMA and row[0] not in UPGRADABLE):
                    raise self._corrupt(f"has schema {row[0] if row else None!r}, expected {SCHEMA!r}")
                problems = [r[0] for r in self._db.execute("PRAGMA quick_check")]
                if problems != ["ok"]:
                    raise self._corrupt(f"is damaged (SQLite quick_check: {problems[0]})")
                if row[0] != SCHEMA:
                    self._retry(self._upgrade, row[0])
        except sqlite3.DatabaseError as err:
            if isinstance(err, sqlite3.OperationalError) and _is_busy(err):
                raise
            raise self._corrupt(f"is damaged ({err})") from None
        self._retry(self._init_schema)

    def _upgrade(self, old: str) -> None:
        """Upgrade a ``mpiregress-history/1`` file in place, after a backup copy, keeping every row and run.

        Schema 1 keyed point-to-point series by placement and message size; schema 2
        keeps them as the ordered parameters {placement, size} of the open series model.
        """
        db = self._db
        backup = self.path.with_name(f"{self.path.name}.{old.replace('/', '-')}.bak")
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
                return
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
                raise InputError(f"history file {self.path}: the upgrade from {old} moved {moved} of {rows} rows; "
                                 f"nothing was changed")
            db.execute("DROP TABLE measurements_v1")
            db.execute("UPDATE meta SET value=? WHERE key='schema'", (SCHEMA,))
            db.execute("COMMIT")
        except BaseException:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise
        self.upgraded = (f"history file {self.path} upgraded from {old} to {SCHEMA}: {runs} run(s) and "
                         f"{rows} measurement row(s) kept; the old file is backed up as {backup}")
        print(f"mpiregress: {self.upgraded}", file=sys.stderr)

    def _init_schema(self) -> None:
        # WAL lets readers (reports) run while a CI job imports; on a network file system it is
        # unsafe and the rollback journal is used (history_journal says which, and why).
        self._db.execute(f"PRAGMA journal_mode={self.journal.mode}")
        self._db.execute("BEGIN IMMEDIATE")
        try:
            for statement in filter(None, (s.strip() for s in _DDL.split(";"))):
                self._db.execute(statement)
            self._db.execute("INSERT OR IGNORE INTO meta(key, value) VALUES ('schema', ?)", (SCHEMA,))
            self._db.execute("COMMIT")
        except BaseException:
            self._db.execute("ROLLBACK")
            raise

    def _retry(self, action, *args, **kwargs):
        """Run ``action`` again while another writer holds the lock past the busy timeout."""
        deadline = _time.monotonic() + RETRY_DEADLINE_S
        delay = 0.05
        while True:
            try:
                return action(*args, **kwargs)
            except sqlite3.OperationalError as err:
                if not _is_busy(err) or _time.monotonic() > deadline:
                    if _is_busy(err):
                        raise InputError(f"history file {self.path} stayed locked by another writer for "
                                         f"{RETRY_DEADLINE_S:.0f} s; try again") from None
                    raise
                _time.sleep(delay)
                delay = min(delay * 2, 1.0)

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> "History":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- writing ---------------------------------------------------------
    def import_results(self, results: Sequence[Result], run_id: Optional[str] = None, kind: str = "schedule",
                       new_toolchain: bool = False, source: str = "") -> ImportSummary:
        """Store one run's results in one transaction.

        ``run_id`` defaults to a digest of the content, so importing the same file twice is
        a no-op. ``kind`` decides whether the run joins the reference history at once
        (schedule, merge) or waits for :meth:`accept` (mr, manual). A result whose toolchain
        differs from the series' accepted history is refused unless ``new_toolchain``.
        """
        if kind not in KINDS:
            raise InputError(f"run kind {kind!r} is not one of {', '.join(KINDS)}")
        if not results:
            raise InputError(f"{source or 'the results'} holds no results: nothing to import")
        hint = f"{source}: " if source else ""
        for i, result in enumerate(results):
            _validate(result, i, hint)
        digest = _digest(results)
        run_id = run_id or f"sha256-{digest[:16]}"
        return self._retry(self._import_tx, results, run_id, kind, new_toolchain, source, digest)

    def _import_tx(self, results, run_id, kind, new_toolchain, source, digest) -> ImportSummary:
        db = self._db
        db.execute("BEGIN IMMEDIATE")
        try:
            existing = db.execute("SELECT digest, accepted FROM runs WHERE run_id=?", (run_id,)).fetchone()
            if existing:
                db.execute("ROLLBACK")
                if existing[0] != digest:
                    raise InputError(f"run {run_id!r} is already in {self.path} with different results: "
                                     f"give this run its own --run-id")
                count = db.execute("SELECT COUNT(*) FROM measurements WHERE run_id=?", (run_id,)).fetchone()[0]
                return ImportSummary(run_id, count, created=False, accepted=bool(existing[1]))
            if not new_toolchain:
                self._refuse_toolchain_mix(results)
            accepted = kind in ACCEPTED_KINDS
            times = sorted(r.time for r in results if r.time)
            run_time = times[-1] if times else _now()
            commits = sorted({r.commit for r in results if r.commit})
            pipelines = sorted({r.pipeline for r in results if r.pipeline})
            db.execute("INSERT INTO runs VALUES (?,?,?,?,?,?,?,?,?)",
                       (run_id, kind, int(accepted), digest, _now(), run_time, ",".join(commits),
                        ",".join(pipelines), source))
            rows = []
            for r in results:
                params = params_json(r.parameters)
                conditions = json.dumps(r.conditions, sort_keys=True, default=str)
                for sample, value in _rows_of(r):
                    rows.append((run_id, r.system, r.partition, r.target, r.method, r.benchmark, params,
                                 r.metric, sample, value, r.unit, r.toolchain, r.commit, r.pipeline,
                                 ",".join(r.nodelist), r.time or run_time, r.status, r.reason, conditions))
            db.executemany("INSERT INTO measurements(run_id, system, partition, target, method, benchmark, "
                           "params, metric, sample, value, unit, toolchain, commit_sha, "
                           "pipeline, nodelist, time, status, reason, conditions) VALUES "
                           "(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", rows)
            db.execute("COMMIT")
        except BaseException:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise
        return ImportSummary(run_id, len(rows), created=True, accepted=accepted)

    def _refuse_toolchain_mix(self, results: Sequence[Result]) -> None:
        seen: set[SeriesKey] = set()
        for r in results:
            key = r.key()
            if key in seen:
                continue
            seen.add(key)
            row = self._db.execute(NEWEST_TOOLCHAIN_SQL, _series_args(key)).fetchone()
            if row and row[0] != r.toolchain:
                raise InputError(
                    f"results for {key.name()} were built with toolchain {r.toolchain or '(none)'!r} but that "
                    f"series' history is toolchain {row[0]!r}: they are not mixed; pass --new-toolchain to start "
                    f"the {r.toolchain or '(none)'} series deliberately")

    def accept(self, run_id: str) -> None:
        """Make an MR run part of the reference history (after its merge)."""
        def tx():
            cur = self._db.execute("UPDATE runs SET accepted=1 WHERE run_id=?", (run_id,))
            if cur.rowcount == 0:
                raise InputError(f"run {run_id!r} is not in {self.path}")
        self._retry(tx)

    # -- reading ---------------------------------------------------------
    def rows(self, system: Optional[str] = None, partition: Optional[str] = None, method: Optional[str] = None,
             benchmark: Optional[str] = None, metric: Optional[str] = None, accepted: Optional[bool] = None,
             run_id: Optional[str] = None) -> list[Row]:
        """Measurement rows matching the given filters, oldest first."""
        where: list[str] = []
        args: list[object] = []
        for column, value in (("m.system", system), ("m.partition", partition), ("m.method", method),
                              ("m.benchmark", benchmark), ("m.metric", metric), ("m.run_id", run_id)):
            if value is not None:
                where.append(f"{column}=?")
                args.append(value)
        if accepted is not None:
            where.append("runs.accepted=?")
            args.append(int(accepted))
        sql = ("SELECT m.run_id, runs.kind, runs.accepted, m.system, m.partition, m.target, m.method, m.benchmark, "
               "m.params, m.metric, m.sample, m.value, m.unit, m.toolchain, m.commit_sha, "
               "m.pipeline, m.nodelist, m.time, m.status, m.reason, m.conditions "
               "FROM measurements m JOIN runs USING(run_id)")
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY m.time, m.id"
        return [Row(r[0], r[1], bool(r[2]), *r[3:]) for r in self._db.execute(sql, args)]

    def latest_run_with(self, system: str, partition: str, benchmark: str) -> Optional[str]:
        """The run id of the newest measurement of ``benchmark`` on ``system:partition`` (accepted or not)."""
        row = self._db.execute("SELECT run_id FROM measurements WHERE system=? AND partition=? AND benchmark=? "
                               "ORDER BY time DESC, id DESC LIMIT 1", (system, partition, benchmark)).fetchone()
        return row[0] if row else None

    def series_keys(self, accepted: Optional[bool] = True) -> list[SeriesKey]:
        """Every series that has rows (accepted ones only, by default)."""
        sql = ("SELECT DISTINCT m.system, m.partition, m.method, m.benchmark, m.params, m.metric FROM measurements m "
               "JOIN runs USING(run_id)")
        args: list = []
        if accepted is not None:
            sql += " WHERE runs.accepted=?"
            args.append(int(accepted))
        return sorted(SeriesKey(r[0], r[1], r[2], r[3], params_from_json(r[4]), r[5])
                      for r in self._db.execute(sql, args))

    def series_runs(self, key: SeriesKey, toolchain: Optional[str] = None, accepted: Optional[bool] = True,
                    last: Optional[int] = None, exclude_run: Optional[str] = None) -> list[RunPoint]:
        """The runs of one series, oldest first, each with its measured samples.

        Only measured values count (failed and skipped checks carry none); ``last`` keeps
        the newest runs. The message size is one of the series' parameters, so sweep rows
        of other sizes are other series and never leak in.
        """
        sql = ("SELECT m.run_id, m.time, m.commit_sha, m.pipeline, m.toolchain, runs.kind, runs.accepted, "
               "m.nodelist, m.value FROM measurements m JOIN runs USING(run_id) "
               f"WHERE {_SERIES_WHERE} AND m.value IS NOT NULL AND m.status IN ('pass','fail')")
        args: list = _series_args(key)
        if accepted is not None:
            sql += " AND runs.accepted=?"
            args.append(int(accepted))
        if toolchain is not None:
            sql += " AND m.toolchain=?"
            args.append(toolchain)
        if exclude_run is not None:
            sql += " AND m.run_id<>?"
            args.append(exclude_run)
        # Grouped here rather than with GROUP_CONCAT, which prints REALs with 15 digits only.
        grouped: dict[str, list] = {}
        for r in self._db.execute(sql + " ORDER BY m.id", args):
            entry = grouped.setdefault(r[0], [r, []])
            if r[1] > entry[0][1]:
                entry[0] = r
            entry[1].append(float(r[8]))
        points = sorted((RunPoint(run_id=r[0], time=r[1], commit=r[2], pipeline=r[3], toolchain=r[4], kind=r[5],
                                  accepted=bool(r[6]), nodelist=r[7], samples=tuple(values))
                         for r, values in grouped.values()), key=lambda p: p.time)
        return points[-last:] if last else points

    def toolchains(self, key: SeriesKey) -> list[str]:
        """Toolchains of the accepted history of ``key``, newest last."""
        rows = self._db.execute(
            "SELECT m.toolchain, MAX(m.time) FROM measurements m JOIN runs USING(run_id) WHERE runs.accepted=1 "
            f"AND {_SERIES_WHERE} GROUP BY m.toolchain ORDER BY 2", _series_args(key)).fetchall()
        return [r[0] for r in rows]

    def runs(self) -> list[RunInfo]:
        """Every imported run, oldest first."""
        sql = ("SELECT runs.run_id, runs.kind, runs.accepted, runs.time, runs.commit_sha, runs.pipeline, "
               "runs.source, COUNT(m.id), GROUP_CONCAT(DISTINCT m.toolchain) FROM runs "
               "LEFT JOIN measurements m USING(run_id) GROUP BY runs.run_id ORDER BY runs.time, runs.rowid")
        return [RunInfo(r[0], r[1], bool(r[2]), r[3], r[4], r[5], r[6], r[7],
                        tuple(sorted(filter(None, (r[8] or "").split(","))))) for r in self._db.execute(sql)]

    def export_csv(self, handle: IO[str], **filters) -> int:
        """Write the rows matching ``filters`` (see :meth:`rows`) as CSV; returns the row count."""
        writer = csv.writer(handle)
        writer.writerow(COLUMNS)
        count = 0
        for row in self.rows(**filters):
            writer.writerow(["" if v is None else v for v in (
                row.run_id, row.kind, int(row.accepted), row.system, row.partition, row.target, row.method,
                row.benchmark, row.params, row.metric, row.sample, row.value, row.unit,
                row.toolchain, row.commit, row.pipeline, row.nodelist, row.time, row.status, row.reason,
                row.conditions)])
            count += 1
        return count


def check_db_path(path: Path, creating: bool) -> bool:
    """Whether a history file exists at ``path`` (False: absent, which is fine); any path no history can
    live at is one sentence (InputError, exit 2): a symlink loop or a link to nothing, a folder, a device, a
    parent that is a file. ``creating``: the file may be created (an import), so its folder is checked too."""
    path = Path(path)
    try:
        found = os.stat(path)
    except FileNotFoundError:
        if os.path.islink(path):
            raise InputError(f"history file {path} is a symlink to {os.readlink(path)}, which does not exist: "
                             "give the real file") from None
        if creating:
            for parent in path.parents:
                try:
                    if not stat.S_ISDIR(os.stat(parent).st_mode):
                        raise InputError(f"history file {path} cannot be created: {parent} is not a folder")
                    break
                except FileNotFoundError:
                    continue
                except OSError as err:
                    raise InputError(f"history file {path} cannot be created: {parent}: "
                                     f"{_stat_error(err)}") from None
        return False
    except OSError as err:
        raise InputError(f"history file {path} cannot be used: {_stat_error(err)}") from None
    if stat.S_ISDIR(found.st_mode):
        raise InputError(f"history file {path} is a folder, not a file: give the history's SQLite file")
    if not stat.S_ISREG(found.st_mode):
        raise InputError(f"history file {path} is not a regular file: give the history's SQLite file")
    return True


def _stat_error(err: OSError) -> str:
    if err.errno == errno.ELOOP:
        return "a symlink loop (too many levels of symbolic links)"
    if err.errno == errno.ENOTDIR:
        return "a part of the path is a file, not a folder"
    return err.strerror or str(err)


def open_history(path: Optional[Path] = None) -> History:
    """Open (creating if absent) the history at ``path`` (default: paths.history_db())."""
    if path is None:
        from mpiregress.paths import history_db
        path = history_db()
    return History(Path(path))


def open_existing(path: Optional[Path] = None) -> Optional[History]:
    """The history at ``path`` (default: paths.history_db()) if the file exists, else None: judging
    and reporting read a history, they never create one."""
    if path is None:
        from mpiregress.paths import history_db
        path = history_db()
    return open_history(path) if check_db_path(Path(path), creating=False) else None


def import_files(history: History, paths: Iterable[Path], **kwargs) -> list[ImportSummary]:
    """Import several results files, one transaction (and one run) each."""
    return [history.import_results(read_results_file(p), source=str(p), **kwargs) for p in paths]
