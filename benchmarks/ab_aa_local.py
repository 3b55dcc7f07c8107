"""A/A "MRs" on the local Slurm: the real false alarms per MR and the power per series, beside the simulation.

An A/A run pairs the target branch's build with itself through the same A/B path as a toolchain MR
(``mpiregress run --ab-against SAME``: the same check, interleaving, sequential looks, judge and
composed verdict). Nothing changed, so every regression is a false alarm and every "needs a look" is
a good MR turned yellow. Per MR the script prints the exit code, the state, the pairs each series
took and what each could have seen (its power); at the end:

* false alarms per MR (MRs with at least one regression) with the Wilson 95 % upper bound, and
  yellow MRs, beside the simulation's figure for the same design (``benchmarks/ab_sequential.py``,
  docs/ab.md: 0.5 % per MR of 80 series);
* per series: the median and worst power over the MRs, and how many MRs it was short of the
  system's target (``power.paired_ab`` in systems/local.yaml);
* the noise model check: the real pair log-ratio spread per series against the spread the
  simulation's noise model (``benchmarks/_synth.py``) gives the same series, and the power the
  judge computes on simulated pairs of that model with the same number of pairs.

OSU: real OSU 7.2 with ``OSU_SOURCE_MIRROR`` (and ``OSU_SHA256``), else the test double under tests/.
Slow (a few minutes per MR on a loaded 2-core host): not part of the suite.

Usage: OSU_SOURCE_MIRROR=DIR OSU_SHA256=SUM python benchmarks/ab_aa_local.py [--mrs 10]
       [--placements same_numa] [--metrics latency,bandwidth] [--iterations 100] [--work /tmp/ab-aa]
       [--deadline-minutes 60]
"""
from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benchmarks"))
sys.path.insert(0, str(REPO / "tests"))

from _synth import NOISE, locality  # noqa: E402

from mpiregress.model.systems import get  # noqa: E402
from mpiregress.verdict.ab import paired, sequential  # noqa: E402
from mpiregress.verdict.power import target_for, targets_of  # noqa: E402

SIMULATED_FA_PER_MR = 0.005   # docs/ab.md: sequential 4 + 2 ... 10, 400 null MRs of 80 series (95 % upper 1.8 %)


def cli(args: list[str], env: dict[str, str], log: Path, timeout: float = 3600) -> int:
    with open(log, "w") as out:
        try:
            return subprocess.run([sys.executable, "-m", "mpiregress", *args], env=env, stdout=out,
                                  stderr=subprocess.STDOUT, cwd=REPO, timeout=timeout).returncode
        except subprocess.TimeoutExpired:
            return -1


def upper95(hits: int, n: int) -> float:
    """Wilson 95 % upper bound of a rate."""
    if n == 0:
        return 1.0
    z = 1.96
    p = hits / n
    centre = p + z * z / (2 * n)
    spread = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return min(1.0, (centre + spread) / (1 + z * z / n))


def simulated(series: dict, pairs: dict, target, seed: int = 7) -> tuple[dict, dict]:
    """(pair log-ratio spread, paired power) per series from the simulation's noise model with the real pairs."""
    rng = np.random.default_rng(seed)
    records = []
    spread = {}
    for name, key in series.items():
        run_sigma, jitter = NOISE[(key.metric, locality(dict(key.parameters)["placement"]))]
        del run_sigma   # common to A and B of a pair: it cancels in the ratio
        n = max(pairs.get(name, 4), 4)
        d = []
        for pair in range(n):
            a, b = (float(np.exp(abs(rng.standard_t(3)) * jitter)) for _ in range(2))
            d.append(math.log(b / a))
            for side, value in (("A", a), ("B", b)):
                records.append(dict(system="sim", partition="batch", method=key.method, benchmark=key.benchmark,
                                    parameters=dict(key.parameters), metric=key.metric, unit="", value=value,
                                    status="pass", ab_side=side, ab_pair=pair, nodelist=["n1"], ab_max_pairs=n))
        spread[name] = paired.robust_scale(np.asarray(d))
    config = paired.PairedConfig(target=target)
    power = {v.name().replace("sim/", "local/", 1): v.power.detectable for v in paired.judge(records, config)
             if v.power is not None}
    return spread, power


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mrs", type=int, default=10)
    parser.add_argument("--placements", default="same_numa")
    parser.add_argument("--metrics", default="latency,bandwidth")
    parser.add_argument("--iterations", type=int, default=100)
    parser.add_argument("--work", type=Path, default=Path("/tmp/ab-aa"))
    parser.add_argument("--deadline-minutes", type=float, default=0, help="stop starting MRs after this long")
    parser.add_argument("--keep-cluster", action="store_true", help="leave the local cluster running at the end")
    opts = parser.parse_args()
    work = opts.work
    shutil.rmtree(work / "reports", ignore_errors=True)
    work.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, MPIREGRESS_STATE_DIR=str(work / "state"),
               MPIREGRESS_LOCAL_CLUSTER_DIR=os.environ.get("MPIREGRESS_LOCAL_CLUSTER_DIR",
                                                           str(REPO / "var" / "local-cluster")))
    osu = "real OSU 7.2 (" + env["OSU_SOURCE_MIRROR"] + ")" if env.get("OSU_SOURCE_MIRROR") else "the OSU test double"
    if not env.get("OSU_SOURCE_MIRROR"):
        from helpers.osu_double import make_tarball  # the suite's double, packed as a tarball

        mirror = work / "double-mirror"
        mirror.mkdir(exist_ok=True)
        _, sha = make_tarball(mirror)
        env.update(OSU_SOURCE_MIRROR=str(mirror), OSU_SHA256=sha)
    target = targets_of(get("local")).get("paired_ab")
    started = time.time()
    manifests = work / "main" / "manifests"
    code = cli(["build", "--method", "source", "--system", "local", "--partition", "batch", "--manifest-dir",
                str(manifests), "--install-root", str(work / "main" / "install")], env, work / "build.log")
    if code != 0:
        sys.exit(f"build failed (exit {code}), see {work / 'build.log'}")
    load = os.getloadavg()[0]
    print(f"A/A on the local cluster: {osu}, placements {opts.placements}, metrics {opts.metrics}, "
          f"{opts.iterations} iterations, schedule {sequential.schedule_of(get('local'))}, A/B target {target}; load "
          f"{load:.1f} at the start", flush=True)
    outcomes = []
    powers: dict[str, list[float]] = {}
    spreads: dict[str, list[float]] = {}
    pairs_of: dict[str, list[int]] = {}
    keys: dict = {}
    try:
        for i in range(opts.mrs):
            if opts.deadline_minutes and time.time() - started > opts.deadline_minutes * 60:
                print(f"deadline: stopped after {i} MRs")
                break
            report = work / "reports" / f"aa-{i}"
            t0 = time.time()
            code = cli(["run", "--system", "local", "--methods", "source", "--no-build", "--ab-against", "SAME",
                        "--manifest-dir", str(manifests), "--iterations", str(opts.iterations), "--placements",
                        opts.placements, "--metrics", opts.metrics, "--report-dir", str(report)], env,
                       work / f"aa-{i}.log")
            minutes = (time.time() - t0) / 60
            verdict_file = report / "verdict.json"
            if not verdict_file.exists():
                print(f"MR {i + 1}: exit {code}, no verdict (see {work / f'aa-{i}.log'})", flush=True)
                outcomes.append((code, "no verdict", 0, 0))
                continue
            verdict = json.loads(verdict_file.read_text())
            regressions = [f for f in verdict["findings"] if f["state"] == "regression"]
            looks = [f for f in verdict["findings"] if f["state"] == "needs a look"]
            outcomes.append((code, verdict["state"], len(regressions), len(looks)))
            samples = [r for r in json.loads((report / "ab-samples.json").read_text()) if "ab_side" in r]
            for s in paired.collect(samples).values():
                name = s.key.name()
                keys[name] = s.key
                if len(s.a) >= 2:
                    spreads.setdefault(name, []).append(paired.robust_scale(s.log_ratios()))
                pairs_of.setdefault(name, []).append(len(s.a))
            for name, p in verdict.get("power", {}).items():
                powers.setdefault(name, []).append(p["detectable"])
            line = (f"MR {i + 1}: exit {code} {verdict['state']} in {minutes:.1f} min (load "
                    f"{os.getloadavg()[0]:.1f}); " + "; ".join(
                        f"{n}: {pairs_of[n][-1]} pairs, could see >= {powers[n][-1]:.1%}" for n in sorted(powers)
                        if n in pairs_of))
            print(line + "".join(f"\n    {f['state']}: {f['subject']}: {f['sentence']}" for f in regressions + looks),
                  flush=True)
    finally:
        if not opts.keep_cluster:
            cli(["cluster", "stop"], env, work / "cluster-stop.log", timeout=300)
    judged = [o for o in outcomes if o[1] != "no verdict"]
    false = sum(o[2] > 0 for o in judged)
    yellow = sum(o[1] == "needs a look" for o in judged)
    print(f"\n{len(judged)} A/A MRs judged ({len(outcomes) - len(judged)} without a verdict) in "
          f"{(time.time() - started) / 60:.1f} min")
    print(f"real false alarms: {false}/{len(judged)} MRs with a regression ({false / max(len(judged), 1):.1%}, 95 % "
          f"upper {upper95(false, len(judged)):.1%}); simulated (benchmarks/ab_sequential.py, 80 series): "
          f"{SIMULATED_FA_PER_MR:.1%} per MR")
    print(f"yellow (needs a look) A/A MRs: {yellow}/{len(judged)}; green: "
          f"{sum(o[1] == 'pass' for o in judged)}/{len(judged)}")
    median_pairs = {n: int(statistics.median(p)) for n, p in pairs_of.items()}
    sim_spread, sim_power = simulated(keys, median_pairs, target or 0.05)
    print("(simulated: the noise model of benchmarks/_synth.py for the same series and pairs; pair spread = "
          "1.4826 MAD of log B/A)")
    print("\n| series | pairs (median) | power median | power worst | short of target | pair spread real | "
          "pair spread simulated | power simulated |\n|---|---|---|---|---|---|---|---|")
    for name in sorted(powers):
        ps = powers[name]
        wanted = target_for(target, keys[name].metric) if name in keys else None
        short = sum(p > wanted for p in ps) if wanted else 0
        real = statistics.median(spreads.get(name) or [float("nan")])
        print(f"| {name} | {median_pairs.get(name, 0)} | {statistics.median(ps):.1%} | {max(ps):.1%} | "
              f"{short}/{len(ps)} | {real:.2%} | {sim_spread.get(name, float('nan')):.2%} | "
              f"{sim_power.get(name, float('nan')):.1%} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
