"""A run disturbed on purpose, end to end on the local Slurm (prints figures, asserts nothing).

1. ``--quiet`` quiet point-to-point runs (same_numa latency, the noise probe in each
   benchmark job) are imported into a fresh history as accepted scheduled runs;
2. the FWQ check (noise family) runs once quiet and once with the injected source;
3. a pt2pt run with ``--repeat auto`` (k from the history's node noise) while the test-only
   noise source (tests/noise_source: SCHED_FIFO 10, pinned to core 1, 1 ms spin every
   10 ms = 100 Hz) disturbs core 1;
4. ``mpiregress compare --gate`` judges the disturbed run against that history, and
   the same results without their probe show what the gate would have said.

    MPIREGRESS_STATE_DIR=/tmp/state OSU_SOURCE_MIRROR=... OSU_SHA256=... \\
        python benchmarks/noise_disturbed_run.py --quiet 5

Needs root (SCHED_FIFO) for the source to preempt on time, as in tests/test_noise_fwq.py.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SOURCE = REPO / "tests" / "noise_source" / "noise_source.c"
PT2PT = ["--methods", "source", "--metrics", "latency", "--placements", "same_numa", "--iterations", "20000"]


def mpiregress(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mpiregress", *args], env=env, capture_output=True, text=True,
                          cwd=REPO, timeout=900)


def probe_of(results: Path) -> str:
    rows = json.loads(results.read_text())
    return "; ".join(f"{r['parameters'].get('placement') or r['parameters'].get('layout')} {r['metric']} "
                     f"{r['value']:.3g} samples {r.get('samples')} noise {r['conditions'].get('noise')}"
                     for r in rows if r.get("value") is not None)


def fwq_of(results: Path) -> str:
    rows = json.loads(results.read_text())
    return "; ".join(f"{r['parameters']['layout']} {r['parameters']['node']} {r['metric']} {r['value']:.4g}"
                     for r in rows if r["benchmark"] == "fwq" and r.get("value") is not None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quiet", type=int, default=5, help="quiet runs in the history (the gate needs 5)")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="noise-disturbed-"))
    env = dict(os.environ, MPIREGRESS_HISTORY_DB=str(work / "history.sqlite"))
    source = work / "noise_source"
    subprocess.run(["cc", "-O2", "-o", str(source), str(SOURCE)], check=True)

    for i in range(args.quiet):
        out = work / f"quiet-{i}"
        done = mpiregress("run", "--system", "local", *PT2PT, "--repeat", "3", "--report-dir", str(out), env=env)
        print(f"quiet run {i}: exit {done.returncode}: {probe_of(out / 'results.json')}")
        imported = mpiregress("history", "import", "--kind", "schedule",
                              str(out / "results.json"), env=env)
        if imported.returncode:
            print(imported.stderr)

    fwq_quiet = work / "fwq-quiet"
    mpiregress("run", "--system", "local", "--families", "noise", "--methods", "source", "--allow-missing-baselines",
               "--report-dir", str(fwq_quiet), env=env)
    print(f"FWQ check, quiet: {fwq_of(fwq_quiet / 'results.json')}")
    summary = (fwq_quiet / "noise" / "local-batch" / "all_cores" / "summary.txt").read_text()
    print("FWQ check, quiet, findings:\n  " + summary.strip().replace("\n", "\n  "))

    noise = subprocess.Popen([str(source), "1", "10000", "1000", "600", "10"], stdout=subprocess.PIPE, text=True)
    try:
        print(noise.stdout.readline().strip() if noise.stdout else "")
        fwq_noisy = work / "fwq-disturbed"
        mpiregress("run", "--system", "local", "--families", "noise", "--methods", "source",
                   "--allow-missing-baselines", "--report-dir", str(fwq_noisy), env=env)
        print(f"FWQ check, disturbed: {fwq_of(fwq_noisy / 'results.json')}")
        summary = (fwq_noisy / "noise" / "local-batch" / "all_cores" / "summary.txt").read_text()
        print("FWQ check, disturbed, findings:\n  " + summary.strip().replace("\n", "\n  "))
        out = work / "disturbed"
        done = mpiregress("run", "--system", "local", *PT2PT, "--repeat", "auto", "--report-dir", str(out), env=env)
    finally:
        noise.send_signal(signal.SIGTERM)
        noise.wait(timeout=10)
    print(f"disturbed run: exit {done.returncode}: {probe_of(out / 'results.json')}")
    print("--repeat auto said: " + next((line for line in done.stdout.splitlines() if "--repeat auto" in line), "?"))
    gate = mpiregress("compare", str(out / "results.json"), "--db", env["MPIREGRESS_HISTORY_DB"], env=env)
    print(f"gate on the disturbed run: exit {gate.returncode}")
    print(gate.stdout.strip()[-2500:])
    bare = json.loads((out / "results.json").read_text())
    for row in bare:
        row["conditions"].pop("noise", None)
    (work / "no-probe.json").write_text(json.dumps(bare))
    without = mpiregress("compare", str(work / "no-probe.json"), "--db", env["MPIREGRESS_HISTORY_DB"], env=env)
    print(f"the same results without their probe: exit {without.returncode}")
    print(without.stdout.strip()[-1500:])
    print(f"(everything is in {work})")


if __name__ == "__main__":
    main()
