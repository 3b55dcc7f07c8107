"""The whole suite on a fresh clone with two busy loops beside it (issue 20): does it hold under load?

Clones this checkout (its committed HEAD) into a temporary folder, starts two CPU busy loops (two
processes, so a 2-core machine sits at load >= 4 with the suite), runs ``CI=true bash .ci/run`` there
(the same entry point CI uses), stops the loops by their PIDs, and prints the suite's result: exit
code, wall time, pytest's summary line, the failed tests, and the load average seen during the run.
Prints figures, asserts nothing.

    python benchmarks/suite_under_load.py [--loops 2] [--keep]

The clone shares ../shared (the read-only material the tests read) by a symlink beside it, as CI has.
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def _busy_loop() -> subprocess.Popen:
    """One process spinning on a core until it is killed by its PID."""
    return subprocess.Popen([sys.executable, "-c", "while True: pass"], stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _sample_load(stop: threading.Event, seen: list[float]) -> None:
    while not stop.wait(10):
        seen.append(os.getloadavg()[0])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--loops", type=int, default=2, help="busy loops beside the suite (default 2)")
    parser.add_argument("--keep", action="store_true", help="keep the clone and its logs")
    args = parser.parse_args()
    entry = REPO / ".ci" / "run"
    if not entry.exists():
        print(f"suite_under_load: {entry} does not exist in this checkout; nothing to run")
        return 2
    root = Path(tempfile.mkdtemp(prefix="mpiregress-under-load-"))
    clone = root / REPO.name
    subprocess.run(["git", "clone", "--quiet", str(REPO), str(clone)], check=True)
    if not (clone / ".ci" / "run").exists():
        # The CI entry point is the runner's, not committed here: the clone gets this checkout's copy.
        shutil.copytree(REPO / ".ci", clone / ".ci")
    shared = REPO.parent / "shared"
    if shared.exists() and not (root / "shared").exists():
        (root / "shared").symlink_to(shared)
    log = root / "suite.log"
    loops = [_busy_loop() for _ in range(args.loops)]
    seen: list[float] = []
    stop = threading.Event()
    sampler = threading.Thread(target=_sample_load, args=(stop, seen), daemon=True)
    sampler.start()
    started = time.monotonic()
    try:
        with open(log, "w") as out:
            code = subprocess.run(["bash", ".ci/run"], cwd=clone, env=dict(os.environ, CI="true"),
                                  stdout=out, stderr=subprocess.STDOUT).returncode
    finally:
        for loop in loops:
            loop.send_signal(signal.SIGKILL)   # by PID: only the loops this script started
            loop.wait()
        stop.set()
    took = time.monotonic() - started
    text = log.read_text(errors="replace")
    summary = [ln for ln in text.splitlines() if re.search(r"\d+ (passed|failed)", ln)]
    failed = sorted(set(re.findall(r"^FAILED (\S+)", text, flags=re.M)))
    print(f"suite on a fresh clone of {REPO} ({subprocess.run(['git', 'rev-parse', '--short', 'HEAD'], cwd=REPO, capture_output=True, text=True).stdout.strip()}) "  # noqa: E501
          f"with {args.loops} busy loop(s) on {os.cpu_count()} core(s)")
    print(f"exit {code}; {took / 60:.1f} min; load average during the run: "
          f"max {max(seen, default=0):.1f}, mean {sum(seen) / len(seen) if seen else 0:.1f}")
    print(f"pytest: {summary[-1].strip() if summary else 'no summary line (see the log)'}")
    for name in failed:
        print(f"  FAILED {name}")
    if args.keep:
        print(f"kept {root} (log: {log})")
    else:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
