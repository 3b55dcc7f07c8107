"""``mpiregress cluster start|stop|status|env``: the `local` system's one-host Slurm."""
from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path

from ..errors import INFRASTRUCTURE, OK
from ..local_cluster import LocalCluster, default_state_dir


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("cluster", help="start, stop or inspect the local one-host Slurm (the `local` system)")
    p.add_argument("action", choices=("start", "stop", "status", "env"),
                   help="start (idempotent), stop (by PID), status (exit 0 up, 3 down), "
                        "env (export lines for eval)")
    p.add_argument("--state-dir", type=Path, default=None,
                   help=f"folder of the cluster's config, keys, spool and logs (default {default_state_dir()})")
    p.add_argument("--json", action="store_true", help="status: print the full status as JSON")
    p.add_argument("--force", action="store_true", help="stop: stop the cluster even while a run is using it")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    cluster = LocalCluster(args.state_dir)
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
        for name, n in status["nodes"].items():
            print(f"{name:14} {n['state']}, {n['cpus']} CPUs, features {','.join(n['features'])}")
    if not status["up"]:
        print(status["message"], file=sys.stderr)
        return INFRASTRUCTURE
    return OK
