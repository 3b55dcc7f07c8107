"""The ``spack`` build method: concretize and install ``spack-envs/<cluster>-<target>``.

The environment pins the target (``packages:all:require``), the compiler and the
OpenMPI variants; ``mpiregress lint`` keeps it in line with the toolchain file. The
build works on a copy of the environment (the repository never gets a spack.lock)
with an install tree per target, and the manifest is written from what Spack
recorded in ``<prefix>/.spack/spec.json``: the concrete target, compiler, MPI and
hash, not from what was asked.

Spack cannot be installed on the project's development machines: there,
``build`` raises NotAvailableError (exit 4, skipped) and nothing is faked.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any, Mapping, Optional

import yaml

from .. import manifest as manifest_mod
from .. import microarch, toolchain
from ..errors import InputError
from ..manifest import Manifest
from ..paths import REPO_ROOT
from . import BuildOptions, common

METHOD = "spack"
BIN_SUBDIR = common.BIN_SUBDIR
BUILDCACHE_VAR = "MPIREGRESS_SPACK_BUILDCACHE"
SPEC_FILE = Path(".spack") / "spec.json"
MPI_PACKAGES = ("openmpi", "mpich", "mvapich2", "mvapich", "intel-oneapi-mpi", "cray-mpich")


_say = common.say


def require_spack() -> str:
    """Path of the ``spack`` command, or NotAvailableError (exit 4) naming what is missing."""
    return common.require_command("spack", "Spack", "source share/spack/setup-env.sh of a Spack installation first")


def check_version(version_output: str, tc: toolchain.Toolchain) -> str:
    """The Spack version from ``spack --version``; InputError when it is not one the environments support."""
    found = re.search(r"(\d+)\.(\d+)(?:\.\d+)?", version_output)
    if not found:
        raise InputError(f"cannot tell the Spack version from 'spack --version': {version_output.strip()!r}")
    series = f"{found.group(1)}.{found.group(2)}"
    if series not in tc.spack_versions:
        raise InputError(f"Spack {found.group(0)} is not supported by toolchain {tc.name} (spack.versions: "
                         f"{', '.join(tc.spack_versions)} in {tc.path}): use one of those")
    return found.group(0)


def check_buildcache(env: Mapping[str, str]) -> str:
    """The build cache the environments' mirror names; InputError when it is unset or relative (no default)."""
    value = env.get(BUILDCACHE_VAR, "")
    if not value or not (value.startswith("/") or "://" in value):
        raise InputError(f"{BUILDCACHE_VAR} must name the Spack build cache (an absolute path or a URL), found "
                         f"{value or 'nothing'}: the environments' buildcache-destination mirror has no default")
    return value


def copy_environment(source_env: Path, env_dir: Path) -> None:
    """Copy ``spack.yaml`` and the files it includes, keeping their relative places (no spack.lock)."""
    env_dir.mkdir(parents=True, exist_ok=True)
    shutil.copy2(source_env / "spack.yaml", env_dir / "spack.yaml")
    data = yaml.safe_load((source_env / "spack.yaml").read_text()) or {}
    for include in (data.get("spack") or {}).get("include") or []:
        src = (source_env / str(include)).resolve()
        if not src.is_file():
            raise InputError(f"{source_env / 'spack.yaml'} includes {include}, which does not exist")
        dest = (env_dir / str(include)).resolve()
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dest)


def stack_from_spec(nodes: list, tc: toolchain.Toolchain) -> dict[str, dict[str, Any]]:
    """The toolchain's stack components as Spack concretized them: version and, for UCX, its transports."""
    stack: dict[str, dict[str, Any]] = {}
    for name, component in tc.stack.items():
        node = next((n for n in nodes if n.get("name") == component.get("spack", name)), None)
        if node is None:
            continue
        entry: dict[str, Any] = {"version": _version(node.get("version", "")), "hash": str(node.get("hash", "")),
                                 "from": "spec.json"}
        wanted = tc.transports.get(name)
        if wanted:
            params = node.get("parameters") or {}
            entry["transports"] = sorted(t for t in wanted if params.get(t) is True)
        stack[name] = entry
    return stack


def environment_for(options: BuildOptions, tc: toolchain.Toolchain, root: Path = REPO_ROOT) -> Path:
    """The Spack environment folder to build: ``options.spack_env``, else the one of the partition/target."""
    if options.spack_env is not None:
        env = Path(options.spack_env)
        if not (env / "spack.yaml").is_file():
            raise InputError(f"Spack environment {env} has no spack.yaml")
        return env
    candidates = []
    for part in tc.partitions():
        if options.system and options.system != part.system:
            continue
        if options.partition and options.partition != part.partition:
            continue
        if part.target != options.target:
            continue
        candidates += [root / "spack-envs" / f"{part.system}-{part.partition}",
                       root / "spack-envs" / f"{part.system}-{part.target}"]
    for env in candidates:
        if (env / "spack.yaml").is_file():
            return env
    known = ", ".join(sorted(p.parent.name for p in (root / "spack-envs").glob("*/spack.yaml"))) or "none"
    raise InputError(f"no Spack environment builds target {options.target}"
                     f"{f' for {options.system}' if options.system else ''} (spack-envs/: {known}); "
                     f"pass --system/--partition or --env")


def _spack(base: list[str], *args: str, log: Path, step: str) -> None:
    common.run_logged([*base, *args], step=step, cwd=log.parent, log=log)


def _spack_output(base: list[str], *args: str) -> str:
    proc = subprocess.run([*base, *args], stdin=subprocess.DEVNULL, capture_output=True, text=True)
    if proc.returncode != 0:
        raise common.BuildError(f"'{' '.join([*base, *args])}' failed: {proc.stderr.strip()[-1500:]}")
    return proc.stdout


# --- spec.json -> manifest ---------------------------------------------------------------------

def _version(value: Any) -> str:
    # Concrete versions may be written "=13.2.0" (Spack >= 0.20 distinguishes exact versions).
    return str(value).lstrip("=")


def _target_name(node: Mapping[str, Any]) -> str:
    target = (node.get("arch") or {}).get("target")
    return str(target.get("name") if isinstance(target, dict) else target or "")


def _dependencies(node: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Dependency edges of a node as [{name, hash, deptypes, virtuals}] across spec file formats."""
    deps = node.get("dependencies") or []
    if isinstance(deps, dict):   # specfile v1/v2: {name: {hash, type}}
        return [{"name": n, "hash": d.get("hash", ""), "deptypes": d.get("type", []), "virtuals": []}
                for n, d in deps.items()]
    out = []
    for dep in deps:
        params = dep.get("parameters") or {}
        out.append({"name": dep.get("name", ""), "hash": dep.get("hash", ""),
                    "deptypes": params.get("deptypes", dep.get("type", [])),
                    "virtuals": params.get("virtuals", [])})
    return out


def manifest_from_spec(data: Mapping[str, Any], prefix: str, tc: toolchain.Toolchain, *,
                       env_name: str = "", system: Optional[str] = None,
                       partition: Optional[str] = None) -> Manifest:
    """The manifest of a Spack installation from its ``.spack/spec.json`` (a pure function).

    Handles specfile format 4 (Spack 0.20-0.23: ``compiler`` on each node) and 5
    (Spack 1.x: the compiler is a build dependency providing ``c``).
    """
    spec = data.get("spec") if isinstance(data, Mapping) else None
    nodes = spec.get("nodes") if isinstance(spec, Mapping) else None
    if not isinstance(nodes, list) or not nodes:
        raise InputError("spec.json has no spec.nodes list: not a Spack spec file")
    osu_name = tc.osu.get("name", "osu-micro-benchmarks")
    root = next((n for n in nodes if n.get("name") == osu_name), None)
    if root is None:
        raise InputError(f"spec.json describes {nodes[0].get('name')!r}, not {osu_name}")
    by_hash = {n.get("hash"): n for n in nodes}
    deps = _dependencies(root)

    if isinstance(root.get("compiler"), Mapping):
        compiler = {"name": str(root["compiler"].get("name", "")),
                    "version": _version(root["compiler"].get("version", ""))}
    else:
        edge = next((d for d in deps if "c" in d["virtuals"]), None)
        cnode = by_hash.get(edge["hash"]) if edge else None
        compiler = {"name": str(cnode.get("name")), "version": _version(cnode.get("version"))} if cnode else {}

    mpi_edge = next((d for d in deps if "mpi" in d["virtuals"]), None) or \
        next((d for d in deps if d["name"] in MPI_PACKAGES), None)
    mpi_node = by_hash.get(mpi_edge["hash"]) if mpi_edge else None
    mpi = {"name": str(mpi_node.get("name")), "version": _version(mpi_node.get("version"))} if mpi_node else {}

    target = _target_name(root)
    microarch.lookup(target)
    try:
        flags = common.target_flags(target, compiler) if compiler else ""
    except InputError:
        flags = ""
    version = _version(root.get("version", ""))
    stack = stack_from_spec(nodes, tc)
    notes = common.toolchain_notes(tc, compiler, mpi)
    notes += [f"MPI stack differs from toolchain {tc.name}: {p}"
              for p in common.stack_problems(stack, tc, complete=True)]
    if version != str(tc.osu["version"]):
        notes.append(f"Spack built OSU {version}, the toolchain {tc.name} says {tc.osu['version']}")
    mpi_params = (mpi_node or {}).get("parameters") or {}
    arch = root.get("arch") or {}
    return Manifest(
        method=METHOD, toolchain=tc.name, osu_version=version, target=target, prefix=str(prefix),
        bin_dir=str(Path(prefix) / BIN_SUBDIR),
        # Spack's compiler wrapper adds archspec's flags for the spec's target and compiler.
        flags=flags,
        # Spack checks the tarball against its package's sha256 (7.2: the official one) before building.
        sha256=str(tc.osu["sha256"]), sha256_official=True,
        compiler=compiler, mpi=mpi,
        env={"setup": [], "modules": [], "env_vars": tc.runtime_env},
        extra={"spack_hash": str(root.get("hash", "")), "spack_env": env_name,
               "specfile_version": (spec.get("_meta") or {}).get("version") if isinstance(spec, Mapping) else None,
               "platform": str(arch.get("platform", "")), "platform_os": str(arch.get("platform_os", "")),
               "mpi_hash": str((mpi_node or {}).get("hash", "")),
               "mpi_variants": {k: v for k, v in mpi_params.items()
                                if k in ("fabrics", "schedulers", "internal-pmix", "legacylaunchers", "pmi")},
               "system": system, "partition": partition},
        notes=notes, stack=stack,
    )


# --- the build --------------------------------------------------------------------------------

def build(options: BuildOptions) -> Manifest:
    """Concretize and install the partition's Spack environment; write and return the manifest.

    NotAvailableError (exit 4) when ``spack`` is not on PATH.
    """
    spack = require_spack()
    tc = toolchain.load(options.toolchain_file)
    version = check_version(_spack_output([spack], "--version"), tc)
    check_buildcache(os.environ)
    target = microarch.lookup(options.target).name
    source_env = environment_for(options, tc)
    workdir = Path(options.install_root) / METHOD / target
    env_dir = workdir / "env" / source_env.name
    # Work on a copy: concretizing writes spack.lock and .spack-env/ next to spack.yaml.
    copy_environment(source_env, env_dir)
    base = [spack, "-e", str(env_dir), "-c", f"config:install_tree:root:{(workdir / 'opt').resolve()}"]
    log = workdir / "spack.log"
    _say(f"spack environment {source_env} -> {env_dir} (log: {log})")
    _spack(base, "concretize", "-f", log=log, step="spack concretize")
    _spack(base, "install", "--fail-fast", "-j", str(max(1, int(options.jobs))), log=log, step="spack install")
    prefix = _spack_output(base, "location", "--install-dir", str(tc.osu["name"])).strip().splitlines()[-1]
    spec_file = Path(prefix) / SPEC_FILE
    try:
        data = json.loads(spec_file.read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise common.BuildError(f"cannot read Spack's record {spec_file}: {err}") from None
    manifest = manifest_from_spec(data, prefix, tc, env_name=source_env.name,
                                  system=options.system, partition=options.partition)
    if manifest.target != target:
        raise common.BuildError(f"Spack concretized {tc.osu['name']} for target {manifest.target}, not {target}: "
                                f"check packages:all:require in {source_env / 'spack.yaml'}")
    manifest.build_host = manifest_mod.host_record()   # the machine that ran spack install
    manifest.extra["build_log"] = str(log)
    manifest.extra["spack_env_dir"] = str(env_dir)
    manifest.extra["spack_version"] = version
    # The project's programs, with the MPI Spack just installed in this environment.
    load = f'eval "$({spack} -e {env_dir} load --sh {tc.mpi["name"]})"'
    manifest.programs = common.build_programs(method=METHOD, target=target, cflags=f"-O2 {manifest.flags}".strip(),
                                              setup=[load], install_root=options.install_root, log=log)
    return common.record(manifest, options.manifest_dir, "spack install finished", log)
