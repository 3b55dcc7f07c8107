"""The ``eessi`` build method: nothing is compiled, EESSI's prebuilt OSU module is located.

EESSI picks its software subdirectory (``x86_64/intel/haswell``, ``x86_64/amd/zen2``, ...)
from the CPU of the machine that sources its init script -- in a job, the first node
of the allocation. On a partition that mixes node generations that choice can be a
binary the other nodes cannot run, so a site forces one with
``EESSI_ARCHDETECT_OPTIONS_OVERRIDE`` (ULHPC forces haswell on Iris). The manifest's
target is the archspec name of the subdirectory EESSI really used, and its
``env.setup`` holds the shell lines a job must run to get the same binaries.

Without /cvmfs (the project's development machines) ``build`` raises
NotAvailableError (exit 4, skipped); nothing is faked.
"""
from __future__ import annotations

import shlex
import subprocess
from pathlib import Path
from typing import Mapping, Optional

from mpiregress.builds import BuildOptions, common
from mpiregress.errors import InputError, NotAvailableError
from mpiregress.model import microarch, toolchain
from mpiregress.model.manifest import Manifest

METHOD = "eessi"
OVERRIDE_VAR = "EESSI_ARCHDETECT_OPTIONS_OVERRIDE"
OSU_ROOT_VAR = "EBROOTOSUMINMICROMINBENCHMARKS"
OSU_VERSION_VAR = "EBVERSIONOSUMINMICROMINBENCHMARKS"
BIN_SUBDIR = common.BIN_SUBDIR


def setup_lines(init: str, module: str, subdir_override: Optional[str] = None) -> list[str]:
    """The shell lines that give a job EESSI's OSU: [export override,] source init, module load."""
    lines = []
    if subdir_override:
        lines.append(f"export {OVERRIDE_VAR}={shlex.quote(subdir_override)}")
    lines.append(f"source {shlex.quote(init)}")
    lines.append(f"module load {shlex.quote(module)}")
    return lines


def require_eessi(init: str) -> Path:
    """The EESSI init script, or NotAvailableError (exit 4) when this machine has no EESSI."""
    path = Path(init)
    if not path.is_file():
        raise NotAvailableError(f"EESSI is not available on this machine: {init} not found "
                                f"(no CernVM-FS mount of software.eessi.io)")
    return path


def probe_environment(lines: list[str]) -> dict[str, str]:
    """Run ``lines`` in a bash subprocess and return the environment they leave behind.

    The init script and ``module`` talk on stdout; they are sent to stderr so that
    stdout carries only ``env -0``. Each line must succeed (the init script itself
    is not run under ``set -e``: it is not written for it).
    """
    steps = [line if line.startswith("export ") else f"{line} >&2 || exit {i + 10}" for i, line in enumerate(lines)]
    script = "\n".join(steps) + "\nenv -0\n"
    try:
        proc = subprocess.run(["bash", "-c", script], stdin=subprocess.DEVNULL, capture_output=True, timeout=300)
    except subprocess.TimeoutExpired:
        raise common.BuildError("EESSI init and module load did not finish within 300 s") from None
    if proc.returncode != 0:
        failed = lines[proc.returncode - 10] if 10 <= proc.returncode < 10 + len(lines) else "; ".join(lines)
        err = proc.stderr.decode(errors="replace").strip().splitlines()[-15:]
        raise common.BuildError(f"EESSI setup failed at '{failed}' (exit code {proc.returncode}):\n" + "\n".join(err))
    env = {}
    for item in proc.stdout.decode(errors="replace").split("\0"):
        key, sep, value = item.partition("=")
        if sep:
            env[key] = value
    return env


def manifest_from_env(env: Mapping[str, str], tc: toolchain.Toolchain, *,
                      subdir_override: Optional[str] = None, system: Optional[str] = None,
                      partition: Optional[str] = None) -> Manifest:
    """The manifest of EESSI's OSU from the environment after init + module load (a pure function)."""
    init, module = str(tc.eessi["init"]), str(tc.eessi["module"])
    subdir = env.get("EESSI_SOFTWARE_SUBDIR", "")
    if not subdir:
        raise InputError("EESSI_SOFTWARE_SUBDIR is not set: the EESSI init script did not select a "
                         "software subdirectory")
    root = env.get(OSU_ROOT_VAR, "")
    if not root:
        raise InputError(f"{OSU_ROOT_VAR} is not set after 'module load {module}': EESSI "
                         f"{env.get('EESSI_VERSION', tc.eessi.get('version'))} has no {module} for {subdir}")
    target = microarch.lookup(microarch.from_eessi_subdir(subdir)).name
    compiler = {"name": "gcc", "version": env.get("EBVERSIONGCC", "")} if env.get("EBVERSIONGCC") else {}
    mpi = {"name": "openmpi", "version": env.get("EBVERSIONOPENMPI", "")} if env.get("EBVERSIONOPENMPI") else {}
    version = env.get(OSU_VERSION_VAR, str(tc.osu["version"]))
    notes = common.toolchain_notes(tc, compiler, mpi)
    stack = common.stack_from_ebversions(env, tc, f"EESSI module {module} (EBVERSION* variables)")
    notes += [f"MPI stack differs from toolchain {tc.name}: {p}" for p in common.stack_problems(stack, tc)]
    if version != str(tc.osu["version"]):
        notes.append(f"EESSI provides OSU {version}, the toolchain {tc.name} says {tc.osu['version']}")
    if subdir_override and subdir.rstrip("/") != subdir_override.rstrip("/"):
        notes.append(f"{OVERRIDE_VAR}={subdir_override} was set, but EESSI used {subdir}")
    try:
        flags = common.target_flags(target, compiler) if compiler else ""
    except InputError:
        flags = ""
    return Manifest(
        method=METHOD, toolchain=tc.name, osu_version=version, target=target, prefix=root,
        bin_dir=str(Path(root) / BIN_SUBDIR),
        # EESSI compiles each subdirectory for its own target with archspec-equivalent flags.
        flags=flags,
        # EESSI's easyconfig pins the official checksum; nothing here saw the tarball itself.
        sha256=str(tc.osu["sha256"]), sha256_official=True,
        compiler=compiler, mpi=mpi,
        env={"setup": setup_lines(init, module, subdir_override), "modules": [module],
             "env_vars": {**tc.runtime_env, **({OVERRIDE_VAR: subdir_override} if subdir_override else {})}},
        extra={"eessi_software_subdir": subdir, "eessi_version": env.get("EESSI_VERSION", ""),
               "eessi_software_path": env.get("EESSI_SOFTWARE_PATH", ""), "eessi_init": init,
               "module": module, "archdetect_override": subdir_override or "",
               "system": system, "partition": partition},
        notes=notes, stack=stack,
    )


def subdir_override_for(options: BuildOptions, tc: toolchain.Toolchain) -> Optional[str]:
    """The EESSI subdirectory to force: the option's, else the toolchain's for the partition, else None.

    Forcing the partition's subdirectory makes the build independent of which node
    sources the init script (Iris' batch partition mixes Broadwell and Skylake).
    """
    if options.eessi_subdir_override:
        return options.eessi_subdir_override
    if options.system and options.partition:
        return tc.partition(options.system, options.partition).eessi_subdir or None
    return None


def build(options: BuildOptions) -> Manifest:
    """Locate EESSI's OSU module for this machine (or the forced subdirectory); write and return the manifest.

    NotAvailableError (exit 4) when the EESSI init script is absent; a BuildError when
    the subdirectory EESSI chose holds binaries a ``options.target`` node cannot run.
    """
    tc = toolchain.load(options.toolchain_file)
    init = str(tc.eessi["init"])
    require_eessi(init)
    override = subdir_override_for(options, tc)
    lines = setup_lines(init, str(tc.eessi["module"]), override)
    manifest = manifest_from_env(probe_environment(lines), tc, subdir_override=override,
                                 system=options.system, partition=options.partition)
    refusal = microarch.check(manifest.target, [options.target])
    if refusal:
        raise common.BuildError(f"EESSI selected {manifest.extra['eessi_software_subdir']}: {refusal}; "
                                f"force a subdirectory with --eessi-subdir-override")
    # The project's programs, compiled against EESSI's MPI for the subdirectory EESSI uses.
    log = Path(options.install_root) / METHOD / manifest.target / "programs.log"
    manifest.programs = common.build_programs(method=METHOD, target=manifest.target,
                                              cflags=f"-O2 {manifest.flags}".strip(), setup=lines,
                                              install_root=options.install_root, log=log)
    # What EESSI's OpenMPI can really do, from its own ompi_info after the same setup lines.
    manifest.extra["mpi_capabilities"] = common.mpi_capabilities(lines)
    manifest.notes += [f"MPI differs from toolchain {tc.name}: {p}"
                       for p in common.capability_problems(manifest.extra["mpi_capabilities"], tc)]
    return common.record(manifest, options.manifest_dir, f"EESSI module {tc.eessi['module']} loaded")
