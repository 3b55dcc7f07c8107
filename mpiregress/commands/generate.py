"""``mpiregress generate``: render the files derived from systems/*.yaml and the toolchain file."""
from __future__ import annotations

import argparse
from pathlib import Path

from mpiregress.definitions import generate
from mpiregress.errors import OK, InputError
from mpiregress.paths import REPO_ROOT


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("generate", help="render .gitlab-ci.yml, the ReFrame site config and the Spack "
                                        "environments from systems/*.yaml and the toolchain file")
    p.add_argument("--check", action="store_true", help="only say which derived files are out of date (exit 2)")
    p.add_argument("--toolchain", type=Path, default=None, help="toolchain file (default: toolchains/2023b.yaml)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.check:
        problems = generate.stale(REPO_ROOT, args.toolchain)
        if problems:
            names = ", ".join(f"{item.path} {why}" for item, why in problems)
            raise InputError(f"derived files differ from systems/ and the toolchain file ({names}): "
                             f"run 'mpiregress generate'")
        print("generate: every derived file is up to date")
        return OK
    for path in generate.write(REPO_ROOT, args.toolchain):
        print(f"generate: wrote {path}")
    return OK
