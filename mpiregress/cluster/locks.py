"""Advisory locks that say who holds them: one run per report folder, one run per local cluster.

An flock is dropped by the kernel when its holder dies, so a crashed run never leaves a
stale lock; the file keeps the holder's description for the next caller's sentence.
"""
from __future__ import annotations

import fcntl
import os
from pathlib import Path
from typing import Callable

from mpiregress.errors import InfrastructureError


def hold(path: Path, holder: str, busy: Callable[[str], str]) -> int:
    """Take ``path``'s lock without waiting and write ``holder`` into it; return the descriptor to close.

    When another process holds it, raise InfrastructureError with ``busy(what the holder wrote)``.
    OSError from opening the file is the caller's to turn into its own sentence.
    """
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        other = os.pread(fd, 300, 0).decode(errors="replace").strip() or "another process"
        os.close(fd)
        raise InfrastructureError(busy(other)) from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{holder}\n".encode(), 0)
    return fd
