"""``history copy``: a whole history from one store to another (SQLite <-> PostgreSQL), counts checked.

The copy is one transaction on the destination: every run of the source, its measurement rows
(in the source's order) and the stored change points. A run already in the destination with the
same content is skipped (so a copy can be repeated, or merge runners' files into one server); one
with other content stops the copy with nothing written. Before committing, every run of the source
must be in the destination with as many rows as in the source, or nothing is written.
"""
from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import Connection, text

from mpiregress.errors import InputError
from mpiregress.history.schema import change_points, measurements, runs
from mpiregress.history.store import History


@dataclass(frozen=True)
class CopySummary:
    runs: int            # runs copied
    rows: int            # measurement rows copied
    skipped: int         # runs the destination already held, unchanged
    change_points: int   # change points copied (new to the destination)
    total_runs: int      # what the destination holds afterwards
    total_rows: int

    def sentence(self, source: str, destination: str) -> str:
        return (f"copied {self.runs} run(s) with {self.rows} measurement row(s) and {self.change_points} change "
                f"point(s) from {source} to {destination} ({self.skipped} run(s) were already there, unchanged); "
                f"counts checked: every run of the source is there with as many rows; {destination} now holds "
                f"{self.total_runs} run(s) and {self.total_rows} measurement row(s)")


def copy(source: History, destination: History) -> CopySummary:
    """Copy every run of ``source`` into ``destination`` in one transaction (see the module's docstring)."""
    src_runs = source.table_rows("runs")
    src_counts = source.rows_per_run()
    src_points = source.table_rows("change_points")

    def body(conn: Connection) -> CopySummary:
        copied = rows = skipped = 0
        insert_run = text(
            "INSERT INTO runs(run_id, kind, accepted, digest, imported_at, time, commit_sha, pipeline, source) "
            "VALUES (:run_id, :kind, :accepted, :digest, :imported_at, :time, :commit_sha, :pipeline, :source) "
            "ON CONFLICT (run_id) DO NOTHING")
        for run in src_runs:
            if conn.execute(insert_run, run).rowcount == 0:
                there = conn.execute(text("SELECT digest FROM runs WHERE run_id=:run_id"), run).scalar_one()
                if there != run["digest"]:
                    raise InputError(f"run {run['run_id']!r} is in both {source.path} and {destination.path} with "
                                     f"different results: nothing was copied")
                skipped += 1
                continue
            batch = [{k: v for k, v in row.items() if k != "id"}
                     for row in source.table_rows("measurements", run_id=run["run_id"])]
            if batch:
                conn.execute(measurements.insert(), batch)
            copied += 1
            rows += len(batch)
        points = 0
        insert_point = text(
            f"INSERT INTO change_points({', '.join(c.name for c in change_points.columns)}) VALUES "
            f"({', '.join(':' + c.name for c in change_points.columns)}) ON CONFLICT DO NOTHING")
        for point in src_points:
            points += conn.execute(insert_point, point).rowcount
        there = {r[0]: int(r[1]) for r in conn.execute(
            text("SELECT run_id, COUNT(*) FROM measurements GROUP BY run_id"))}
        wrong = [run_id for run_id, count in src_counts.items() if there.get(run_id) != count]
        if wrong:
            raise InputError(f"the copy to {destination.path} would hold other row counts than {source.path} for "
                             f"{len(wrong)} run(s) (first: {wrong[0]}): nothing was copied")
        total_runs = conn.execute(text(f"SELECT COUNT(*) FROM {runs.name}")).scalar_one()
        return CopySummary(copied, rows, skipped, points, int(total_runs), sum(there.values()))

    return destination.transaction(body)
