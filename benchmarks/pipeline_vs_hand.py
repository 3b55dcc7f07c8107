"""Does the pipeline measure what a person measures by hand? Prints one ratio.

On the local one-host Slurm, alternates N times between
  (a) `mpiregress run --system local` for osu_latency 8192 B, same_numa, source build, and
  (b) the same binary launched by hand with the same binding:
      srun --mpi=pmix -N1 -n2 --cpus-per-task=1 --cpu-bind=map_cpu:0,1 osu_latency -m 8192:8192 -x 100 -i 1000
and prints median(a) / median(b), which should be 1.0 within noise. Alternating the two
keeps slow drifts of a shared machine from landing on one side only.

    python benchmarks/pipeline_vs_hand.py [--rounds 5] [--manifest-dir DIR]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from mpiregress import paths
from mpiregress.cluster.local import LocalCluster  # noqa: E402
from mpiregress.families import osu_output
from mpiregress.model import (
    manifest,
    microarch,
    topology,  # noqa: E402
)


def through_pipeline(env: dict, manifest_dir: Path, report_dir: Path) -> float:
    done = subprocess.run(
        [sys.executable, "-m", "mpiregress", "run", "--system", "local", "--methods", "source",
         "--metrics", "latency", "--placements", "same_numa", "--no-build", "--allow-missing-baselines",
         "--manifest-dir", str(manifest_dir), "--report-dir", str(report_dir)],
        env=env, capture_output=True, text=True, cwd=REPO, timeout=600)
    if done.returncode != 0:
        sys.exit(f"pipeline run failed (exit {done.returncode}):\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    (result,) = json.loads((report_dir / "results.json").read_text())
    return result["value"]


def by_hand(env: dict, binary: Path, map_cpu: str) -> float:
    done = subprocess.run(
        ["srun", "--mpi=pmix", "-p", "batch", "--exclusive", "-N1", "-n2", "--cpus-per-task=1",
         f"--cpu-bind=map_cpu:{map_cpu}", str(binary), "-m", "8192:8192", "-x", "100", "-i", "1000"],
        env=env, capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        sys.exit(f"srun failed (exit {done.returncode}): {done.stderr[-1000:]}")
    return osu_output.parse(done.stdout).value(8192)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--manifest-dir", type=Path, default=paths.manifest_dir())
    args = parser.parse_args()

    cluster = LocalCluster()
    cluster.start()
    env = dict(os.environ, **cluster.client_env(),
               OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    host = microarch.host_target()
    build, reason = manifest.select(args.manifest_dir, "source", [host])
    if build is None:
        sys.exit(f"{reason} (the benchmark reuses a build; run `mpiregress run --system local` once)")
    topo_file = paths.checks_dir() / "topology" / "local-batch" / "processor.json"
    binding = topology.place("same_numa", topology.Topology.from_processor_info(json.loads(topo_file.read_text())))

    pipeline, hand = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.rounds):
            pipeline.append(through_pipeline(env, args.manifest_dir, Path(tmp) / f"run{i}"))
            hand.append(by_hand(env, build.binary("osu_latency"), binding.map_cpu()))
            print(f"round {i + 1}: pipeline {pipeline[-1]:.2f} us, by hand {hand[-1]:.2f} us", flush=True)
    official = "official OSU 7.2 tarball" if build.sha256_official else f"tarball sha256 {build.sha256[:12]}… (not the official one)"
    print(f"binary: {build.binary('osu_latency')} ({official}), binding map_cpu:{binding.map_cpu()}")
    print(f"median latency through the pipeline: {statistics.median(pipeline):.2f} us (n={len(pipeline)})")
    print(f"median latency by hand:              {statistics.median(hand):.2f} us (n={len(hand)})")
    print(f"ratio pipeline / by hand: {statistics.median(pipeline) / statistics.median(hand):.3f}")


if __name__ == "__main__":
    main()
