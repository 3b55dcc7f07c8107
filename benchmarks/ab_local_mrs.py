"""Two real toolchain MRs through the A/B pipeline on the local one-host Slurm: one red, one green.

What it does, with the same commands the pipeline's jobs run:

* **A** (the target branch's build): ``mpiregress build --method source`` with the checkout's
  toolchain file, its manifest placed in the system's manifest store
  (``<state>/ab-store/main/local-batch/``) as the default branch's build job leaves it
  (``ci/jobs/build.sh``), so ``--ab-against auto`` finds it there;
* **the red MR** changes the toolchain file: ``mpi.runtime_env: {OMPI_MCA_btl: '^vader'}`` (the
  toolchain's OpenMPI runs without its shared-memory transport, so same-node ranks talk over
  TCP loopback). B is built with that toolchain file; its manifest carries the variable in
  ``env.env_vars`` (printed), and the A/B check applies it to B's steps only;
* **the green MR** changes nothing: B is built again from the unchanged toolchain into its own
  install root, as the MR's build job would.

Each MR is judged by ``mpiregress run --system local --ab-against auto`` (k = 5 pairs per
series, interleaved A B B A ...); the script prints the exit code, the verdict and cause of
every series, and for the green MR how many of ``--green-runs`` runs stayed green.

OSU: the tarball in ``$OSU_SOURCE_MIRROR`` with ``$OSU_SHA256`` (real OSU 7.2 for evidence; the
test double works too). Slow (minutes per run on a loaded 2-core host): not part of the suite.

Usage: OSU_SOURCE_MIRROR=DIR OSU_SHA256=SUM python benchmarks/ab_local_mrs.py [--green-runs 20]
       [--iterations 100] [--placements same_numa] [--work /tmp/ab-mrs]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
RED_ENV = {"OMPI_MCA_btl": "^vader"}


def cli(args: list[str], env: dict[str, str], log: Path) -> int:
    with open(log, "w") as out:
        return subprocess.run([sys.executable, "-m", "mpiregress", *args], env=env, stdout=out,
                              stderr=subprocess.STDOUT, cwd=REPO).returncode


def build(toolchain: Path, manifests: Path, install: Path, env: dict[str, str], log: Path) -> dict:
    code = cli(["build", "--method", "source", "--system", "local", "--partition", "batch",
                "--toolchain", str(toolchain), "--manifest-dir", str(manifests), "--install-root", str(install)],
               env, log)
    if code != 0:
        sys.exit(f"build failed (exit {code}), see {log}")
    return json.loads(next(manifests.glob("source-*.json")).read_text())


def judge(name: str, b_manifests: Path, work: Path, env: dict[str, str], opts: argparse.Namespace) -> tuple[int, list]:
    report = work / "reports" / name
    code = cli(["run", "--system", "local", "--methods", "source", "--no-build", "--ab-against", "auto",
                "--manifest-dir", str(b_manifests), "--iterations", str(opts.iterations),
                "--placements", opts.placements, "--report-dir", str(report)], env, work / f"{name}.log")
    rows = []
    if (report / "ab-samples.json").exists():
        from mpiregress.report import ab as ab_report
        from mpiregress.verdict.ab import judge as ab_judge

        samples = [r for r in json.loads((report / "ab-samples.json").read_text()) if "ab_side" in r]
        verdicts, causes = ab_judge.judge_run(samples)
        rows = ab_report.rows(verdicts, causes)
    return code, rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--green-runs", type=int, default=20)
    parser.add_argument("--iterations", type=int, default=100)
    # cross_node on this host is a heterogeneous step that can hang after its output for up to the
    # step timeout (Slurm 22.05, SchedMD 16817): same_numa only keeps 20 runs within an hour.
    parser.add_argument("--placements", default="same_numa")
    parser.add_argument("--work", type=Path, default=Path("/tmp/ab-mrs"))
    parser.add_argument("--deadline-minutes", type=float, default=0, help="stop green runs after this long (0: never)")
    opts = parser.parse_args()
    if not os.environ.get("OSU_SOURCE_MIRROR"):
        sys.exit("set OSU_SOURCE_MIRROR (and OSU_SHA256) to the folder of an OSU 7.2 tarball")
    work = opts.work
    # Builds are reused when nothing changed (the source method's own reuse test); reports are new.
    shutil.rmtree(work / "reports", ignore_errors=True)
    work.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, MPIREGRESS_STATE_DIR=str(work / "state"),
               MPIREGRESS_LOCAL_CLUSTER_DIR=os.environ.get("MPIREGRESS_LOCAL_CLUSTER_DIR",
                                                           str(REPO / "var" / "local-cluster")))
    toolchain = REPO / "toolchains" / "2023b.yaml"
    store = work / "state" / "ab-store" / "main" / "local-batch"
    started = time.time()
    a = build(toolchain, store, work / "A-install", env, work / "build-A.log")
    print(f"A (main):  {a['prefix']}  env_vars {a['env']['env_vars']}  -> manifest store {store}")

    red_toolchain = work / "mr-red" / "toolchains" / "2023b.yaml"
    red_toolchain.parent.mkdir(parents=True, exist_ok=True)
    data = yaml.safe_load(toolchain.read_text())
    data["mpi"]["runtime_env"] = RED_ENV
    red_toolchain.write_text(yaml.safe_dump(data, sort_keys=False))
    b_red = build(red_toolchain, work / "mr-red" / "manifests", work / "mr-red" / "install", env, work / "build-red.log")
    print(f"B (red MR: toolchain mpi.runtime_env {RED_ENV}): {b_red['prefix']}  env_vars {b_red['env']['env_vars']}")
    b_green = build(toolchain, work / "mr-green" / "manifests", work / "mr-green" / "install", env,
                    work / "build-green.log")
    print(f"B (green MR, no change): {b_green['prefix']}  env_vars {b_green['env']['env_vars']}")

    code, rows = judge("red", work / "mr-red" / "manifests", work, env, opts)
    print(f"\nred MR: exit {code}")
    for r in rows:
        print(f"  {r.verdict:<12} {r.series:<44} {r.effect_text:>8} {r.interval_text:>18}  {r.cause}")
    green_codes = []
    for i in range(opts.green_runs):
        if opts.deadline_minutes and time.time() - started > opts.deadline_minutes * 60:
            break
        code, rows = judge(f"green-{i}", work / "mr-green" / "manifests", work, env, opts)
        green_codes.append(code)
        worst = max((r for r in rows if r.effect is not None), key=lambda r: r.effect, default=None)
        print(f"green run {i + 1}: exit {code}"
              + (f", worst series {worst.series} {worst.effect_text} {worst.interval_text}" if worst else "")
              + "".join(f"\n    {r.verdict}: {r.series}: {r.cause or r.reason}" for r in rows
                        if r.verdict not in ("pass", "skip")), flush=True)
    green = sum(c == 0 for c in green_codes)
    print(f"\n| MR | runs | right | result |\n|---|---|---|---|\n| red (toolchain OMPI_MCA_btl=^vader) | 1 | "
          f"{int(code_red_ok(work))} | see above |\n| green (no change) | {len(green_codes)} | {green} | "
          f"{green}/{len(green_codes)} exit 0 |")
    print(f"total time {(time.time() - started) / 60:.1f} min")
    return 0


def code_red_ok(work: Path) -> bool:
    status = work / "reports" / "red" / "status.json"
    return status.exists() and json.loads(status.read_text()).get("exit_code") == 1


if __name__ == "__main__":
    raise SystemExit(main())
