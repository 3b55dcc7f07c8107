"""The history's tables as SQLAlchemy Core objects: what the code reads and writes, for SQLite and PostgreSQL.

The tables are created and changed only by the Alembic migrations in ``migrations/``
(migrated forward when a history is opened); these definitions must match the newest revision.
Times are ISO 8601 text (UTC, ``+00:00``) in both stores, so they sort and compare alike;
the PostgreSQL views cast them to ``timestamptz`` for Grafana.
"""
from __future__ import annotations

from sqlalchemy import BigInteger, Column, Float, Integer, MetaData, Table, Text

metadata = MetaData()

# SQLite's rowid alias must be declared INTEGER; PostgreSQL gets a 64-bit identity.
ID = BigInteger().with_variant(Integer(), "sqlite")

meta = Table(
    "meta", metadata,
    Column("key", Text, primary_key=True),
    Column("value", Text, nullable=False),
)

runs = Table(
    "runs", metadata,
    # The idempotence key: a pipeline job imports with --run-id (or the content's digest), and a
    # second import of it, even at the same moment from another runner, stores nothing.
    Column("run_id", Text, primary_key=True),
    Column("kind", Text, nullable=False),
    Column("accepted", Integer, nullable=False),
    Column("digest", Text, nullable=False),
    Column("imported_at", Text, nullable=False),
    Column("time", Text, nullable=False),
    Column("commit_sha", Text, nullable=False),
    Column("pipeline", Text, nullable=False),
    Column("source", Text, nullable=False),
)

measurements = Table(
    "measurements", metadata,
    Column("id", ID, primary_key=True, autoincrement=True),
    Column("run_id", Text, nullable=False),
    Column("system", Text, nullable=False),
    Column("partition", Text, nullable=False),
    Column("target", Text, nullable=False),
    Column("method", Text, nullable=False),
    Column("benchmark", Text, nullable=False),
    Column("params", Text, nullable=False),
    Column("metric", Text, nullable=False),
    Column("sample", Integer, nullable=False),
    Column("value", Float(53)),
    Column("unit", Text, nullable=False),
    Column("toolchain", Text, nullable=False),
    Column("commit_sha", Text, nullable=False),
    Column("pipeline", Text, nullable=False),
    Column("nodelist", Text, nullable=False),
    Column("time", Text, nullable=False),
    Column("status", Text, nullable=False),
    Column("reason", Text, nullable=False),
    Column("conditions", Text, nullable=False),
)

# What the weekly scan found (``history changes --store``): Grafana draws them as annotations.
change_points = Table(
    "change_points", metadata,
    Column("system", Text, primary_key=True),
    Column("partition", Text, primary_key=True),
    Column("method", Text, primary_key=True),
    Column("benchmark", Text, primary_key=True),
    Column("params", Text, primary_key=True),
    Column("metric", Text, primary_key=True),
    Column("run_id", Text, primary_key=True),     # the first run of the new level
    Column("time", Text, nullable=False),
    Column("before", Float(53), nullable=False),
    Column("after", Float(53), nullable=False),
    Column("change", Float(53), nullable=False),
    Column("worse", Integer, nullable=False),
    Column("shared", Integer, nullable=False),
    Column("commits", Text, nullable=False),
    Column("sentence", Text, nullable=False),
    Column("found_at", Text, nullable=False),
)

MEASUREMENT_COLUMNS = tuple(c.name for c in measurements.columns if c.name != "id")
