"""``mpiregress cluster start|stop|status|env|fault``: the `local` system's Slurm on this host."""
from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path

from mpiregress.cluster.local import NETWORKS, LocalCluster, default_state_dir
from mpiregress.errors import INFRASTRUCTURE, OK, InputError

FAULT_USAGE = ("fault rate NODE RATE [--peer NODE] | fault down NODE | fault stop NODE | fault clear")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("cluster", help="start, stop, inspect or fault the local Slurm (the `local` system)")
    p.add_argument("action", choices=("start", "stop", "status", "env", "fault"),
                   help="start (idempotent), stop (by PID; undoes every fault), status (exit 0 up, 3 down), "
                        "env (export lines for eval), fault (a real fault on a node or link: " + FAULT_USAGE + ")")
    p.add_argument("what", nargs="*", help="fault: rate NODE RATE | down NODE | stop NODE | clear")
    p.add_argument("--peer", default=None, help="fault rate: limit only the link between NODE and this node")
    p.add_argument("--nodes", type=int, default=None,
                   help="start: how many nodes (default: cluster.nodes of systems/local.yaml)")
    p.add_argument("--network", choices=NETWORKS, default=None,
                   help="start: a network and hostname of their own per node (namespaces) or this host's "
                        "(one-host) (default: cluster.network of systems/local.yaml)")
    p.add_argument("--state-dir", type=Path, default=None,
                   help=f"folder of the cluster's config, keys, spool and logs (default {default_state_dir()})")
    p.add_argument("--json", action="store_true", help="status: print the full status as JSON")
    p.add_argument("--force", action="store_true", help="stop: stop the cluster even while a run is using it")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.action != "start" and (args.nodes is not None or args.network is not None):
        raise InputError("--nodes and --network choose the layout of 'cluster start' only")
    if args.action == "start":
        cluster = LocalCluster(args.state_dir, nodes=args.nodes, network=args.network)
    else:
        cluster = LocalCluster(args.state_dir)
    if args.action == "fault":
        return fault(cluster, args.what, args.peer)
    if args.what:
        raise InputError(f"'cluster {args.action}' takes no further words (got {' '.join(args.what)})")
    if args.action == "start":
        started = cluster.start()
        status = cluster.status()
        ports = ", ".join(f"{k} {v}" for k, v in status["ports"].items())
        nodes = ", ".join(f"{n} {s['state']}" for n, s in status["nodes"].items())
        print(f"local Slurm cluster {'started' if started else 'already running'} in {cluster.state_dir}: "
              f"{nodes} (ports: {ports})")
        where = "" if cluster.state_dir == default_state_dir().resolve() else \
            f" --state-dir {shlex.quote(str(cluster.state_dir))}"
        print(f"use it with: eval \"$(mpiregress cluster env{where})\"")
        return OK
    if args.action == "stop":
        pids = cluster.stop(force=args.force)
        print(f"local Slurm cluster in {cluster.state_dir}: "
              + (f"stopped PIDs {', '.join(map(str, pids))}" if pids else "nothing was running"))
        return OK
    if args.action == "env":
        for key, value in cluster.client_env().items():
            print(f"export {key}={shlex.quote(value)}")
        return OK
    status = cluster.status()
    if args.json:
        print(json.dumps(status, indent=2))
    else:
        for name, d in status["daemons"].items():
            print(f"{name:14} {'running, PID ' + str(d['pid']) if d['alive'] else 'not running'}")
        print(f"{'network':14} {status['network']}")
        for name, n in status["nodes"].items():
            print(f"{name:14} {n['state']}, hostname {n['hostname']}, address {n['addr']}, {n['cpus']} CPUs, "
                  f"features {','.join(n['features'])}")
        for said in status["faults"]:
            print(f"{'fault':14} {said}")
    if not status["up"]:
        print(status["message"], file=sys.stderr)
        return INFRASTRUCTURE
    return OK


def fault(cluster: LocalCluster, what: list[str], peer: str | None) -> int:
    """``cluster fault ...``: one sentence per fault made or undone."""
    kind, rest = (what[0], what[1:]) if what else ("", [])
    if kind == "clear" and not rest:
        undone = cluster.clear_faults()
        print(f"local cluster in {cluster.state_dir}: " + ("; ".join(undone) if undone else "no fault was in force"))
        return OK
    if kind == "rate" and len(rest) == 2:
        print(cluster.fault("rate", rest[0], rate=rest[1], peer=peer))
        return OK
    if kind in ("down", "stop") and len(rest) == 1 and peer is None:
        print(cluster.fault(kind, rest[0]))
        return OK
    raise InputError(f"'cluster fault {' '.join(what)}' is not a fault; use {FAULT_USAGE}")
