"""Fault injectors for issue 8's fault matrix: bad inputs, unwritable outputs, busy locks.

Shared by ``tests/test_faults.py`` (the fast cases) and ``benchmarks/fault_matrix.py``
(the same cases plus the slow ones that kill Slurm daemons). Every case runs the real
``mpiregress`` command line in a subprocess and returns what a user sees: the exit
code, the one error sentence and the state of the reports.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

REPO = Path(__file__).resolve().parent.parent.parent

# One valid result record of today's model (system, partition, method, placement, metric).
GOOD_RESULT = {
    "system": "local", "partition": "batch", "method": "source", "parameters": {"placement": "same_numa", "size": 8192},
    "metric": "latency", "benchmark": "osu_latency", "unit": "us",
    "value": 3.0, "status": "pass", "samples": [3.0],
}


@dataclass
class Outcome:
    """What one injected fault produced."""

    fault: str
    expected: int
    code: int
    message: str
    kept: str = ""
    seconds: Optional[float] = None

    @property
    def ok(self) -> bool:
        return self.code == self.expected and "Traceback" not in self.message


def cli(args: list[str], env: Optional[dict] = None, timeout: float = 900) -> subprocess.CompletedProcess:
    """Run ``python -m mpiregress ARGS`` from the repository, capturing its output."""
    return subprocess.run([sys.executable, "-m", "mpiregress", *args], env=env or dict(os.environ),
                          capture_output=True, text=True, timeout=timeout, cwd=REPO)


def sentence(done: subprocess.CompletedProcess) -> str:
    """The error line a user reads (or the traceback's last line, which must never happen)."""
    lines = [ln for ln in done.stderr.splitlines() if ln.strip()]
    if any(ln.startswith("Traceback") for ln in lines):
        return "Traceback: " + lines[-1]
    errors = [ln for ln in lines if ": error: " in ln]
    return (errors[0] if errors else (lines[-1] if lines else "")).strip()


def report_state(folder: Path) -> str:
    """What a reports folder says now: the run's state, its results and the summary's first line."""
    folder = Path(folder)
    if not folder.exists():
        return "no folder"
    parts = []
    try:
        status = json.loads((folder / "status.json").read_text())
        parts.append(f"status {status['state']} (exit {status['exit_code']})")
    except (OSError, ValueError, KeyError):
        parts.append("no status.json")
    try:
        found = json.loads((folder / "results.json").read_text())
        measured = sum(1 for r in found if r.get("value") is not None)
        parts.append(f"results.json {len(found)} results, {measured} measured")
    except (OSError, ValueError):
        parts.append("no results.json")
    try:
        first = (folder / "summary.md").read_text().splitlines()[0]
        parts.append(f"summary '{first.lstrip('# ')[:40]}'")
    except (OSError, IndexError):
        parts.append("no summary.md")
    return "; ".join(parts)


def write_inputs(root: Path) -> dict[str, Path]:
    """The bad input files of the issue (and one good one), written under ``root``."""
    root.mkdir(parents=True, exist_ok=True)
    files = {
        "garbage": root / "garbage.json",
        "null_samples": root / "null-samples.json",
        "unknown_metric": root / "unknown-metric.json",
        "empty": root / "empty.json",
        "good": root / "good.json",
        "a_file": root / "a-file",
    }
    # Binary garbage that is not UTF-8 (a fixed pattern: the case must not depend on chance).
    files["garbage"].write_bytes(bytes(range(256)) * 4)
    files["null_samples"].write_text(json.dumps([{**GOOD_RESULT, "samples": None}]))
    files["unknown_metric"].write_text(json.dumps([{**GOOD_RESULT, "metric": "latencyy"}]))
    files["empty"].write_text("[]\n")
    files["good"].write_text(json.dumps([GOOD_RESULT]))
    files["a_file"].write_text("a regular file where a folder is expected\n")
    return files


Spec = tuple[str, int, list[str], Callable[[], str]]


def fast_specs(root: Path) -> list[Spec]:
    """Every fault that needs no running Slurm: (fault, expected exit code, CLI args, reports probe)."""
    inputs = root / "inputs"
    f = {name: inputs / leaf for name, leaf in (
        ("garbage", "garbage.json"), ("null_samples", "null-samples.json"),
        ("unknown_metric", "unknown-metric.json"), ("empty", "empty.json"), ("good", "good.json"),
        ("a_file", "a-file"))}
    db = ["--db", str(root / "history.sqlite")]
    out = root / "out"
    blocked = f["a_file"] / "sub"        # a folder under a regular file: nothing can be written there
    specs: list[Spec] = []
    for name, path in (("binary garbage results", f["garbage"]), ("samples: null", f["null_samples"]),
                       ("unknown metric name", f["unknown_metric"]), ("empty results list", f["empty"])):
        specs += [
            (f"{name} -> history import", 2, ["history", "import", str(path), *db], lambda: ""),
            (f"{name} -> compare", 2, ["compare", str(path), *db], lambda: ""),
            (f"{name} -> report --gate", 2, ["report", str(path), "--gate", "--out-dir", str(out), *db], lambda: ""),
        ]
    specs += [
        ("unwritable report --out-dir", 2, ["report", str(f["good"]), "--out-dir", str(blocked), *db], lambda: ""),
        ("unwritable compare --junit", 2, ["compare", str(f["good"]), "--junit", str(blocked / "j.xml"), *db],
         lambda: ""),
        ("unwritable run --report-dir", 2, ["run", "--system", "local", "--report-dir", str(blocked)], lambda: ""),
        ("run --iterations -5", 2, ["run", "--system", "local", "--iterations", "-5",
                                    "--report-dir", str(root / "r-iter")], lambda: report_state(root / "r-iter")),
        ("run --repeat 0", 2, ["run", "--system", "local", "--repeat", "0", "--report-dir", str(root / "r-repeat")],
         lambda: report_state(root / "r-repeat")),
        ("compare --min-samples 0", 2, ["compare", str(f["good"]), "--min-samples", "0", *db], lambda: ""),
        ("report --gate --z nan", 2, ["report", str(f["good"]), "--gate", "--z", "nan", "--out-dir", str(out), *db],
         lambda: ""),
    ]
    return specs


FAST_FAULTS = [spec[0] for spec in fast_specs(Path("/nonexistent"))]


def run_spec(spec: Spec, root: Path, env: dict) -> Outcome:
    """Inject one fast fault (writing the input files first) and return what the user saw."""
    write_inputs(root / "inputs")
    fault, expected, args, kept = spec
    done = cli(args, env, timeout=300)
    return Outcome(fault, expected, done.returncode, sentence(done), kept())


def missing_binary_manifest(folder: Path, method: str = "source", target: str = "x86_64") -> Path:
    """A valid manifest whose binaries do not exist (a deleted install prefix)."""
    folder.mkdir(parents=True, exist_ok=True)
    prefix = folder / "gone"
    path = folder / f"{method}-{target}.json"
    path.write_text(json.dumps({
        "schema": "mpiregress-manifest/1", "method": method, "toolchain": "2023b", "osu_version": "7.2",
        "target": target, "prefix": str(prefix), "bin_dir": str(prefix / "libexec/osu-micro-benchmarks/mpi")}))
    return path


def stale_folder(folder: Path) -> None:
    """A reports folder as a previous passing run left it."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "results.json").write_text(json.dumps([GOOD_RESULT]))
    (folder / "summary.md").write_text("# MPI regression: local\n\nall pass\n")
    (folder / "junit.xml").write_text('<testsuites><testsuite name="x" tests="1" failures="0"/></testsuites>\n')
    (folder / "status.json").write_text(json.dumps({"state": "finished", "exit_code": 0}))
    # A run records what it wrote as its own; only those entries may the next run remove.
    (folder / ".mpiregress-owned").write_text("results.json\nsummary.md\njunit.xml\nstatus.json\n")
