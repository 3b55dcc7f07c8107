"""The real ``.gitlab-ci.yml`` under gitlab-ci-local, as GitLab runs a toolchain MR: bad MRs red for the
right reason, good MRs green with every job, every job's status and wall time printed.

Each MR is the working tree committed as ``main`` plus the MR commit (tests/test_gitlab_ci.py helpers),
run with ``CI_PIPELINE_SOURCE=merge_request_event`` and ``MPIREGRESS_SYSTEMS=local`` up to
``verdict:local``: lint, the MR's builds, ``ab:local:batch`` (A built at the merge base, A and B
interleaved on the same nodes; on a toolchain MR its B side is the MR's measurement, ``run:*`` does not
run), then the one ``verdict:local``.

The repository is as a user has it: baselines not widened, the pipeline's own settings (no
``MPIREGRESS_RUN_ARGS``/``MPIREGRESS_AB_ARGS``) unless ``--settings`` gives them. MRs (issue 30's set):

* ``sndbuf``: ``OMPI_MCA_btl_tcp_sndbuf``/``rcvbuf`` 4096 (cross-node bandwidth through 4 KiB socket
  buffers): red for "toolchain" on cross_node bandwidth, a B step that hits its time limit included;
* ``single-copy``: ``OMPI_MCA_btl_vader_single_copy_mechanism: none`` (same-node bandwidth loses CMA):
  red for "toolchain" on same-node bandwidth;
* ``no-vader``: ``OMPI_MCA_btl: ^vader`` (same-node ranks lose shared memory): red;
* ``neutral``: ``OMPI_MCA_btl_vader_eager_limit: 1024`` (no effect by hand: same-node 8 KiB latency
  3.68 -> 3.56 us): every job green, ``--green`` times;
* ``green``: a comment in the toolchain file: every job green, ``--green`` times.

Printed per MR: every job's status and wall time (gitlab-ci-local's "finished in"), the load average
before and after, the verdict's state, its findings that are not evidence, and the A/B power per series
(what each could have seen, from verdict.json). At the end: MRs judged as wanted, and per kind the wall
times of the pipeline and of the A/B job.

    OSU_SOURCE_MIRROR=DIR OSU_SHA256=SUM python benchmarks/verdict_pipeline.py [--work DIR] [--green 3]
        [--only sndbuf,single-copy,neutral,green] [--settings "--iterations 200"]

Real OSU 7.2 for evidence (a tarball in OSU_SOURCE_MIRROR). About 6-20 minutes per MR on a 2-core VM.
"""

from __future__ import annotations

import argparse
import json
import os
import re
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

from mpiregress.builds import unavailable_reason  # noqa: E402

CLUSTER = REPO / "var" / "local-cluster"
# gitlab-ci-local's line when a job ends: "<job> finished in 5.31 min" (pretty-hrtime).
FINISHED = re.compile(r"^(\S.*?)\s+finished in ([\d.]+) (ms|s|min|h)\b")
SECONDS = {"ms": 0.001, "s": 1.0, "min": 60.0, "h": 3600.0}


def runtime_env(env: dict[str, str]):
    def change(repo: Path) -> None:
        path = repo / "toolchains" / "2023b.yaml"
        data = yaml.safe_load(path.read_text())
        data["mpi"]["runtime_env"] = env
        path.write_text(yaml.safe_dump(data, sort_keys=False))
    return change


# name -> (the MR's change, the verdict job's wanted status, the series it must be red for or None)
MRS = {"sndbuf": (runtime_env({"OMPI_MCA_btl_tcp_sndbuf": "4096", "OMPI_MCA_btl_tcp_rcvbuf": "4096"}),
                  "FAIL", "cross_node"),
       "single-copy": (runtime_env({"OMPI_MCA_btl_vader_single_copy_mechanism": "none"}), "FAIL", "same_"),
       "no-vader": (runtime_env({"OMPI_MCA_btl": "^vader"}), "FAIL", "same_"),
       "neutral": (runtime_env({"OMPI_MCA_btl_vader_eager_limit": "1024"}), "PASS", None),
       "green": (touch_toolchain, "PASS", None)}
REPEATED = ("neutral", "green")


def mr_pipeline(name: str, change, work: Path, needs: str, *options: str,
                more: dict[str, str] | None = None, widen: bool = True, state: Path | None = None
                ) -> tuple[subprocess.CompletedProcess, Path, float]:
    """One MR pipeline under gitlab-ci-local up to job ``needs`` on the project's local Slurm (real OSU from
    $OSU_SOURCE_MIRROR): the finished run, the MR's repository, the seconds it took. ``state`` is the runner's
    state folder kept across MRs (install prefixes, manifest store), as a cluster runner keeps it; None: a
    fresh one for this MR."""
    root = work / name
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    repo = make_repo(root, change, f"{name} toolchain MR", widen=widen)
    kept = state is not None
    if state is None:
        state = runner_state(name)
    variables = {**mr_vars(), "MPIREGRESS_SYSTEMS": "local", "MPIREGRESS_AB": "on",
                 "OSU_SOURCE_MIRROR": os.environ["OSU_SOURCE_MIRROR"], "OSU_SHA256": os.environ.get("OSU_SHA256", ""),
                 "MPIREGRESS_LOCAL_STATE_DIR": str(state), "MPIREGRESS_HISTORY_DB": str(root / "history.sqlite"),
                 "MPIREGRESS_VENV": str(REPO / ".venv"), **(more or {})}
    started = time.time()
    done = gcl(GCL, repo, "--shell-isolation", "--concurrency", "1", *options, "--needs", needs,
               variables=variables, timeout=5400)
    took = time.time() - started
    (root / "gitlab-ci-local.log").write_text(done.stdout + done.stderr)
    if not kept:
        shutil.rmtree(state, ignore_errors=True)
    return done, repo, took


def runner_state(name: str) -> Path:
    """A runner's state folder: its local-cluster is the project's own, install prefixes go beside it. Short
    and under /tmp: unix socket paths are limited."""
    state = Path(tempfile.mkdtemp(prefix=f"vp-{name[:8]}-", dir="/tmp"))
    state.chmod(0o755)
    (state / "local-cluster").symlink_to(CLUSTER, target_is_directory=True)
    return state


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


def job_seconds(output: str) -> dict[str, float]:
    """Each job's wall time as gitlab-ci-local printed it."""
    found = {}
    for line in output.splitlines():
        m = FINISHED.match(line.strip())
        if m:
            found[m.group(1).strip()] = float(m.group(2)) * SECONDS[m.group(3)]
    return found


def one_mr(name: str, change, work: Path, settings: str, state: Path) -> tuple[dict, dict[str, float], dict, float]:
    more = {"MPIREGRESS_RUN_ARGS": settings, "MPIREGRESS_AB_ARGS": settings} if settings else {}
    done, repo, took = mr_pipeline(name, change, work, "verdict:local", more=more, widen=False, state=state)
    found = list(repo.glob("**/reports/report-local/verdict.json"))
    verdict = json.loads(found[0].read_text()) if found else {}
    return job_verdicts(done.stdout), job_seconds(done.stdout + done.stderr), verdict, took


def red_for(verdict: dict, series: str | None) -> bool:
    """A regression finding of cause "toolchain" on a series whose name holds ``series``."""
    return any(f["state"] == "regression" and "toolchain" in (f["cause"] or "") and series in f["subject"]
               for f in verdict.get("findings", ())) if series else True


def show(verdict: dict) -> None:
    print(f"   verdict: {verdict['state']} (exit {verdict['exit_code']}), event {verdict['event']}")
    for f in verdict["findings"]:
        if f["state"] != "evidence":
            print(f"   - {f['state']}: {f['judge']}: {f['subject']}: {f['sentence'][:240]}; cause: {f['cause'] or '-'}")
    for series, power in sorted(verdict.get("power", {}).items()):
        print(f"   power {series}: {power['sentence']}")


def unavailable(jobs: dict[str, str]) -> set[str]:
    """The build jobs, allowed to fail, of methods that cannot build on this machine at all."""
    return {job for job, status in jobs.items() if status == "WARN" and (m := re.search(r"\[(\w+)\]", job))
            and job.startswith("build:") and unavailable_reason(m.group(1))}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, default=Path("/tmp/verdict-pipeline"))
    parser.add_argument("--green", type=int, default=3, help="runs of each good MR (neutral, green)")
    parser.add_argument("--only", default="sndbuf,single-copy,neutral,green")
    parser.add_argument("--settings", default="", help="MPIREGRESS_RUN_ARGS and MPIREGRESS_AB_ARGS (default: none)")
    opts = parser.parse_args()
    prepare(opts.work)
    plan = []
    for name in opts.only.split(","):
        plan += [f"{name}-{i + 1}" for i in range(opts.green)] if name in REPEATED else [name]
    # One runner for every MR: its install prefixes and manifest store outlive a pipeline, so an MR
    # whose build inputs did not change reuses them as on a cluster (the first MR pays the builds).
    state = runner_state("bench")
    right = 0
    times: dict[str, list[tuple[float, float]]] = {}
    for name in plan:
        kind = name.rsplit("-", 1)[0] if name.rsplit("-", 1)[0] in REPEATED else name
        change, wanted, series = MRS[kind]
        load = os.getloadavg()[0]
        jobs, seconds, verdict, took = one_mr(name, change, opts.work, opts.settings, state)
        got = jobs.get("verdict:local", "did not run")
        # A build job of a method this machine cannot build (no Spack here) is an allowed failure (exit 4), shown as
        # such: not a pass, and nothing the MR did.
        every_green = wanted == "PASS" and all(status == "PASS" or job in unavailable(jobs)
                                               for job, status in jobs.items())
        ok = got == wanted and (every_green if wanted == "PASS" else red_for(verdict, series))
        right += ok
        times.setdefault(kind, []).append((took, seconds.get("ab:local:batch", float("nan"))))
        print(f"\n== {name} MR: verdict:local {got} (wanted {wanted}{', every job green' if wanted == 'PASS' else ''}"
              f"{', red for toolchain on ' + series if series else ''}): {'right' if ok else 'WRONG'}; "
              f"{took / 60:.1f} min, load {load:.1f} -> {os.getloadavg()[0]:.1f}")
        allowed = unavailable(jobs)
        print("   jobs: " + ", ".join(f"{job} {status}{' (allowed: not available here)' if job in allowed else ''}"
                                    f" ({seconds.get(job, float('nan')) / 60:.1f} min)"
                                    for job, status in sorted(jobs.items())))
        if verdict:
            show(verdict)
        sys.stdout.flush()
    shutil.rmtree(state, ignore_errors=True)
    print(f"\n{right} of {len(plan)} MRs judged as wanted")
    for kind, spans in times.items():
        print(f"  {kind}: pipeline " + ", ".join(f"{t / 60:.1f}" for t, _ in spans) + " min; ab:local:batch "
              + ", ".join(f"{a / 60:.1f}" for _, a in spans) + " min")
    return 0


if __name__ == "__main__":
    sys.exit(main())
