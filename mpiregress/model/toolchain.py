"""The toolchain file (``toolchains/<generation>.yaml``): load, validate, answer questions."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mpiregress.errors import InputError
from mpiregress.model import inputs, systems
from mpiregress.paths import REPO_ROOT, toolchains_dir

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

    @property
    def stack(self) -> dict[str, dict[str, str]]:
        """The MPI stack under OpenMPI: {component: {version, easybuild, spack}}."""
        return dict(self.data.get("stack") or {})

    @property
    def transports(self) -> dict[str, dict[str, Any]]:
        """Required (true) and forbidden (false) transports, per component (``ucx``, ``pmix``)."""
        return dict(self.data.get("transports") or {})

    @property
    def variants(self) -> dict[str, dict[str, Any]]:
        """Build variants beyond versions, per component (``hwloc: {pci: true}``): Spack variant names."""
        return dict(self.data.get("variants") or {})

    @property
    def providers(self) -> dict[str, dict[str, bool]]:
        """Providers built (true) or absent (false), per component (``libfabric``: Spack's ``fabrics``)."""
        return {str(k): {str(p): bool(w) for p, w in (v or {}).items()}
                for k, v in (self.data.get("providers") or {}).items()}

    @property
    def runtime_env(self) -> dict[str, str]:
        """Variables the toolchain's MPI runs with (``mpi.runtime_env``: MCA settings such as an
        OpenMPI module's ``setenv OMPI_MCA_*``). Part of the toolchain, so every build method records
        them in its manifest's ``env.env_vars`` and a toolchain MR that changes them changes B."""
        return {str(k): str(v) for k, v in (self.mpi.get("runtime_env") or {}).items()}

    @property
    def spack_versions(self) -> list[str]:
        """Spack release series (``0.23``, ``1.1``) the Spack environments are written for."""
        return [str(v) for v in (self.data.get("spack") or {}).get("versions") or []]

    def partitions(self) -> list[PartitionSpec]:
        """Every cluster partition with a fixed build target, from the systems data (systems/*.yaml)."""

        return [PartitionSpec(p.system, p.name, p.target, p.constraint, p.eessi_subdir)
                for system in systems.load_all(self.root) for p in system.partitions if p.target]

    @property
    def root(self) -> Path:
        """The checkout this toolchain file belongs to (``<root>/toolchains/<name>.yaml``), whose
        systems/ it pairs with; the installed checkout for a toolchain file elsewhere."""

        candidate = self.path.resolve().parent.parent
        return candidate if (candidate / "systems").is_dir() else REPO_ROOT

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
                "osu.sha256", "osu.tarball", "eessi.version", "eessi.module", "stack", "transports",
                "spack.versions"):
        node: Any = data
        for part in key.split("."):
            node = node.get(part) if isinstance(node, dict) else None
        if node in (None, "", {}):
            raise InputError(f"toolchain file {path}: '{key}' is missing")
    for key in ("compiler", "mpi", "osu", "eessi", "stack", "transports", "spack"):
        if not isinstance(data[key], dict):
            raise InputError(f"toolchain file {path}: '{key}' must be a mapping, found {type(data[key]).__name__}")
    if "partitions" in data:
        raise InputError(f"toolchain file {path}: 'partitions' moved to the systems data (systems/<name>.yaml)")
    runtime_env = data["mpi"].get("runtime_env") or {}
    if not isinstance(runtime_env, dict) or not all(isinstance(k, str) and isinstance(v, (str, int, float))
                                                     for k, v in runtime_env.items()):
        raise InputError(f"toolchain file {path}: 'mpi.runtime_env' must map variable names to values")
    for name, component in data["stack"].items():
        if not isinstance(component, dict) or not component.get("version"):
            raise InputError(f"toolchain file {path}: 'stack.{name}.version' is missing")
    return Toolchain(path, data)


def default_path() -> Path:

    return toolchains_dir() / "2023b.yaml"
