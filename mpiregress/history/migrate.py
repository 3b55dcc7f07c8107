"""The history schema's version: migrated forward by Alembic when a history is opened, refused when newer.

Every store (SQLite file, PostgreSQL database) carries Alembic's ``alembic_version`` row. A file
written before Alembic has the layout of revision 0002 and is stamped with it first. Migrating
is one transaction (PostgreSQL and SQLite both change tables transactionally) taken under a lock
(SQLite's ``BEGIN IMMEDIATE``, PostgreSQL's advisory lock), so two runners opening an old history
at once migrate it once. A revision this code does not know was written by a newer mpiregress:
the history is refused with one sentence and left untouched.
"""
from __future__ import annotations

from pathlib import Path
from typing import Optional

from alembic.config import Config
from alembic.runtime.environment import EnvironmentContext
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from alembic.util import CommandError
from sqlalchemy import Connection, inspect, text

from mpiregress.errors import InputError

MIGRATIONS = Path(__file__).with_name("migrations")
LEGACY_REVISION = "0002"          # the layout of files written before Alembic (meta schema mpiregress-history/2)
# Any fixed number: the key of the PostgreSQL advisory lock that serializes migrations.
ADVISORY_LOCK_KEY = 0x6D70_6972_6567
_script: Optional[ScriptDirectory] = None


def script() -> ScriptDirectory:
    """The migration scripts shipped with this code (read once per process)."""
    global _script
    if _script is None:
        config = Config()
        config.set_main_option("script_location", str(MIGRATIONS))
        _script = ScriptDirectory.from_config(config)
    return _script


def head() -> str:
    """The newest revision this code knows."""
    newest = script().get_current_head()
    assert newest is not None, "no migration script shipped"
    return newest


def current(conn: Connection) -> Optional[str]:
    """The store's revision (None: a store without Alembic's table)."""
    return MigrationContext.configure(conn).get_current_revision()


def begin(conn: Connection) -> None:
    """Open the one write transaction (the connection is in autocommit mode: transactions are explicit)."""
    if conn.dialect.name == "sqlite":
        conn.exec_driver_sql("BEGIN IMMEDIATE")
    else:
        conn.exec_driver_sql("BEGIN")


def _known(revision: str) -> bool:
    try:
        return script().get_revision(revision) is not None
    except CommandError:
        return False


def refuse_newer(conn: Connection, where: str) -> Optional[str]:
    """The store's revision, after refusing one newer than this code (InputError, nothing touched)."""
    found = current(conn)
    if found is not None and not _known(found):
        raise InputError(f"history {where} has schema revision {found}, newer than this mpiregress knows "
                         f"(up to {head()}): use the mpiregress that wrote it or a newer one; nothing was changed")
    return found


def migrate(conn: Connection, where: str) -> Optional[str]:
    """Bring the store at ``conn`` to :func:`head`; a sentence when it changed anything, else None."""
    found = refuse_newer(conn, where)
    if found == head():
        return None
    begin(conn)
    try:
        if conn.dialect.name == "postgresql":
            conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": ADVISORY_LOCK_KEY})
        found = refuse_newer(conn, where)          # another opener may have migrated while we waited
        if found != head():
            if found is None and inspect(conn).has_table("meta"):
                MigrationContext.configure(conn).stamp(script(), LEGACY_REVISION)
                found = LEGACY_REVISION
            _upgrade(conn)
        conn.exec_driver_sql("COMMIT")
    except BaseException:
        conn.exec_driver_sql("ROLLBACK")
        raise
    if found is None or found == head():
        return None     # created now, or migrated by another opener meanwhile: nothing to tell
    return f"history {where} schema migrated from revision {found} to {head()}"


def _upgrade(conn: Connection) -> None:
    scripts = script()

    def steps(revision, _context):
        return scripts._upgrade_revs(head(), revision)

    with EnvironmentContext(Config(), scripts, fn=steps, destination_rev=head()) as env:
        # The transaction is ours (begin above): Alembic runs inside it and does not commit.
        env.configure(connection=conn, transactional_ddl=True)
        with env.begin_transaction():
            env.run_migrations()
