"""The ``easybuild`` build method: ``eb`` with the project's OSU easyconfig, per target.

The easyconfig (``easyconfigs/OSU-Micro-Benchmarks-7.2-gompi-2023b.eb``) is the one
EasyBuild itself ships; what makes a build *for a target* is passed on the command line:

* ``--optarch=GCC:<flags>``: archspec's flags for the partition's target and GCC 13.2.0
  (``-march=broadwell -mtune=broadwell``). EasyBuild's default is ``-march=native``, which
  encodes whichever node happened to compile -- the SIGILL story of the seed study.
* ``--installpath=<install_root>/easybuild/<target>``: one tree per target, so a
  Skylake build never shadows a Broadwell one.

The manifest is written from EasyBuild's own records: the module file (the install
root behind ``$EBROOTOSUMINMICROMINBENCHMARKS``), the reproducibility environment
(``easybuild/reprod/*.env``: the CFLAGS really used), the easyconfig copy in the
repository with its ``buildstats`` (build host CPU as archspec names it), and the
dependency chain ``eb --dry-run --robot`` resolves (the GCC and OpenMPI of gompi/2023b).
"""
from __future__ import annotations

import ast
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

from mpiregress.builds import BuildOptions, common, host_toolchain
from mpiregress.errors import InputError
from mpiregress.model import microarch, toolchain
from mpiregress.model.manifest import Manifest
from mpiregress.paths import REPO_ROOT, state_dir

METHOD = "easybuild"
OSU_NAME = "OSU-Micro-Benchmarks"
BINARIES = common.BINARIES
BIN_SUBDIR = common.BIN_SUBDIR
# EasyBuild's compiler family names, for --optarch=<family>:<flags>.
EB_COMPILER_FAMILY = {"gcc": "GCC"}
# Where distributions install Lmod's command when no login shell has set $LMOD_CMD.
LMOD_CANDIDATES = ("/usr/share/lmod/lmod/libexec/lmod", "/opt/apps/lmod/lmod/libexec/lmod")
# "(no easyconfig file found)": an installed module the robot takes as it is (a site's external module).
DRY_RUN_LINE = re.compile(r"^\s*\*\s+\[(?P<status>.)\]\s+(?P<easyconfig>\(no easyconfig file found\)|\S+)\s+"
                          r"\(module:\s+(?P<module>[^)]+)\)\s*$")
# Where a build on a system with a host toolchain writes that toolchain's module files (under --installpath).
HOST_MODULES = "host-modules"


_say = common.say


# --- running eb ----------------------------------------------------------------------------

def require_eb() -> str:
    """Path of the ``eb`` command, or NotAvailableError (exit 4) naming what is missing."""
    return common.require_command("eb", "EasyBuild", "pip install easybuild, or load the site's EasyBuild module")


# What builds.unavailable_reason asks: can this machine build with this method at all.
require_tools = require_eb


def eb_environment(base: Optional[Mapping[str, str]] = None) -> dict[str, str]:
    """The environment ``eb`` runs in: ``base`` (default os.environ) plus what EasyBuild needs here.

    As root EasyBuild refuses to run unless explicitly allowed (CI containers and this
    project's machines run as root). It also needs Lmod's command, which only a login
    shell's profile puts in ``$LMOD_CMD``.
    """
    env = dict(os.environ if base is None else base)
    if os.geteuid() == 0:
        env.setdefault("EASYBUILD_ALLOW_USE_AS_ROOT_AND_ACCEPT_CONSEQUENCES", "1")
    # With Rich installed (import-linter brings it) EasyBuild wraps its lines at 80 columns, which cuts
    # the dry run's "* [ ] path (module: name)" lines that parse_dry_run reads: plain lines, always.
    env["EASYBUILD_OUTPUT_STYLE"] = "basic"
    # eb's launcher looks for a python that imports EasyBuild on PATH; this one does when it has EasyBuild.
    if not env.get("EB_PYTHON") and (Path(sys.executable).parent / "eb").exists():
        env["EB_PYTHON"] = sys.executable
    if not env.get("LMOD_CMD") and shutil.which("lmod", path=env.get("PATH")) is None:
        candidates = [str(Path(env["LMOD_DIR"]) / "lmod")] if env.get("LMOD_DIR") else []
        for candidate in candidates + list(LMOD_CANDIDATES):
            if os.access(candidate, os.X_OK):
                env["LMOD_CMD"] = candidate
                break
    return env


def _run_eb(args: Sequence[str], *, timeout: int = 600, prefix: Optional[Path] = None,
            env: Optional[Mapping[str, str]] = None) -> subprocess.CompletedProcess:
    """Run ``eb ARGS`` and capture its output; a BuildError quotes EasyBuild's last lines on failure."""
    cmd = [require_eb(), *args]
    if prefix is not None:
        # Keeps EasyBuild's build/install/repository defaults away from the user's ~/.local/easybuild,
        # and the logs EasyBuild leaves behind on failure out of /tmp.
        cmd += [f"--prefix={prefix}", f"--tmpdir={Path(prefix) / 'tmp'}", f"--tmp-logdir={Path(prefix) / 'logs'}"]
    try:
        proc = subprocess.run(cmd, env=eb_environment(env), stdin=subprocess.DEVNULL, capture_output=True,
                              text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise common.BuildError(f"'{shlex.join(cmd)}' did not finish within {timeout} s") from None
    if proc.returncode != 0:
        lines = (proc.stdout + proc.stderr).strip().splitlines()
        errors = [line for line in lines if line.startswith("ERROR")] or lines[-15:]
        raise common.BuildError(f"'{shlex.join(cmd)}' failed with exit code {proc.returncode}:\n"
                                + "\n".join(errors))
    return proc


@dataclass(frozen=True)
class Dependency:
    """One entry of EasyBuild's resolved dependency chain (``eb --dry-run --robot``)."""

    module: str          # e.g. OpenMPI/4.1.6-GCC-13.2.0
    easyconfig: str      # the easyconfig file the robot picked
    installed: bool      # True when the module already exists ([x] in EasyBuild's list)


def parse_dry_run(output: str) -> list[Dependency]:
    """The dependency chain from ``eb --dry-run`` output, in build order (the easyconfig itself last)."""
    chain = []
    for line in output.splitlines():
        match = DRY_RUN_LINE.match(line)
        if match:
            chain.append(Dependency(module=match["module"].strip(), easyconfig=match["easyconfig"],
                                    installed=match["status"] in ("x", "F", "R")))
    return chain


def dependency_chain(easyconfig: Path, *, prefix: Optional[Path] = None,
                     env: Optional[Mapping[str, str]] = None, root: Path = REPO_ROOT) -> list[Dependency]:
    """Run ``eb <easyconfig> --dry-run --robot`` (offline) and return the resolved chain.

    ``prefix`` (e.g. a temporary folder) keeps EasyBuild's default paths out of the
    user's home; site configuration from the environment still applies.
    """
    proc = _run_eb([str(easyconfig), "--dry-run", "--robot", robot_paths_option(root)], timeout=300, prefix=prefix,
                   env=env)
    chain = parse_dry_run(proc.stdout)
    if not chain:
        raise common.BuildError(f"'eb {easyconfig} --dry-run --robot' listed no easyconfigs; output:\n"
                                f"{proc.stdout.strip()[-2000:]}")
    return chain


def check_contrib(easyconfig: Path, *, prefix: Optional[Path] = None,
                  env: Optional[Mapping[str, str]] = None) -> str:
    """Run ``eb --check-contrib`` (style and sha256 checksums) on ``easyconfig``; its output, or BuildError."""
    return _run_eb([str(easyconfig), "--check-contrib"], timeout=300, prefix=prefix, env=env).stdout


def robot_paths_option(root: Path = REPO_ROOT) -> str:
    """``--robot-paths`` that puts the project's easyconfigs/ before EasyBuild's own (the trailing ':')."""
    return f"--robot-paths={Path(root) / 'easyconfigs'}:"


def toolchain_versions(chain: Sequence[Dependency]) -> tuple[dict[str, str], dict[str, str]]:
    """(compiler, mpi) as {name, version} from the module names of EasyBuild's dependency chain."""
    compiler: dict[str, str] = {}
    mpi: dict[str, str] = {}
    for dep in chain:
        name, _, version = dep.module.partition("/")
        if name == "GCC":
            compiler = {"name": "gcc", "version": version}
        elif name == "OpenMPI":
            mpi = {"name": "openmpi", "version": version.split("-")[0]}
    return compiler, mpi


def stack_versions(chain: Sequence[Dependency]) -> dict[str, dict[str, str]]:
    """{EasyBuild name: {version, module}} of every module in the chain (``PMIx/4.2.6-GCCcore-13.2.0``
    -> ``PMIx: 4.2.6``): the resolved stack a manifest records and lint compares."""
    out: dict[str, dict[str, str]] = {}
    for dep in chain:
        name, _, version = dep.module.partition("/")
        out[name] = {"version": version.split("-")[0], "module": dep.module}
    return out


def stack_from_chain(chain: Sequence[Dependency], tc: toolchain.Toolchain) -> dict[str, dict[str, Any]]:
    """The toolchain's stack components as EasyBuild resolved them (version and module of each)."""
    resolved = stack_versions(chain)
    stack: dict[str, dict[str, Any]] = {}
    for name, component in tc.stack.items():
        found = resolved.get(str(component.get("easybuild", name)))
        if found:
            stack[name] = {**found, "from": "eb --dry-run --robot"}
    return stack


# libfabric providers its configure builds unless told --disable-<p> (verbs and usnic also need rdma-core).
LIBFABRIC_DEFAULT_PROVIDERS = ("tcp", "udp", "shm", "rxm", "rxd", "sockets", "usnic", "mrail")


def easyconfig_features(component: str, text: str) -> dict[str, bool]:
    """What an easyconfig builds, as the toolchain file names it: {feature: built?} from its dependencies,
    OS dependencies and configure options (hwloc pci, libfabric providers, UCX transports).

    Features the text cannot decide are left out (not assumed)."""
    opts = set(re.findall(r"--(?:enable|disable|with|without)-[\w-]+", " ".join(
        m.group(1) for m in re.finditer(r"^configopts\s*\+?=\s*(.+)$", text, re.M))))
    block = re.search(r"^dependencies\s*=\s*\[(.*?)^\]", text, re.M | re.S)
    deps = set(re.findall(r"^\s*\(\s*['\"]([^'\"]+)['\"]", block.group(1), re.M)) if block else set()
    ibverbs = "OS_PKG_IBVERBS_DEV" in text
    found: dict[str, bool] = {}
    if component == "hwloc":
        found["pci"] = "libpciaccess" in deps and "--disable-pci" not in opts
    elif component == "libfabric":
        for provider in (*LIBFABRIC_DEFAULT_PROVIDERS, "verbs"):
            default = ibverbs if provider in ("verbs", "usnic") else True
            found[provider] = f"--enable-{provider}" in opts or (default and f"--disable-{provider}" not in opts)
    elif component == "ucx":
        verbs = ("--with-verbs" in opts or ibverbs) and "--without-verbs" not in opts
        for transport in ("verbs", "rc", "ud", "dc"):
            found[transport] = verbs
        found["mlx5_dv"] = verbs and "--without-mlx5-dv" not in opts
        found["rdmacm"] = ibverbs and "--without-rdmacm" not in opts
        found["cma"] = "--enable-cma" in opts
        found["knem"] = "--with-knem" in opts
        found["xpmem"] = "--with-xpmem" in opts
    return found


def stack_features(chain: Sequence[Dependency], tc: toolchain.Toolchain) -> dict[str, dict[str, bool]]:
    """{component: {feature: built?}} of the stack easyconfigs in ``chain`` (what the toolchain file's
    variants, providers and transports name), read from the easyconfig files EasyBuild resolved."""
    out: dict[str, dict[str, bool]] = {}
    for name, component in tc.stack.items():
        dep = next((d for d in chain if d.module.startswith(f"{component.get('easybuild', name)}/")), None)
        if dep is None or not Path(dep.easyconfig).is_file():
            continue
        features = easyconfig_features(name, Path(dep.easyconfig).read_text())
        if features:
            out[name] = features
    return out


# --- what to build ----------------------------------------------------------------------------

def easyconfig_for(tc: toolchain.Toolchain, root: Path = REPO_ROOT) -> Path:
    """The project's OSU easyconfig for ``tc`` (``easyconfigs/OSU-Micro-Benchmarks-<v>-<tc>-<tcv>.eb``)."""
    ebtc = tc.data.get("easybuild_toolchain") or {}
    name = f"{OSU_NAME}-{tc.osu['version']}-{ebtc.get('name', 'gompi')}-{ebtc.get('version', tc.name)}.eb"
    path = Path(root) / "easyconfigs" / name
    if not path.is_file():
        raise InputError(f"no easyconfig {path}: the easybuild method builds the project's own easyconfig")
    return path


def module_name(tc: toolchain.Toolchain, host: Optional[host_toolchain.HostToolchain] = None) -> str:
    """The module EasyBuild installs for the OSU easyconfig (EasyBuildMNS): OSU-Micro-Benchmarks/7.2-gompi-2023b,
    or at a host toolchain's version (OSU-Micro-Benchmarks/7.2-gompi-host)."""
    if host is not None:
        return f"{OSU_NAME}/{tc.osu['version']}-{host.eb_name}-{host.eb_version}"
    ebtc = tc.data.get("easybuild_toolchain") or {}
    return f"{OSU_NAME}/{tc.osu['version']}-{ebtc.get('name', 'gompi')}-{ebtc.get('version', tc.name)}"


def optarch_for(target: str, compiler: Mapping[str, str]) -> str:
    """``--optarch`` value for ``target``: archspec's flags for the toolchain compiler (never -march=native)."""
    family = EB_COMPILER_FAMILY.get(compiler["name"])
    if family is None:
        raise InputError(f"no EasyBuild compiler family known for {compiler['name']} (known: "
                         f"{', '.join(EB_COMPILER_FAMILY)})")
    return f"{family}:{common.target_flags(target, compiler)}"


def installpath_for(install_root: Path, target: str) -> Path:
    """EasyBuild's --installpath for ``target``: one software/ and modules/ tree per target."""
    return Path(install_root) / METHOD / target


def eb_command(eb: str, easyconfig: Path, *, optarch: str, installpath: Path, sourcepaths: Sequence[Path],
               jobs: int, rebuild: bool = False, logdir: Optional[Path] = None,
               workdir: Optional[Path] = None) -> list[str]:
    """The ``eb`` command line of a build (the same on a laptop, in CI and on the clusters).

    EasyBuild searches every ``sourcepaths`` entry and downloads into the first one
    (dependencies' sources, config.guess), so the first should be a cache the build
    owns and the folder holding the verified OSU tarball can follow, untouched.
    """
    cmd = [eb, str(easyconfig), "--robot", robot_paths_option(), f"--optarch={optarch}", f"--installpath={installpath}",
           f"--repositorypath={installpath / 'ebfiles_repo'}", f"--parallel={max(1, int(jobs))}"]
    if sourcepaths:
        cmd.append("--sourcepath=" + ":".join(str(p) for p in dict.fromkeys(sourcepaths)))
    if rebuild:
        cmd.append("--rebuild")
    if logdir is not None:
        cmd.append(f"--tmp-logdir={logdir}")   # EasyBuild's own log of a failed build, next to ours
    if workdir is not None:
        # EasyBuild's default build folder (~/.local/easybuild/build/<name>/<version>/<toolchain>) is shared
        # by every build of the same easyconfig: two builds at once (two targets, CI and a user) would
        # compile in one tree. Each build gets its own, and its own temporary folder.
        cmd += [f"--buildpath={workdir / 'eb-build'}", f"--tmpdir={workdir / 'eb-tmp'}"]
    return cmd


# --- EasyBuild's records -> manifest ----------------------------------------------------------

@dataclass
class EasyBuildRecords:
    """What EasyBuild wrote about one installation."""

    module: str                      # OSU-Micro-Benchmarks/7.2-gompi-2023b
    module_file: str
    root: str                        # the install dir ($EBROOT...)
    easyconfig: str                  # the copy in the repository (with buildstats)
    params: dict[str, Any] = field(default_factory=dict)     # literal parameters of that copy
    buildstats: dict[str, Any] = field(default_factory=dict)  # the last build's statistics
    build_env: dict[str, str] = field(default_factory=dict)   # reprod/*.env exports (CFLAGS, CC, ...)
    build_modules: list[str] = field(default_factory=list)    # reprod/*.env module loads


def ebroot_var(name: str) -> str:
    """EasyBuild's $EBROOT variable for software ``name`` (``-`` is spelled MIN, ``+`` PLUS, ``.`` DOT)."""
    return "EBROOT" + name.upper().replace("-", "MIN").replace("+", "PLUS").replace(".", "DOT")


def parse_easyconfig_literals(text: str) -> dict[str, Any]:
    """Top-level assignments of an easyconfig whose values are Python literals (others are skipped)."""
    params: dict[str, Any] = {}
    for node in ast.parse(text).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            try:
                params[node.targets[0].id] = ast.literal_eval(node.value)
            except (ValueError, SyntaxError):
                continue   # templates and comprehensions (SOURCELOWER_TAR_GZ, [... for x in ...])
    return params


def module_root(module_text: str) -> Optional[str]:
    """The install root an EasyBuild module file sets (Lua ``local root = "..."`` or Tcl ``set root ...``)."""
    match = re.search(r'^local root = "([^"]+)"', module_text, re.M) or \
        re.search(r"^set root\s+(\S+)", module_text, re.M)
    return match.group(1) if match else None


def parse_env_script(text: str) -> tuple[list[str], dict[str, str]]:
    """(modules, exports) of EasyBuild's reprod ``*.env`` script."""
    modules, exports = [], {}
    for line in text.splitlines():
        if line.startswith("module load "):
            modules.append(line.split(None, 2)[2].strip())
        elif line.startswith("export ") and "=" in line:
            key, _, value = line[len("export "):].partition("=")
            try:
                exports[key] = shlex.split(value)[0] if value.strip() else ""
            except ValueError:
                exports[key] = value.strip("'")
    return modules, exports


def read_records(installpath: Path, module: str) -> EasyBuildRecords:
    """Read EasyBuild's records of ``module`` installed under ``installpath`` (repository in ebfiles_repo/).

    An InputError names the first record that is missing: without them the
    manifest would be a guess.
    """
    installpath = Path(installpath)
    name, _, version = module.partition("/")
    module_file = next((p for p in (installpath / "modules" / "all" / name / f"{version}.lua",
                                    installpath / "modules" / "all" / name / version) if p.is_file()), None)
    if module_file is None:
        raise InputError(f"EasyBuild left no module file for {module} under {installpath / 'modules' / 'all'}")
    root = module_root(module_file.read_text())
    if not root:
        raise InputError(f"{module_file} does not set the install root (no 'local root = ...')")
    repo_copy = installpath / "ebfiles_repo" / name / f"{name}-{version}.eb"
    if not repo_copy.is_file():
        raise InputError(f"EasyBuild left no easyconfig copy with build statistics at {repo_copy}")
    params = parse_easyconfig_literals(repo_copy.read_text())
    stats = params.get("buildstats") or [{}]
    env_script = Path(root) / "easybuild" / "reprod" / f"{name}-{version}.env"
    build_modules, build_env = parse_env_script(env_script.read_text()) if env_script.is_file() else ([], {})
    return EasyBuildRecords(module=module, module_file=str(module_file), root=root, easyconfig=str(repo_copy),
                            params=params, buildstats=dict(stats[-1]), build_env=build_env,
                            build_modules=build_modules)


def _march_flags(text: str) -> str:
    """The -march/-mtune flags in a compiler flag string (what decides the instruction set)."""
    return " ".join(re.findall(r"-m(?:arch|tune|cpu)=[\w.+-]+", text))


def _optarch_from_command_line(command_line: Sequence[str]) -> str:
    for arg in command_line or []:
        if str(arg).startswith("--optarch="):
            return _march_flags(str(arg))
    return ""


def manifest_from_records(records: EasyBuildRecords, tc: toolchain.Toolchain, target: str,
                          chain: Sequence[Dependency], *, installpath: Path, expected_flags: str,
                          official_sha256: Optional[str] = None, system: Optional[str] = None,
                          partition: Optional[str] = None, setup: Optional[Sequence[str]] = None,
                          loaded: Optional[tuple[Sequence[str], Mapping[str, str]]] = None) -> Manifest:
    """The manifest of an EasyBuild installation, from EasyBuild's records only (a pure function).

    ``setup``: the shell lines that make the module loadable (default: ``module use`` of the install
    tree and ``module load``). ``loaded``: (modules, environment) after those lines ran
    (:func:`loaded_environment`): compiler and MPI are then what the loaded modules say
    (``EBVERSIONGCC``, ``EBVERSIONOPENMPI``), the stack is what the MPI's own tools report, and the
    MCA parameters the modules set are recorded -- a host toolchain's modules are in no easyconfig.

    A BuildError when the records say the binaries were compiled for something else
    than ``expected_flags`` (e.g. an old ``-march=native`` install the robot reused).
    """
    flags = _march_flags(records.build_env.get("CFLAGS", "")) or \
        _optarch_from_command_line(records.buildstats.get("command_line", []))
    if "native" in flags:
        raise common.BuildError(f"{records.module} in {installpath} was compiled with {flags}: its instructions "
                                f"are those of build host {records.buildstats.get('hostname', '?')}, not of "
                                f"{target}; rebuild it (mpiregress build --method easybuild --rebuild)")
    if _march_flags(expected_flags) and flags != _march_flags(expected_flags):
        raise common.BuildError(f"{records.module} in {installpath} was compiled with "
                                f"'{flags or 'no -march flags'}', not '{_march_flags(expected_flags)}' for "
                                f"{target}; rebuild it (mpiregress build --method easybuild --rebuild)")
    checksums = records.params.get("checksums") or []
    sha256 = ""
    if checksums:
        first = checksums[0]
        sha256 = first if isinstance(first, str) else (first.get(tc.osu["tarball"], "") if isinstance(first, dict)
                                                       else "")
    official = sha256 == (official_sha256 or tc.osu["sha256"])
    compiler, mpi = toolchain_versions(chain)
    modules_dir = Path(installpath) / "modules" / "all"
    setup = list(setup) if setup is not None else [f"module use {modules_dir}", f"module load {records.module}"]
    extra_loaded: dict[str, Any] = {}
    if loaded is not None:
        loaded_modules, loaded_env = loaded
        compiler = {"name": "gcc", "version": loaded_env.get("EBVERSIONGCC", "")}
        mpi = {"name": "openmpi", "version": loaded_env.get("EBVERSIONOPENMPI", "")}
        extra_loaded = {"loaded_modules": list(loaded_modules),
                        "module_env": {k: v for k, v in sorted(loaded_env.items())
                                       if k.startswith("OMPI_MCA_") or k.startswith("EBVERSION")}}
    ebtc = records.params.get("toolchain") or {}
    stats = records.buildstats
    notes = common.toolchain_notes(tc, compiler, mpi)
    if not official:
        notes.append(f"built from a site tarball (sha256 {sha256}) accepted by override, not the official "
                     f"OSU {tc.osu['version']} release (sha256 {tc.osu['sha256']})")
    stack = stack_from_chain(chain, tc) if loaded is None else common.detect_stack(tc)
    for name, features in (stack_features(chain, tc) if loaded is None else {}).items():
        if name in stack:
            stack[name]["built"] = features   # variants, providers, transports from the easyconfig
    return Manifest(
        method=METHOD, toolchain=tc.name, osu_version=str(records.params.get("version", tc.osu["version"])),
        target=target, prefix=records.root, bin_dir=str(Path(records.root) / BIN_SUBDIR), flags=flags,
        sha256=sha256, sha256_official=official, compiler=compiler, mpi=mpi,
        build_host={"hostname": str(stats.get("hostname", "")), "target": str(stats.get("cpu_arch_name", "")),
                    "vendor": str(stats.get("cpu_vendor", "")), "model": str(stats.get("cpu_model", ""))},
        env={"setup": setup, "modules": [records.module], "env_vars": tc.runtime_env},
        extra={"module": records.module, "module_file": records.module_file,
               "ebroot_var": ebroot_var(OSU_NAME), "easyconfig_repository_copy": records.easyconfig,
               "easybuild_toolchain": f"{ebtc.get('name', '?')}/{ebtc.get('version', '?')}",
               "installpath": str(installpath), "build_modules": records.build_modules,
               "cflags": records.build_env.get("CFLAGS", ""),
               "easybuild_version": str(stats.get("easybuild-framework_version", "")),
               "command_line": list(stats.get("command_line", [])),
               "dependency_chain": [d.module for d in chain],
               "system": system, "partition": partition, **extra_loaded},
        notes=notes + [f"MPI stack differs from toolchain {tc.name}: {p}"
                       for p in common.stack_problems(stack, tc, complete=loaded is None)],
        stack=stack,
    )


# --- the build ------------------------------------------------------------------------------

def _amended_easyconfig(easyconfig: Path, workdir: Path, official: str, actual: str,
                        host: Optional[host_toolchain.HostToolchain] = None,
                        official_toolchain: Optional[Mapping[str, str]] = None) -> Path:
    """A copy of ``easyconfig`` for this build: the accepted site tarball's checksum and, on a system with
    a host toolchain, the host toolchain's version (the original stays untouched)."""
    text = easyconfig.read_text()
    if official != actual:
        if official not in text:
            raise InputError(f"{easyconfig} does not hold the official sha256 {official}: run 'mpiregress lint'")
        text = text.replace(official, actual)
    name = easyconfig.name
    if host is not None:
        text = host_toolchain.easyconfig_at(text, host, official_toolchain or {})
        name = name.replace(f"-{(official_toolchain or {}).get('name')}-{(official_toolchain or {}).get('version')}.eb",
                            f"-{host.eb_name}-{host.eb_version}.eb")
    copy = workdir / name
    workdir.mkdir(parents=True, exist_ok=True)
    copy.write_text(text)
    return copy


def loaded_environment(setup: Sequence[str], timeout: int = 60) -> tuple[list[str], dict[str, str]]:
    """(modules loaded, environment) after running a manifest's ``setup`` lines in a fresh bash.

    What a check's job script gets is what the module files really set, whatever a data file says:
    the manifest records it (the toolchain modules the OSU module pulls in, their EBVERSION* and the
    MCA parameters they set).
    """
    script = " && ".join(f"{{ {line}; }}" for line in [common.LMOD_INIT, *setup, "env -0"])
    try:
        proc = subprocess.run(["bash", "-c", script], capture_output=True, timeout=timeout, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise common.BuildError(f"loading the build's modules did not finish within {timeout} s") from None
    if proc.returncode != 0:
        raise common.BuildError(f"loading the build's modules failed ({'; '.join(setup)}): "
                                f"{proc.stderr.decode(errors='replace').strip()[-600:]}")
    env = dict(item.split("=", 1) for item in proc.stdout.decode(errors="replace").split("\0") if "=" in item)
    modules = [m for m in env.get("LOADEDMODULES", "").split(":") if m]
    return modules, env


def build(options: BuildOptions) -> Manifest:
    """Build OSU with EasyBuild for ``options.target``; write and return the manifest.

    NotAvailableError (exit 4) when ``eb`` is not on PATH. Reuses the install when
    an existing manifest records the same prefix, flags and tarball, unless
    ``options.extra["rebuild"]``. On a system whose data declares a ``host_toolchain`` (the local
    one), the host's compiler and MPI are offered to EasyBuild as module files written from that
    data, and the project's easyconfig is built at that toolchain's version.
    """
    eb = require_eb()
    tc = toolchain.load(options.toolchain_file)
    host = host_toolchain.for_system(options.system)
    target = microarch.lookup(options.target).name
    easyconfig = easyconfig_for(tc)
    ebtc = {"name": "gompi", "version": tc.name, **(tc.data.get("easybuild_toolchain") or {})}
    tarball = common.resolve_tarball(tc, options.source_mirror)
    sha256, official = common.verify_sha256(tarball, tc, options.sha256_override)
    optarch = optarch_for(target, host.compiler if host else tc.compiler)
    flags = optarch.split(":", 1)[1]
    installpath = installpath_for(options.install_root, target).resolve()
    workdir = state_dir() / "build" / f"{METHOD}-{target}"
    rebuild = bool(options.extra.get("rebuild"))
    env = eb_environment()
    host_modules = installpath / HOST_MODULES
    if host is not None:
        host_toolchain.check_host(host, common.detect_compiler("mpicc"), common.detect_mpi())
        module = module_name(tc, host)
        # Written by every build (never kept from an earlier one): the data decides what they say.
        host_toolchain.write_lmod_modules(host, host_modules)
        env["MODULEPATH"] = ":".join(filter(None, [str(host_modules), env.get("MODULEPATH")]))
    else:
        module = module_name(tc)

    # Everything the build is made from: the easyconfig, the toolchain file, the tarball, the target's flags
    # and the host toolchain's data. Reused only when none of it changed.
    inputs = common.input_hash({"method": METHOD, "easyconfig": common.file_digest(easyconfig),
                                "toolchain": common.file_digest(Path(options.toolchain_file)), "sha256": sha256,
                                "target": target, "optarch": optarch, "host_toolchain": host_record(host)})
    if not rebuild:
        expect = {"toolchain": tc.name, "osu_version": str(tc.osu["version"]), "sha256": sha256, "flags": flags}
        existing, why = common.reusable(options.manifest_dir, METHOD, target, expect, BINARIES, inputs)
        same_host = existing is not None and existing.extra.get("host_toolchain") == host_record(host)
        if existing is not None and same_host and Path(existing.prefix).is_relative_to(installpath):
            _say(f"reusing the existing EasyBuild build for {target} ({existing.path}); pass --rebuild to build again")
            return existing
        _say(f"building ({why or 'the existing manifest is for another install path or host toolchain'})")

    if not official or host is not None:
        easyconfig = _amended_easyconfig(easyconfig, workdir, tc.osu["sha256"], sha256, host, ebtc)
    sourcepaths = [common.sources_cache_dir().resolve(), tarball.parent.resolve()]
    cmd = eb_command(eb, easyconfig, optarch=optarch, installpath=installpath, sourcepaths=sourcepaths,
                     jobs=options.jobs, rebuild=rebuild or host is not None, logdir=workdir / "eb-logs",
                     workdir=workdir)
    log = workdir / "eb.log"
    _say(f"{shlex.join(cmd)} (log: {log})")
    workdir.mkdir(parents=True, exist_ok=True)
    common.run_logged(cmd, step="eb", cwd=workdir, log=log, env=env)

    chain = dependency_chain(easyconfig, prefix=workdir / "dry-run", env=env)
    records = read_records(installpath, module)
    setup = None
    loaded: Optional[tuple[list[str], dict[str, str]]] = None
    if host is not None:
        setup = [common.LMOD_INIT, f"module use {host_modules}", f"module use {installpath / 'modules' / 'all'}",
                 f"module load {module}"]
        loaded = loaded_environment(setup)
    manifest = manifest_from_records(records, tc, target, chain, installpath=installpath, expected_flags=flags,
                                     system=options.system, partition=options.partition, setup=setup,
                                     loaded=loaded)
    manifest.sha256_official = official
    manifest.extra["build_log"] = str(log)
    manifest.extra["host_toolchain"] = host_record(host)
    manifest.extra["input_hash"] = inputs
    if not official:
        # As the source method records it: which tarball was accepted, and that EasyBuild was told so.
        manifest.extra["checksum_override"] = {"sha256": sha256, "official_sha256": tc.osu["sha256"],
                                               "easyconfig": str(easyconfig),
                                               "how": "the easyconfig copy's checksums line holds the accepted "
                                                      "sha256 (--sha256 / OSU_SHA256)"}
    # The project's programs, with the MPI of the module EasyBuild just installed.
    # The MPI the loaded modules name ($EBROOTOPENMPI): the programs' mpicc must be that one's.
    mpi_prefix = loaded[1].get("EBROOT" + str(tc.mpi["name"]).upper()) if loaded is not None else None
    manifest.programs = common.build_programs(method=METHOD, target=target, cflags=f"-O2 {flags}",
                                              setup=manifest.env["setup"], install_root=options.install_root,
                                              log=log, mpi_prefix=mpi_prefix)
    manifest.extra["programs_setup"] = list(manifest.env["setup"])
    manifest.extra["programs_mpicc"] = common.loaded_mpicc(manifest.env["setup"], f"the {METHOD} build's modules",
                                                           mpi_prefix=mpi_prefix)
    manifest.extra["mpi_capabilities"] = common.mpi_capabilities(manifest.env["setup"], mpi_prefix)
    manifest.notes += [f"MPI differs from toolchain {tc.name}: {p}"
                       for p in common.capability_problems(manifest.extra["mpi_capabilities"], tc)]
    return common.record(manifest, options.manifest_dir, "EasyBuild finished", log)


def host_record(host: Optional[host_toolchain.HostToolchain]) -> Optional[dict[str, Any]]:
    """What a manifest records of the host toolchain a build used (None: the toolchain's own modules)."""
    if host is None:
        return None
    return {"system": host.system, "easybuild_toolchain": host.toolchain_module, "compiler": dict(host.compiler),
            "mpi": dict(host.mpi), "modules": [host.compiler_module, host.mpi_module, host.toolchain_module],
            "runtime_env": dict(host.runtime_env)}
