"""A real CPU hog on one rank's core, on the local Slurm: how often the link analysis names its node.

Prints figures, asserts nothing. Each round runs linktest twice in one exclusive allocation of
the two nodes of a local cluster of its own (2 nodes, the layout of systems/local.yaml; 8 ranks, 4 a
node, serial mode): once undisturbed, once with a CPU hog. The two nodes share this host's 2
cores, so the harness makes one rank own a core, as every rank does on a cluster node:
rank ``--victim`` (node2) is pinned alone to CPU 1, the seven
others to CPU 0, all at SCHED_FIFO 5 (as root) so that the shared host's other load does not
reach them. The hog is the test's periodic noise source (tests/noise_source/noise_source.c)
pinned to CPU 1 at SCHED_FIFO 10, spinning ``--busy-us`` of every ``--period-us`` (80 % by
default: at 95 % the kernel's RT throttling starves the victim and the run stalls).

The analysis is ``mpiregress links analyze`` with its defaults (median of each pair's
iterations, 2x and 5 robust sigmas; a rank slow with most of its peers, or whose slow pairs
all meet at it, is a bad node). The victim owning a core makes its pairs differ from the
others even undisturbed (faster across nodes, slower within its node): the undisturbed
rounds say what that costs in false findings.

2026-11-24, this 2-core VM, 10 rounds: the hog named node2 (rank 6) in 9 of 10 rounds, the
tenth lost its allocation (Slurm revoked it: with the ranks and the hog all real-time, the
host's own daemons get only the kernel's RT-throttling slack); the undisturbed runs named
nothing in 10 of 10. Before slow pairs meeting at one rank counted, 5 of 10 (three more came
out as two or three "bad links" all of rank 6). Why this is not a test in the suite: it
starves the CI runner's own processes for seconds and one round in ten lost its allocation.
tests/test_links_local.py injects real rate limits (``cluster fault rate``) instead.

    sudo python benchmarks/links_cpu_hog.py --rounds 10
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from mpiregress.cluster.local import LocalCluster  # noqa: E402
from mpiregress.families.links import analysis, resultsfile  # noqa: E402

WRAPPER = """#!/bin/sh
if [ "$SLURM_PROCID" = "$VICTIM" ]; then cpu=1; else cpu=0; fi
exec taskset -c $cpu chrt -f 5 "$@"
"""


def build(work: Path) -> tuple[Path, Path, Path]:
    """linktest by its own Makefile, the noise source, and the per-node pinning wrapper."""
    shutil.copytree(REPO / "checks" / "src" / "linktest", work / "src")
    subprocess.run(["make", "-C", str(work / "src"), "MPICC=mpicc", "CFLAGS=-O2", f"PREFIX={work / 'prefix'}",
                    "install"], check=True, capture_output=True, timeout=300)
    hog = work / "noise_source"
    subprocess.run(["gcc", "-O2", "-o", str(hog), str(REPO / "tests" / "noise_source" / "noise_source.c")],
                   check=True, capture_output=True, timeout=120)
    wrapper = work / "pinned.sh"
    wrapper.write_text(WRAPPER)
    wrapper.chmod(0o755)
    return work / "prefix" / "bin" / "linktest", hog, wrapper


def measure(cluster: LocalCluster, binary: Path, wrapper: Path, out: Path, victim: int,
            hog: list[str] | None) -> str:
    """One linktest run (with the hog running around it when given); the analysis' verdict lines."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    env.update(cluster.client_env(), OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_mpi_yield_when_idle="1", VICTIM=str(victim))
    started = subprocess.Popen(hog, stdout=subprocess.DEVNULL) if hog else None
    try:
        time.sleep(0.3 if hog else 0)
        done = subprocess.run(["salloc", "-N2", "--exclusive", "--time=6", "srun", "--mpi=pmix", "-n8", "-O",
                               "--cpu-bind=none", "--kill-on-bad-exit=1", str(wrapper), str(binary), "-S", "-w", "5",
                               "-i", "50", "-I", "10", "-o", str(out)],
                              env=env, capture_output=True, text=True, timeout=300)
    finally:
        if started:
            started.terminate()
            started.wait()
    if done.returncode != 0 or not out.exists():
        return f"run failed (exit {done.returncode}): {done.stderr.strip().splitlines()[-1:]}"
    judged = analysis.analyse(resultsfile.read(out))
    found = [node.sentence() for node in judged.bad_nodes]
    found += [f"bad link {s.link()} (ranks {s.rank_a}-{s.rank_b}): {s.metric} {s.ratio_first:.1f}x"
              for s in judged.bad_links]
    return "; ".join(found) or "nothing named"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--victim", type=int, default=6, help="rank pinned alone to CPU 1 (4-7 are node2)")
    parser.add_argument("--period-us", type=int, default=1000)
    parser.add_argument("--busy-us", type=int, default=800)
    args = parser.parse_args()
    if os.geteuid() != 0 or not shutil.which("chrt"):
        sys.exit("links_cpu_hog: needs root and chrt (SCHED_FIFO for the ranks and the hog)")
    root = Path(tempfile.mkdtemp(prefix="mpiregress-hog-", dir="/tmp"))
    root.chmod(0o755)
    cluster = LocalCluster(root / "local-cluster", nodes=2)
    cluster.start()
    try:
        binary, hog_binary, wrapper = build(root)
        hog = [str(hog_binary), "1", str(args.period_us), str(args.busy_us), "120", "10"]
        victim_node = "node2" if args.victim >= 4 else "node1"
        named = {"hog": 0, "clean": 0}
        print(f"victim rank {args.victim} ({victim_node}) alone on CPU 1; hog on CPU 1 spins {args.busy_us} us "
              f"of every {args.period_us} us at SCHED_FIFO 10")
        for i in range(args.rounds):
            for case, argv in (("clean", None), ("hog", hog)):
                said = measure(cluster, binary, wrapper, root / f"{case}{i}.bin", args.victim, argv)
                named[case] += f"bad node {victim_node} (rank {args.victim})" in said
                print(f"round {i + 1:2d} {case:5s}: {said}")
        print(f"\nhog rounds naming {victim_node} (rank {args.victim}) a bad node: {named['hog']} of {args.rounds}")
        print(f"undisturbed rounds naming it (false): {named['clean']} of {args.rounds}")
    finally:
        cluster.stop()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
