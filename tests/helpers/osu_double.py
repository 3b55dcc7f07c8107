"""Package the OSU test double (``tests/osu_double/``) like the OSU 7.2 release tarball."""
from __future__ import annotations

import gzip
import hashlib
import io
import tarfile
from pathlib import Path

DOUBLE_DIR = Path(__file__).resolve().parent.parent / "osu_double"
TARBALL_NAME = "osu-micro-benchmarks-7.2.tar.gz"
TOP_DIR = "osu-micro-benchmarks-7.2"
_EXECUTABLES = {"configure"}
# A fixed time (OSU 7.2 release month) keeps the archive reproducible and make happy.
_MTIME = 1688169600


def _members() -> list[Path]:
    # Only the source files: skip anything a manual build left in the folder.
    return sorted(p for p in DOUBLE_DIR.rglob("*")
                  if p.is_file() and "__pycache__" not in p.parts and p.suffix not in (".o", ".pyc"))


def make_tarball(mirror_dir: Path) -> tuple[Path, str]:
    """Write ``osu-micro-benchmarks-7.2.tar.gz`` of the double into ``mirror_dir``; return (path, sha256).

    The archive is reproducible (fixed owner, mode and times; gzip without a
    timestamp), so every call yields the same sha256 for the same sources.
    """
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        directories: set[str] = set()
        for path in _members():
            rel = path.relative_to(DOUBLE_DIR)
            for depth in range(len(rel.parts)):
                name = "/".join((TOP_DIR,) + rel.parts[:depth])
                if name not in directories:
                    directories.add(name)
                    info = tarfile.TarInfo(name)
                    info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, _MTIME
                    tar.addfile(info)
            info = tarfile.TarInfo(f"{TOP_DIR}/{rel.as_posix()}")
            data = path.read_bytes()
            info.size, info.mtime = len(data), _MTIME
            info.mode = 0o755 if rel.name in _EXECUTABLES else 0o644
            tar.addfile(info, io.BytesIO(data))
    compressed = io.BytesIO()
    with gzip.GzipFile(fileobj=compressed, mode="wb", mtime=0, filename="") as gz:
        gz.write(buffer.getvalue())
    mirror_dir = Path(mirror_dir)
    mirror_dir.mkdir(parents=True, exist_ok=True)
    target = mirror_dir / TARBALL_NAME
    target.write_bytes(compressed.getvalue())
    return target, hashlib.sha256(compressed.getvalue()).hexdigest()
