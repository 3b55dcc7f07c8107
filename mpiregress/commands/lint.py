"""``mpiregress lint``: fail when a build definition disagrees with the toolchain file."""
from __future__ import annotations

import argparse
from pathlib import Path

from mpiregress.definitions import lint as lint_mod
from mpiregress.errors import ERROR, OK
from mpiregress.paths import REPO_ROOT


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "lint",
        help="check systems/, the derived files, spack-envs/, EasyBuild's resolved stack, easyconfigs/, "
             "module names, ReFrame environments and baselines against the toolchain file (exit 2 on "
             "any disagreement)",
    )
    p.add_argument("--toolchain", type=Path, default=None,
                   help="toolchain file (default: <root>/toolchains/2023b.yaml)")
    p.add_argument("--root", type=Path, default=REPO_ROOT,
                   help="repository root holding spack-envs/, easyconfigs/, checks/, baselines/ "
                        "(default: this checkout)")
    p.add_argument("--easybuild", choices=("auto", "yes", "no"), default="auto",
                   help="compare the stack 'eb --dry-run --robot' resolves with the toolchain's "
                        "(auto: when eb is on PATH; takes a few seconds)")
    p.add_argument("--site-scope", type=Path, action="append", default=[],
                   help="also check a site's Spack scope folder (repeatable): every compiler path and external "
                        "prefix it names must exist on this machine")
    p.add_argument("--manifests", type=Path, default=None,
                   help="also check the build manifests in this folder: each build's MPI, as its own ompi_info "
                        "says, provides the toolchain's MPI features (ucx, slurm, pmix)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    easybuild = {"auto": None, "yes": True, "no": False}[args.easybuild]
    report = lint_mod.lint(args.root, args.toolchain, easybuild=easybuild, site_scopes=args.site_scope,
                           manifests=args.manifests)
    for line in lint_mod.summary(report):
        print(line)
    return OK if report.ok else ERROR
