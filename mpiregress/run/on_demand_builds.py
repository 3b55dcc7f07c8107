"""The builds a run needs: built on demand where the system says so, planned for a dry run,
and their binaries checked before any job is submitted."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

from mpiregress import paths
from mpiregress.builds import BuildOptions
from mpiregress.builds import method as build_method
from mpiregress.builds.common import program_sources
from mpiregress.errors import InputError, NotAvailableError
from mpiregress.families.coll.algorithms import COLLECTIVES
from mpiregress.model import manifest, microarch, systems, toolchain
from mpiregress.model.names import PT2PT
from mpiregress.run.options import (
    COLL_SUBSETS,
    FAMILY_PROGRAMS,
    RunOptions,
    log,
)


def ensure_builds(opts: RunOptions, tc: toolchain.Toolchain, methods: list[str]) -> dict[str, str]:
    """For a system that builds on demand (``builds: on_demand``): reuse or build, for each target of
    the run's partitions, every one of its ``methods`` the run asks for; {method: sentence} of the methods
    that cannot build here (their checks then skip with the reason)."""

    system = systems.get(opts.system)
    skipped: dict[str, str] = {}
    for part in system.partitions_named(opts.partition):
        target = part.build_target()
        for name in [m for m in system.methods if m in methods]:
            usable = [m for m in manifest.of_system(manifest.find(opts.manifest_dir, name), opts.system)
                      if microarch.can_run(m.target, target)]
            # A named tarball goes through the build's own strict reuse test (same sha256, flags, tools);
            # without one, any build these nodes can run is reused rather than failing offline.
            if usable and not (opts.source_mirror or opts.sha256_override):
                log(f"reusing {name} build {usable[0].path} (target {usable[0].target})")
                continue
            log(f"{name} build of OSU {tc.osu['version']} for {target} (reused when nothing changed)")
            try:
                built = build_method(name).build(BuildOptions(
                    method=name, toolchain_file=opts.toolchain_file, target=target,
                    manifest_dir=opts.manifest_dir, install_root=paths.install_root(),
                    system=opts.system, partition=part.name, source_mirror=opts.source_mirror,
                    sha256_override=opts.sha256_override))
            except NotAvailableError as err:
                skipped[name] = f"{name} build not available here: {err}"
                log(skipped[name])
                continue
            log(f"built {built.path}")
    return skipped


def planned_manifests(opts: RunOptions, tc: toolchain.Toolchain, methods: list[str]) -> Path:
    """For --dry-run: real manifests plus clearly marked planned ones, so every job script can be written."""
    planned = opts.report_dir / "planned-manifests"
    planned.mkdir(parents=True, exist_ok=True)
    for existing in manifest.of_system(manifest.find_all(opts.manifest_dir), opts.system):
        if existing.path:
            shutil.copy(existing.path, planned / Path(existing.path).name)
    targets = sorted({p.build_target() for p in systems.get(opts.system).partitions})
    for method in methods:
        for target in targets:
            if (planned / f"{method}-{target}.json").exists():
                continue
            prefix = f"/planned/{method}/{target}"
            manifest.write(manifest.Manifest(
                method=method, toolchain=tc.name, osu_version=tc.osu["version"], target=target,
                prefix=prefix, bin_dir=str(Path(prefix) / manifest.BIN_SUBDIR),
                programs={src.name: f"{prefix}/programs/bin/{src.name}" for src in program_sources()},
                extra={"planned": True},
                notes=["planned by --dry-run: not built; only used to write job scripts"]), planned)
    return planned


def binaries_needed(build: manifest.Manifest, opts: RunOptions) -> list[Path]:
    """The binaries of ``build`` the selected families will launch (the project's own programs too)."""

    needed = []
    if any(f in opts.families for f in ("pt2pt", "pt2pt-sweep", "ab")):
        needed += [build.binary(PT2PT[m].benchmark) for m in (opts.metrics or list(PT2PT)) if m in PT2PT]
    if any(f in COLL_SUBSETS for f in opts.families):
        needed += [build.binary(f"osu_{c}", kind="collective") for c in (opts.collectives or COLLECTIVES)]
    needed += [build.program(FAMILY_PROGRAMS[f]) for f in opts.families if f in FAMILY_PROGRAMS]
    if "noise" in opts.families:
        needed.append(build.program("fwq"))   # one sentence when the build made no fwq
    return needed


def check_binaries(manifest_dir: Path, methods: list[str], opts: RunOptions) -> None:
    """Refuse, before any job, a manifest whose benchmark binary is missing or not executable."""
    for method in methods:
        for build in manifest.of_system(manifest.find(manifest_dir, method), opts.system):
            if build.extra.get("planned"):
                continue
            for binary in binaries_needed(build, opts):
                if not binary.is_file():
                    raise InputError(f"manifest {build.path} names {binary}, which does not exist: rebuild with "
                                     f"'mpiregress build --method {method}' or remove the manifest")
                if not os.access(binary, os.X_OK):
                    raise InputError(f"manifest {build.path} names {binary}, which is not executable")
