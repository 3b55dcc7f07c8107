"""A system's own compiler and MPI, offered to the build tools as a site offers external software.

The local one-host Slurm has no gompi/2023b: its toolchain is what the host has (Debian's GCC
and OpenMPI under /usr). ``systems/<name>.yaml`` declares it under ``host_toolchain``::

    host_toolchain:
      easybuild_toolchain: {name: gompi, version: host}
      compiler: {name: gcc, version: "12.2.0", prefix: /usr}
      mpi: {name: openmpi, version: "4.1.4", prefix: /usr}
      runtime_env: {}        # OMPI_MCA_* the MPI's module sets, as a site's module would

From that data, and only from it, a build writes what the tools need: Lmod module files for
EasyBuild (``GCC/12.2.0``, ``OpenMPI/4.1.4-GCC-12.2.0`` and the toolchain module
``gompi/host``, each setting ``EBROOT*``/``EBVERSION*`` as EasyBuild's own modules do) and
Spack's externals (the same prefix and versions). Nothing here is hand-placed: the files are
written at build time into the build's own tree. Before any tool runs, the host is asked what it
really has; a mismatch with the data is one sentence, not a build that silently uses another MPI.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Optional

from mpiregress.errors import InputError
from mpiregress.model import systems

# EasyBuild's software names of the toolchain elements (EasyBuildMNS module names).
EB_NAMES = {"gcc": "GCC", "openmpi": "OpenMPI"}
_VERSION = re.compile(r"^[0-9A-Za-z][0-9A-Za-z._-]*$")
_MCA = re.compile(r"^OMPI_MCA_\w+$")


@dataclass(frozen=True)
class HostToolchain:
    """A system's compiler and MPI as its data declares them."""

    system: str
    eb_name: str                  # EasyBuild toolchain name (gompi)
    eb_version: str               # EasyBuild toolchain version the modules and easyconfig use (host)
    compiler: dict[str, str]      # {name, version, prefix}
    mpi: dict[str, str]           # {name, version, prefix}
    runtime_env: dict[str, str] = field(default_factory=dict)

    @property
    def compiler_module(self) -> str:
        return f"{EB_NAMES[self.compiler['name']]}/{self.compiler['version']}"

    @property
    def mpi_module(self) -> str:
        return f"{EB_NAMES[self.mpi['name']]}/{self.mpi['version']}-{self.compiler_module.replace('/', '-')}"

    @property
    def toolchain_module(self) -> str:
        return f"{self.eb_name}/{self.eb_version}"


def from_system(data: Mapping[str, Any], system: str, path: object = "") -> Optional[HostToolchain]:
    """The ``host_toolchain`` of a system file's data, or None when it has none; InputError names the key."""
    spec = data.get("host_toolchain")
    if spec is None:
        return None
    where = f"system file {path or system}"
    if not isinstance(spec, dict):
        raise InputError(f"{where}: 'host_toolchain' must be a mapping (easybuild_toolchain, compiler, mpi)")
    ebtc = spec.get("easybuild_toolchain") or {}
    if ebtc.get("name") != "gompi" or not _VERSION.match(str(ebtc.get("version", ""))):
        raise InputError(f"{where}: 'host_toolchain.easybuild_toolchain' must be {{name: gompi, version: V}} "
                         f"(the EasyBuild toolchain the host's GCC and OpenMPI form)")
    parts: dict[str, dict[str, str]] = {}
    for key, allowed in (("compiler", ("gcc",)), ("mpi", ("openmpi",))):
        item = spec.get(key) or {}
        name, version, prefix = (str(item.get(k, "")) for k in ("name", "version", "prefix"))
        if name not in allowed or not _VERSION.match(version) or not prefix.startswith("/"):
            raise InputError(f"{where}: 'host_toolchain.{key}' must be {{name: {'|'.join(allowed)}, version: X.Y.Z, "
                             f"prefix: /absolute/path}}, found {dict(item)!r}")
        parts[key] = {"name": name, "version": version, "prefix": prefix}
    env = {str(k): str(v) for k, v in (spec.get("runtime_env") or {}).items()}
    bad = [k for k in env if not _MCA.match(k)]
    if bad:
        raise InputError(f"{where}: 'host_toolchain.runtime_env' holds OpenMPI MCA variables (OMPI_MCA_*) only, "
                         f"found {', '.join(bad)}")
    return HostToolchain(system=system, eb_name="gompi", eb_version=str(ebtc["version"]),
                         compiler=parts["compiler"], mpi=parts["mpi"], runtime_env=env)


@systems.section_check("host_toolchain")
def _check(value: Any, path: Path, key: str) -> None:
    # a wrong host_toolchain is named when the file is read, not mid-build
    from_system({key: value}, path.stem, path)


def for_system(system: Optional[str]) -> Optional[HostToolchain]:
    """The host toolchain of system ``system`` (None for no system or a system without one)."""
    if not system:
        return None
    found = systems.get(system)
    return from_system(found.data, found.name, found.path)


def check_host(host: HostToolchain, compiler: Mapping[str, str], mpi: Mapping[str, str]) -> None:
    """InputError (one sentence) when the compiler/MPI the host really has is not what the data declares."""
    for label, want, got in (("compiler", host.compiler, compiler), ("MPI", host.mpi, mpi)):
        if (got.get("name"), got.get("version")) != (want["name"], want["version"]):
            raise InputError(f"systems/{host.system}.yaml declares the host's {label} as {want['name']} "
                             f"{want['version']} (host_toolchain), but this host has {got.get('name')} "
                             f"{got.get('version')}: correct host_toolchain in systems/{host.system}.yaml")
    for label, want in (("compiler", host.compiler), ("MPI", host.mpi)):
        if not Path(want["prefix"], "bin").is_dir():
            raise InputError(f"systems/{host.system}.yaml declares the host's {label} under {want['prefix']}, "
                             f"which has no bin/ folder on this host: correct host_toolchain.{label.lower()}.prefix")


def _lua(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def lmod_modules(host: HostToolchain) -> dict[str, str]:
    """{relative module file path: Lua text} of the host's compiler, MPI and toolchain modules.

    Each sets what EasyBuild's own module of that software sets and EasyBuild's toolchain code reads
    (``EBROOT<NAME>``, ``EBVERSION<NAME>``); the MPI module also the site's default MCA parameters.
    """
    header = (f"-- Written by mpiregress build from systems/{host.system}.yaml (host_toolchain): the host's own "
              f"software offered to EasyBuild as a site's external module. Regenerated by every build.\n")
    cc, mpi = host.compiler, host.mpi
    cc_var, mpi_var = EB_NAMES[cc["name"]].upper(), EB_NAMES[mpi["name"]].upper()
    compiler = header + f"whatis({_lua('the host compiler ' + cc['name'] + ' ' + cc['version'])})\n"
    compiler += (f"setenv(\"EBROOT{cc_var}\", {_lua(cc['prefix'])})\n"
                 f"setenv(\"EBVERSION{cc_var}\", {_lua(cc['version'])})\n")
    mpi_text = header + f"whatis({_lua('the host MPI ' + mpi['name'] + ' ' + mpi['version'])})\n"
    mpi_text += f"depends_on({_lua(host.compiler_module)})\n"
    mpi_text += (f"setenv(\"EBROOT{mpi_var}\", {_lua(mpi['prefix'])})\n"
                 f"setenv(\"EBVERSION{mpi_var}\", {_lua(mpi['version'])})\n")
    for key, value in sorted(host.runtime_env.items()):
        mpi_text += f"setenv({_lua(key)}, {_lua(value)})\n"
    tc_var = host.eb_name.upper()
    toolchain = header + f"whatis({_lua('toolchain ' + host.toolchain_module + ': the host compiler and MPI')})\n"
    toolchain += (f"depends_on({_lua(host.compiler_module)})\ndepends_on({_lua(host.mpi_module)})\n"
                  f"setenv(\"EBROOT{tc_var}\", {_lua(mpi['prefix'])})\n"
                  f"setenv(\"EBVERSION{tc_var}\", {_lua(host.eb_version)})\n")
    return {f"{host.compiler_module}.lua": compiler, f"{host.mpi_module}.lua": mpi_text,
            f"{host.toolchain_module}.lua": toolchain}


def write_lmod_modules(host: HostToolchain, directory: Path) -> list[Path]:
    """Write :func:`lmod_modules` under ``directory`` (a MODULEPATH entry); the files written."""
    written = []
    for rel, text in lmod_modules(host).items():
        path = Path(directory) / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        written.append(path)
    return written


def easyconfig_at(text: str, host: HostToolchain, official_toolchain: Mapping[str, str]) -> str:
    """The easyconfig ``text`` with its toolchain line moved to the host toolchain's version.

    Only the version changes (``{'name': 'gompi', 'version': '2023b'}`` -> ``'host'``): every other
    line is the project's, so what is built is the project's easyconfig, not a look-alike.
    """
    old = f"toolchain = {{'name': '{official_toolchain['name']}', 'version': '{official_toolchain['version']}'}}"
    if old not in text:
        raise InputError(f"the project's easyconfig has no line {old!r} to move to the host toolchain "
                         f"{host.toolchain_module}: run 'mpiregress lint'")
    return text.replace(old, f"toolchain = {{'name': '{host.eb_name}', 'version': '{host.eb_version}'}}")
