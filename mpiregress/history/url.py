"""Where the history lives: an SQLite file (a path) or a PostgreSQL server (a URL), and how to show it.

A location is what ``--db`` or ``MPIREGRESS_HISTORY_URL`` / ``MPIREGRESS_HISTORY_DB`` give:
``postgresql://user@host:5432/db`` (or ``postgres://``, ``postgresql+psycopg://``,
``postgresql:///db?service=name``) is a server, anything else a file path. A URL is handed to
libpq unchanged, so a password left out of it comes from ``~/.pgpass`` (or ``PGPASSFILE``) and
``service=`` from ``~/.pg_service.conf``; a password written into it is never printed: every
place that shows a location shows :func:`mask`'s text.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Union
from urllib.parse import parse_qsl, urlsplit

from mpiregress.paths import history_db

URL_ENV = "MPIREGRESS_HISTORY_URL"
SCHEMES = ("postgresql", "postgres", "postgresql+psycopg")
MASK = "***"

Location = Union[Path, str]

# user:password@ in any URL-looking text, and password=... in a query string or a libpq keyword list.
_USERINFO = re.compile(r"(?P<head>[A-Za-z][A-Za-z0-9+.-]*://[^:/@\s]*):(?P<secret>[^@\s/]*)@")
_KEYWORD = re.compile(r"(?P<head>\bpassword\s*=\s*)(?P<secret>'[^']*'|[^\s&]+)", re.IGNORECASE)


def is_url(value: Union[str, Path, None]) -> bool:
    """True when ``value`` names a PostgreSQL server rather than a file."""
    if value is None or isinstance(value, Path):
        return False
    return value.split("://", 1)[0].lower() in SCHEMES and "://" in value


def resolve(value: Union[str, Path, None] = None) -> Location:
    """The history location: ``value`` if given, else ``$MPIREGRESS_HISTORY_URL``, else the SQLite file
    (``$MPIREGRESS_HISTORY_DB`` or var/history.sqlite)."""
    if value is None or value == "":
        value = os.environ.get(URL_ENV) or None
        if value is None:
            return history_db()
    if is_url(str(value)):
        return str(value)
    return Path(value)


def exists(location: Location) -> bool:
    """Whether a history may be there to read: a file that exists; a server is asked when opened."""
    return location.exists() if isinstance(location, Path) else True


# The --db option's help, the same for every command that reads or writes the history.
DB_HELP = ("history: an SQLite file or a postgresql:// URL (default: $MPIREGRESS_HISTORY_URL, else "
           "$MPIREGRESS_HISTORY_DB or var/history.sqlite)")


def mask(text: object) -> str:
    """``text`` with every URL password and ``password=`` value replaced by ``***``."""
    masked = _USERINFO.sub(lambda m: f"{m['head']}:{MASK}@", str(text))
    return _KEYWORD.sub(lambda m: f"{m['head']}{MASK}", masked)


def display(location: Location) -> str:
    """How a location is printed: a path as it is, a URL with its password masked."""
    return mask(location)


@dataclass(frozen=True)
class Server:
    """A PostgreSQL history: where it is, for ``history list`` (the counterpart of a file's journal)."""

    url: str

    def sentence(self) -> str:
        parts = urlsplit(self.url)
        query = dict(parse_qsl(parts.query))
        where = query.get("service") and f"service {query['service']}" or (
            f"{parts.hostname or query.get('host') or 'the local socket'}"
            f"{':' + str(parts.port) if parts.port else ''}")
        database = parts.path.lstrip("/") or query.get("dbname") or "(the user's default)"
        return (f"PostgreSQL server at {where}, database {database}: shared by every runner, "
                f"each import one transaction")


def sqlalchemy_url(url: str) -> str:
    """The URL SQLAlchemy needs to use psycopg 3; the rest (and the query's libpq keywords: service,
    sslmode, ...) goes through as it is."""
    return "postgresql+psycopg://" + url.split("://", 1)[1]


def first_line(err: BaseException, limit: int = 240) -> str:
    """The first meaningful line of a driver error, masked, without SQLAlchemy's background link."""
    orig = getattr(err, "orig", None) or err
    lines = [line.strip() for line in str(orig).splitlines() if line.strip()]
    text = " ".join(lines[:2]) if lines else type(orig).__name__
    text = re.sub(r"\(Background on this error at: [^)]*\)", "", text).strip()
    return mask(text)[:limit]


def username(url: str) -> Optional[str]:
    """The user named in ``url`` (None: libpq's default, the login name)."""
    return urlsplit(url).username
