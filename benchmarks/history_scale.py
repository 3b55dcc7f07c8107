"""A year of weekly history for both clusters and the full matrix: load, judge, render; print the times.

Matrix: Iris (broadwell, skylake; 3 placements) and Aion (batch; 4 placements) x
4 methods x 2 metrics = 80 series, k samples per run, one run per cluster per week
(104 imports). Events injected so the report has something to show: Aion cross-node
bandwidth improves 6 % at week 20 (a UCX update), Iris/skylake EESSI same-NUMA
bandwidth loses 70 % at week 35 (the seed's failure), Aion moves to toolchain
2024a at week 44 with latencies 5 % lower. Then one MR run with an injected 15 %
latency regression, a crashed check and a skipped one is judged and reported.

Each stage is timed on the wall clock and in this process' CPU time, with the load average
before and after: on a shared 2-core machine the wall time of a stage is its CPU time stretched
by whatever else runs. The target (issue 19) is report build plus HTML render under 5 s.

Usage: python benchmarks/history_scale.py [--weeks 52] [--k 5] [--out DIR]
Evidence, not a test: prints the times, asserts nothing.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _synth  # noqa: E402

from mpiregress import report  # noqa: E402
from mpiregress.history import store as history
from mpiregress.model.results import Result, pt2pt_key  # noqa: E402
from mpiregress.report import html, junit, markdown  # noqa: E402
from mpiregress.verdict import compose  # noqa: E402
from mpiregress.verdict import history_gate as gate  # noqa: E402


def events(system: str, week: int) -> tuple[dict, str]:
    """Injected effects and toolchain of ``system`` at ``week``."""
    effects: dict = {}
    toolchain = "2023b"
    if system == "aion" and week >= 20:
        for method in _synth.METHODS:
            effects[("batch", method, "cross_node", "bandwidth")] = -0.06
    if system == "iris" and week >= 35:
        effects[("skylake", "eessi", "same_numa", "bandwidth")] = 0.70
    if system == "aion" and week >= 44:
        toolchain = "2024a"
        for method in _synth.METHODS:
            for placement in _synth.SYSTEM_PLACEMENTS["aion"]:
                effects[("batch", method, placement, "latency")] = -0.05
    return effects, toolchain


@contextmanager
def stage(times: dict[str, tuple[float, float]], name: str):
    """Time the block: (wall s, CPU s of this process) under ``name``."""
    wall, cpu = time.perf_counter(), time.process_time()
    yield
    times[name] = (time.perf_counter() - wall, time.process_time() - cpu)


def loadavg() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{one:.2f} {five:.2f} {fifteen:.2f} on {os.cpu_count()} cores"


def injected(weeks: int) -> dict[tuple, int]:
    """(system, partition, method, placement, metric) -> the week its injected step starts."""
    steps: dict[tuple, int] = {}
    for system in ("iris", "aion"):
        for week in range(1, weeks):
            before, after = events(system, week - 1)[0], events(system, week)[0]
            for key in set(before) | set(after):
                if before.get(key, 0.0) != after.get(key, 0.0):
                    steps[(system, *key)] = week
    return steps


def found_steps(changes: dict, weeks: int) -> list[str]:
    """Lines saying, per injected event, which stepped series the change-point scan found within one week."""
    steps = injected(weeks)
    placed: dict[tuple, list[int]] = {}
    for key, points in changes.items():
        name = (key.system, key.partition, key.method, key.placement, key.metric)
        placed[name] = [int(cp.run_after.run_id[1:3]) for cp in points]
    lines = []
    for system, week in sorted({(k[0], w) for k, w in steps.items()}, key=lambda e: e[1]):
        names = [k for k, w in steps.items() if k[0] == system and w == week]
        hit = [k for k in names if any(abs(p - week) <= 1 for p in placed.get(k, []))]
        lines.append(f"  {system} week {week}: {len(hit)} of {len(names)} stepped series found within one week")
        for k in sorted(set(names) - set(hit)):
            lines.append(f"    missed: {'/'.join(k)} (points at weeks {placed.get(k, [])})")
    false = [(k, p) for k, weeks_ in placed.items() for p in weeks_ if abs(p - steps.get(k, -99)) > 3]
    lines.append(f"  false change points (> 3 weeks from an injected step): {len(false)} over {len(changes)} "
                 f"series with points, " + ", ".join(f"{'/'.join(k)} week {p}" for k, p in false))
    return lines


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--weeks", type=int, default=52)
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--out", type=Path, default=None,
                        help="where to leave the db and reports (default: a temp dir)")
    args = parser.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    out = args.out or Path(tempfile.mkdtemp(prefix="mpiregress-scale-"))
    out.mkdir(parents=True, exist_ok=True)
    db_path = out / "history.sqlite"
    if db_path.exists():
        sys.exit(f"{db_path} exists; give an empty --out")
    start = datetime(2025, 1, 6, 2, 0, tzinfo=timezone.utc)
    load_before = loadavg()
    times: dict[str, tuple[float, float]] = {}

    rows = 0
    with stage(times, "import"), history.open_history(db_path) as db:
        for week in range(args.weeks):
            when = (start + timedelta(weeks=week)).isoformat()
            commit = f"{0xc0ffee00 + week:08x}"
            for system in ("iris", "aion"):
                effects, toolchain = events(system, week)
                results = _synth.matrix_results(rng, system, when, commit, f"p{1000 + week}", args.k,
                                                toolchain=toolchain, effects=effects)
                summary = db.import_results(results, run_id=f"w{week:02d}-{system}", kind="schedule",
                                            new_toolchain=(system == "aion" and week == 44))
                rows += summary.rows

    # The MR run: one more week, a 15 % latency regression on Iris/broadwell spack cross-socket,
    # a crashed check and a skipped one.
    when = (start + timedelta(weeks=args.weeks)).isoformat()
    mr: list[Result] = []
    for system in ("iris", "aion"):
        effects, toolchain = events(system, args.weeks)
        if system == "iris":
            effects[("broadwell", "spack", "cross_socket", "latency")] = 0.15
        mr += _synth.matrix_results(rng, system, when, "mr0001", "p9999", args.k, toolchain=toolchain,
                                    effects=effects)
    crashed = next(r for r in mr if r.key() == pt2pt_key("aion", "batch", "eessi", "cross_numa", "bandwidth"))
    crashed.status, crashed.value, crashed.samples = "error", None, []
    crashed.reason = "rank 1 died of signal 4 (illegal instruction): build target zen3, node zen2"
    skipped = next(r for r in mr if r.key() == pt2pt_key("iris", "skylake", "source", "cross_node", "latency"))
    skipped.status, skipped.value, skipped.samples, skipped.reason = "skip", None, [], "only one node free"

    with stage(times, "build"), history.open_history(db_path) as db:
        data = report.build(mr, db, {}, results_source="synthetic MR run", history_source=str(db_path))
    with stage(times, "html"):
        html_path = html.write(data, out / "report.html")
    markdown.write(data, out / "summary.md")
    junit.write(data, out / "junit.xml")

    with stage(times, "gate"), history.open_history(db_path) as db:
        verdicts = gate.judge(mr, db, {})
    load_after = loadavg()

    changes = sum(len(v) for v in data.changes.values())
    print(f"history: {args.weeks} weeks x 2 clusters = {2 * args.weeks} runs, {len(data.trends)} series, "
          f"{rows} measurement rows, {db_path.stat().st_size / 1e6:.1f} MB")
    print(f"load average: {load_before} before, {load_after} after")
    print(f"{'stage':44s} {'wall s':>7s} {'CPU s':>7s}")
    for name, label in (("import", f"import ({2 * args.weeks} runs, one transaction each)"),
                        ("gate", f"gate only ({len(mr)} series vs history)"),
                        ("build", "report build (gate + findings + change points)"),
                        ("html", "HTML render (figures embedded)")):
        wall, cpu = times[name]
        print(f"{label:44s} {wall:7.2f} {cpu:7.2f}")
    wall = times["build"][0] + times["html"][0]
    cpu = times["build"][1] + times["html"][1]
    print(f"{'report build + HTML (target < 5 s wall)':44s} {wall:7.2f} {cpu:7.2f}")
    print(f"import per run: {times['import'][0] / (2 * args.weeks) * 1000:.0f} ms; "
          f"HTML size: {len(html_path.read_bytes()) / 1e6:.2f} MB")
    print("verdicts: " + ", ".join(f"{n} {k}" for k, n in gate.counts(verdicts).items() if n)
          + f"; exit code {compose.exit_code_of_history(verdicts)}")
    print(f"change points found: {changes}")
    for points in data.changes.values():
        for cp in points:
            print(f"  {cp.sentence()}")
    print("injected steps:")
    for line in found_steps(data.changes, args.weeks):
        print(line)
    for v in verdicts:
        if v.verdict not in ("pass",):
            print(f"  {v.verdict}: {v.name()}: {v.reason}")
    print(f"files in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
