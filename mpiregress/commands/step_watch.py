"""``mpiregress step-watch``: srun with a time limit that also ends once every rank has exited."""
from __future__ import annotations

import argparse
import sys

from mpiregress.errors import ERROR
from mpiregress.run import stepwatch


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("step-watch", help="run srun bounded like timeout(1); with --ranks, end it --grace s "
                                          "after every rank marked its exit (a job-script launcher modifier)")
    p.add_argument("--limit", type=float, required=True, help="seconds before srun gets SIGTERM")
    p.add_argument("--kill-after", type=float, default=10.0, help="seconds from SIGTERM to SIGKILL")
    p.add_argument("--ranks", type=int, default=0, help="ranks whose exit marks end a stuck srun (0: none)")
    p.add_argument("--grace", type=float, default=5.0, help="seconds srun may outlive its last rank")
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- srun ...")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:

    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command or args.limit <= 0 or args.ranks < 0 or args.grace < 0:
        print("step-watch needs a command after --, a positive --limit and no negative --ranks or --grace",
              file=sys.stderr)
        return ERROR
    return stepwatch.run(command, args.limit, args.kill_after, args.ranks, args.grace)
