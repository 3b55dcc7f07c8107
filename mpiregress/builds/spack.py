"""The ``spack`` build method: concretize and install ``spack-envs/<cluster>-<target>``.

The environment pins the target (``packages:all:require``), the compiler and the
OpenMPI variants; ``mpiregress lint`` keeps it in line with the toolchain file. The
build works on a copy of the environment (the repository never gets a spack.lock)
with an install tree per target, and the manifest is written from what Spack
recorded in ``<prefix>/.spack/spec.json``: the concrete target, compiler, MPI and
hash, not from what was asked.

OSU's tarball comes from the same source-mirror option as the source method
(``--source-mirror`` / ``OSU_SOURCE_MIRROR``): it is placed in a file mirror at Spack's own
layout, ``_source-cache/archive/<sha256[:2]>/<sha256>.tar.gz`` keyed by the sha256 Spack's
package records (a ``<package>/<file>`` layout is not searched), so compute nodes without
internet never fetch. A site tarball accepted by ``--sha256`` is installed with
``--no-checksum`` and the manifest records the override, as the source method does.

On a system whose data declares a ``host_toolchain`` (the local one) the environment is
written at build time from that data: the host's gcc as Spack's compiler and its OpenMPI as a
non-buildable external (the same facts EasyBuild's module files are written from).

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

from mpiregress.builds import BuildOptions, common, host_toolchain
from mpiregress.errors import InputError
from mpiregress.model import manifest as manifest_mod
from mpiregress.model import microarch, toolchain
from mpiregress.model.manifest import Manifest
from mpiregress.paths import REPO_ROOT

METHOD = "spack"
BIN_SUBDIR = common.BIN_SUBDIR
BUILDCACHE_VAR = "MPIREGRESS_SPACK_BUILDCACHE"
SPEC_FILE = Path(".spack") / "spec.json"
MPI_PACKAGES = ("openmpi", "mpich", "mvapich2", "mvapich", "intel-oneapi-mpi", "cray-mpich")
# Build tools a host-toolchain build takes from the host (spack external find) instead of fetching.
HOST_BUILD_TOOLS = ("gmake",)
# The mirror the build adds to its environment copy for OSU's tarball.
SOURCE_MIRROR_NAME = "mpiregress-osu-source"


_say = common.say


def require_spack() -> str:
    """Path of the ``spack`` command, or NotAvailableError (exit 4) naming what is missing."""
    return common.require_command("spack", "Spack", "source share/spack/setup-env.sh of a Spack installation first")


# What builds.unavailable_reason asks: can this machine build with this method at all.
require_tools = require_spack


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


# --- OSU's tarball in a mirror at Spack's layout -------------------------------------------------

def mirror_path(sha256: str, suffix: str = ".tar.gz") -> Path:
    """Where Spack looks for an archive in a mirror: ``_source-cache/archive/<sha[:2]>/<sha>.tar.gz``."""
    sha256 = sha256.lower()
    if not re.fullmatch(r"[0-9a-f]{64}", sha256):
        raise InputError(f"not a sha256: {sha256!r}")
    return Path("_source-cache") / "archive" / sha256[:2] / f"{sha256}{suffix}"


def place_in_mirror(tarball: Path, mirror: Path, package_sha256: str) -> Path:
    """Copy ``tarball`` into the file mirror ``mirror`` where Spack looks for the archive whose sha256
    its package records (``package_sha256``: the toolchain's osu.sha256, the one Spack's package has)."""
    target = Path(mirror) / mirror_path(package_sha256)
    target.parent.mkdir(parents=True, exist_ok=True)
    if not target.is_file() or common.sha256_of(target) != common.sha256_of(tarball):
        shutil.copyfile(tarball, target)
    return target


def add_mirror(env_dir: Path, mirror: Path) -> None:
    """Add the file mirror to the environment copy's spack.yaml (the repository's stays untouched)."""
    path = Path(env_dir) / "spack.yaml"
    data = yaml.safe_load(path.read_text()) or {}
    spack = data.setdefault("spack", {})
    mirrors = spack.get("mirrors") or {}
    mirrors[SOURCE_MIRROR_NAME] = f"file://{Path(mirror).resolve()}"
    spack["mirrors"] = mirrors
    path.write_text(yaml.safe_dump(data, sort_keys=False))


# --- the local environment, written from the host toolchain ------------------------------------

def host_environment(host: host_toolchain.HostToolchain, tc: toolchain.Toolchain, target: str,
                     spack_version: str) -> dict[str, Any]:
    """The Spack environment (spack.yaml data) of a system with a host toolchain: OSU for ``target`` with
    the host's gcc as the compiler and its OpenMPI as a non-buildable external, all from the data.

    Spack 0.2x reads compilers from ``compilers:``; Spack 1.x takes the compiler as an external package.
    """
    cc, mpi = host.compiler, host.mpi
    bindir = Path(cc["prefix"]) / "bin"
    paths = {"cc": str(bindir / "gcc"), "cxx": str(bindir / "g++")}
    packages: dict[str, Any] = {
        "all": {"require": [f"target={target}"]},
        "mpi": {"require": [mpi["name"]]},
        mpi["name"]: {"buildable": False, "externals": [{"spec": f"{mpi['name']}@{mpi['version']}",
                                                         "prefix": mpi["prefix"]}]},
    }
    env: dict[str, Any] = {
        "specs": [f"{tc.osu['name']}@{tc.osu['version']} target={target} %{cc['name']}@{cc['version']}"],
        "view": False,
        "concretizer": {"unify": True, "reuse": False},
        "packages": packages,
    }
    if int(spack_version.split(".")[0]) >= 1:
        packages[cc["name"]] = {"buildable": False, "externals": [{
            "spec": f"{cc['name']}@{cc['version']} languages:='c,c++'", "prefix": cc["prefix"],
            "extra_attributes": {"compilers": {"c": paths["cc"], "cxx": paths["cxx"]}}}]}
    else:
        env["compilers"] = [{"compiler": {
            "spec": f"{cc['name']}@={cc['version']}", "paths": {**paths, "f77": None, "fc": None},
            "operating_system": _platform_os(), "target": microarch.lookup(target).family.name, "modules": []}}]
    return {"spack": env}


def _platform_os() -> str:
    """Spack's name of this host's OS (debian12, rhel8, ...) from /etc/os-release."""
    info: dict[str, str] = {}
    try:
        for line in Path("/etc/os-release").read_text().splitlines():
            key, _, value = line.partition("=")
            info[key] = value.strip().strip('"')
    except OSError:
        return "unknown"
    distro = {"rocky": "rocky", "rhel": "rhel", "centos": "centos", "almalinux": "almalinux"}.get(info.get("ID", ""),
                                                                                                   info.get("ID", ""))
    return f"{distro}{info.get('VERSION_ID', '').split('.')[0]}"


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
        params = node.get("parameters") or {}
        wanted = tc.transports.get(name)
        if wanted:
            entry["transports"] = sorted(t for t in wanted if params.get(t) is True)
        if tc.variants.get(name):   # what matters beyond versions, as concretized (hwloc +pci)
            entry["variants"] = {v: params.get(v) for v in tc.variants[name]}
        if tc.providers.get(name):
            fabrics = params.get("fabrics")
            entry["providers"] = sorted(fabrics) if isinstance(fabrics, list) else fabrics
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


def load_command(base: list[str], spec: str) -> list[str]:
    """``spack load --sh SPEC`` with the install tree, scopes and environment of the build (``base``)."""
    return [*base, "load", "--sh", spec]


def programs_from_load(base: list[str], spec: str, *, target: str, cflags: str, install_root: Path, log: Path,
                       mpi_prefix: Optional[str]) -> tuple[dict[str, str], dict[str, Any]]:
    """Build the project's MPI programs in the environment ``spack load`` (with ``base``'s install tree, scopes
    and environment) gives ``spec``: ({name: binary}, what the manifest records of how).

    A failed load is a BuildError in one sentence, before anything is compiled: the programs would otherwise
    take whatever ``mpicc`` is on PATH (issue 33: "matches no installed packages", then the host's mpicc).
    """
    setup = [common.load_line(load_command(base, spec), f"Spack's {spec}")]
    mpicc = common.loaded_mpicc(setup, f"Spack's {spec}", mpi_prefix=mpi_prefix)
    programs = common.build_programs(method=METHOD, target=target, cflags=cflags, setup=setup,
                                     install_root=install_root, log=log, mpi_prefix=mpi_prefix)
    return programs, {"programs_setup": setup, "programs_mpicc": mpicc}


def environment_inputs(env_dir: Path, scopes: list[Path], toolchain_file: Path, sha256: str, target: str,
                       spack_version: str) -> dict[str, object]:
    """What a Spack build is made from, for its input hash: the environment's spack.yaml and the files it
    includes, every site scope's files, the toolchain file, the tarball's sha256, the target, Spack's version."""
    env_dir = Path(env_dir)
    data = yaml.safe_load((env_dir / "spack.yaml").read_text()) or {}
    includes = [str(i) for i in (data.get("spack") or {}).get("include") or []]
    return {"method": METHOD, "spack.yaml": common.file_digest(env_dir / "spack.yaml"),
            "includes": {i: common.file_digest(env_dir / i) for i in includes},
            "scopes": {str(s): {f.name: common.file_digest(f) for f in sorted(Path(s).glob("*.yaml"))}
                       for s in scopes},
            "toolchain": common.file_digest(Path(toolchain_file)), "sha256": sha256, "target": target,
            "spack_version": spack_version}


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
    external = (mpi_node or {}).get("external")
    if external:
        # An external MPI's own stack is not in Spack's graph: "no UCX" would be a false claim.
        path = external.get("path", "") if isinstance(external, Mapping) else ""
        notes.append(f"MPI {mpi.get('name')} {mpi.get('version')} is an external of Spack ({path}): the stack "
                     f"under it is not in Spack's graph")
    notes += [f"MPI stack differs from toolchain {tc.name}: {p}"
              for p in common.stack_problems(stack, tc, complete=not external)]
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
               "mpi_external": bool(external),
               # An external's variants are its package's defaults (fabrics=none for an OpenMPI built with UCX):
               # not recorded; the build records what its ompi_info says instead (mpi_capabilities).
               "mpi_variants": {} if external else {
                   k: v for k, v in mpi_params.items()
                   if k in ("fabrics", "schedulers", "internal-pmix", "legacylaunchers", "pmi")},
               "system": system, "partition": partition},
        notes=notes, stack=stack,
    )


# --- a site scope ---------------------------------------------------------------------------------

def site_scope_problems(scope: Path) -> list[str]:
    """One sentence per compiler or external in the Spack scope folder ``scope`` whose path does not exist
    on this machine (Spack 0.23 would stop with "internal error ... unsatisfiable", 1.1 concretize a smaller
    graph without a word)."""
    scope = Path(scope)
    if not scope.is_dir():
        return [f"Spack site scope {scope} is not a folder"]
    problems = []
    for name in ("compilers.yaml", "packages.yaml"):
        path = scope / name
        if not path.is_file():
            continue
        try:
            data = yaml.safe_load(path.read_text()) or {}
        except yaml.YAMLError as err:
            problems.append(f"{path} is not valid YAML: {getattr(err, 'problem', None) or err}")
            continue
        for entry in data.get("compilers") or []:
            compiler = (entry or {}).get("compiler") or {}
            for key, value in sorted((compiler.get("paths") or {}).items()):
                if value and not Path(str(value)).exists():
                    problems.append(f"{path}: compiler {compiler.get('spec', '?')} has {key}: {value}, which does "
                                    f"not exist on this machine")
        for package, settings in sorted(((data.get("packages") or {}) if isinstance(data, dict) else {}).items()):
            for external in (settings or {}).get("externals") or []:
                prefix = str((external or {}).get("prefix") or "")
                spec = (external or {}).get("spec", package)
                if prefix and not Path(prefix).is_dir():
                    problems.append(f"{path}: external {spec} has prefix {prefix}, which does not exist on this "
                                    f"machine")
                    continue
                compilers = ((external or {}).get("extra_attributes") or {}).get("compilers") or {}
                for lang, value in sorted(compilers.items()):
                    if value and not Path(str(value)).exists():
                        problems.append(f"{path}: external {spec} has compiler {lang}: {value}, which does not "
                                        f"exist on this machine")
    return problems


def check_site_scopes(scopes: list[Path]) -> None:
    """InputError with the first problem of the site scopes (before Spack runs), naming how many more."""
    problems = [p for scope in scopes for p in site_scope_problems(scope)]
    if problems:
        more = f" ({len(problems) - 1} more problem(s) of the same kind)" if len(problems) > 1 else ""
        raise InputError(f"{problems[0]}: put in this cluster's real paths before Spack runs{more}")


# --- the build --------------------------------------------------------------------------------

def build(options: BuildOptions) -> Manifest:
    """Concretize and install the partition's Spack environment; write and return the manifest.

    NotAvailableError (exit 4) when ``spack`` is not on PATH. On a system with a ``host_toolchain``
    the environment is written from that data. OSU's tarball is served from a file mirror at
    Spack's layout; site scopes (``options.extra["site_scopes"]``) are checked before Spack runs.
    """
    # A broken site scope is a bad input whatever the machine: judged before Spack is even looked for.
    scopes = [Path(p) for p in options.extra.get("site_scopes") or []]
    check_site_scopes(scopes)
    spack = require_spack()
    tc = toolchain.load(options.toolchain_file)
    version = check_version(_spack_output([spack], "--version"), tc)
    host = host_toolchain.for_system(options.system)
    if host is None:
        check_buildcache(os.environ)
    target = microarch.lookup(options.target).name
    tarball = common.resolve_tarball(tc, options.source_mirror)
    sha256, official = common.verify_sha256(tarball, tc, options.sha256_override)
    workdir = Path(options.install_root).resolve() / METHOD / target
    if host is not None:
        host_toolchain.check_host(host, common.detect_compiler("mpicc"), common.detect_mpi())
        env_name = f"{host.system}-host"
        env_dir = workdir / "env" / env_name
        env_dir.mkdir(parents=True, exist_ok=True)
        # Written by every build from the data, never kept from an earlier one.
        (env_dir / "spack.yaml").write_text(
            "# Written by mpiregress build from systems/" + host.system + ".yaml (host_toolchain).\n"
            + yaml.safe_dump(host_environment(host, tc, target, version), sort_keys=False))
        source_env = env_dir
    else:
        source_env = environment_for(options, tc)
        env_name = source_env.name
        env_dir = workdir / "env" / source_env.name
        # Work on a copy: concretizing writes spack.lock and .spack-env/ next to spack.yaml.
        copy_environment(source_env, env_dir)
    mirror = workdir / "source-mirror"
    place_in_mirror(tarball, mirror, tc.osu["sha256"])
    add_mirror(env_dir, mirror)
    # The same install tree and scopes for every Spack command of this build, the load included: without
    # them `spack load` answers "matches no installed packages".
    base = [spack, *[a for scope in scopes for a in ("-C", str(scope))], "-e", str(env_dir),
            "-c", f"config:install_tree:root:{(workdir / 'opt').resolve()}"]
    log = workdir / "spack.log"
    inputs = common.input_hash(environment_inputs(env_dir, scopes, options.toolchain_file, sha256, target, version))
    if not options.extra.get("rebuild"):
        existing, why = common.reusable(options.manifest_dir, METHOD, target, {}, common.BINARIES, inputs)
        if existing is not None:
            _say(f"reusing the existing Spack build for {target} ({existing.path}): same environment, toolchain "
                 f"file, tarball, target, scopes and Spack; pass --rebuild to build again")
            return existing
        _say(f"building ({why})")
    where = f"{env_dir}" if source_env == env_dir else f"{source_env} (copied to {env_dir})"
    _say(f"spack environment {where} (log: {log})")
    if host is not None:
        # The host's own build tools (make), as Spack finds them: built from source they would be fetched
        # from the internet, which compute nodes do not have.
        _spack(base, "external", "find", "--not-buildable", *HOST_BUILD_TOOLS, log=log, step="spack external find")
    _spack(base, "concretize", "-f", log=log, step="spack concretize")
    install = ["install", "--fail-fast", "-j", str(max(1, int(options.jobs)))]
    if not official:
        install.append("--no-checksum")   # the site tarball accepted by --sha256; recorded below
    if options.extra.get("rebuild"):
        install += ["--overwrite", "-y", str(tc.osu["name"])]   # --rebuild: compile OSU again, not Spack's cache
    _spack(base, *install, log=log, step="spack install")
    prefix = _spack_output(base, "location", "--install-dir", str(tc.osu["name"])).strip().splitlines()[-1]
    spec_file = Path(prefix) / SPEC_FILE
    try:
        data = json.loads(spec_file.read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise common.BuildError(f"cannot read Spack's record {spec_file}: {err}") from None
    manifest = manifest_from_spec(data, prefix, tc, env_name=env_name,
                                  system=options.system, partition=options.partition)
    if manifest.target != target:
        raise common.BuildError(f"Spack concretized {tc.osu['name']} for target {manifest.target}, not {target}: "
                                f"check packages:all:require in {source_env / 'spack.yaml'}")
    if host is not None:
        # The host's OpenMPI is an external: its stack as its own tools report it, as for the source build.
        manifest.stack = common.detect_stack(tc)
        manifest.notes += [f"MPI stack differs from toolchain {tc.name}: {p}"
                           for p in common.stack_problems(manifest.stack, tc)]
        manifest.sha256, manifest.sha256_official = sha256, official
    if not official:
        manifest.notes.append(f"built from a site tarball (sha256 {sha256}) accepted by override, not the official "
                              f"OSU {tc.osu['version']} release (sha256 {tc.osu['sha256']})")
        manifest.extra["checksum_override"] = {"sha256": sha256, "official_sha256": tc.osu["sha256"],
                                               "how": "spack install --no-checksum (--sha256 / OSU_SHA256)"}
    manifest.build_host = manifest_mod.host_record()   # the machine that ran spack install
    manifest.extra["build_log"] = str(log)
    manifest.extra["spack_env_dir"] = str(env_dir)
    manifest.extra["spack_version"] = version
    manifest.extra["source_mirror"] = str(mirror / mirror_path(tc.osu["sha256"]))
    manifest.extra["site_scopes"] = [str(p) for p in scopes]
    if host is not None:
        manifest.extra["host_toolchain"] = {"system": host.system, "compiler": dict(host.compiler),
                                            "mpi": dict(host.mpi)}
    manifest.extra["input_hash"] = inputs
    # The project's programs, with the MPI of OSU's own Spack environment, loaded as it was installed.
    mpi_prefix = _spack_output(base, "location", "--install-dir", manifest.mpi["name"]).strip().splitlines()[-1] \
        if manifest.mpi.get("name") else None
    manifest.extra["mpi_prefix"] = mpi_prefix
    manifest.programs, loaded = programs_from_load(base, str(tc.osu["name"]), target=target,
                                                   cflags=f"-O2 {manifest.flags}".strip(),
                                                   install_root=options.install_root, log=log, mpi_prefix=mpi_prefix)
    manifest.extra.update(loaded)
    # What the MPI used can really do, from its own ompi_info: for an external, Spack's variants are only the
    # defaults of its package (fabrics=none, schedulers=none for an OpenMPI built with UCX and Slurm).
    manifest.extra["mpi_capabilities"] = common.mpi_capabilities(loaded["programs_setup"], mpi_prefix)
    manifest.notes += [f"MPI differs from toolchain {tc.name}: {p}"
                       for p in common.capability_problems(manifest.extra["mpi_capabilities"], tc)]
    return common.record(manifest, options.manifest_dir, "spack install finished", log)
