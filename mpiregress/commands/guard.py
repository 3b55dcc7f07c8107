"""``mpiregress guard``: may a binary built for one target run on a node of another?"""
from __future__ import annotations

import argparse
import os
import socket
import sys

from mpiregress.errors import ERROR, OK
from mpiregress.model import microarch


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("guard", help="exit 0 if a build target can run on the node target(s), else say why")
    p.add_argument("--build-target", required=True, help="archspec target the binary was built for")
    p.add_argument("--node-target", required=True, action="append",
                   help="archspec target of a node (repeat, or comma-separate, for every node of the allocation)")
    p.set_defaults(func=run)
    register_node_target(sub)


def run(args: argparse.Namespace) -> int:
    nodes = [n for value in args.node_target for n in value.split(",") if n]
    sentence = microarch.check(args.build_target, nodes)
    if sentence:
        print(sentence, file=sys.stderr)
        return ERROR
    print(f"ok: a {args.build_target} binary runs on {', '.join(sorted(set(nodes)))}")
    return OK


def register_node_target(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("node-target", help="print this node's hostname and archspec target (run on each node of a job)")
    p.set_defaults(func=run_node_target)


def run_node_target(args: argparse.Namespace) -> int:

    # Slurm's node name, not the host name: several slurmd nodes can share one host.
    node = os.environ.get("SLURMD_NODENAME") or socket.gethostname()
    print(f"mpiregress-node-target {node} {microarch.host_target()}")
    return OK
