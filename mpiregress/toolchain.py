"""The toolchain file (``toolchains/<generation>.yaml``): load, validate, answer questions."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import inputs, microarch
from .errors import InputError

SCHEMA = "mpiregress-toolchain/1"


@dataclass(frozen=True)
class PartitionSpec:
    """A cluster partition as the toolchain sees it: what to build for it and how to land on it."""

    system: str
    partition: str
    target: str
    constraint: str
    eessi_subdir: str


@dataclass
class Toolchain:
    path: Path
    data: dict[str, Any]

    @property
    def name(self) -> str:
        return str(self.data["name"])

    @property
    def compiler(self) -> dict[str, str]:
        return self.data["compiler"]

    @property
    def mpi(self) -> dict[str, Any]:
        return self.data["mpi"]

    @property
    def osu(self) -> dict[str, str]:
        return self.data["osu"]

    @property
    def eessi(self) -> dict[str, str]:
        return self.data["eessi"]

    def partitions(self) -> list[PartitionSpec]:
        return [
            PartitionSpec(system, name, spec["target"], spec.get("constraint", ""), spec.get("eessi_subdir", ""))
            for system, parts in self.data["partitions"].items()
            for name, spec in parts.items()
        ]

    def partition(self, system: str, partition: str) -> PartitionSpec:
        for spec in self.partitions():
            if (spec.system, spec.partition) == (system, partition):
                return spec
        known = ", ".join(f"{p.system}:{p.partition}" for p in self.partitions())
        raise InputError(f"toolchain {self.path}: no partition {system}:{partition} (known: {known})")


def load(path: Path) -> Toolchain:
    """Load ``path`` and check the fields every consumer relies on; errors name file and key."""
    path = Path(path)
    data = inputs.read_yaml(path, "toolchain file", expect=None)
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise InputError(f"toolchain file {path}: 'schema' must be '{SCHEMA}'")
    for key in ("compiler.name", "compiler.version", "mpi.name", "mpi.version", "osu.version",
                "osu.sha256", "osu.tarball", "eessi.version", "eessi.module", "partitions"):
        node: Any = data
        for part in key.split("."):
            node = node.get(part) if isinstance(node, dict) else None
        if node in (None, "", {}):
            raise InputError(f"toolchain file {path}: '{key}' is missing")
    for key in ("compiler", "mpi", "osu", "eessi", "partitions"):
        if not isinstance(data[key], dict):
            raise InputError(f"toolchain file {path}: '{key}' must be a mapping, found {type(data[key]).__name__}")
    for system, parts in data["partitions"].items():
        if not isinstance(parts, dict) or not all(
                isinstance(spec, dict) and isinstance(spec.get("target"), str) for spec in parts.values()):
            raise InputError(f"toolchain file {path}: 'partitions.{system}' must map each partition to a "
                             "mapping with a 'target'")
    toolchain = Toolchain(path, data)
    for spec in toolchain.partitions():
        microarch.lookup(spec.target)
    return toolchain


def default_path() -> Path:
    from .paths import toolchains_dir

    return toolchains_dir() / "2023b.yaml"
