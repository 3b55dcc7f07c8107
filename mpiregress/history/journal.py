"""Which SQLite journal the history file may use, from the file system it lives on.

WAL needs shared memory between every process that opens the file, which only a
local file system gives: on NFS, Lustre, GPFS and the like two CI jobs on two hosts
would each see their own WAL index and corrupt the file. There the history uses
SQLite's rollback journal, which relies on POSIX (fcntl) locks, and a file system
that cannot lock is refused with one sentence rather than corrupted silently.
"""
from __future__ import annotations

import fcntl
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from mpiregress.errors import InputError

# File system types (as /proc/self/mounts names them) shared between hosts.
NETWORK_FILE_SYSTEMS = frozenset({
    "nfs", "nfs4", "cifs", "smb3", "smbfs", "lustre", "gpfs", "beegfs", "ceph", "cephfs", "glusterfs",
    "fuse.glusterfs", "fuse.sshfs", "fuse.cephfs", "9p", "afs", "ocfs2", "gfs2", "pvfs2", "orangefs",
    "fuse.beegfs", "fuse.juicefs", "virtiofs",
})


@dataclass(frozen=True)
class Journal:
    """The journal mode chosen for a history file and why."""

    mode: str          # "wal" or "delete" (SQLite's rollback journal)
    fs_type: str
    mount_point: str

    def sentence(self) -> str:
        where = "a network file system" if self.fs_type in NETWORK_FILE_SYSTEMS else "a local disk"
        how = ("WAL (readers never wait for an import)" if self.mode == "wal"
               else "rollback journal with POSIX locks (WAL is unsafe across hosts)")
        return f"journal mode {self.mode}: {how}; the file is on {where} ({self.fs_type} at {self.mount_point})"


def file_system(path: Path, mounts: Optional[str] = None) -> tuple[str, str]:
    """(type, mount point) of the file system holding ``path``; ``mounts`` is /proc/self/mounts' text."""
    if mounts is None:
        try:
            mounts = Path("/proc/self/mounts").read_text()
        except OSError:
            return "unknown", "/"
    target = str(Path(path).resolve())
    best = ("unknown", "/")
    for line in mounts.splitlines():
        fields = line.split()
        if len(fields) < 3:
            continue
        point = fields[1].replace("\\040", " ")
        inside = target == point or target.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= len(best[1]) or (inside and best[0] == "unknown"):
            best = (fields[2], point)
    return best


def _can_lock(folder: Path) -> Optional[str]:
    """None when POSIX locks work in ``folder``, else the system's reason."""
    try:
        fd, name = tempfile.mkstemp(prefix=".mpiregress-lock-probe-", dir=folder)
    except OSError as err:
        return err.strerror or str(err)
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        fcntl.lockf(fd, fcntl.LOCK_UN)
        return None
    except OSError as err:
        return err.strerror or str(err)
    finally:
        os.close(fd)
        os.unlink(name)


def choose(path: Path, mounts: Optional[str] = None) -> Journal:
    """The journal for the history file at ``path``; InputError when its file system cannot lock."""
    folder = Path(path).resolve().parent
    fs_type, point = file_system(folder, mounts)
    if fs_type not in NETWORK_FILE_SYSTEMS:
        return Journal("wal", fs_type, point)
    problem = _can_lock(folder) if folder.exists() else None
    if problem:
        raise InputError(f"history file {path} is on {fs_type} ({point}), where file locking does not work "
                         f"({problem}): concurrent imports would corrupt it; put it on a file system with "
                         f"locking (--db or MPIREGRESS_HISTORY_DB)")
    return Journal("delete", fs_type, point)
