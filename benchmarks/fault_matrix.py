"""Issue 8's fault matrix on the real local Slurm: fault -> exit code -> message -> reports kept.

Injects every fault of the issue through the real command line: bad inputs and
unwritable outputs (also in tests/test_faults.py), then on a one-host Slurm of its
own (own state folder, free ports) the slow ones: slurmd killed mid-run (a lost
node), slurmctld killed mid-run (controller unreachable, sbatch failing), a job
cancelled by Slurm, a job hitting its time limit, two runs on one checkout,
`cluster start` under a run, step daemons left behind. Prints one table and the
time from killing a slurmd to the run's end.

Issue 20's rows: SIGTERM, SIGINT and SIGHUP to a running run's PID and to its process group
(seconds until no job of the run is queued, seconds until it exited, processes left in its group,
the report's state, and whether the NEXT run's files in the same folder change during --settle
seconds after it ended: the issue asked for 5 minutes, the default here is 60 s to keep the matrix
short; pass --settle 300 for the full wait), a run whose ReFrame gets no grace (the run cancels the
job by id itself), a run killed outright (SIGKILL) cleaned up by `mpiregress cancel`; the symlinked
and foreign report folders; compare/report/ab/confirm on rejected input after an earlier pass.

    python benchmarks/fault_matrix.py [--skip-slow] [--only-cancel] [--settle S] [--keep]
"""
from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "tests")]

from helpers import cancelrun  # noqa: E402
from helpers.faults import (  # noqa: E402
    GOOD_RESULT,
    Outcome,
    cli,
    fast_specs,
    missing_binary_manifest,
    report_state,
    run_spec,
    sentence,
    stale_folder,
)
from helpers.osu_double import make_tarball  # noqa: E402

from mpiregress.cluster.local import LocalCluster  # noqa: E402
from mpiregress.run.folder import RunFolder  # noqa: E402

# Long enough that the fault lands while OSU measures (cross-node ping-pong here: ~10-20 us each).
LONG = ["--iterations", "3000000"]


def _popen_run(env: dict, report_dir: Path, *args: str) -> subprocess.Popen:
    # Output to files: a pipe nobody reads until the end could fill and stall the run.
    report_dir.parent.mkdir(parents=True, exist_ok=True)
    out = open(report_dir.parent / f"{report_dir.name}.stdout", "w+")
    err = open(report_dir.parent / f"{report_dir.name}.stderr", "w+")
    proc = subprocess.Popen([sys.executable, "-m", "mpiregress", "run", "--system", "local", "--methods", "source",
                             "--families", "pt2pt",
                             "--no-build", "--report-dir", str(report_dir), *args],
                            env=env, cwd=REPO, stdout=out, stderr=err, text=True)
    proc.logs = (out, err)  # type: ignore[attr-defined]
    return proc


def _running_job(env: dict, timeout: float = 300, nodes: str = "") -> str:
    """The id of the first job that reaches RUNNING (on ``nodes``, when given), after it has run a few seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        out = subprocess.run(["squeue", "-h", "-t", "R", "-o", "%i %N"], env=env, capture_output=True,
                             text=True).stdout.splitlines()
        jobs = [line.split()[0] for line in out if line.strip() and (not nodes or line.split()[-1] == nodes)]
        if jobs:
            time.sleep(3)   # the job script's probe is done and OSU is measuring
            return jobs[0]
        time.sleep(0.5)
    raise SystemExit("fault matrix: no job reached RUNNING in time; is the machine overloaded?")


def _finish(proc: subprocess.Popen, fault: str, expected: int, report_dir: Path, since: float,
            timeout: float = 900) -> Outcome:
    proc.wait(timeout=timeout)
    streams = []
    for handle in proc.logs:   # the files _popen_run opened
        handle.seek(0)
        streams.append(handle.read())
        handle.close()
    done = subprocess.CompletedProcess(proc.args, proc.returncode, *streams)
    return Outcome(fault, expected, proc.returncode, sentence(done), report_state(report_dir),
                   round(time.monotonic() - since, 1))


def slow_cases(root: Path, env: dict, cluster: LocalCluster, rows: list[Outcome]) -> None:
    """The faults that kill or starve Slurm under a running benchmark; each appends its row to ``rows``."""
    slurm_env = {**env, **cluster.client_env()}
    cluster.start()
    reports = root / "reports"

    # A clean run first: builds OSU (test double tarball, sha256 override) and leaves a "pass" behind.
    rows.append(_reference_build(env, reports))

    # Stale reports: the next run fails early (unknown partition) in the same folder.
    stale = cli(["run", "--system", "local", "--partition", "nopart", "--report-dir", str(reports)], env)
    rows.append(Outcome("run fails early (unknown partition) after a pass", 2, stale.returncode, sentence(stale),
                        report_state(reports)))

    # A lost node: slurmd of node2 killed while OSU measures across both nodes.
    lost = root / "r-lost-node"
    proc = _popen_run(env, lost, "--metrics", "latency", "--placements", "cross_node", *LONG)
    _running_job(slurm_env, nodes="node[1-2]")
    second = cli(["run", "--system", "local", "--methods", "source", "--report-dir", str(root / "r-second")], env)
    rows.append(Outcome("second run on the same checkout", 3, second.returncode, sentence(second),
                        report_state(root / "r-second")))
    pid = cluster._pid("slurmd-node2")
    assert pid is not None, "slurmd node2 is not running"
    os.kill(pid, signal.SIGKILL)
    killed, killed_at = time.monotonic(), time.time()
    restart = cli(["cluster", "start", "--state-dir", str(cluster.state_dir)], env)
    rows.append(Outcome("cluster start while a run uses a broken cluster", 3, restart.returncode,
                        sentence(restart), "cluster left as it is"))
    lost_row = _finish(proc, "slurmd killed mid-run (node lost)", 3, lost, killed)
    rows.append(lost_row)
    TIMELINE["node DOWN"] = _down_after(cluster, killed_at)
    rows.append(_leftovers(cluster, env, "step daemons left after slurmd died"))

    # Controller gone: slurmctld killed while the first of two checks measures; the second's sbatch fails.
    cluster.start()
    gone = root / "r-controller"
    proc = _popen_run(env, gone, "--metrics", "latency", "--placements", "same_numa,cross_node",
                      "--iterations", "10000000")
    _running_job(slurm_env)
    pid = cluster._pid("slurmctld")
    assert pid is not None, "slurmctld is not running"
    os.kill(pid, signal.SIGKILL)
    rows.append(_finish(proc, "slurmctld killed mid-run (controller unreachable)", 3, gone, time.monotonic()))
    rows.append(_leftovers(cluster, env, "step daemons left after slurmctld died"))

    # Slurm kills the job: scancel, then a time limit.
    cluster.start()
    cancelled = root / "r-cancelled"
    proc = _popen_run(env, cancelled, "--metrics", "latency", "--placements", "cross_node", *LONG)
    job = _running_job(slurm_env)
    subprocess.run(["scancel", job], env=slurm_env, check=True)
    rows.append(_finish(proc, "job cancelled by Slurm (scancel) mid-run", 3, cancelled, time.monotonic()))

    limited = root / "r-time-limit"
    proc = _popen_run(env, limited, "--metrics", "latency", "--placements", "cross_node", "--iterations", "20000000")
    job = _running_job(slurm_env)
    subprocess.run(["scontrol", "update", f"JobId={job}", "TimeLimit=1"], env=slurm_env, check=True)
    rows.append(_finish(proc, "job reaches its Slurm time limit", 3, limited, time.monotonic()))
    cluster.stop(force=True)


TIMELINE: dict[str, object] = {}
CANCEL_ROWS: list[cancelrun.Cancellation] = []


def _reference_build(env: dict, reports: Path) -> Outcome:
    first = cli(["run", "--system", "local", "--methods", "source", "--families", "pt2pt", "--metrics", "latency",
                 "--placements", "same_numa", "--iterations", "200", "--report-dir", str(reports)], env)
    return Outcome("reference: a clean run (builds OSU)", 0, first.returncode, sentence(first) or "pass",
                   report_state(reports))


def cancel_cases(root: Path, env: dict, cluster: LocalCluster, rows: list[Outcome], settle: float) -> None:
    """Issue 20: each signal to the PID and to the group of a running run; no grace; SIGKILL + cancel."""
    slurm_env = {**env, **cluster.client_env()}
    cluster.start()
    if not (root / "reports").exists():
        rows.append(_reference_build(env, root / "reports"))
    cases = [(sig, group) for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP) for group in (False, True)]
    for sig, group in cases:
        folder = root / f"r-{sig.name}-{'group' if group else 'pid'}"
        proc = cancelrun.start(env, folder, *cancelrun.LONG_RUN)
        cancelrun.wait_running(proc, slurm_env, folder)
        seen = cancelrun.cancel(proc, sig, group, slurm_env, folder, settle=5)
        CANCEL_ROWS.append(seen)
        # The next run in the same folder: nothing of the cancelled one may write into its files later.
        nxt = cli(["run", "--system", "local", "--methods", "source", "--families", "pt2pt", "--metrics", "latency",
                   "--placements", "same_numa", "--iterations", "200", "--no-build", "--report-dir", str(folder)], env)
        before = cancelrun.snapshot(folder)
        time.sleep(settle)
        changed = sorted(k for k, v in cancelrun.snapshot(folder).items() if before.get(k) != v)
        left = f"{len(seen.left_processes)} process(es) left" + (f" {seen.left_processes}" if seen.left_processes
                                                                   else "")
        rows.append(Outcome(
            f"{sig.name} to the run's {'process group' if group else 'PID'}", 5,
            seen.code if seen.code is not None else -1,
            f"queue empty after {seen.queue_empty_s} s, exited after {seen.exit_s} s, {left}; "
            f"next run (exit {nxt.returncode}): {len(changed)} of its files changed in the {settle:g} s after it",
            f"status {seen.state}; JUnit error {'yes' if seen.junit_error else 'NO'}", seen.exit_s))
    # ReFrame gets no grace: the run itself cancels the job by id.
    folder = root / "r-no-grace"
    proc = cancelrun.start({**env, "MPIREGRESS_CANCEL_GRACE": "0"}, folder, *cancelrun.LONG_RUN)
    job = cancelrun.wait_running(proc, slurm_env, folder)
    seen = cancelrun.cancel(proc, signal.SIGTERM, False, slurm_env, folder, settle=5)
    by_id = "cancelled by id" in (folder / "status.json").read_text()
    rows.append(Outcome("SIGTERM, ReFrame given no grace (the run scancels by id)", 5,
                        seen.code if seen.code is not None else -1,
                        f"job {job}: queue empty after {seen.queue_empty_s} s; {'' if by_id else 'NOT '}cancelled "
                        f"by the run by id; {len(seen.left_processes)} process(es) left", f"status {seen.state}",
                        seen.exit_s))
    # An A/B run (run --ab-against): the same path, one job holding A and B interleaved.
    manifests = Path(env["MPIREGRESS_STATE_DIR"]) / "manifests"
    a_side = root / "ab-a"
    a_side.mkdir(exist_ok=True)
    for found in manifests.glob("source-*.json"):
        shutil.copy(found, a_side / found.name)
    folder = root / "r-ab"
    proc = cancelrun.start(env, folder, *cancelrun.LONG_RUN, "--ab-against", str(a_side), "--manifest-dir",
                           str(manifests), "--ab-pairs", "2")
    job = cancelrun.wait_running(proc, slurm_env, folder)
    seen = cancelrun.cancel(proc, signal.SIGTERM, True, slurm_env, folder, settle=5)
    rows.append(Outcome("SIGTERM to an A/B run's process group (run --ab-against)", 5,
                        seen.code if seen.code is not None else -1,
                        f"job {job}: queue empty after {seen.queue_empty_s} s, exited after {seen.exit_s} s, "
                        f"{len(seen.left_processes)} process(es) left, {len(seen.changed_after)} file(s) written "
                        "after it ended", f"status {seen.state}; JUnit error {'yes' if seen.junit_error else 'NO'}",
                        seen.exit_s))
    # Killed outright: ReFrame dies with it, the job stays until `mpiregress cancel` reads the record.
    folder = root / "r-sigkill"
    proc = cancelrun.start(env, folder, *cancelrun.LONG_RUN)
    job = cancelrun.wait_running(proc, slurm_env, folder)
    killed = time.monotonic()
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    time.sleep(2)
    left = cancelrun.process_group_members(proc.pid)
    queued = cancelrun.queued(slurm_env, folder)
    done = cli(["cancel", str(folder), "--wait", "0"], env)
    after = cancelrun.queued(slurm_env, folder)
    rows.append(Outcome("SIGKILL to the run, then `mpiregress cancel` (after_script)", 0, done.returncode,
                        f"job {job}: {len(left)} process(es) left; queued after the kill: {queued or 'none'}; after "
                        f"`mpiregress cancel`: {after or 'none'}", done.stdout.strip()[-120:],
                        round(time.monotonic() - killed, 1)))


def ownership_and_stale_cases(root: Path, env: dict, rows: list[Outcome]) -> None:
    """Issue 20: symlinked and foreign report folders; outputs of commands that fail on their input."""
    import json

    def tree(folder: Path) -> dict:
        return {str(p): (p.lstat().st_size, p.lstat().st_mtime_ns) for p in folder.rglob("*")}

    def early(folder: Path) -> subprocess.CompletedProcess:
        return cli(["run", "--system", "local", "--repeat", "0", "--report-dir", str(folder)], env)

    target = root / "someone-elses"
    (target / "html").mkdir(parents=True)
    (target / "html" / "index.html").write_text("theirs")
    (target / "summary.md").write_text("theirs\n")
    before = tree(target)
    (root / "link-to-folder").symlink_to(target)
    done = early(root / "link-to-folder")
    rows.append(Outcome("--report-dir is a symlink to a folder of other files", 2, done.returncode, sentence(done),
                        "target untouched" if tree(target) == before else "TARGET CHANGED"))
    (root / "local").symlink_to("/etc")
    etc = sorted(os.listdir("/etc"))
    done = early(root / "local")
    rows.append(Outcome("reports/local is a symlink to /etc", 2, done.returncode, sentence(done),
                        "/etc untouched" if sorted(os.listdir("/etc")) == etc else "/etc CHANGED"))
    done = early(target)
    rows.append(Outcome("report folder holds foreign files a run would remove", 2, done.returncode, sentence(done),
                        "untouched" if tree(target) == before else "CHANGED"))
    inside = root / "r-inner-link"
    stale_folder(inside)
    (inside / "html").symlink_to(target)
    done = early(inside)
    rows.append(Outcome("report folder holds a symlink leading out of it", 2, done.returncode, sentence(done),
                        "target untouched" if tree(target) == before else "TARGET CHANGED"))

    bad = root / "bad-results.json"
    bad.write_text(json.dumps([dict(GOOD_RESULT, value=-5.0, samples=[-5.0])]))
    out = root / "stale"
    out.mkdir()
    for name in ("c.md", "summary.md"):
        (out / name).write_text("## MPI performance: pass (exit 0)\n")
    for name in ("c.junit.xml", "junit.xml"):
        (out / name).write_text('<testsuites><testsuite tests="1" failures="0"/></testsuites>\n')
    (out / "report.html").write_text("<html>pass</html>\n")
    db = str(root / "none.sqlite")
    for label, argv, files in (
            ("compare on a -5 us latency after a pass", ["compare", str(bad), "--db", db, "--markdown",
                                                             str(out / "c.md"), "--junit", str(out / "c.junit.xml")],
             ("c.md", "c.junit.xml")),
            ("report --out-dir on rejected input after a pass", ["report", str(bad), "--db", db, "--out-dir", str(out)],
             ("summary.md", "junit.xml", "report.html"))):
        done = cli(argv, env)
        failed = [f for f in files if "FAILED" in (out / f).read_text() or "<error" in (out / f).read_text()]
        rows.append(Outcome(label, 2, done.returncode, sentence(done),
                            f"{len(failed)} of {len(files)} outputs replaced by a failure version"))


def _down_after(cluster: LocalCluster, since: float) -> object:
    """Seconds from ``since`` (epoch) to slurmctld's 'setting DOWN' line for node2, from its log."""
    import datetime as dt

    try:
        lines = (cluster.state_dir / "log" / "slurmctld.log").read_text(errors="replace").splitlines()
    except OSError:
        return None
    for line in lines:
        if "node2" in line and "setting DOWN" in line:
            stamp = dt.datetime.fromisoformat(line[1:24])
            return round(stamp.timestamp() - since, 1)
    return None


def _leftovers(cluster: LocalCluster, env: dict, fault: str) -> Outcome:
    before = len(cluster.step_daemons())
    stop = cli(["cluster", "stop", "--state-dir", str(cluster.state_dir)], env)
    after = len(cluster.step_daemons())
    # Expected 0: `cluster stop` succeeds and no step daemon of this cluster survives it.
    return Outcome(fault, 0, stop.returncode if after == 0 else 100 + after,
                   f"{before} slurmstepd before `cluster stop`, {after} after", sentence(stop) or "stopped")


class _Done(Exception):
    """--only-cancel: the rows asked for are in."""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip-slow", action="store_true", help="only the faults that need no running Slurm")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder (reports, cluster logs)")
    parser.add_argument("--only-cancel", action="store_true", help="only issue 20's rows (signals, symlinks, "
                                                                    "stale outputs)")
    parser.add_argument("--settle", type=float, default=60.0,
                        help="seconds to watch the next run's files after a cancelled run (issue: 300)")
    args = parser.parse_args()
    # Under /tmp and open to others: munged runs as the munge user and must reach its socket.
    root = Path(tempfile.mkdtemp(prefix="mpiregress-faults-", dir="/tmp"))
    root.chmod(0o755)
    mirror = root / "mirror"
    _, sha256 = make_tarball(mirror)
    env = dict(os.environ, MPIREGRESS_STATE_DIR=str(root / "state"),
               MPIREGRESS_LOCAL_CLUSTER_DIR=str(root / "state" / "local-cluster"),
               OSU_SOURCE_MIRROR=str(mirror), OSU_SHA256=sha256)
    env.pop("MPIREGRESS_DEBUG", None)
    cluster = LocalCluster(root / "state" / "local-cluster")
    rows: list[Outcome] = []
    started = time.monotonic()
    try:
        ownership_and_stale_cases(root, env, rows)
        if args.only_cancel:
            cancel_cases(root, env, cluster, rows, args.settle)
            raise _Done
        rows += [run_spec(spec, root, env) for spec in fast_specs(root)]
        manifests = root / "bad-manifests"
        missing_binary_manifest(manifests, target="broadwell")
        done = cli(["run", "--system", "iris", "--methods", "source", "--manifest-dir", str(manifests),
                    "--report-dir", str(root / "r-manifest")], env)
        rows.append(Outcome("manifest binary does not exist", 2, done.returncode, sentence(done),
                            report_state(root / "r-manifest")))
        stale_folder(root / "r-locked")
        with RunFolder(root / "r-locked", "a run holding its folder"):
            done = cli(["run", "--system", "local", "--report-dir", str(root / "r-locked")], env)
        rows.append(Outcome("second run on the same report folder", 3, done.returncode, sentence(done),
                            "left to the first run"))
        if not args.skip_slow:
            try:
                slow_cases(root, env, cluster, rows)
                cancel_cases(root, env, cluster, rows, args.settle)
            except (SystemExit, AssertionError) as err:   # an injection that could not be placed
                rows.append(Outcome(f"slow cases stopped: {err}", 0, -1, str(err)))
    except _Done:
        pass
    except AssertionError as err:
        rows.append(Outcome(f"cancel cases stopped: {err}", 0, -1, str(err)))
    finally:
        try:
            cluster.stop(force=True)
        finally:
            if not args.keep:
                shutil.rmtree(root, ignore_errors=True)
    _print(rows)
    lost = [r for r in rows if r.fault.startswith("slurmd killed")]
    if lost:
        print(f"\ntime from killing slurmd (node2) to the run's end: {lost[0].seconds:.1f} s; slurmctld set "
              f"node2 DOWN {TIMELINE.get('node DOWN')} s after the kill (SlurmdTimeout=20 in "
              f"ci/local-cluster/slurm.conf.j2); load average {os.getloadavg()[0]:.1f}")
    bad = [r for r in rows if not r.ok]
    print(f"\n{len(rows) - len(bad)} of {len(rows)} faults at the expected exit code "
          f"(whole matrix {time.monotonic() - started:.0f} s)"
          + (f"; NOT: {', '.join(r.fault for r in bad)}" if bad else ""))
    if args.keep:
        print(f"kept {root}")
    return 1 if bad else 0


def _print(rows: list[Outcome]) -> None:
    width = max(len(r.fault) for r in rows)
    print(f"{'fault':<{width}}  exp  got  ok  {'seconds':>7}  message  ||  reports kept")
    for r in rows:
        secs = "" if r.seconds is None else f"{r.seconds:.1f}"
        message = r.message.split(": error: ", 1)[-1]
        print(f"{r.fault:<{width}}  {r.expected:>3}  {r.code:>3}  {'ok' if r.ok else 'NO':<2}  {secs:>7}  "
              f"{message[:150]}  ||  {r.kept or '-'}")


if __name__ == "__main__":
    sys.exit(main())
