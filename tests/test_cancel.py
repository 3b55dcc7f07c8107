"""A cancelled run stops everything it started (issue 20).

SIGTERM, SIGINT and SIGHUP, to the run's PID or to its whole process group, on a real run on the
test session's Slurm: the run's Slurm jobs leave the queue, no process of its group is left, the
report says "cancelled" (exit 6) and nothing writes into the folder after the run ended. A run
killed outright (SIGKILL) takes ReFrame with it, and `mpiregress cancel` cancels its recorded jobs.
"""
from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest
from helpers import cancelrun
from helpers.e2e import mpiregress, pipeline  # noqa: F401  (pipeline is a fixture)
from shared import REPO

from mpiregress.errors import CANCELLED
from mpiregress.run import cancel

pytestmark = [pytest.mark.slurm, pytest.mark.slow]


@pytest.fixture(scope="module")
def built(pipeline, local_cluster, tmp_path_factory):  # noqa: F811
    """The module's environment after one short run that built OSU (the cancelled runs reuse it)."""
    done = mpiregress(pipeline, "--methods", "source", "--families", "pt2pt", "--metrics", "latency",
                      "--placements", "same_numa", "--iterations", "50",
                      report_dir=tmp_path_factory.mktemp("build-run"))
    # Structure, not performance: the run finished and judged (a band, or a noisy node's "needs a look" (5),
    # is the measurement's business).
    assert done.returncode in (0, 1, 5), done.stderr[-1500:]
    return pipeline, {**pipeline, **local_cluster.client_env()}


# The ways a run is ended in practice, not every signal times every delivery (each case is a real run,
# 15-25 s): Ctrl-C and a closed terminal signal the foreground group; a job's killer (a runner's
# cancel, Slurm's time limit on a batch step, systemd) signals the process, or its group.
@pytest.mark.parametrize(("sig", "to_group"), [(signal.SIGINT, True), (signal.SIGHUP, True),
                                               (signal.SIGTERM, False), (signal.SIGTERM, True)],
                         ids=["SIGINT-group", "SIGHUP-group", "SIGTERM-pid", "SIGTERM-group"])
def test_a_signal_ends_the_run_and_everything_it_started(built, tmp_path, sig, to_group):
    env, slurm_env = built
    report_dir = tmp_path / "run"
    proc = cancelrun.start(env, report_dir, *cancelrun.LONG_RUN)
    try:
        job = cancelrun.wait_running(proc, slurm_env, report_dir)
        seen = cancelrun.cancel(proc, sig, to_group, slurm_env, report_dir, settle=5)
    finally:
        cancelrun.ensure_ended(proc, slurm_env, report_dir)
    assert seen.code == CANCELLED, seen.output[-1500:]
    assert seen.queue_empty_s is not None, f"job {job} of the run is still queued"
    assert seen.left_processes == [], f"processes left in the run's group: {seen.left_processes}"
    assert seen.left_anywhere == [], f"processes left working in the run's folder: {seen.left_anywhere}"
    assert seen.state == "cancelled"
    assert seen.summary.startswith("# MPI regression run CANCELLED (exit 6)")
    assert seen.junit_error
    assert job in seen.jobs, f"job {job} not recorded in {cancel.JOBS_FILE}: {seen.jobs}"
    assert seen.changed_after == [], f"written after the run ended: {seen.changed_after}"
    assert f"cancelled by {sig.name}" in seen.output
    assert "Traceback" not in seen.output


@pytest.mark.parametrize("grace", [2.0], ids=["SIGKILL-after-2s"])
def test_sigterm_then_sigkill_soon_after_leaves_nothing_and_says_cancelled(built, tmp_path, grace):
    """GitLab's way: SIGTERM to the job's group, SIGKILL after a short grace. The run says "cancelled" and
    cancels its recorded jobs at once, before it waits for ReFrame: nothing of it is left queued."""
    env, slurm_env = built
    report_dir = tmp_path / "run"
    proc = cancelrun.start(env, report_dir, *cancelrun.LONG_RUN, "--repeat", "3")
    try:
        job = cancelrun.wait_running(proc, slurm_env, report_dir)
        os.killpg(proc.pid, signal.SIGTERM)
        time.sleep(grace)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        status = json.loads((report_dir / "status.json").read_text())
        # Cancelled jobs leave the queue within Slurm's own time (a loaded controller: seconds).
        deadline = time.monotonic() + 60
        while cancelrun.queued(slurm_env, report_dir) and time.monotonic() < deadline:
            time.sleep(1)
        left = cancelrun.queued(slurm_env, report_dir)
    finally:
        cancelrun.ensure_ended(proc, slurm_env, report_dir)
    assert job in cancel.JobRecord.read(report_dir / cancel.JOBS_FILE).jobs
    assert status["state"] == "cancelled", status
    assert left == [], f"jobs of the run still queued {grace:g} s after SIGTERM was followed by SIGKILL: {left}"
    assert cancelrun.process_group_members(proc.pid) == []
    deadline = time.monotonic() + 30
    while cancelrun.processes_in(report_dir) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert cancelrun.processes_in(report_dir) == [], "processes of the run's jobs outlived their cancel"


def test_a_run_killed_outright_leaves_jobs_that_mpiregress_cancel_ends(built, tmp_path):
    env, slurm_env = built
    report_dir = tmp_path / "run"
    # No grace for ReFrame: this run's own clean-up never runs (SIGKILL), the record must be enough.
    proc = cancelrun.start(env, report_dir, *cancelrun.LONG_RUN)
    try:
        _killed_then_cancelled(proc, env, slurm_env, report_dir, tmp_path)
    finally:
        cancelrun.ensure_ended(proc, slurm_env, report_dir)


def _killed_then_cancelled(proc, env, slurm_env, report_dir, tmp_path):
    job = cancelrun.wait_running(proc, slurm_env, report_dir)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    deadline = time.monotonic() + 30
    while cancelrun.process_group_members(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    # ReFrame died with the run (PR_SET_PDEATHSIG): nothing of its group is left.
    assert cancelrun.process_group_members(proc.pid) == []
    assert job in cancelrun.queued(slurm_env, report_dir), "the killed run's job should still be queued"
    done = subprocess.run([sys.executable, "-m", "mpiregress", "cancel", str(tmp_path), "--wait", "0"],
                          env=env, cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"cancelled Slurm job(s) {job}" in done.stdout
    assert cancelrun.queued(slurm_env, report_dir) == []
    # The dead run's folder no longer says "running": the after_script marked it cancelled.
    status = json.loads((report_dir / "status.json").read_text())
    assert (status["state"], status["exit_code"]) == ("cancelled", CANCELLED), status
    assert status["message"].startswith("killed outright")
    assert (report_dir / "summary.md").read_text().startswith("# MPI regression run CANCELLED (exit 6)")


def test_mpiregress_cancel_in_ci_ends_the_ci_jobs_slurm_jobs_without_any_record(local_cluster, tmp_path):
    """The after_script of a CI job whose reports are gone still finds its Slurm jobs: their token names it."""
    slurm_env = {**os.environ, **local_cluster.client_env()}
    submitted = subprocess.run(["sbatch", "--parsable", "-n1", "--comment=mpiregress-ci4242-0123456789abcdef",
                                "--wrap", "sleep 120"], env=slurm_env, capture_output=True, text=True, timeout=30,
                               cwd=tmp_path)
    assert submitted.returncode == 0, submitted.stderr
    job = submitted.stdout.strip().split(";")[0]
    other = subprocess.run(["sbatch", "--parsable", "-n1", "--comment=mpiregress-ci4243-0123456789abcdef",
                            "--wrap", "sleep 120"], env=slurm_env, capture_output=True, text=True, timeout=30,
                           cwd=tmp_path).stdout.strip().split(";")[0]
    try:
        done = subprocess.run([sys.executable, "-m", "mpiregress", "cancel", str(tmp_path / "none"), "--wait", "0"],
                              env={**slurm_env, "CI_JOB_ID": "4242"}, cwd=REPO, capture_output=True, text=True,
                              timeout=120)
        assert done.returncode == 0, done.stdout + done.stderr
        assert f"cancelled Slurm job(s) {job} of CI job 4242" in done.stdout
        # Another CI job's Slurm job stays.
        assert other in (cancel.queued_jobs(slurm_env) or {})
    finally:
        subprocess.run(["scancel", job, other], env=slurm_env, timeout=30)


def test_the_next_run_in_a_killed_runs_folder_cancels_its_jobs_and_keeps_its_record(built, tmp_path):
    env, slurm_env = built
    report_dir = tmp_path / "run"
    proc = cancelrun.start(env, report_dir, *cancelrun.LONG_RUN)
    try:
        job = cancelrun.wait_running(proc, slurm_env, report_dir)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        token = cancelrun.token(report_dir)
        assert job in cancelrun.queued(slurm_env, report_dir), "the killed run's job should still be queued"
        # Its private sbatch was in its own folder (not /tmp, where a killed run cannot remove it).
        assert (report_dir / cancel.FENCE_NAME / "sbatch").exists()
        # A new run (a dry run: quick, and it owns the folder the same way) in the same folder.
        done = subprocess.run([sys.executable, "-m", "mpiregress", "run", "--system", "local", "--report-dir",
                               str(report_dir), "--dry-run", *cancelrun.LONG_RUN], env=env, cwd=REPO,
                              capture_output=True, text=True, timeout=300)
    finally:
        cancelrun.ensure_ended(proc, slurm_env, report_dir)
    said = [line for line in done.stdout.splitlines() if "died without finishing" in line]
    assert len(said) == 1 and f"its Slurm job(s) {job} were cancelled by id" in said[0], done.stdout[-2000:]
    aside = sorted(report_dir.glob("killed-run-*"))
    assert len(aside) == 1 and str(aside[0]) in said[0]
    kept = cancel.JobRecord.read(aside[0] / cancel.JOBS_FILE)
    assert (kept.token, job in kept.jobs) == (token, True)
    # Its status no longer claims a dead run is running.
    assert json.loads((aside[0] / "status.json").read_text())["state"] == "cancelled"
    # Its private folders went aside with it; the new run left none of its own behind.
    assert (aside[0] / cancel.FENCE_NAME / "sbatch").exists()
    assert not (report_dir / cancel.FENCE_NAME).exists() and not (report_dir / cancel.STAGING_NAME).exists()
    deadline = time.monotonic() + 60
    while job in cancelrun.queued(slurm_env, aside[0]) and time.monotonic() < deadline:
        time.sleep(1)
    assert job not in cancelrun.queued(slurm_env, aside[0])


def test_mpiregress_cancel_never_touches_a_job_of_another_comment(built, tmp_path):
    env, slurm_env = built
    # A job of someone else whose id a stale record names: it must stay queued.
    other = subprocess.run(["sbatch", "--parsable", "-n1", "--comment=someone-else", "--wrap", "sleep 120"],
                           env=slurm_env, capture_output=True, text=True, timeout=30, cwd=tmp_path)
    assert other.returncode == 0, other.stderr
    job = other.stdout.strip().split(";")[0]
    try:
        folder = tmp_path / "old-run"
        folder.mkdir()
        record = cancel.JobRecord("mpiregress-0000", 999999, slurm_env["SLURM_CONF"], [job])
        (folder / cancel.JOBS_FILE).write_text(record.header() + f"{job}\n")
        done = subprocess.run([sys.executable, "-m", "mpiregress", "cancel", str(folder), "--wait", "0"],
                              env=env, cwd=REPO, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        assert "no job of this run is queued" in done.stdout
        assert job in (cancel.queued_jobs(slurm_env) or {})
    finally:
        subprocess.run(["scancel", job], env=slurm_env, timeout=30)


def test_signals_raise_cancelled_once_and_later_ones_are_ignored():
    with pytest.raises(cancel.Cancelled) as caught:
        with cancel.signals_cancel():
            os.kill(os.getpid(), signal.SIGHUP)
            time.sleep(1)
    assert caught.value.sentence == "cancelled by SIGHUP"
    # The handlers are back: a later SIGHUP would end the process by default.
    assert signal.getsignal(signal.SIGHUP) is signal.SIG_DFL


def _blocked_signals(native_id: int) -> set[int]:
    mask = next(line.split()[1] for line in open(f"/proc/self/task/{native_id}/status") if line.startswith("SigBlk:"))
    return {sig for sig in range(1, 65) if int(mask, 16) >> (sig - 1) & 1}


def test_only_the_main_thread_can_take_a_cancel_signal_while_the_queue_is_watched():
    """The kernel hands a signal sent to the run to any thread not blocking it, and Python runs handlers in the
    main thread only: taken by the queue-watch thread, a SIGTERM left the main thread blocked in its read of
    ReFrame's output (the run did not answer for minutes). The watch thread blocks them; the main does not."""
    children = cancel.RunChildren(None, dict(os.environ, PATH="/nonexistent"), watch=True)
    children.popen(["sleep", "30"])
    try:
        watch = next(t for t in threading.enumerate() if t.name == "mpiregress-jobs")
        deadline = time.monotonic() + 10
        while not set(cancel.CANCEL_SIGNALS) <= _blocked_signals(watch.native_id) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert set(cancel.CANCEL_SIGNALS) <= _blocked_signals(watch.native_id)
        assert not set(cancel.CANCEL_SIGNALS) & _blocked_signals(threading.main_thread().native_id)
    finally:
        children.stop(grace=1)


def test_the_job_record_reads_back_what_the_run_wrote(tmp_path):
    record = cancel.JobRecord("mpiregress-abc", 42, "/x/slurm.conf")
    path = tmp_path / cancel.JOBS_FILE
    path.write_text(record.header() + "17\n18\n")
    back = cancel.JobRecord.read(path)
    assert (back.token, back.pid, back.slurm_conf, back.jobs) == ("mpiregress-abc", 42, "/x/slurm.conf", ["17", "18"])


def test_stop_ends_what_the_child_started_in_a_session_of_its_own(tmp_path):
    """ReFrame's local scheduler (inside a CI allocation) starts each job in its own session: it goes too."""
    pid_file = tmp_path / "pid"
    children = cancel.RunChildren(None, dict(os.environ), watch=False)
    # A child that ignores SIGTERM and leaves a grandchild in a new session (as `setsid` does).
    proc = children.popen(["bash", "-c", f"trap '' TERM; setsid sleep 600 & echo $! > {pid_file}; wait"])
    deadline = time.monotonic() + 20
    while not (pid_file.exists() and pid_file.read_text().strip()) and time.monotonic() < deadline:
        time.sleep(0.1)
    grandchild = int(pid_file.read_text())
    said = children.stop(grace=1)
    assert proc.poll() is not None
    assert any("killed after 1 s" in s for s in said)
    assert any("left behind killed" in s and str(grandchild) in s for s in said), said
    time.sleep(0.5)
    assert not os.path.exists(f"/proc/{grandchild}") or "Z" in open(f"/proc/{grandchild}/stat").read().split(")")[1][:3]


def test_a_signal_before_the_command_runs_is_not_lost_and_says_cancelled():
    """From the CLI's first line: a SIGTERM while the options are parsed (a run's slowest seconds on a loaded
    host, before it installed anything of its own) is exit 6 and one sentence, not a silent death."""
    code = ("import os, signal, sys\nfrom mpiregress import cli\nreal = cli.build_parser\n"
            "def parsing(command=None):\n    os.kill(os.getpid(), signal.SIGTERM)\n    return real(command)\n"
            "cli.build_parser = parsing\nsys.exit(cli.main(['guard', '--build-target', 'x86_64', "
            "'--node-target', 'x86_64']))\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == CANCELLED, (done.returncode, done.stderr)
    assert done.stderr.strip() == "mpiregress: error: cancelled by SIGTERM; exit 6"


def test_a_sighup_its_starter_ignored_stays_ignored():
    """nohup asks to survive the terminal's hangup: the run honours it (SIGTERM and SIGINT still cancel)."""
    code = ("import signal\nfrom mpiregress.run import cancel\nsignal.signal(signal.SIGHUP, signal.SIG_IGN)\n"
            "with cancel.signals_cancel():\n"
            "    print(signal.getsignal(signal.SIGHUP) is signal.SIG_IGN, "
            "signal.getsignal(signal.SIGTERM) is cancel._on_signal)\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.stdout.split() == ["True", "True"], done.stderr


def test_a_run_killed_before_it_recorded_any_job_is_marked_cancelled_by_the_after_script(tmp_path):
    """Killed outright while still reading its inputs: no slurm-jobs.txt, status.json "running" with a dead
    PID. The after_script has nothing to cancel, and the folder says cancelled all the same."""
    folder = tmp_path / "reports" / "local"
    folder.mkdir(parents=True)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (folder / "status.json").write_text(json.dumps({"state": "running", "pid": dead.pid, "command": "mpiregress run",
                                                    "started": "2026-11-26T18:00:00Z", "steps": []}))
    done = subprocess.run([sys.executable, "-m", "mpiregress", "cancel", str(tmp_path / "reports"), "--wait", "0"],
                          cwd=REPO, capture_output=True, text=True, timeout=120,
                          env={k: v for k, v in os.environ.items() if not k.startswith("CI_")})
    assert done.returncode == 0, done.stdout + done.stderr
    assert "the run there was killed outright; its status.json now says cancelled" in done.stdout
    status = json.loads((folder / "status.json").read_text())
    assert (status["state"], status["exit_code"]) == ("cancelled", CANCELLED), status
    assert status["message"].startswith("killed outright") and "it had submitted no Slurm job" in status["message"]
    assert (folder / "summary.md").read_text().startswith("# MPI regression run CANCELLED (exit 6)")


def test_a_runs_private_folder_is_in_its_report_folder_and_starts_empty(tmp_path):
    """Where a run keeps its sbatch and ReFrame's reports until adopted: its own folder, emptied of what a run
    killed there left; a fresh temporary folder where it has none, or where its path cannot stand in PATH."""
    left = tmp_path / "run" / cancel.STAGING_NAME
    left.mkdir(parents=True)
    (left / "reframe-report.json").write_text("{}")
    folder = cancel.private_folder(tmp_path / "run", cancel.STAGING_NAME, "mpiregress-test-")
    assert folder == left and list(folder.iterdir()) == []
    for where in (None, tmp_path / "a:b"):
        elsewhere = cancel.private_folder(where, cancel.FENCE_NAME, "mpiregress-test-")
        try:
            assert elsewhere.name.startswith("mpiregress-test-") and elsewhere.parent == Path(tempfile.gettempdir())
        finally:
            elsewhere.rmdir()
