"""A link taken down mid-run: seconds from the fault to the product's exit, and what its report said.

On a namespaces cluster of the project's own (4 nodes, its own --state-dir), `mpiregress run` measures
cross_node latency then bandwidth (one Slurm job each, the OSU test double built through the source
path, the baselines widened so that the fault, not this loaded host's speed, decides the verdict);
once the latency job has finished and the bandwidth job runs, the link of a node it uses is taken
down (`mpiregress cluster fault down NODE`: its veth is set down, as a pulled cable). Printed per
repeat: the exit code (3 is infrastructure), the seconds from the fault to the exit, the finished
measurements the results kept, and the words the report gives for the fault.

    .venv/bin/python benchmarks/link_down.py [--repeats 3] [--state-dir /tmp/link-down-c]

Needs root (network namespaces); the cluster is stopped at the end (by the PIDs in its state folder).
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

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "tests")]

from helpers.e2e import wide_baselines  # noqa: E402
from helpers.linkdown import LinkDownRun, run_with_link_down  # noqa: E402
from helpers.osu_double import make_tarball  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--state-dir", type=Path, default=None,
                        help="the cluster's folder (default: a new one in /tmp)")
    parser.add_argument("--keep", action="store_true", help="keep the runs' report folders (their path is printed)")
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("link_down: network namespaces need root")
    root = Path(tempfile.mkdtemp(prefix="mpr-ld-", dir="/tmp"))
    root.chmod(0o755)   # munged runs as the munge user
    state = (args.state_dir or root / "c").resolve()
    _, sha256 = make_tarball(root / "mirror")
    env = dict(os.environ, MPIREGRESS_STATE_DIR=str(root / "state"), MPIREGRESS_LOCAL_CLUSTER_DIR=str(state),
               MPIREGRESS_BASELINES_DIR=str(wide_baselines(root / "baselines")),
               OSU_SOURCE_MIRROR=str(root / "mirror"), OSU_SHA256=sha256,
               OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    cli = [sys.executable, "-m", "mpiregress"]
    try:
        subprocess.run([*cli, "cluster", "start", "--nodes", "4", "--network", "namespaces", "--state-dir", str(state)],
                       env=env, check=True, cwd=REPO, timeout=300)
        rows: list[LinkDownRun] = []
        for index in range(args.repeats):
            found = run_with_link_down(env, root / f"run-{index}")
            rows.append(found)
            print(f"repeat {index + 1}: {found.line()}", flush=True)
        print(f"\n{'repeat':>6} {'exit':>4} {'fault->exit s':>13} {'kept':>4}  the report's words for the fault")
        for index, found in enumerate(rows, 1):
            said = found.reasons[0] if found.reasons else found.verdict
            print(f"{index:>6} {found.exit_code:>4} {found.seconds:>13.1f} {found.kept:>4}  {said}")
        seconds = sorted(r.seconds for r in rows)
        print(f"\nfault to exit: {seconds[0]:.1f}-{seconds[-1]:.1f} s over {len(rows)} run(s); "
              f"exit 3 in {sum(r.exit_code == 3 for r in rows)} of {len(rows)}")
        print(json.dumps([r.__dict__ for r in rows]), file=sys.stderr)
    finally:
        subprocess.run([*cli, "cluster", "stop", "--force", "--state-dir", str(state)], env=env, cwd=REPO,
                       timeout=300)
        if args.keep:
            print(f"the runs' report folders are in {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
