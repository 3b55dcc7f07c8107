"""``mpiregress baseline propose``: new baseline values and tolerances from the history, as a diff to review."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .. import paths
from ..baselines import for_system
from ..errors import OK, InputError
from ..history import open_existing
from ..names import SYSTEMS
from ..propose import propose


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("baseline", help="baselines from the history")
    verbs = p.add_subparsers(dest="verb", metavar="VERB")
    verbs.required = True
    pro = verbs.add_parser("propose", help="print a unified diff of proposed baselines (nothing is written by default)")
    pro.add_argument("--system", required=True, choices=SYSTEMS)
    pro.add_argument("--db", type=Path, default=None,
                     help="history file (default: $MPIREGRESS_HISTORY_DB or var/history.sqlite)")
    pro.add_argument("--baselines-dir", type=Path, default=None,
                     help="default: $MPIREGRESS_BASELINES_DIR or baselines/")
    pro.add_argument("--toolchain", help="toolchain of the proposal (default: the current file's)")
    pro.add_argument("--write", type=Path, metavar="PATH", help="also write the proposed file to PATH")
    pro.set_defaults(func=run_propose)


def run_propose(args: argparse.Namespace) -> int:
    directory = args.baselines_dir or paths.baselines_dir()
    path = Path(directory) / f"{args.system}.yaml"
    current = for_system(args.system, Path(directory)) if path.exists() else None
    history = open_existing(args.db)
    if history is None:
        raise InputError(f"history file {args.db or paths.history_db()} does not exist: nothing to propose from")
    with history:
        proposal = propose(history, args.system, current, path, toolchain=args.toolchain,
                           source=str(history.path))
    for line in proposal.changed:
        print(f"proposed: {line}", file=sys.stderr)
    for line in proposal.kept:
        print(f"kept: {line}", file=sys.stderr)
    sys.stdout.write(proposal.diff or f"# no change proposed for {path}\n")
    if args.write:
        args.write.parent.mkdir(parents=True, exist_ok=True)
        args.write.write_text(proposal.text)
        print(f"wrote the proposed file to {args.write}", file=sys.stderr)
    return OK
