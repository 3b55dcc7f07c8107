"""The ``mpiregress`` command line: one subcommand per pipeline job.

Each module in ``mpiregress.commands`` defines ``register(subparsers)``; adding a
command is adding a module.

One rule holds here, at the top: no traceback reaches the user, and every failure
maps to the documented exit codes (0 pass, 1 regression, 2 error, 3 infrastructure,
4 not available, 5 needs a look, 6 cancelled by SIGTERM/SIGINT/SIGHUP). Errors derived from
MpiRegressError become their sentence and code; a file the system refuses (OSError) becomes one
sentence naming it, exit 2;
anything unexpected becomes exit 2 with one sentence naming the command's inputs
and the log holding the traceback. Exit 1 is left to a judged regression alone.
"""
from __future__ import annotations

import argparse
import datetime as _dt
import faulthandler
import importlib
import os
import pkgutil
import signal
import sys
import tempfile
import traceback
from pathlib import Path
from typing import Optional, Sequence

from mpiregress import __version__, commands
from mpiregress.errors import CANCELLED, ERROR, MpiRegressError
from mpiregress.history.url import mask
from mpiregress.paths import state_dir
from mpiregress.run.cancel import Cancelled, signals_cancel


def build_parser(command: Optional[str] = None) -> argparse.ArgumentParser:
    """The argument parser; with ``command``, only the module registering it is imported.

    Without one, or for a name no module owns (``--help``, a typo), every command is registered,
    so help lists them all and argparse's error names the valid choices.
    """
    parser = argparse.ArgumentParser(
        prog="mpiregress",
        description="MPI performance regression pipeline (OSU 7.2, ReFrame, Slurm).",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    names = sorted(info.name for info in pkgutil.iter_modules(commands.__path__))
    wanted = commands.MODULE_OF_COMMAND.get(command or "", command or "")
    for name in [wanted] if wanted in names else names:
        importlib.import_module(f"{commands.__name__}.{name}").register(sub)
    return parser


def _inputs(args: argparse.Namespace) -> str:
    """The files and folders the command was given, for a sentence (``--db h.sqlite, results.json``)."""
    named = []
    for key, value in sorted(vars(args).items()):
        values = value if isinstance(value, list) else [value]
        for item in values:
            if isinstance(item, Path):
                named.append(str(item) if key in ("results",) else f"--{key.replace('_', '-')} {item}")
            elif key == "db" and isinstance(item, str):
                named.append(f"--db {mask(item)}")
    return ", ".join(named) or "no file argument"


def _crash_log(argv: Sequence[str], text: str) -> Path:
    """Write the traceback to a log file (state folder, else the temp folder) and return its path."""

    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    # A history URL's password (--db postgresql://user:secret@...) never reaches a log.
    body = mask(f"mpiregress {' '.join(argv)}\n{text}")
    for folder in (state_dir() / "log", Path(tempfile.gettempdir())):
        try:
            folder.mkdir(parents=True, exist_ok=True)
            path = folder / f"mpiregress-crash-{stamp}-{os.getpid()}.log"
            path.write_text(body)
            return path
        except OSError:
            continue
    return Path("(no writable log folder; run again with MPIREGRESS_DEBUG=1)")


def tools_beside() -> None:
    """Put the folder of this Python first on PATH (for ``shutil.which`` and every child) when it is a venv's:
    the tools installed beside the CLI (eb, reframe) are found without ``source ci/env.sh``, as
    ``.venv/bin/mpiregress build --method easybuild`` needs."""
    here = str(Path(sys.executable).parent)
    parts = [p for p in os.environ.get("PATH", "").split(os.pathsep) if p]
    if sys.prefix != sys.base_prefix and here not in parts:
        os.environ["PATH"] = os.pathsep.join([here, *parts])


def main(argv: Optional[Sequence[str]] = None) -> int:
    # `kill -USR2 <pid>` prints where every thread of a command is (a run slow to answer a signal, a hang),
    # from C, whatever the main thread is blocked in; nothing else sends it.
    if sys.__stderr__ is not None:
        try:
            faulthandler.register(signal.SIGUSR2, file=sys.__stderr__, all_threads=True)
        except (ValueError, OSError):
            pass   # no real stderr to print to (an embedding caller's): nothing to register
    # From the first line: a cancelling signal during the imports and option checks is not lost.
    with signals_cancel():
        try:
            return _main(argv)
        except Cancelled as err:      # before a command's own handling (while parsing its options)
            print(f"mpiregress: error: {err.sentence}; exit {CANCELLED}", file=sys.stderr)
            return CANCELLED


def _main(argv: Optional[Sequence[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    tools_beside()
    parser = build_parser(argv[0] if argv else None)
    args = parser.parse_args(argv)
    prefix = f"mpiregress {args.command}: error:"
    try:
        code = args.func(args)
    except MpiRegressError as err:
        print(f"{prefix} {mask(err)}", file=sys.stderr)
        return err.exit_code
    except Cancelled as err:
        print(f"{prefix} {err.sentence}; exit {CANCELLED}", file=sys.stderr)
        return CANCELLED
    except KeyboardInterrupt:
        print(f"{prefix} interrupted; exit {CANCELLED}", file=sys.stderr)
        return CANCELLED
    except OSError as err:
        # A location the system refuses (not writable, not a folder, disk full): the user's to fix.
        where = err.filename if err.filename is not None else _inputs(args)
        print(f"{prefix} cannot use {where}: {err.strerror or err}", file=sys.stderr)
        return ERROR
    except Exception as err:  # noqa: BLE001 - the top-level rule: no traceback reaches a user
        if os.environ.get("MPIREGRESS_DEBUG"):
            raise
        log = _crash_log(argv, traceback.format_exc())
        print(f"{prefix} unexpected {type(err).__name__} ({mask(' '.join(str(err).split()))[:200]}) while "
              f"handling {_inputs(args)}; the traceback is in {log}", file=sys.stderr)
        return ERROR
    code = int(code or 0)
    return code


if __name__ == "__main__":
    sys.exit(main())
