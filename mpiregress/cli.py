"""The ``mpiregress`` command line: one subcommand per pipeline job.

Each module in ``mpiregress.commands`` defines ``register(subparsers)``; adding a
command is adding a module. Errors derived from MpiRegressError become one
sentence on stderr and their exit code, never a traceback.
"""
from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
from typing import Optional, Sequence

from . import __version__, commands
from .errors import MpiRegressError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mpiregress",
        description="MPI performance regression pipeline (OSU 7.2, ReFrame, Slurm).",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda i: i.name):
        module = importlib.import_module(f"{commands.__name__}.{info.name}")
        module.register(sub)
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        code = args.func(args)
    except MpiRegressError as err:
        print(f"mpiregress {args.command}: error: {err}", file=sys.stderr)
        return err.exit_code
    except KeyboardInterrupt:
        return 130
    return int(code or 0)


if __name__ == "__main__":
    sys.exit(main())
