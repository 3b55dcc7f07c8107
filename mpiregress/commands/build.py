"""``mpiregress build``: build (or locate) OSU 7.2 by one method for one target and write its manifest.

The target is explicit (``--target``), or the toolchain's for a cluster
partition (``--system``/``--partition``), or this host's archspec name. The
method module ``mpiregress.builds.<method>`` does the work; this command only
resolves options and prints the manifest path (the one line on stdout).
"""
from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Optional

from mpiregress import builds, paths
from mpiregress.builds import BuildOptions
from mpiregress.builds.common import MIRROR_ENV, SHA256_ENV, normalize_sha256
from mpiregress.errors import OK, InputError
from mpiregress.model import microarch, systems, toolchain
from mpiregress.model.names import METHODS


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("build", help="build OSU 7.2 by one method for one target and write its manifest")
    p.add_argument("--method", required=True, choices=METHODS, help="how to obtain OSU")
    p.add_argument("--target", help="archspec target to build for (e.g. broadwell, zen2)")
    p.add_argument("--system", help="take the target from the toolchain's partition of this system")
    p.add_argument("--partition", help="partition of --system")
    p.add_argument("--toolchain", type=Path, default=None,
                   help="toolchain file (default: toolchains/2023b.yaml)")
    p.add_argument("--source-mirror", type=Path, default=None,
                   help=f"folder holding the OSU release tarball (default: ${MIRROR_ENV})")
    p.add_argument("--sha256", default=None,
                   help=f"accept a site tarball with this sha256 instead of the official one (default: ${SHA256_ENV})")
    p.add_argument("--env", type=Path, default=None, help="Spack environment folder (spack method)")
    p.add_argument("--site-scope", type=Path, action="append", default=[],
                   help="a Spack configuration scope of the site (spack -C DIR; repeatable), checked before Spack runs")
    p.add_argument("--eessi-subdir-override", default=None,
                   help="force EESSI's software subdirectory, e.g. x86_64/intel/haswell (eessi method)")
    p.add_argument("--manifest-dir", type=Path, default=None, help="where to write the manifest")
    p.add_argument("--install-root", type=Path, default=None, help="root of install prefixes")
    p.add_argument("--jobs", type=int, default=2, help="parallel compile jobs (default 2)")
    p.add_argument("--rebuild", action="store_true", help="build even if a matching build exists")
    p.set_defaults(func=run)


def resolve_target(args: argparse.Namespace, tc_path: Path) -> tuple[str, Optional[str], Optional[str]]:
    """(target, system, partition) from --target, else --system/--partition, else the host."""
    if args.target and (args.system or args.partition):
        raise InputError("give either --target or --system/--partition, not both")
    if args.target:
        return microarch.lookup(args.target).name, None, None
    if args.system and not args.partition:
        only = systems.get(args.system).partitions
        if len(only) == 1:   # a one-partition system (the local one) needs no --partition
            args.partition = only[0].name
    if args.system or args.partition:
        if not (args.system and args.partition):
            raise InputError("--system and --partition go together (e.g. --system iris --partition broadwell)")
        part = next((p for p in systems.get(args.system).partitions if p.name == args.partition), None)
        if part is not None and part.target is None:
            # A partition without a fixed target (the local one-host Slurm): this host's.
            return microarch.host_target(), args.system, args.partition
        spec = toolchain.load(tc_path).partition(args.system, args.partition)
        return spec.target, args.system, args.partition
    return microarch.host_target(), None, None


def options_from_args(args: argparse.Namespace) -> BuildOptions:
    """BuildOptions from the command line, with environment defaults filled in."""
    if args.jobs < 1:
        raise InputError(f"--jobs must be at least 1, got {args.jobs}")
    tc_path = args.toolchain or toolchain.default_path()
    target, system, partition = resolve_target(args, tc_path)
    mirror = args.source_mirror or (Path(os.environ[MIRROR_ENV]) if os.environ.get(MIRROR_ENV) else None)
    return BuildOptions(
        method=args.method,
        toolchain_file=tc_path,
        target=target,
        manifest_dir=args.manifest_dir or paths.manifest_dir(),
        install_root=args.install_root or paths.install_root(),
        system=system,
        partition=partition,
        source_mirror=mirror,
        sha256_override=normalize_sha256(args.sha256 or os.environ.get(SHA256_ENV)),
        spack_env=args.env,
        eessi_subdir_override=args.eessi_subdir_override,
        jobs=args.jobs,
        extra={"rebuild": bool(args.rebuild), "site_scopes": list(args.site_scope)},
    )


def run(args: argparse.Namespace) -> int:
    options = options_from_args(args)
    result = builds.method(options.method).build(options)
    print(result.path or options.manifest_dir / f"{result.method}-{result.target}.json")
    return OK
