"""Cross-method consistency on real binaries: source and EasyBuild builds measured on the local Slurm,
alike and then with one build made different, and what the consistency check says about each.

Two rounds, each a real `mpiregress run --system local --methods source,easybuild` (same_numa and
cross_node latency) followed by the consistency check of its results with the builds' manifests:

1. alike: both builds as systems/local.yaml makes them (same OpenMPI, -O2, same target flags);
2. injected: the EasyBuild build again, from a copy of the systems data whose host toolchain sets a
   different default MCA parameter in the OpenMPI module file EasyBuild is offered
   (``OMPI_MCA_btl: self,tcp``: ranks on one node talk over TCP loopback instead of shared memory),
   as a site's module could. The source build is unchanged.

It prints each round's values, the manifests' differences and the findings. Nothing is asserted:
the machine is shared and loaded; whether the injected build is found behind is the figure.

    python benchmarks/consistency_injected.py --source-mirror DIR [--sha256 HEX]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from mpiregress.builds import differences  # noqa: E402
from mpiregress.model import manifest, results  # noqa: E402
from mpiregress.verdict import cross_method as consistency  # noqa: E402

RUN = ["--methods", "source,easybuild", "--metrics", "latency", "--placements", "same_numa,cross_node",
       "--iterations", "500", "--allow-missing-baselines"]


def cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mpiregress", *args], env=env, cwd=REPO, capture_output=True,
                          text=True, timeout=1800)


def round_(name: str, env: dict[str, str], report: Path) -> None:
    for method in ("source", "easybuild"):
        done = cli(env, "build", "--method", method, "--system", "local")
        if done.returncode != 0:
            sys.exit(f"{name}: build {method} failed (exit {done.returncode}): {done.stderr[-1500:]}")
    done = cli(env, "run", "--system", "local", *RUN, "--no-build", "--report-dir", str(report))
    print(f"\n== {name}: mpiregress run exit {done.returncode}")
    table = [line for line in done.stdout.splitlines() if line.startswith(("partition", "local:batch", "---"))]
    print("\n".join(table))
    found = results.load((report / "results.json").read_text()) if (report / "results.json").exists() else []
    builds = manifest.find_all(Path(env["MPIREGRESS_STATE_DIR"]) / "manifests")
    diffs = differences.between(builds)
    print("manifests differ:", {"/".join(sorted(k)): v for k, v in diffs.items()} or "no")
    findings = consistency.check(consistency.method_values(found), builds=diffs)
    print("consistency findings:" if findings else "consistency findings: none")
    for finding in findings:
        print("  " + finding.sentence())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source-mirror", default=os.environ.get("OSU_SOURCE_MIRROR"), required=False)
    parser.add_argument("--sha256", default=os.environ.get("OSU_SHA256"))
    args = parser.parse_args()
    if not args.source_mirror:
        sys.exit("consistency_injected: pass --source-mirror DIR (or set OSU_SOURCE_MIRROR)")
    root = Path(tempfile.mkdtemp(prefix="mpiregress-consistency-", dir="/tmp"))
    root.chmod(0o755)   # munged runs as the munge user
    env = dict(os.environ, MPIREGRESS_STATE_DIR=str(root / "state"), OSU_SOURCE_MIRROR=str(args.source_mirror),
               MPIREGRESS_LOCAL_CLUSTER_DIR=str(root / "local-cluster"),
               OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    if args.sha256:
        env["OSU_SHA256"] = args.sha256
    try:
        round_("alike", env, root / "alike")
        systems = root / "systems"
        shutil.copytree(REPO / "systems", systems)
        local = yaml.safe_load((systems / "local.yaml").read_text())
        local["host_toolchain"]["runtime_env"] = {"OMPI_MCA_btl": "self,tcp"}
        (systems / "local.yaml").write_text(yaml.safe_dump(local, sort_keys=False))
        injected = dict(env, MPIREGRESS_SYSTEMS_DIR=str(systems))
        done = cli(injected, "build", "--method", "easybuild", "--system", "local", "--rebuild")
        if done.returncode != 0:
            sys.exit(f"injected: rebuild easybuild failed: {done.stderr[-1500:]}")
        m = json.loads(Path(done.stdout.strip().splitlines()[-1]).read_text())
        print(f"\ninjected: the EasyBuild build's OpenMPI module sets {m['extra'].get('module_env')}")
        round_("injected (easybuild's OpenMPI module: OMPI_MCA_btl=self,tcp)", injected, root / "injected")
    finally:
        cli(env, "cluster", "stop", "--state-dir", str(root / "local-cluster"))
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
