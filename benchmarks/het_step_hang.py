"""Hung heterogeneous srun steps on the namespaces cluster: bounded by timeout alone, and by the step watcher.

Starts its own local cluster (``--network namespaces``, 2 nodes, in a fresh folder under /tmp),
builds the OSU test double (tests/osu_double) and, inside one ``salloc -N2 --exclusive``, launches
its osu_latency ``--launches`` times per way, the ways alternating launch by launch so both see the
same load. Each launch is the cross_node step the checks run here (mpiregress.model.launch.pt2pt_step:
a heterogeneous step, rank 0 on core 0 of node1, rank 1 on core 1 of node2, ``--mpi=pmix``):

- ``timeout``: ``timeout -k 10 LIMIT srun ...``, as before the watcher;
- ``watch``: ``mpiregress step-watch --limit LIMIT --ranks 2 --grace GRACE -- srun ...``
  (mpiregress.model.launch.step_bound), each rank marking its exit;
- ``homogeneous``: for comparison, ``srun -N2 -n2 --ntasks-per-node=1 --cpu-bind=map_cpu:0``
  under timeout (one step cannot bind its ranks to different cores per node, so both take core 0).

A launch is *hung* when srun has not ended 15 s after the program's output was complete (its
last result line); *stopped* when the watcher ended a stuck srun (its sentence on stderr).
Prints one line per hung or stopped launch and a table; asserts nothing.

    python benchmarks/het_step_hang.py --launches 100

2026-11-25, this 2-core VM shared with another session, 2 runs:

    --launches 150 (557 s, load 1.6-5.1, median 4.0; the watcher then polled with Popen.wait)
    way          launches   hung stopped failed s/launch median s  max s
    timeout           150   1/150       0      0     2.05     1.24  119.0
    watch             150   0/150       2      0     1.64     1.46    6.8

    --launches 100 --ways timeout,watch,homogeneous (1027 s, load 0.9-5.1, median 3.0)
    way          launches   hung stopped failed s/launch median s  max s
    timeout           100   0/100       0      0     1.10     1.03    1.7
    watch             100   0/100       1      0     1.32     1.19    6.6
    homogeneous       100   0/100       0      0     7.81     9.92   14.8

Together: 1 of 250 timeout-bounded steps hung (ended by timeout 119 s after its output); 0 of 250
watched steps hung, 3 were stuck and ended 5.8-6.0 s after their output with exit 0 and the complete
measurement. A loop by hand (osu_latency -x 20 -i 200 in one ``salloc -N2 --exclusive``) hung 3 of
250. The watcher costs about 0.2 s a step (a Python start). The homogeneous step never hung but puts
both ranks on core 0 (7x slower launches, and not the placement asked for).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from _cluster import mpi_env, own_cluster

from mpiregress.model import launch
from mpiregress.model.topology import Binding

DOUBLE = Path(__file__).resolve().parent.parent / "tests" / "osu_double"
ARGS = ["-m", "8:8", "-x", "200", "-i", "1000"]
WAYS = ("timeout", "watch", "homogeneous")
HUNG_AFTER_S = 15.0


def build(work: Path) -> Path:
    src = work / "src"
    shutil.copytree(DOUBLE, src)
    for step in (["./configure", "CC=mpicc", "CXX=mpicxx", f"--prefix={work / 'inst'}"], ["make"], ["make", "install"]):
        subprocess.run(step, cwd=src, check=True, capture_output=True, timeout=300)
    return work / "inst" / "libexec" / "osu-micro-benchmarks" / "mpi" / "pt2pt" / "osu_latency"


def command(way: str, binary: Path, limit: int, grace: float) -> str:
    if way == "homogeneous":
        step = launch.Step(["--mpi=pmix", launch.KILL_ON_BAD_EXIT, "-w", "node1,node2", "-N2", "-n2",
                            "--ntasks-per-node=1", "--cpu-bind=verbose,map_cpu:0"], list(ARGS))
    else:
        step = launch.pt2pt_step(Binding("cross_node", ((0, 0), (1, 1))), 2, str(binary), ARGS, ["--mpi=pmix"])
    modifier = launch.step_bound(sys.executable, limit, 10, step.marked_ranks if way == "watch" else 0, grace)
    return " ".join(modifier + ["srun"] + step.options + [str(binary)] + step.executable_opts)


def one(way: str, binary: Path, limit: int, grace: float, cwd: Path) -> dict:
    """One launch: when its output was complete, when srun ended, what it said."""
    env = dict(os.environ, MPIREGRESS_NODE0="node1", MPIREGRESS_NODE1="node2")
    started = time.monotonic()
    proc = subprocess.Popen(["bash", "-c", command(way, binary, limit, grace)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, cwd=cwd)
    complete: list[float] = []
    err: list[str] = []

    def read_out() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.split()[:1] == ARGS[1].split(":")[:1]:  # the result line of the one size
                complete.append(time.monotonic())

    def read_err() -> None:
        assert proc.stderr is not None
        err.extend(proc.stderr)

    readers = [threading.Thread(target=read_out), threading.Thread(target=read_err)]
    for r in readers:
        r.start()
    rc = proc.wait()
    ended = time.monotonic()
    for r in readers:
        r.join()
    after = ended - complete[0] if complete else None
    return {"way": way, "rc": rc, "seconds": ended - started, "after_output": after,
            "hung": after is None or after > HUNG_AFTER_S,
            "stopped": any("mpiregress step-watch:" in line for line in err),
            "said": [ln.strip() for ln in err if ln.startswith(("srun:", "mpiregress"))][:3]}


def inner(args: argparse.Namespace) -> int:
    """Inside the allocation: the launches, one JSON line each."""
    cwd = Path(tempfile.mkdtemp(prefix="hetstep-", dir=args.work))
    for i in range(args.launches):
        for way in args.ways.split(","):
            result = one(way, Path(args.binary), args.limit, args.grace, cwd)
            print(json.dumps({"launch": i + 1, "load": os.getloadavg()[0], **result}), flush=True)
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--launches", type=int, default=100, help="launches per way")
    parser.add_argument("--ways", default="timeout,watch", help=f"comma-separated, of {', '.join(WAYS)}")
    parser.add_argument("--limit", type=int, default=109, help="the step's time limit (s), as limit_step_time sets")
    parser.add_argument("--grace", type=float, default=5.0, help="the watcher's grace (s) after the last rank")
    parser.add_argument("--inner", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--binary", help=argparse.SUPPRESS)
    parser.add_argument("--work", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.inner:
        return inner(args)
    unknown = [w for w in args.ways.split(",") if w not in WAYS]
    if unknown:
        print(f"unknown way {unknown[0]!r} (known: {', '.join(WAYS)})", file=sys.stderr)
        return 2
    print(f"# 2 nodes, osu_latency {' '.join(ARGS)}, {args.launches} launches per way, limit {args.limit} s, "
          f"grace {args.grace:g} s", flush=True)
    results: list[dict] = []
    started = time.monotonic()
    with own_cluster(2, "het") as (cluster, work):
        binary = build(work)
        cluster.start()
        env = mpi_env(cluster)
        argv = ["salloc", "-N2", "--exclusive", sys.executable, __file__, "--inner", "--binary", str(binary),
                "--work", str(work), "--launches", str(args.launches), "--ways", args.ways,
                "--limit", str(args.limit), "--grace", str(args.grace)]
        with subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, text=True) as proc:
            assert proc.stdout is not None
            for line in proc.stdout:
                if not line.startswith("{"):
                    continue
                r = json.loads(line)
                results.append(r)
                if r["hung"] or r["stopped"] or r["rc"]:
                    after = "never" if r["after_output"] is None else f"{r['after_output']:.1f} s"
                    print(f"{r['way']} launch {r['launch']}: exit {r['rc']}, ended {after} after its output "
                          f"({'stopped by the watcher' if r['stopped'] else 'hung' if r['hung'] else 'failed'}): "
                          f"{' | '.join(r['said'])}", flush=True)
    loads = sorted(r["load"] for r in results)
    if loads:
        print(f"# {time.monotonic() - started:.0f} s; load average (1 min) after each launch: min {loads[0]:.1f}, "
              f"median {loads[len(loads) // 2]:.1f}, max {loads[-1]:.1f}")
    print(f"{'way':<12} {'launches':>8} {'hung':>6} {'stopped':>7} {'failed':>6} {'s/launch':>8} {'median s':>8} "
          f"{'max s':>6}")
    for way in args.ways.split(","):
        mine = [r for r in results if r["way"] == way]
        if not mine:
            continue
        secs = sorted(r["seconds"] for r in mine)
        hung = sum(r["hung"] for r in mine)
        stopped = sum(r["stopped"] for r in mine)
        failed = sum(1 for r in mine if r["rc"] and not r["hung"])
        print(f"{way:<12} {len(mine):>8} {hung:>3}/{len(mine):<3}{stopped:>6} {failed:>6} "
              f"{sum(secs) / len(secs):>8.2f} {secs[len(secs) // 2]:>8.2f} {secs[-1]:>6.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
