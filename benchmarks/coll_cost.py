#!/usr/bin/env python3
"""Print the cost of the collective sweep per partition: job steps and estimated allocation time.

    python benchmarks/coll_cost.py [--sweep checks/config/coll_sweep.yaml] [--openmpi 4.1.6]

For every partition (cores per node from checks/topology/<partition>/processor.json) it
expands the weekly and MR subsets of the sweep file into OSU invocations (job steps)
and estimates their time with the model below, then says whether the targets hold
(weekly <= 60 min on two nodes, MR <= 5 min) and, if not, prints the figure of a reduced
sweep (fewer iterations at large sizes, one-node steps packed two at a time).

Cost model (an estimate, not a measurement; every input is named):
- launch of one step: LAUNCH_S + LAUNCH_PER_RANK_S x ranks (srun step start and MPI_Init
  over PMIx; assumed, not measured on Iris/Aion);
- one iteration of a collective at size s on n ranks: hops x L + bytes / B, with L and B the
  point-to-point latency and bandwidth of the slowest region the ranks span (cross_node
  for two nodes, cross_socket for more ranks than one socket holds, else same_numa) and
  hops/bytes per algorithm family (table ALGORITHM_COST); all-to-all shares the node's
  link among its ranks (B / ranks per node); the default costs what the best forced
  algorithm costs (OpenMPI's fixed decision is close to it in the seed's figures 4-5);
- OSU adds a barrier after every iteration: 2 x ceil(log2 n) x L;
- iterations and warm-up per size: OSU's (1000/200 up to 8 KiB, 100/10 above) unless the
  sweep file sets them.
Latency/bandwidth inputs: Aion small-message latencies from seed 002 table 2 (EPYC 7H12,
ORFEO: same NUMA 0.34 us, other NUMA same socket 0.36, other socket 0.65, other node 1.82)
and 1 MiB bandwidths from the May 2025 study (../shared/data, source builds); Iris has no
small-message figure, so its 8 KiB latencies from that study are used (an upper bound).
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import replace
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from mpiregress.families.coll import algorithms as algorithms_mod  # noqa: E402
from mpiregress.families.coll import plan  # noqa: E402
from mpiregress.model.topology import Topology  # noqa: E402

LAUNCH_S = 2.0
LAUNCH_PER_RANK_S = 0.005
WEEKLY_TARGET_MIN = 60.0
MR_TARGET_MIN = 5.0

# us and MB/s (= bytes/us) per region.
REGIONS = {
    "aion-batch": {"latency": {"same_numa": 0.34, "cross_numa": 0.36, "cross_socket": 0.65, "cross_node": 1.82},
                   "bandwidth": {"same_numa": 14545.6, "cross_numa": 12649.5, "cross_socket": 12664.8,
                                 "cross_node": 12323.0}},
    "iris-broadwell": {"latency": {"same_numa": 2.05, "cross_socket": 4.13, "cross_node": 7.19},
                       "bandwidth": {"same_numa": 4910.72, "cross_socket": 4739.22, "cross_node": 8491.02}},
    "iris-skylake": {"latency": {"same_numa": 2.05, "cross_socket": 4.13, "cross_node": 7.19},
                     "bandwidth": {"same_numa": 4910.72, "cross_socket": 4739.22, "cross_node": 8491.02}},
}


def _log2(n: int) -> int:
    return max(1, math.ceil(math.log2(n)))


def _seg(s: int, seg: int) -> int:
    return min(s, seg) if seg else s


# (hops, bytes on the critical path) per algorithm, for n ranks and s bytes per rank.
ALGORITHM_COST = {
    ("bcast", "basic_linear"): lambda n, s, seg: (n - 1, (n - 1) * s),
    ("bcast", "chain"): lambda n, s, seg: (math.ceil((n - 1) / 4), s + (math.ceil((n - 1) / 4) - 1) * _seg(s, seg)),
    ("bcast", "pipeline"): lambda n, s, seg: (n - 1, s + (n - 2) * _seg(s, seg)),
    ("bcast", "split_binary_tree"): lambda n, s, seg: (_log2(n), s + _log2(n) * _seg(s, seg)),
    ("bcast", "binary_tree"): lambda n, s, seg: (_log2(n), 2 * _log2(n) * _seg(s, seg) + s),
    ("bcast", "binomial"): lambda n, s, seg: (_log2(n), _log2(n) * s),
    ("bcast", "knomial"): lambda n, s, seg: (_log2(n), 3 * math.ceil(math.log(max(n, 2), 4)) * s),
    ("bcast", "scatter_allgather"): lambda n, s, seg: (2 * _log2(n), 2 * s),
    ("bcast", "scatter_allgather_ring"): lambda n, s, seg: (_log2(n) + n - 1, 2 * s),
    ("scatter", "basic_linear"): lambda n, s, seg: (n - 1, (n - 1) * s),
    ("scatter", "binomial"): lambda n, s, seg: (_log2(n), (n - 1) * s),
    ("scatter", "linear_nb"): lambda n, s, seg: (n - 1, (n - 1) * s),
    ("allreduce", "basic_linear"): lambda n, s, seg: (2 * (n - 1), 2 * (n - 1) * s),
    ("allreduce", "nonoverlapping"): lambda n, s, seg: (2 * _log2(n), 2 * _log2(n) * s),
    ("allreduce", "recursive_doubling"): lambda n, s, seg: (_log2(n), _log2(n) * s),
    ("allreduce", "ring"): lambda n, s, seg: (2 * (n - 1), 2 * s),
    ("allreduce", "segmented_ring"): lambda n, s, seg: (2 * (n - 1), 2 * s),
    ("allreduce", "rabenseifner"): lambda n, s, seg: (2 * _log2(n), 2 * s),
    ("alltoall", "linear"): lambda n, s, seg: (n - 1, (n - 1) * s),
    ("alltoall", "pairwise"): lambda n, s, seg: (n - 1, (n - 1) * s),
    ("alltoall", "modified_bruck"): lambda n, s, seg: (_log2(n), _log2(n) * s * n // 2),
    ("alltoall", "linear_sync"): lambda n, s, seg: (n - 1, (n - 1) * s),
    ("alltoall", "two_proc"): lambda n, s, seg: (1, s),
}


def cores_per_node(partition: str) -> int:
    info = json.loads((REPO / "checks" / "topology" / partition / "processor.json").read_text())
    return len(Topology.from_processor_info(info).cores)


def sockets_of(partition: str) -> int:
    info = json.loads((REPO / "checks" / "topology" / partition / "processor.json").read_text())
    return len(Topology.from_processor_info(info).sockets())


def region_for(nprocs: int, nodes: int, cores: int, sockets: int, distribution: str) -> str:
    if nodes > 1:
        return "cross_node"
    if nprocs > cores // sockets or distribution.endswith("cyclic"):
        return "cross_socket"
    return "same_numa"


def iteration_us(coll: str, alg: str, n: int, nodes: int, s: int, region: str, figures: dict, seg: int,
                 tuned: algorithms_mod.TunedAlgorithms) -> float:
    lat, bw = figures["latency"][region], figures["bandwidth"][region]
    if alg == algorithms_mod.DEFAULT:
        options = [a.name for a in tuned.collective(coll).algorithms if a.only_nprocs in (None, n)]
        return min(iteration_us(coll, a, n, nodes, s, region, figures, seg, tuned) for a in options)
    hops, nbytes = ALGORITHM_COST[(coll, alg)](n, s, seg)
    if coll == "alltoall":
        bw = bw / max(1, n // nodes)
    return hops * lat + nbytes / bw + 2 * _log2(n) * lat


def step_seconds(step: plan.Step, partition: str, cores: int, sockets: int, seg: int,
                 tuned: algorithms_mod.TunedAlgorithms) -> float:
    figures = REGIONS[partition]
    region = region_for(step.nprocs, step.nodes, cores, sockets, step.distribution)
    total_us = 0.0
    for size in step.sizes.sizes():
        iters, warm = step.sizes.iterations_at(size)
        total_us += (iters + warm) * iteration_us(step.collective, step.algorithm, step.nprocs, step.nodes,
                                                  size, region, figures, seg, tuned)
    return step.repeats * (LAUNCH_S + LAUNCH_PER_RANK_S * step.nprocs + total_us / 1e6)


def allocation_minutes(steps: list[plan.Step], partition: str, seg: int, tuned: algorithms_mod.TunedAlgorithms,
                       pack_one_node: bool = False) -> tuple[float, dict[str, float]]:
    """Minutes of a two-node allocation running ``steps`` one after the other (or one-node steps
    two at a time, one per node, when ``pack_one_node``), and the minutes per collective."""
    cores, sockets = cores_per_node(partition), sockets_of(partition)
    one_node, two_node = 0.0, 0.0
    per_coll: dict[str, float] = {}
    for step in steps:
        seconds = step_seconds(step, partition, cores, sockets, seg, tuned)
        per_coll[step.collective] = per_coll.get(step.collective, 0.0) + seconds / 60
        if step.nodes == 1:
            one_node += seconds
        else:
            two_node += seconds
    if pack_one_node:
        one_node /= 2
    return (one_node + two_node) / 60, per_coll


ALLTOALL_CAP = 65536


def reduced(subset: plan.Subset) -> plan.Subset:
    """The proposed reduction: -i 100 -x 10 up to 8 KiB, -i 20 -x 2 above (OSU: 1000/200, 100/10),
    and all-to-all measured up to 64 KiB only (above, its cost grows with ranks x size and it
    dominates everything else)."""
    ranges = []
    for r in subset.ranges:
        if r.low <= plan.OSU_LARGE_MESSAGE < r.high:
            ranges += [plan.SizeRange(r.low, plan.OSU_LARGE_MESSAGE, 100, 10),
                       plan.SizeRange(plan.OSU_LARGE_MESSAGE * 2, r.high, 20, 2)]
        elif r.high <= plan.OSU_LARGE_MESSAGE:
            ranges.append(plan.SizeRange(r.low, r.high, 100, 10))
        else:
            ranges.append(plan.SizeRange(r.low, r.high, 20, 2))
    caps = dict(subset.max_size)
    if "alltoall" in subset.collectives:
        caps["alltoall"] = min(caps.get("alltoall", ALLTOALL_CAP), ALLTOALL_CAP)
    return replace(subset, ranges=tuple(ranges), max_size=tuple(sorted(caps.items())))


def osu_defaults(subset: plan.Subset) -> plan.Subset:
    """``subset`` without its iteration settings and size caps: what OSU's defaults would cost.
    Contiguous size ranges become one OSU invocation again."""
    merged: list[plan.SizeRange] = []
    for r in subset.ranges:
        if merged and merged[-1].high * 2 == r.low:
            merged[-1] = plan.SizeRange(merged[-1].low, r.high)
        else:
            merged.append(plan.SizeRange(r.low, r.high))
    return replace(subset, ranges=tuple(merged), max_size=())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sweep", type=Path, default=plan.sweep_file())
    parser.add_argument("--openmpi", default="4.1.6", help="toolchain OpenMPI version (gompi/2023b: 4.1.6)")
    parser.add_argument("--osu-defaults", action="store_true",
                        help="ignore the sweep file's iterations and size caps (OSU's defaults)")
    args = parser.parse_args()
    tuned = algorithms_mod.load(args.openmpi)
    subsets = plan.load(args.sweep)
    if args.osu_defaults:
        subsets = {name: osu_defaults(s) for name, s in subsets.items()}
    print(f"collective sweep cost (model in the docstring); OpenMPI {args.openmpi}, sweep {args.sweep}"
          f"{' with OSU default iterations and no size caps' if args.osu_defaults else ''}")
    print(f"{'partition':15} {'subset':8} {'steps':>6} {'ranks max':>9} {'minutes':>8} {'target':>7}  verdict")
    verdicts = []
    for partition in REGIONS:
        cores = cores_per_node(partition)
        for name, target in (("weekly", WEEKLY_TARGET_MIN), ("mr", MR_TARGET_MIN)):
            subset = subsets[name]
            seg = subset.segsize if subset.segsize is not None else tuned.default_segsize
            steps = plan.steps(subset, tuned, cores)
            minutes, per_coll = allocation_minutes(steps, partition, seg, tuned)
            ok = minutes <= target
            verdicts.append(ok)
            print(f"{partition:15} {name:8} {len(steps):6d} {max(s.nprocs for s in steps):9d} {minutes:8.1f} "
                  f"{target:7.0f}  {'meets the target' if ok else 'OVER the target'}")
            print(f"{'':15} {'':8} by collective: " + ", ".join(f"{c} {m:.1f} min" for c, m in per_coll.items()))
            if not ok:
                small = reduced(subset)
                steps_r = plan.steps(small, tuned, cores)
                minutes_r, per_r = allocation_minutes(steps_r, partition, seg, tuned)
                minutes_p, _ = allocation_minutes(steps_r, partition, seg, tuned, pack_one_node=True)
                print(f"{'':15} {name + '-r':8} {len(steps_r):6d} {'':9} {minutes_r:8.1f} {target:7.0f}  "
                      f"reduced: -i 100 -x 10 up to 8 KiB, -i 20 -x 2 above, alltoall up to 64 KiB "
                      f"({'meets' if minutes_r <= target else 'still over'})")
                print(f"{'':15} {name + '-rp':8} {len(steps_r):6d} {'':9} {minutes_p:8.1f} {target:7.0f}  "
                      f"reduced and one-node steps packed two at a time (one per node) "
                      f"({'meets' if minutes_p <= target else 'still over'})")
                print(f"{'':15} {'':8} reduced by collective: " + ", ".join(f"{c} {m:.1f} min" for c, m in per_r.items()))
    print("all targets met as configured" if all(verdicts) else
          "some targets are not met as configured: see the reduced figures above")
    return 0


if __name__ == "__main__":
    sys.exit(main())
