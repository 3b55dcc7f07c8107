"""Issue 32: runs on the local Slurm ended at a random moment in a random way; what each way leaves.

Starts `mpiregress run --system local` (real OSU from the worktree's build, or any build the run finds:
build it first with `OSU_SOURCE_MIRROR=... mpiregress build --method source --system local`), small
settings, each in a session of its own (its process group is the run, as a CI job's is its shell's), and
ends each at a random moment (uniform in [--earliest, --latest] s after start: preparing, building, queued,
mid-step or judging, whichever it is in then) in one of these ways (every --build-every'th run starts with
empty manifest and install folders and builds source OSU on demand first, so some are ended mid-build):

  SIGTERM, SIGINT, SIGHUP       to the run's process group (GitLab's cancel, Ctrl-C, a closed terminal)
  TERM+KILL@2s, TERM+KILL@10s   GitLab's timeout/cancel: SIGTERM to the group, SIGKILL after the grace
  KILL+after_script             SIGKILL to the group, then `mpiregress cancel DIR --wait 0` (the after_script)
  KILL+new_run                  SIGKILL to the group, then a new (short, real) run in the same folder

and prints, per way: the phases hit, Slurm jobs left (queued or running 30 s after the way ended),
processes left (anything whose environment or command line names the run's folder, or in its group),
the status.json states (for KILL+new_run: the dead run's, as moved aside by the new run), reports saying
"cancelled", exit codes and time to exit. Then the lie cases: a results file labelled pass on a
1e6 us latency (`mpiregress verdict --event run`), and a history import of a 1e308 us latency.

    setsid python benchmarks/kill_sequences.py [--runs 40] [--seed 32] [--max-minutes 60] [--ways W,...]
        [--earliest S] [--latest S] [--build-every 4] [--judging-every N] [--keep]

A way with a grace of 5 s or more sends the run SIGUSR2 half a second before its SIGKILL: a run that has not
answered SIGTERM by then prints where each of its threads sat (faulthandler) at the end of its .out.

2026-11-26, real OSU 7.2, the local cluster with proctrack/cgroup, 42 runs each (load 1-7, beside the links
and noise benchmarks). Seed 32: Slurm jobs left 0, processes left 0; one status.json "running" (SIGKILL at
4.1 s, before the run recorded any job: the after_script then found no slurm-jobs.txt and left it; it now
marks such a folder cancelled) and one run with no status.json (SIGHUP at 1.4 s, before the run had claimed
its folder: "cancelled by SIGHUP", exit 6, nothing written into a folder it did not own). Seed 33:

    way                runs  jobs left  procs left  status.json                     exit s (median/max)
    SIGTERM              6       0          0       cancelled 6                     6.9 / 8.2
    SIGINT               6       0          0       cancelled 6                     6.4 / 8.1
    SIGHUP               6       0          0       cancelled 6                     6.5 / 7.6
    TERM+KILL@2s         6       0          0       cancelled 6                     2.0 / 2.3
    TERM+KILL@10s        6       1          6       cancelled 5, running 1          6.6 / 10.0
    KILL+after_script    6       0          0       cancelled 6                     0.0 / 0.0
    KILL+new_run         6       0          0       cancelled 5, not moved aside 1  0.0 / 0.0

The TERM+KILL@10s run did not answer SIGTERM (at 34.2 s, mid-step, load about 7) within 10 s: no "cancelled",
its job left RUNNING (batch script, srun, both osu_bw ranks) for the after_script. Not explained yet (the
SIGUSR2 dump above is for the next time). "not moved aside": killed at 1.1 s, before it wrote anything.

2026-11-27, with --build-every 2 (every second run builds source OSU on demand into empty folders first), seeds
34 and 35, 42 runs (load 2.5-4.7, beside a gitlab-ci-local pipeline): 11 ended while building (make, gcc or
configure in the run's group), 2 while queued, 16 mid-step, 13 preparing. Slurm jobs left 0, processes left 0
(a killed build's compilers included), status.json "running" for a dead run 0; every run's report "cancelled"
except one killed at 1.1 s before it had claimed its folder (nothing written). TERM+KILL@10s answered
SIGTERM within 0.2-7.5 s in 6 of 6; exit 6 in 0.1-0.6 s from building, 3.9-8.4 s from a step.

2026-11-27, after the fix of the unanswered signal (the queue-watch thread blocks TERM/INT/HUP, so the kernel
hands them to the main thread) and with build steps' TMPDIR in their own folder: seed 36, --build-every 3,
--judging-every 5, 25 runs in the 75 minutes (each judging run goes to its end first: 10-15 min at this load),
beside benchmarks/links_faults.py, the noise benchmark and a gitlab-ci-local pipeline (load 5-9):

    way                runs  phases                                 jobs left  procs left  status.json   exit s med/max
    SIGTERM              3   mid-step 2, preparing 1                    0          0       cancelled 3   7.4 / 8.7
    SIGINT               2   building 1, queued 1                       0          0       cancelled 2   1.9 / 3.4
    SIGHUP               5   building 2, mid-step 2, preparing 1        0          0       cancelled 5   1.5 / 8.0
    TERM+KILL@2s         3   building 1, mid-step 2                     0          0       cancelled 3   2.0 / 2.1
    TERM+KILL@10s        3   judging 1, mid-step 2                      0          0       cancelled 3   7.1 / 8.2
    KILL+after_script    5   building 2, judging 1, mid-step 2          0          0       cancelled 5   0.0 / 0.0
    KILL+new_run         4   judging 1, mid-step 3                      0          0       cancelled 4   0.0 / 0.0

Every run's report said "cancelled"; no gcc temporary file was left in /tmp by the six runs ended while building.
The lie cases: a results file labelled pass on a 1e6 us latency, `verdict --event run`: exit 1, "baseline band:
1000000 us is above the limit 42 us"; a history import of a 1e308 us latency: exit 2, "value: latency 1e+308 us
is impossible: it must be at most 3.6e+09 us (an hour)".
"""
from __future__ import annotations

import argparse
import collections
import contextlib
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Optional

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO)]

from mpiregress.cluster.local import LocalCluster  # noqa: E402
from mpiregress.run.cancel import JOBS_FILE, JobRecord, process_group_members  # noqa: E402

WAYS = ("SIGTERM", "SIGINT", "SIGHUP", "TERM+KILL@2s", "TERM+KILL@10s", "KILL+after_script", "KILL+new_run")
RUN_ARGS = ["--methods", "source", "--families", "pt2pt", "--metrics", "latency,bandwidth",
            "--placements", "same_numa,cross_node", "--iterations", "3000", "--repeat", "2", "--no-build"]
# A run given these (empty folders) has no build: it builds source OSU on demand, and can be ended mid-build.
FRESH_BUILD_VARS = ("MPIREGRESS_MANIFEST_DIR", "MPIREGRESS_INSTALL_ROOT")
NEW_RUN_ARGS = ["--methods", "source", "--families", "pt2pt", "--metrics", "latency", "--placements", "same_numa",
                "--iterations", "200", "--no-build"]


def mpiregress(*args: str) -> list[str]:
    return [sys.executable, "-m", "mpiregress", *args]


def start(folder: Path, args: list[str], env: dict[str, str]) -> subprocess.Popen:
    log = open(folder.parent / f"{folder.name}.out", "a")
    return subprocess.Popen(mpiregress("run", "--system", "local", "--report-dir", str(folder), *args), env=env,
                            cwd=REPO, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


def queue(slurm_env: dict[str, str]) -> dict[str, str]:
    """Job id -> 'comment|state' of every job in the queue (asking again while Slurm is slow)."""
    for _ in range(30):
        try:
            done = subprocess.run(["squeue", "-h", "-o", "%i|%k|%T"], env=slurm_env, capture_output=True, text=True,
                                  timeout=30)
        except subprocess.TimeoutExpired:
            continue
        if done.returncode == 0:
            return {line.split("|", 1)[0]: line.split("|", 1)[1] for line in done.stdout.splitlines() if "|" in line}
        time.sleep(1)
    raise SystemExit("squeue did not answer for 30 tries")


# A process of the run's group running one of these is the run building OSU on demand.
BUILD_COMMANDS = ("configure", "make", "cc1", "cc1plus", "gcc", "g++", "mpicc", "mpicxx", "ld", "as", "eb", "tar")


def building(pgid: int) -> bool:
    """Whether a process of the run's group is compiling, configuring or unpacking."""
    for pid in process_group_members(pgid):
        try:
            argv0 = (Path("/proc") / str(pid) / "cmdline").read_bytes().split(b"\0")[0].decode(errors="replace")
        except OSError:
            continue
        if Path(argv0).name in BUILD_COMMANDS or argv0.endswith("/configure"):
            return True
    return False


def phase(proc: subprocess.Popen, folder: Path, slurm_env: dict[str, str]) -> str:
    """Where the run is now: finished, judging (ReFrame done), mid-step, queued, building or preparing."""
    if proc.poll() is not None:
        return "finished"
    if (folder / "reframe-report.json").exists():
        return "judging"
    if building(proc.pid):
        return "building"
    try:
        token = JobRecord.read(folder / JOBS_FILE).token
    except OSError:
        return "preparing"
    states = [v.split("|")[1] for v in queue(slurm_env).values() if v.split("|")[0] == token]
    if "RUNNING" in states:
        return "mid-step"
    return "queued" if states else "preparing"


def leftover_processes(folder: Path, pgid: int) -> list[str]:
    """Living processes whose environment or command line names ``folder``, or in the run's group."""
    needle = str(folder).encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            stat = (entry / "stat").read_text()
            if stat.rsplit(")", 1)[1].split()[0] == "Z":
                continue
            cmd = (entry / "cmdline").read_bytes()
            env = (entry / "environ").read_bytes()
        except (OSError, IndexError):
            continue
        if needle in cmd or needle in env:
            found.append(entry.name + ":" + cmd.split(b"\0")[0].decode(errors="replace"))
    found += [f"{pid}:group" for pid in process_group_members(pgid) if f"{pid}:" not in " ".join(found)]
    return found


def signal_group(pgid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass


def end(way: str, proc: subprocess.Popen, folder: Path, env: dict[str, str]) -> tuple[Optional[float], list[str]]:
    """End the run ``way``; (seconds from the first signal to the run's exit, notes)."""
    sent = time.monotonic()
    notes: list[str] = []
    if way in ("SIGTERM", "SIGINT", "SIGHUP"):
        signal_group(proc.pid, getattr(signal, way))
    elif way.startswith("TERM+KILL@"):
        grace = float(way.split("@")[1].rstrip("s"))
        signal_group(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=max(grace - 0.5, 0.1))
            proc.wait(timeout=0.5)
        except subprocess.TimeoutExpired:
            if grace >= 5:
                # Where the run sat, printed into its output by its SIGUSR2 handler (faulthandler), before it dies.
                with contextlib.suppress(ProcessLookupError):
                    os.kill(proc.pid, signal.SIGUSR2)
                time.sleep(0.3)
            signal_group(proc.pid, signal.SIGKILL)
            notes.append("SIGKILLed" + (" (its threads' stacks are at the end of its .out)" if grace >= 5 else ""))
    else:
        signal_group(proc.pid, signal.SIGKILL)
    try:
        proc.wait(timeout=180)
        exited = round(time.monotonic() - sent, 1)
    except subprocess.TimeoutExpired:
        signal_group(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        exited = None
        notes.append("did not exit within 180 s")
    if way == "KILL+after_script":
        done = subprocess.run(mpiregress("cancel", str(folder), "--wait", "0"), env=env, cwd=REPO,
                              capture_output=True, text=True, timeout=300)
        notes.append(f"cancel exit {done.returncode}")
    elif way == "KILL+new_run":
        # The new run measures with the runner's usual builds (a killed on-demand build left none).
        again = start(folder, NEW_RUN_ARGS, {k: v for k, v in env.items() if k not in FRESH_BUILD_VARS})
        notes.append(f"new run exit {again.wait(timeout=900)}")
    return exited, notes


def report_of(way: str, folder: Path) -> tuple[str, bool]:
    """(status.json state, summary says cancelled) of the run ended ``way`` (moved aside by a new run)."""
    where = folder
    if way == "KILL+new_run":
        aside = sorted(folder.glob("killed-run-*"))
        if not aside:
            return "not moved aside", False
        where = aside[0]
    try:
        state = json.loads((where / "status.json").read_text()).get("state", "?")
    except (OSError, ValueError):
        state = "no status.json"
    try:
        cancelled = "CANCELLED" in (where / "summary.md").read_text().splitlines()[0]
    except (OSError, IndexError):
        cancelled = False
    return state, cancelled


def lies(root: Path, env: dict[str, str]) -> None:
    """The issue's lie cases, with their exit code and sentence."""
    record = {"system": "local", "partition": "batch", "method": "source", "toolchain": "2023b",
              "parameters": {"placement": "same_numa", "size": 8192}, "metric": "latency", "benchmark": "osu_latency",
              "unit": "us", "value": 1e6, "status": "pass", "samples": [1e6]}
    cases = {
        "status pass on a 1e6 us latency: verdict --event run": (
            [record], lambda p: ["verdict", str(p), "--event", "run", "--out-dir", str(root / "lie-out"),
                                 "--db", str(root / "lie.sqlite")]),
        "history import of a 1e308 us latency": (
            [dict(record, value=1e308, samples=[1e308])],
            lambda p: ["history", "import", "--db", str(root / "lie.sqlite"), str(p)]),
    }
    print("\nlie cases")
    for name, (records, argv) in cases.items():
        path = root / f"lie-{len(name)}.json"
        path.write_text(json.dumps(records))
        done = subprocess.run(mpiregress(*argv(path)), env={k: v for k, v in env.items() if k != "CI_PIPELINE_SOURCE"},
                              cwd=REPO, capture_output=True, text=True, timeout=300)
        said = [ln for ln in done.stderr.splitlines() if "error:" in ln]
        verdict = root / "lie-out" / "verdict.json"
        if not said and verdict.exists():
            data = json.loads(verdict.read_text())
            worst = [f for f in data["findings"] if f["state"] == data["state"]]
            said = [f"verdict {data['state']}: " + (f"{worst[0]['judge']}: {worst[0]['sentence']}" if worst else "")]
        print(f"  {name}: exit {done.returncode}: {said[0] if said else done.stdout.strip()[-300:]}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--seed", type=int, default=32)
    parser.add_argument("--earliest", type=float, default=1.0)
    parser.add_argument("--latest", type=float, default=40.0)
    parser.add_argument("--max-minutes", type=float, default=60.0, help="stop starting runs after this long")
    parser.add_argument("--keep", action="store_true", help="keep the report folders")
    parser.add_argument("--build-every", type=int, default=4,
                        help="every Nth run builds source OSU on demand into empty folders first (needs "
                             "OSU_SOURCE_MIRROR or a download); 0: none")
    parser.add_argument("--judging-every", type=int, default=0,
                        help="every Nth run is ended the moment ReFrame's report lands (judging), not at random")
    parser.add_argument("--lies-only", action="store_true")
    parser.add_argument("--ways", default=",".join(WAYS), help="comma-separated subset of: " + ", ".join(WAYS))
    args = parser.parse_args()
    # The runs get SIGHUP's default disposition even when this script was started under nohup: a run honours
    # an inherited "ignore SIGHUP" (nohup), which would make the SIGHUP way a no-op. Start it with setsid.
    signal.signal(signal.SIGHUP, signal.SIG_DFL)
    chosen = [w for w in args.ways.split(",") if w]
    unknown = sorted(set(chosen) - set(WAYS))
    if unknown:
        parser.error(f"unknown way(s) {', '.join(unknown)}")
    rng = random.Random(args.seed)
    root = Path(tempfile.mkdtemp(prefix="kill-sequences-"))
    env = dict(os.environ)
    env.pop("MPIREGRESS_DEBUG", None)
    if args.lies_only:
        lies(root, env)
        return 0
    cluster = LocalCluster(system="local")
    started = cluster.start()    # stopped at the end when this script started it
    slurm_env = {**env, **cluster.client_env()}
    ways = [chosen[i % len(chosen)] for i in range(args.runs)]
    rng.shuffle(ways)
    rows: list[dict] = []
    began = time.monotonic()
    for index, way in enumerate(ways):
        if time.monotonic() - began > args.max_minutes * 60:
            break
        folder = root / f"run-{index:02d}"
        run_env, run_args = env, RUN_ARGS
        if args.build_every and index % args.build_every == args.build_every - 1:
            fresh = root / f"build-{index:02d}"
            run_env = {**env, "MPIREGRESS_MANIFEST_DIR": str(fresh / "manifests"),
                       "MPIREGRESS_INSTALL_ROOT": str(fresh / "install")}
            run_args = [a for a in RUN_ARGS if a != "--no-build"]
        proc = start(folder, run_args, run_env)
        moment = round(rng.uniform(args.earliest, args.latest), 1)
        deadline = time.monotonic() + moment
        if args.judging_every and index % args.judging_every == args.judging_every - 1:
            # The judging phase lasts well under a second here: watched for, not drawn (the run's own limit bounds it).
            deadline = time.monotonic() + 900
            while not (folder / "reframe-report.json").exists() and time.monotonic() < deadline and proc.poll() is None:
                time.sleep(0.01)
        else:
            while time.monotonic() < deadline and proc.poll() is None:
                time.sleep(0.1)
        at = phase(proc, folder, slurm_env)
        exited, notes = end(way, proc, folder, run_env)
        code = proc.returncode
        # Jobs left: whatever is still in the queue 30 s later (only this benchmark uses this cluster).
        settle = time.monotonic() + 30
        while queue(slurm_env) and time.monotonic() < settle:
            time.sleep(1)
        jobs = queue(slurm_env)
        time.sleep(2)
        procs = leftover_processes(folder, proc.pid)
        state, cancelled = report_of(way, folder)
        row = dict(way=way, moment=moment, phase=at, code=code, exit_s=exited, jobs=sorted(jobs), procs=procs,
                   state=state, cancelled=cancelled, notes=notes)
        rows.append(row)
        print(f"#{index:02d} {way:<18} at {moment:5.1f}s ({at:<9}) exit {code} after {exited}s  jobs left "
              f"{len(jobs)}  procs left {len(procs)}  status {state:<10} cancelled-report {cancelled} "
              f"{' '.join(notes)}", flush=True)
        for job, what in jobs.items():      # leave nothing for the next run to trip over
            subprocess.run(["scancel", job], env=slurm_env, timeout=30)
            print(f"    left job {job} {what}")
        for entry in procs:
            print(f"    left process {entry}")
            try:
                os.kill(int(entry.split(":")[0]), signal.SIGKILL)
            except (ProcessLookupError, ValueError):
                pass
    print(f"\n{len(rows)} runs in {(time.monotonic() - began) / 60:.1f} min (target {args.runs})")
    print(f"{'way':<18} {'runs':>4}  {'phases':<40} {'jobs left':>9} {'procs left':>10}  {'status.json':<26} "
          f"{'cancelled':>9}  {'exit codes':<14} exit s (median/max)")
    for way in WAYS:
        mine = [r for r in rows if r["way"] == way]
        if not mine:
            continue
        times = [r["exit_s"] for r in mine if r["exit_s"] is not None]
        phases = collections.Counter(r["phase"] for r in mine)
        states = collections.Counter(r["state"] for r in mine)
        codes = collections.Counter(str(r["code"]) for r in mine)
        print(f"{way:<18} {len(mine):>4}  {', '.join(f'{k} {v}' for k, v in sorted(phases.items())):<40} "
              f"{sum(len(r['jobs']) for r in mine):>9} {sum(len(r['procs']) for r in mine):>10}  "
              f"{', '.join(f'{k} {v}' for k, v in sorted(states.items())):<26} "
              f"{sum(r['cancelled'] for r in mine):>5}/{len(mine):<3}  "
              f"{', '.join(f'{k}:{v}' for k, v in sorted(codes.items())):<14} "
              f"{round(statistics.median(times), 1) if times else '-'} / {max(times) if times else '-'}")
    running = [r for r in rows if r["state"] == "running"]
    print(f"status.json 'running' for a dead run: {len(running)}; Slurm jobs left: "
          f"{sum(len(r['jobs']) for r in rows)}; processes left: {sum(len(r['procs']) for r in rows)}")
    (root / "rows.json").write_text(json.dumps(rows, indent=1))
    print(f"rows: {root / 'rows.json'}")
    if started:
        cluster.stop()
    lies(root, env)
    if not args.keep:
        for folder in root.glob("run-*"):
            shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
