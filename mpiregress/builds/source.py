"""The ``source`` build method: OSU's own ``configure && make && make install``.

The compiler is the one behind ``mpicc`` on the build host and the target flags
come from archspec for that compiler, so a build for ``broadwell`` says
``-march=broadwell`` whatever machine compiles it (never ``-march=native``).
"""
from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from mpiregress.builds import BuildOptions, common
from mpiregress.model import manifest as manifest_mod
from mpiregress.model import microarch, toolchain
from mpiregress.model.manifest import Manifest
from mpiregress.paths import state_dir

METHOD = "source"
BINARIES = common.BINARIES
BIN_SUBDIR = common.BIN_SUBDIR


def _say(message: str) -> None:
    # Progress goes to stderr: stdout carries only the manifest path, for scripts.
    print(f"mpiregress build: {message}", file=sys.stderr, flush=True)


def prefix_for(install_root: Path, target: str) -> Path:
    """Install prefix of the source build for ``target``."""
    return Path(install_root) / METHOD / target


def build_dir_for(target: str) -> Path:
    """Scratch folder the tarball is extracted and compiled in (kept after the build, with its log)."""
    return state_dir() / "build" / f"{METHOD}-{target}"


def build(options: BuildOptions) -> Manifest:
    """Build OSU from its release tarball for ``options.target``; write and return the manifest.

    Reuses an existing build when its manifest records the same tarball, flags,
    compiler, MPI and prefix and its binaries exist, unless
    ``options.extra["rebuild"]`` is true.
    """
    tc = toolchain.load(options.toolchain_file)
    microarch.lookup(options.target)
    tarball = common.resolve_tarball(tc, options.source_mirror)
    sha256, official = common.verify_sha256(tarball, tc, options.sha256_override)

    compiler = common.detect_compiler("mpicc")
    mpi = common.detect_mpi()
    flags = common.target_flags(options.target, compiler)
    prefix = prefix_for(options.install_root, options.target).resolve()
    bin_dir = prefix / BIN_SUBDIR

    expect = {"toolchain": tc.name, "osu_version": str(tc.osu["version"]), "sha256": sha256,
              "prefix": str(prefix), "flags": flags, "compiler": compiler, "mpi": mpi,
              "env": {"setup": [], "modules": [], "env_vars": tc.runtime_env}}
    # Everything the build is made from: reused only when none of it changed.
    inputs = common.input_hash({"method": METHOD, "toolchain": common.file_digest(Path(options.toolchain_file)),
                                "sha256": sha256, "target": options.target, "flags": flags, "compiler": compiler,
                                "mpi": mpi})
    if not options.extra.get("rebuild"):
        existing, why = common.reusable(options.manifest_dir, METHOD, options.target, expect, BINARIES, inputs)
        if existing is not None:
            _say(f"reusing the existing source build for {options.target} ({existing.path}): same tarball, "
                 f"flags, compiler, MPI and prefix; pass --rebuild to build again")
            return existing
        _say(f"building ({why})")

    workdir = build_dir_for(options.target)
    if workdir.exists():
        shutil.rmtree(workdir)   # a stale tree could hide a configure failure
    srcdir = common.extract_tarball(tarball, workdir)
    log = workdir / "build.log"
    if not (srcdir / "configure").is_file():
        raise common.BuildError(f"{tarball} has no configure script in {srcdir.name}/: use the release "
                                f"tarball (a git checkout needs 'autoreconf -fi' first)")

    cflags = f"-O2 {flags}"
    configure = ["./configure", "CC=mpicc", "CXX=mpicxx", f"CFLAGS={cflags}", f"CXXFLAGS={cflags}",
                 f"--prefix={prefix}"]
    steps = [("configure", configure),
             ("make", ["make", f"-j{max(1, int(options.jobs))}"]),
             ("make install", ["make", "install"])]
    env = dict(os.environ)
    for name in ("CC", "CXX", "CFLAGS", "CXXFLAGS"):
        env.pop(name, None)   # only the values on the configure line count
    for step, cmd in steps:
        _say(f"[{step}] {' '.join(cmd)} (log: {log})")
        common.run_logged(cmd, step=step, cwd=srcdir, log=log, env=env)

    programs = common.build_programs(method=METHOD, target=options.target, cflags=cflags, setup=[],
                                     install_root=options.install_root, log=log)
    stack = common.detect_stack(tc)
    # What the MPI on PATH (the one mpicc wraps) can really do, from its own ompi_info.
    capabilities = common.mpi_capabilities()
    notes = common.toolchain_notes(tc, compiler, mpi)
    notes += [f"MPI differs from toolchain {tc.name}: {p}" for p in common.capability_problems(capabilities, tc)]
    notes += [f"MPI stack differs from toolchain {tc.name}: {p}" for p in common.stack_problems(stack, tc)]
    if not official:
        notes.append(f"built from a site tarball (sha256 {sha256}) accepted by override, not the official "
                     f"OSU {tc.osu['version']} release (sha256 {tc.osu['sha256']})")
    manifest = Manifest(
        method=METHOD, toolchain=tc.name, osu_version=str(tc.osu["version"]), target=options.target,
        prefix=str(prefix), bin_dir=str(bin_dir), flags=flags, sha256=sha256, sha256_official=official,
        compiler=compiler, mpi=mpi, build_host=manifest_mod.host_record(),
        env={"setup": [], "modules": [], "env_vars": tc.runtime_env},
        extra={"tarball": str(tarball), "build_dir": str(workdir), "build_log": str(log),
               "configure": configure, "system": options.system, "partition": options.partition,
               "mpi_capabilities": capabilities, "input_hash": inputs,
               "programs_setup": [], "programs_mpicc": shutil.which("mpicc") or "mpicc"},
        notes=notes, stack=stack, programs=programs,
    )
    return common.record(manifest, options.manifest_dir, "'make install' finished", log)
