"""The history of results: one row per measurement, in an embedded SQLite file or a shared PostgreSQL server.

Why SQLite by default: DESIGN.md principle 4 ("history decides, single runs don't") needs
every scheduled and merged run kept, queried by series, on a laptop, in CI and on the
clusters alike, with no server to run. Why PostgreSQL too: several clusters and runners
share one history (the weekly change points, the A/B evidence and the proposals then see
every runner's past), which an SQLite file on a shared file system cannot carry safely.
``--db``/``MPIREGRESS_HISTORY_URL`` given a ``postgresql://`` URL selects the server
(history_url.py); the code path and the schema are the same for both (SQLAlchemy Core,
schema versions migrated forward by Alembic on open: history_migrate.py).

Layout: a ``runs`` table (one row per imported run: its id, kind, whether it is
*accepted*, a digest of its content) and a ``measurements`` table (one row per
measured sample, or one row with no value for a failed/skipped check). A run is
*accepted* when it is a scheduled or merged run: those form the reference history
that the MR gate, the change-point scan and baseline proposals read. MR runs are
kept too, but only count once ``accept`` is called for them (after the merge).

Concurrency: several CI jobs (Iris and Aion, several methods) import at once. Each
import is one transaction; the run id is the table's key and the run row is inserted
with ``ON CONFLICT DO NOTHING`` first, so a second import of the same run (even at the
same moment, from another runner) stores nothing. SQLite: the file is in WAL mode (or
the rollback journal on network file systems), the transaction is ``BEGIN IMMEDIATE``,
retried with back-off while another writer holds the lock. PostgreSQL: the server
serializes the two inserts of one run id; a server that cannot be reached is exit 3
(InfrastructureError) and nothing is half-written.

Safety: a file that is not an SQLite database, or is damaged, or is someone else's
database, is refused with one sentence and is never written to: the user moves it
aside (history_sqlite.py). Import is idempotent per run id, and refuses to mix
toolchains in a series unless asked to start the new toolchain deliberately.
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
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, Any, Callable, Iterable, Iterator, Mapping, Optional, Sequence, TypeVar, Union

from sqlalchemy import Connection, Engine, create_engine, inspect, text
from sqlalchemy.exc import DBAPIError, SQLAlchemyError
from sqlalchemy.pool import NullPool

from mpiregress.errors import InfrastructureError, InputError
from mpiregress.history import (
    journal as history_journal,
)
from mpiregress.history import (
    migrate as history_migrate,
)
from mpiregress.history import (
    sqlite as history_sqlite,
)
from mpiregress.history import (
    url as history_url,
)
from mpiregress.history.schema import change_points, measurements
from mpiregress.history.schema import runs as runs_table
from mpiregress.model import inputs
from mpiregress.model.names import METHODS, METRICS, PLACEMENTS, SYSTEMS
from mpiregress.model.results import STATUSES, Result
from mpiregress.model.series import SeriesKey, params_from_json, params_json

SCHEMA = history_sqlite.SCHEMA
# Older schemas this code upgrades in place (after a backup copy), and how.
UPGRADABLE = history_sqlite.UPGRADABLE
SQLITE_MAGIC = history_sqlite.SQLITE_MAGIC

# Which kinds of run form the reference history (the rest wait for ``accept``).
KINDS: tuple[str, ...] = ("schedule", "merge", "mr", "manual")
ACCEPTED_KINDS = frozenset({"schedule", "merge"})

# How long one import keeps trying while other writers hold an SQLite file's lock.
BUSY_TIMEOUT_S = history_sqlite.BUSY_TIMEOUT_S
RETRY_DEADLINE_S = history_sqlite.RETRY_DEADLINE_S
# How long a PostgreSQL connection attempt may take before the server counts as unreachable.
CONNECT_TIMEOUT_S = 10

# The columns of a measurement row, in export order (CSV header).
COLUMNS: tuple[str, ...] = (
    "run_id", "kind", "accepted", "system", "partition", "target", "method", "benchmark",
    "parameters", "metric", "sample", "value", "unit", "toolchain", "commit",
    "pipeline", "nodelist", "time", "status", "reason", "conditions",
)

T = TypeVar("T")

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


_SERIES_WHERE = ("m.system=:system AND m.partition=:partition AND m.method=:method AND m.benchmark=:benchmark "
                 "AND m.params=:params AND m.metric=:metric")
# The toolchain of a series' newest accepted row (index measurements_series_time).
NEWEST_TOOLCHAIN_SQL = ("SELECT m.toolchain FROM measurements m JOIN runs USING(run_id) WHERE runs.accepted=1 AND "
                        f"{_SERIES_WHERE} ORDER BY m.time DESC, m.id DESC LIMIT 1")


def _series_args(key: SeriesKey) -> dict[str, Any]:
    return {"system": key.system, "partition": key.partition, "method": key.method, "benchmark": key.benchmark,
            "params": params_json(key.parameters), "metric": key.metric}


def _sqlite_engine(path: Path) -> Engine:
    def connect() -> sqlite3.Connection:
        # isolation_level=None: transactions are explicit (BEGIN IMMEDIATE, history_migrate.begin).
        return sqlite3.connect(str(path), timeout=BUSY_TIMEOUT_S, isolation_level=None)
    return create_engine("sqlite://", creator=connect, poolclass=NullPool, isolation_level="AUTOCOMMIT")


def _postgres_engine(url: str) -> Engine:
    # The URL goes to libpq as it is: a password left out comes from .pgpass, service= from the service file.
    return create_engine(history_url.sqlalchemy_url(url), poolclass=NullPool, isolation_level="AUTOCOMMIT",
                         connect_args={"connect_timeout": CONNECT_TIMEOUT_S, "application_name": "mpiregress"})


def _unreachable(err: DBAPIError) -> bool:
    """A PostgreSQL error that is the server's or the network's, not the query's: worth a retry later."""
    orig = err.orig
    module = type(orig).__module__
    if not module.startswith("psycopg"):
        return False
    name = type(orig).__name__
    # Class 08 (connection), 57 (operator intervention: shutdown), 53 (insufficient resources), and
    # authentication (28) all arrive as OperationalError; a closed connection is InterfaceError.
    return err.connection_invalidated or name in {"OperationalError", "InterfaceError"} or any(
        base.__name__ in {"OperationalError", "InterfaceError"} for base in type(orig).__mro__)


class _Empty(Exception):
    """Raised inside open_existing: the server database holds no history yet."""


class History:
    """An open history (SQLite file or PostgreSQL database). Use :func:`open_history` (a context manager)."""

    def __init__(self, location: Union[Path, str], create: bool = True):
        self.location: Union[Path, str] = history_url.resolve(location)
        # What every message shows: the path, or the URL with its password masked.
        self.path: Union[Path, str] = (self.location if isinstance(self.location, Path)
                                       else history_url.display(self.location))
        self.upgraded = ""     # a sentence when opening upgraded the store's schema
        self.journal: Union[history_journal.Journal, history_url.Server]
        if isinstance(self.location, Path):
            check_db_path(self.location, creating=True)
            self.journal, self.upgraded = history_sqlite.prepare(self.location)
            self._engine = _sqlite_engine(self.location)
        else:
            self.journal = history_url.Server(self.path if isinstance(self.path, str) else str(self.path))
            self._engine = _postgres_engine(self.location)
        self.dialect = self._engine.dialect.name
        self._conn: Connection = self._guard(self._engine.connect)
        try:
            if not create and self.dialect != "sqlite" and not self._guard(self._has_history):
                raise _Empty()
            migrated = self._guard(lambda: history_migrate.migrate(self._conn, str(self.path)))
            if migrated:
                print(f"mpiregress: {migrated}", file=sys.stderr)
                self.upgraded = self.upgraded or migrated
        except BaseException:
            self.close()
            raise

    def _has_history(self) -> bool:
        tables = set(inspect(self._conn).get_table_names())
        return bool(tables & {"alembic_version", "meta"})

    # -- errors and transactions -------------------------------------------
    def _guard(self, action: Callable[[], T]) -> T:
        """Run ``action``: SQLite lock waits retried, a server that cannot be reached one sentence (exit 3)."""
        try:
            if self.dialect == "sqlite":
                return history_sqlite.retry(action, str(self.path))
            return action()
        except DBAPIError as err:
            if _unreachable(err):
                raise InfrastructureError(
                    f"the PostgreSQL history at {self.path} cannot be used ({history_url.first_line(err)}); "
                    f"no import was left half-done, and results files stay as they are for the next import "
                    f"(runs already stored are skipped)") from None
            if type(err.orig).__name__ == "InsufficientPrivilege":
                raise InputError(f"the history at {self.path} refuses this ({history_url.first_line(err)}): "
                                 f"this role may read but not write; use the writer role for imports") from None
            raise

    def _write(self, body: Callable[[Connection], T]) -> T:
        """``body`` in one transaction: all of it or nothing."""
        def attempt() -> T:
            history_migrate.begin(self._conn)
            try:
                out = body(self._conn)
                self._conn.exec_driver_sql("COMMIT")
                return out
            except BaseException:
                self._rollback()
                raise
        return self._guard(attempt)

    def _rollback(self) -> None:
        try:
            self._conn.exec_driver_sql("ROLLBACK")
        except SQLAlchemyError:
            pass    # the connection is gone (or invalidated): the server rolled the transaction back itself

    def _query(self, sql: str, params: Optional[Mapping[str, Any]] = None) -> list[tuple]:
        """All rows of one read (autocommit: a consistent snapshot per statement)."""
        return self._guard(lambda: [tuple(r) for r in self._conn.execute(text(sql), dict(params or {}))])

    def close(self) -> None:
        conn = getattr(self, "_conn", None)
        if conn is not None:
            try:
                conn.close()
            except SQLAlchemyError:
                pass
        self._engine.dispose()

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
        return self._write(lambda conn: self._import_tx(conn, results, run_id, kind, new_toolchain, source, digest))

    def _import_tx(self, conn: Connection, results: Sequence[Result], run_id: str, kind: str, new_toolchain: bool,
                   source: str, digest: str) -> ImportSummary:
        accepted = kind in ACCEPTED_KINDS
        times = sorted(r.time for r in results if r.time)
        run_time = times[-1] if times else _now()
        commits = sorted({r.commit for r in results if r.commit})
        pipelines = sorted({r.pipeline for r in results if r.pipeline})
        # The run id is the key: of two imports of one run, at once or not, the second inserts nothing
        # (PostgreSQL makes it wait for the first to commit, then skips).
        inserted = conn.execute(text(
            "INSERT INTO runs(run_id, kind, accepted, digest, imported_at, time, commit_sha, pipeline, source) "
            "VALUES (:run_id, :kind, :accepted, :digest, :imported_at, :time, :commit_sha, :pipeline, :source) "
            "ON CONFLICT (run_id) DO NOTHING"),
            {"run_id": run_id, "kind": kind, "accepted": int(accepted), "digest": digest, "imported_at": _now(),
             "time": run_time, "commit_sha": ",".join(commits), "pipeline": ",".join(pipelines),
             "source": source}).rowcount
        if inserted == 0:
            existing = conn.execute(text("SELECT digest, accepted FROM runs WHERE run_id=:run_id"),
                                    {"run_id": run_id}).one()
            if existing[0] != digest:
                raise InputError(f"run {run_id!r} is already in {self.path} with different results: "
                                 f"give this run its own --run-id")
            count = conn.execute(text("SELECT COUNT(*) FROM measurements WHERE run_id=:run_id"),
                                 {"run_id": run_id}).scalar_one()
            return ImportSummary(run_id, int(count), created=False, accepted=bool(existing[1]))
        if self.dialect == "postgresql":
            # SQLite's BEGIN IMMEDIATE already serializes writers; on the server, two imports of one series
            # with two toolchains must not both pass the check below: each takes the series' locks first
            # (in one order, so two imports never wait on each other), held until it commits.
            conn.execute(text("SELECT pg_advisory_xact_lock(h) FROM (SELECT DISTINCT hashtextextended(k, 0) AS h "
                              "FROM unnest(CAST(:keys AS text[])) AS k ORDER BY 1) AS series"),
                         {"keys": sorted({json.dumps(_series_args(r.key()), sort_keys=True) for r in results})})
        if not new_toolchain:
            self._refuse_toolchain_mix(conn, results)
        rows = []
        for r in results:
            params = params_json(r.parameters)
            conditions = json.dumps(r.conditions, sort_keys=True, default=str)
            for sample, value in _rows_of(r):
                rows.append({"run_id": run_id, "system": r.system, "partition": r.partition, "target": r.target,
                             "method": r.method, "benchmark": r.benchmark, "params": params, "metric": r.metric,
                             "sample": sample, "value": value, "unit": r.unit, "toolchain": r.toolchain,
                             "commit_sha": r.commit, "pipeline": r.pipeline, "nodelist": ",".join(r.nodelist),
                             "time": r.time or run_time, "status": r.status, "reason": r.reason,
                             "conditions": conditions})
        conn.execute(measurements.insert(), rows)
        return ImportSummary(run_id, len(rows), created=True, accepted=accepted)

    def _refuse_toolchain_mix(self, conn: Connection, results: Sequence[Result]) -> None:
        seen: set[SeriesKey] = set()
        for r in results:
            key = r.key()
            if key in seen:
                continue
            seen.add(key)
            row = conn.execute(text(NEWEST_TOOLCHAIN_SQL), _series_args(key)).first()
            if row and row[0] != r.toolchain:
                raise InputError(
                    f"results for {key.name()} were built with toolchain {r.toolchain or '(none)'!r} but that "
                    f"series' history is toolchain {row[0]!r}: they are not mixed; pass --new-toolchain to start "
                    f"the {r.toolchain or '(none)'} series deliberately")

    def accept(self, run_id: str) -> None:
        """Make an MR run part of the reference history (after its merge)."""
        def tx(conn: Connection) -> None:
            cur = conn.execute(text("UPDATE runs SET accepted=1 WHERE run_id=:run_id"), {"run_id": run_id})
            if cur.rowcount == 0:
                raise InputError(f"run {run_id!r} is not in {self.path}")
        self._write(tx)

    def store_change_points(self, found: Mapping[SeriesKey, Sequence[Any]]) -> int:
        """Keep the weekly scan's change points (changepoint.ChangePoint) for dashboards; returns how many
        were new. A change point found again (same series, same first run of the new level) is kept once."""
        rows = [{"system": cp.key.system, "partition": cp.key.partition, "method": cp.key.method,
                 "benchmark": cp.key.benchmark, "params": params_json(cp.key.parameters), "metric": cp.key.metric,
                 "run_id": cp.run_after.run_id, "time": cp.run_after.time, "before": cp.before, "after": cp.after,
                 "change": cp.change, "worse": int(cp.worse), "shared": cp.shared, "commits": cp.commits,
                 "sentence": cp.sentence(), "found_at": _now()}
                for points in found.values() for cp in points]
        sql = text("INSERT INTO change_points(system, partition, method, benchmark, params, metric, run_id, time, "
                   "before, after, change, worse, shared, commits, sentence, found_at) VALUES (:system, :partition, "
                   ":method, :benchmark, :params, :metric, :run_id, :time, :before, :after, :change, :worse, "
                   ":shared, :commits, :sentence, :found_at) ON CONFLICT DO NOTHING")

        def tx(conn: Connection) -> int:
            return sum(conn.execute(sql, row).rowcount for row in rows)
        return self._write(tx) if rows else 0

    # -- reading ---------------------------------------------------------
    def rows(self, system: Optional[str] = None, partition: Optional[str] = None, method: Optional[str] = None,
             benchmark: Optional[str] = None, metric: Optional[str] = None, accepted: Optional[bool] = None,
             run_id: Optional[str] = None) -> list[Row]:
        """Measurement rows matching the given filters, oldest first."""
        where: list[str] = []
        args: dict[str, Any] = {}
        for column, value in (("system", system), ("partition", partition), ("method", method),
                              ("benchmark", benchmark), ("metric", metric), ("run_id", run_id)):
            if value is not None:
                where.append(f"m.{column}=:{column}")
                args[column] = value
        if accepted is not None:
            where.append("runs.accepted=:accepted")
            args["accepted"] = int(accepted)
        sql = ("SELECT m.run_id, runs.kind, runs.accepted, m.system, m.partition, m.target, m.method, m.benchmark, "
               "m.params, m.metric, m.sample, m.value, m.unit, m.toolchain, m.commit_sha, "
               "m.pipeline, m.nodelist, m.time, m.status, m.reason, m.conditions "
               "FROM measurements m JOIN runs USING(run_id)")
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY m.time, m.id"
        return [Row(r[0], r[1], bool(r[2]), *r[3:]) for r in self._query(sql, args)]

    def latest_run_with(self, system: str, partition: str, benchmark: str) -> Optional[str]:
        """The run id of the newest measurement of ``benchmark`` on ``system:partition`` (accepted or not)."""
        rows = self._query("SELECT run_id FROM measurements WHERE system=:system AND partition=:partition AND "
                           "benchmark=:benchmark ORDER BY time DESC, id DESC LIMIT 1",
                           {"system": system, "partition": partition, "benchmark": benchmark})
        return rows[0][0] if rows else None

    def series_keys(self, accepted: Optional[bool] = True) -> list[SeriesKey]:
        """Every series that has rows (accepted ones only, by default)."""
        sql = ("SELECT DISTINCT m.system, m.partition, m.method, m.benchmark, m.params, m.metric FROM measurements m "
               "JOIN runs USING(run_id)")
        args: dict[str, Any] = {}
        if accepted is not None:
            sql += " WHERE runs.accepted=:accepted"
            args["accepted"] = int(accepted)
        return sorted(SeriesKey(r[0], r[1], r[2], r[3], params_from_json(r[4]), r[5])
                      for r in self._query(sql, args))

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
        args = _series_args(key)
        if accepted is not None:
            sql += " AND runs.accepted=:accepted"
            args["accepted"] = int(accepted)
        if toolchain is not None:
            sql += " AND m.toolchain=:toolchain"
            args["toolchain"] = toolchain
        if exclude_run is not None:
            sql += " AND m.run_id<>:exclude_run"
            args["exclude_run"] = exclude_run
        # Grouped here rather than with GROUP_CONCAT, which prints REALs with 15 digits only.
        grouped: dict[str, list] = {}
        for r in self._query(sql + " ORDER BY m.id", args):
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
        rows = self._query(
            "SELECT m.toolchain, MAX(m.time) FROM measurements m JOIN runs USING(run_id) WHERE runs.accepted=1 "
            f"AND {_SERIES_WHERE} GROUP BY m.toolchain ORDER BY 2", _series_args(key))
        return [r[0] for r in rows]

    def runs(self) -> list[RunInfo]:
        """Every imported run, oldest first (runs of one time in the order they were imported)."""
        sql = ("SELECT runs.run_id, runs.kind, runs.accepted, runs.time, runs.commit_sha, runs.pipeline, "
               "runs.source, COUNT(m.id) FROM runs LEFT JOIN measurements m USING(run_id) "
               "GROUP BY runs.run_id ORDER BY runs.time, MIN(m.id)")
        toolchains: dict[str, set[str]] = {}
        for run_id, toolchain in self._query("SELECT DISTINCT run_id, toolchain FROM measurements"):
            if toolchain:
                toolchains.setdefault(run_id, set()).add(toolchain)
        return [RunInfo(r[0], r[1], bool(r[2]), r[3], r[4], r[5], r[6], int(r[7]),
                        tuple(sorted(toolchains.get(r[0], ())))) for r in self._query(sql)]

    def counts(self) -> dict[str, int]:
        """How many runs, measurement rows and stored change points the history holds."""
        return {table: int(self._query(f"SELECT COUNT(*) FROM {table}")[0][0])
                for table in ("runs", "measurements", "change_points")}

    def stored_change_points(self) -> list[dict[str, Any]]:
        """The stored change points, oldest first, as column -> value."""
        names = [c.name for c in change_points.columns]
        return [dict(zip(names, r)) for r in
                self._query(f"SELECT {', '.join(names)} FROM change_points ORDER BY time, system, partition, "
                            "method, benchmark, params, metric")]

    def table_rows(self, table: str, run_id: Optional[str] = None) -> list[dict[str, Any]]:
        """Every row of ``table`` (runs, measurements, change_points) as column -> value, in stored order
        (measurements of one run only, when ``run_id`` is given): what ``history copy`` moves."""
        columns = {t.name: t for t in (runs_table, measurements, change_points)}[table].columns
        names = [c.name for c in columns]
        # Runs in the order they were imported (their first row), so a copy keeps the rows' order too.
        order = {"runs": "(SELECT MIN(m.id) FROM measurements m WHERE m.run_id = runs.run_id), run_id",
                 "measurements": "id", "change_points": "time, run_id, system, partition, "
                 "method, benchmark, params, metric"}[table]
        where, args = ("", {}) if run_id is None else (" WHERE run_id=:run_id", {"run_id": run_id})
        return [dict(zip(names, r)) for r in
                self._query(f"SELECT {', '.join(names)} FROM {table}{where} ORDER BY {order}", args)]

    def rows_per_run(self) -> dict[str, int]:
        """How many measurement rows each run has."""
        return {r[0]: int(r[1]) for r in self._query("SELECT run_id, COUNT(*) FROM measurements GROUP BY run_id")}

    def transaction(self, body: Callable[[Connection], T]) -> T:
        """``body(connection)`` in one write transaction: all of it or nothing (for history_copy)."""
        return self._write(body)

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


def open_history(path: Union[Path, str, None] = None) -> History:
    """Open (creating or migrating if needed) the history at ``path``: a file path or a ``postgresql://`` URL
    (default: ``$MPIREGRESS_HISTORY_URL``, else paths.history_db())."""
    return History(history_url.resolve(path))


def open_existing(path: Union[Path, str, None] = None) -> Optional[History]:
    """The history at ``path`` (default as :func:`open_history`) if it exists, else None: judging and
    reporting read a history, they never create one. A server database exists once a run was imported
    into it (or it was migrated)."""
    location = history_url.resolve(path)
    if isinstance(location, Path):
        return History(location) if check_db_path(location, creating=False) else None
    try:
        return History(location, create=False)
    except _Empty:
        return None


def import_files(history: History, paths: Iterable[Path], **kwargs) -> list[ImportSummary]:
    """Import several results files, one transaction (and one run) each."""
    return [history.import_results(read_results_file(p), source=str(p), **kwargs) for p in paths]
