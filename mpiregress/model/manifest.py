"""Build manifests: the one place a check learns where a binary is and what it was built for.

A manifest is a JSON file written by ``mpiregress build`` (any method). Checks
never hard-code a path: they read manifests, pick the build compatible with the
partition's nodes, and take its binary folder and environment from here.
"""
from __future__ import annotations

import datetime as _dt
import json
import os
import socket
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Optional

import archspec.cpu

from mpiregress.errors import InputError
from mpiregress.model import inputs, microarch
from mpiregress.model.names import METHODS

SCHEMA = "mpiregress-manifest/1"
# Where OSU 7.2 installs its benchmarks under a prefix, whichever method built it.
BIN_SUBDIR = Path("libexec") / "osu-micro-benchmarks" / "mpi"
_REQUIRED = ("method", "toolchain", "osu_version", "target", "prefix", "bin_dir")


@dataclass
class Manifest:
    """What one build produced. ``bin_dir`` holds pt2pt/, collective/, ... as OSU installs them."""

    method: str
    toolchain: str
    osu_version: str
    target: str                       # archspec name the binary was compiled for
    prefix: str
    bin_dir: str                      # e.g. <prefix>/libexec/osu-micro-benchmarks/mpi
    flags: str = ""                   # the target flags actually used (-march=...)
    sha256: str = ""
    sha256_official: bool = True      # False when a site tarball was accepted by override
    compiler: dict[str, str] = field(default_factory=dict)   # {"name": "gcc", "version": "13.2.0"}
    mpi: dict[str, str] = field(default_factory=dict)        # {"name": "openmpi", "version": "4.1.6"}
    build_host: dict[str, str] = field(default_factory=dict) # {"hostname", "target", "model"}
    # {"setup": [shell lines], "modules": [...], "env_vars": {...}}
    env: dict[str, Any] = field(default_factory=dict)
    # method-specific records (spack hash, eb log, EESSI subdir)
    extra: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    # The MPI stack under OpenMPI as this build really has it: {"ucx": {"version": "1.15.0",
    # "transports": [...], "from": "eb --dry-run --robot"}, "pmix": {...}, ...}
    stack: dict[str, dict[str, Any]] = field(default_factory=dict)
    # The project's own MPI programs built with it (checks/src/<name>/): {"linktest": "<path>"}
    programs: dict[str, str] = field(default_factory=dict)
    created: str = ""
    schema: str = SCHEMA
    path: Optional[str] = None        # where it was read from; not written

    def binary(self, benchmark: str, kind: str = "pt2pt") -> Path:
        """Path of an OSU benchmark binary, e.g. ``binary('osu_latency')``."""
        return Path(self.bin_dir) / kind / benchmark

    def program(self, name: str) -> Path:
        """Path of one of the project's programs (``checks/src/<name>``) built with this build."""
        if name not in self.programs:
            raise InputError(f"manifest {self.path or self.method + '-' + self.target}: no program {name!r} "
                             f"(built: {', '.join(self.programs) or 'none'}); rebuild with 'mpiregress build'")
        return Path(self.programs[name])

    def to_json(self) -> str:
        data = asdict(self)
        data.pop("path")
        return json.dumps(data, indent=2, sort_keys=True) + "\n"


def host_record() -> dict[str, str]:
    """The build host as archspec sees it (name, vendor, model)."""

    host = archspec.cpu.host()
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"hostname": socket.gethostname(), "target": host.name, "vendor": host.vendor, "model": model}


def write(manifest: Manifest, directory: Path) -> Path:
    """Write ``manifest`` as ``<method>-<target>.json`` in ``directory`` and return the path."""
    if not manifest.created:
        manifest.created = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{manifest.method}-{manifest.target}.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(manifest.to_json())
    os.replace(tmp, path)
    return path


def read(path: Path) -> Manifest:
    """Read and validate one manifest; an InputError names the file and the field."""
    data = inputs.read_json(path, "manifest")
    if not isinstance(data, dict):
        raise InputError(f"manifest {path} must hold a JSON object")
    if data.get("schema") != SCHEMA:
        raise InputError(f"manifest {path}: 'schema' must be '{SCHEMA}', found {data.get('schema')!r}")
    for key in _REQUIRED:
        if not isinstance(data.get(key), str) or not data[key]:
            raise InputError(f"manifest {path}: '{key}' is missing or empty")
    if data["method"] not in METHODS:
        raise InputError(f"manifest {path}: 'method' is {data['method']!r}, expected one of {', '.join(METHODS)}")
    microarch.lookup(data["target"])
    known = set(Manifest.__dataclass_fields__) - {"path"}
    unknown = sorted(set(data) - known)
    if unknown:
        raise InputError(f"manifest {path}: unknown field(s) {', '.join(unknown)}")
    return Manifest(**data, path=str(path))


def find(directory: Path, method: str) -> list[Manifest]:
    """All manifests of ``method`` in ``directory`` (sorted by file name)."""
    if not directory.is_dir():
        return []
    return [m for m in (read(p) for p in sorted(directory.glob(f"{method}-*.json"))) if m.method == method]


def of_system(manifests: list[Manifest], system: str) -> list[Manifest]:
    """The manifests built for ``system`` (or recording none): a build of another system is linked against
    that system's MPI and modules, even where the CPU targets agree (the local system and Aion: zen2)."""
    return [m for m in manifests if m.extra.get("system") in (None, "", system)]


def find_all(directory: Path) -> list[Manifest]:
    """Every manifest in ``directory``, whatever its method."""
    if not Path(directory).is_dir():
        return []
    return [read(p) for p in sorted(Path(directory).glob("*.json"))]
