"""A private PostgreSQL server from Debian's packages, for the history tests and benchmarks.

``initdb`` in a temporary folder, its own port on 127.0.0.1 (and a unix socket in that folder),
password authentication (md5) for a superuser whose password is in a file, stopped and removed
by :meth:`PostgresServer.stop`. As root the server runs as the ``postgres`` user (``initdb``
refuses root), as anyone else as that user.
"""
from __future__ import annotations

import glob
import os
import pwd
import secrets
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, Sequence

SUPERUSER = "mpiregress"


def bindir() -> Optional[Path]:
    """Debian's server binaries (newest version installed), or None without the postgresql package."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4]))
    return Path(found[-1]).parent if found else None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class PostgresServer:
    root: Path
    port: int
    password: str
    bin: Path
    _owner: Optional[str] = field(default=None)
    _counter: int = 0

    @property
    def data(self) -> Path:
        return self.root / "data"

    def url(self, database: str = "postgres", user: str = SUPERUSER, password: Optional[str] = None) -> str:
        pw = self.password if password is None else password
        auth = f"{user}:{pw}@" if pw else f"{user}@"
        return f"postgresql://{auth}127.0.0.1:{self.port}/{database}"

    def _as_owner(self, argv: Sequence[str], check: bool = True, timeout: float = 60) -> subprocess.CompletedProcess:
        if self._owner:
            cmd = ["su", self._owner, "-s", "/bin/sh", "-c", " ".join(_quote(a) for a in argv)]
        else:
            cmd = list(argv)
        return subprocess.run(cmd, capture_output=True, text=True, check=check, timeout=timeout)

    def start(self) -> None:
        log = self.root / "log"
        self._as_owner([str(self.bin / "pg_ctl"), "-D", str(self.data), "-l", str(log), "-w", "-t", "60", "-o",
                        f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off "
                        f"-c max_connections=60", "start"], timeout=90)

    def stop(self, mode: str = "fast") -> None:
        if (self.data / "postmaster.pid").exists():
            self._as_owner([str(self.bin / "pg_ctl"), "-D", str(self.data), "-w", "-m", mode, "stop"], check=False,
                           timeout=90)

    def running(self) -> bool:
        return self._as_owner([str(self.bin / "pg_ctl"), "-D", str(self.data), "status"], check=False).returncode == 0

    def psql(self, sql: str, database: str = "postgres") -> str:
        env = {**os.environ, "PGPASSWORD": self.password}
        done = subprocess.run([str(self.bin.parent / "bin" / "psql"), "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1",
                               "-h", "127.0.0.1", "-p", str(self.port), "-U", SUPERUSER, "-d", database, "-c", sql],
                              capture_output=True, text=True, env=env, timeout=60)
        if done.returncode:
            raise RuntimeError(f"psql failed: {done.stderr.strip()}")
        return done.stdout

    def new_database(self, prefix: str = "h") -> str:
        """A fresh empty database; its URL (superuser)."""
        self._counter += 1
        name = f"{prefix}_{os.getpid()}_{self._counter}"
        self.psql(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def destroy(self) -> None:
        # Its data is thrown away: no shutdown checkpoint to wait for on a loaded host.
        self.stop(mode="immediate")
        shutil.rmtree(self.root, ignore_errors=True)


def _quote(arg: str) -> str:
    return "'" + arg.replace("'", "'\"'\"'") + "'"


def start_server(prefix: str = "mpiregress-pg-") -> PostgresServer:
    """initdb and start a private server; RuntimeError with the reason when it cannot."""
    pg_bin = bindir()
    if pg_bin is None:
        raise RuntimeError("PostgreSQL's server is not installed (/usr/lib/postgresql/*/bin/initdb): run ci/setup.sh "
                           "(it installs Debian's postgresql package)")
    # Not under pytest's basetemp: the server runs as postgres, which must reach its folder.
    root = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    root.chmod(0o755)
    owner = None
    if os.geteuid() == 0:
        owner = "postgres"
        entry = pwd.getpwnam(owner)
        os.chown(root, entry.pw_uid, entry.pw_gid)
    password = secrets.token_hex(12)
    pwfile = root / "pw"
    pwfile.write_text(password + "\n")
    if owner:
        entry = pwd.getpwnam(owner)
        os.chown(pwfile, entry.pw_uid, entry.pw_gid)
    pwfile.chmod(0o600)
    server = PostgresServer(root=root, port=free_port(), password=password, bin=pg_bin, _owner=owner)
    try:
        server._as_owner([str(pg_bin / "initdb"), "-D", str(server.data), "-U", SUPERUSER, f"--pwfile={pwfile}",
                          "-A", "md5", "-E", "UTF8", "--locale=C.UTF-8", "--no-sync"], timeout=120)
        pwfile.unlink()
        server.start()
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as err:
        log = (root / "log").read_text() if (root / "log").exists() else ""
        detail = getattr(err, "stderr", "") or ""
        server.destroy()
        raise RuntimeError(f"the private PostgreSQL server did not start: {detail.strip()} {log.strip()}") from None
    # Accepting connections can lag pg_ctl -w by a moment on a loaded host.
    deadline = time.monotonic() + 30
    while True:
        try:
            server.psql("SELECT 1")
            break
        except RuntimeError:
            if time.monotonic() > deadline:
                server.destroy()
                raise
            time.sleep(0.2)
    return server
