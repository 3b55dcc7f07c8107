"""The real ``.gitlab-ci.yml`` under gitlab-ci-local, as GitLab runs a toolchain MR: bad MRs red for the
right reason, a comment-only MR green, every job's status printed.

Each MR is the working tree committed as ``main`` plus the MR commit (tests/test_gitlab_ci.py helpers),
run with ``CI_PIPELINE_SOURCE=merge_request_event`` and ``MPIREGRESS_SYSTEMS=local`` up to
``verdict:local``: lint, the MR's build, ``run:local:batch`` (measures), ``ab:local:batch`` (A built at
the merge base, A and B interleaved on the same nodes), then the one ``verdict:local``. Printed per MR:
every job's status, the verdict's first line and its gating findings (from verdict.json).

MRs: ``single-copy`` (``mpi.runtime_env: {OMPI_MCA_btl_vader_single_copy_mechanism: none}``: same-node
bandwidth loses CMA), ``no-vader`` (``OMPI_MCA_btl: ^vader``: same-node ranks lose shared memory),
and a comment in the toolchain file, ``--green`` times (default 3).

    OSU_SOURCE_MIRROR=DIR OSU_SHA256=SUM python benchmarks/verdict_pipeline.py [--work DIR] [--green 3]
        [--only single-copy,no-vader,green]

Real OSU 7.2 for evidence (a tarball in OSU_SOURCE_MIRROR). About 6-10 minutes per MR on a 2-core VM.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

from test_gitlab_ci import GCL, gcl, job_verdicts, make_repo, mr_vars, touch_toolchain  # noqa: E402

CLUSTER = REPO / "var" / "local-cluster"


def runtime_env(env: dict[str, str]):
    def change(repo: Path) -> None:
        path = repo / "toolchains" / "2023b.yaml"
        data = yaml.safe_load(path.read_text())
        data["mpi"]["runtime_env"] = env
        path.write_text(yaml.safe_dump(data, sort_keys=False))
    return change


MRS = {"single-copy": (runtime_env({"OMPI_MCA_btl_vader_single_copy_mechanism": "none"}), "FAIL"),
       "no-vader": (runtime_env({"OMPI_MCA_btl": "^vader"}), "FAIL"),
       "green": (touch_toolchain, "PASS")}


def mr_pipeline(name: str, change, work: Path, needs: str, *options: str,
                more: dict[str, str] | None = None) -> tuple[subprocess.CompletedProcess, Path, float]:
    """One MR pipeline under gitlab-ci-local up to job ``needs`` on the project's local Slurm (real OSU from
    $OSU_SOURCE_MIRROR): the finished run, the MR's repository, the seconds it took."""
    root = work / name
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    repo = make_repo(root, change, f"{name} toolchain MR")
    # The runner's state folder: its local-cluster is the project's own, install prefixes beside it.
    state = Path(tempfile.mkdtemp(prefix=f"vp-{name[:8]}-", dir="/tmp"))
    state.chmod(0o755)
    (state / "local-cluster").symlink_to(CLUSTER, target_is_directory=True)
    variables = {**mr_vars(), "MPIREGRESS_SYSTEMS": "local", "MPIREGRESS_AB": "on",
                 "OSU_SOURCE_MIRROR": os.environ["OSU_SOURCE_MIRROR"], "OSU_SHA256": os.environ.get("OSU_SHA256", ""),
                 "MPIREGRESS_LOCAL_STATE_DIR": str(state), "MPIREGRESS_HISTORY_DB": str(root / "history.sqlite"),
                 "MPIREGRESS_VENV": str(REPO / ".venv"), "MPIREGRESS_AB_ARGS": "--iterations 200", **(more or {})}
    started = time.time()
    done = gcl(GCL, repo, "--shell-isolation", "--concurrency", "1", *options, "--needs", needs,
               variables=variables, timeout=5400)
    took = time.time() - started
    (root / "gitlab-ci-local.log").write_text(done.stdout + done.stderr)
    shutil.rmtree(state, ignore_errors=True)
    return done, repo, took


def prepare(work: Path) -> None:
    """What every MR pipeline here needs: the OSU mirror, gitlab-ci-local, the project's local Slurm, a work
    folder munge and the job steps can traverse."""
    if not os.environ.get("OSU_SOURCE_MIRROR"):
        sys.exit("set OSU_SOURCE_MIRROR (and OSU_SHA256) to the folder of an OSU 7.2 tarball")
    if not GCL.exists():
        subprocess.run(["bash", str(REPO / "ci" / "install-gitlab-ci-local.sh")], check=True)
    subprocess.run([sys.executable, "-m", "mpiregress", "cluster", "start", "--state-dir", str(CLUSTER)],
                   check=True, cwd=REPO)
    work.mkdir(parents=True, exist_ok=True)
    work.chmod(0o755)


def one_mr(name: str, change, work: Path) -> tuple[dict, dict, float]:
    done, repo, took = mr_pipeline(name, change, work, "verdict:local",
                                   more={"MPIREGRESS_RUN_ARGS": "--iterations 200 --repeat 3 --families pt2pt"})
    found = list(repo.glob("**/reports/report-local/verdict.json"))
    verdict = json.loads(found[0].read_text()) if found else {}
    return job_verdicts(done.stdout), verdict, took


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, default=Path("/tmp/verdict-pipeline"))
    parser.add_argument("--green", type=int, default=3)
    parser.add_argument("--only", default="single-copy,no-vader,green")
    opts = parser.parse_args()
    prepare(opts.work)
    plan = []
    for name in opts.only.split(","):
        plan += [f"green-{i + 1}" for i in range(opts.green)] if name == "green" else [name]
    right = 0
    for name in plan:
        change, wanted = MRS[name.split("-")[0] if name.startswith("green") else name]
        jobs, verdict, took = one_mr(name, change, opts.work)
        got = jobs.get("verdict:local", "did not run")
        right += got == wanted
        print(f"\n== {name} MR: verdict:local {got} (wanted {wanted}) in {took:.0f} s")
        print("   jobs: " + ", ".join(f"{job} {status}" for job, status in sorted(jobs.items())))
        if verdict:
            print(f"   verdict: {verdict['state']} (exit {verdict['exit_code']}), event {verdict['event']}")
            for f in verdict["findings"]:
                if f["state"] != "evidence":
                    effect = "" if f["effect"] is None else f" {f['effect']:+.1%}"
                    interval = "" if f["low"] is None else f" [{f['low']:+.1%}, {f['high']:+.1%}]"
                    print(f"   - {f['state']}: {f['judge']}: {f['subject']}{effect}{interval}; cause: "
                          f"{f['cause'] or '-'}")
    print(f"\n{right} of {len(plan)} MRs judged as wanted")
    return 0


if __name__ == "__main__":
    sys.exit(main())
