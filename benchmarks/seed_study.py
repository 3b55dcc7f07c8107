"""Replay the May 2025 ULHPC study (seed 000) through the tooling: do we reach its three findings?

Inputs, and what is measured vs modelled:
* MEASURED: the study's values, shared/data/ulhpc-2025-05-osu-results.csv (argument).
* MEASURED (recorded): benchmarks/data/seed_study_repo_history.csv, transcribed from
  the study's public repository: the two earlier runs of the same checks (May 20 with
  osu -x 10 -i 100, May 21 with -x 100 -i 1000) and the ReFrame reference tuples that
  were in the check code when the CSV's statuses were produced. The script first
  checks that those tuples reproduce the CSV's 42 pass/fail statuses.
* MODELLED: how our gate reads a ReFrame tuple (value, lower, upper): as a one-sided
  band with the tolerance of the hurting side; seed 000 §3.3's *guessed* reference
  for Aion same-NUMA latency, (0.5, None, 0.1), is shown next to the real one; the
  study has one value per check, so the replay lowers the gate's minimum sample count
  to 1 and its minimum history to 2 runs (the defaults are 3 and 5).

Usage: python benchmarks/seed_study.py [CSV] (default ../shared/data/ulhpc-2025-05-osu-results.csv)
"""
from __future__ import annotations

import csv
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from mpiregress import baselines, consistency, seed_data  # noqa: E402
from mpiregress.baselines import Reference  # noqa: E402
from mpiregress.gate import GateConfig, format_value, judge_values  # noqa: E402
from mpiregress.names import METRICS  # noqa: E402

DEFAULT_CSV = REPO.parent / "shared" / "data" / "ulhpc-2025-05-osu-results.csv"
REPO_HISTORY = Path(__file__).resolve().parent / "data" / "seed_study_repo_history.csv"
PARTITION = "batch"   # the study ran on each cluster's mixed batch partition
# Which recorded reference set produced the CSV's statuses, per system (checked below).
REFERENCES_IN_FORCE = {"aion": "4f74b84", "iris": "2c8f0dd"}
# The earlier runs of the same checks, per system, oldest first (the CSV is the last run).
EARLIER_RUNS = {"aion": ("2c5d0ff",), "iris": ("2c5d0ff", "b8501c8")}
REPLAY = GateConfig(min_samples=1, min_runs=2)


def read_repo_history(path: Path):
    runs, refs = {}, {}
    with open(path, newline="") as handle:
        rows = csv.DictReader(line for line in handle if not line.startswith("#"))
        for row in rows:
            key = (row["system"], seed_data.SCENARIO_TO_PLACEMENT[row["scenario"]],
                   seed_data.METHOD_NAMES[row["method"]], row["metric"])
            if row["kind"] == "run":
                runs.setdefault(row["commit"], {})[key] = (float(row["value"]), row["date"], row["note"])
            else:
                lower = float(row["lower"]) if row["lower"] else None
                upper = float(row["upper"]) if row["upper"] else None
                refs.setdefault(row["commit"], {})[key] = (float(row["value"]), lower, upper)
    return runs, refs


def reframe_passes(value: float, ref: tuple) -> bool:
    target, lower, upper = ref
    return (lower is None or value >= target * (1 + lower)) and (upper is None or value <= target * (1 + upper))


def one_sided(metric: str, ref: tuple, provenance: str) -> Reference:
    """Our reading of a ReFrame tuple: its value, and the tolerance on the side that hurts."""
    target, lower, upper = ref
    hurting = -lower if METRICS[metric].higher_is_better and lower is not None else upper
    return Reference(value=target, tolerance=min(hurting if hurting is not None else 0.99, 0.99),
                     unit=METRICS[metric].unit, provenance=provenance, metric=metric)


def tuple_text(ref: tuple) -> str:
    target, lower, upper = ref
    return f"({target:g}, {lower if lower is not None else 'None'}, {upper if upper is not None else 'None'})"


def study_baselines(system: str, refs: dict) -> baselines.Baselines:
    """The study's references as a baselines file, through the real parser (with provenance)."""
    references: dict = {}
    for (sys_, placement, method, metric), ref in refs.items():
        if sys_ != system:
            continue
        r = one_sided(metric, ref, "study")
        references.setdefault(PARTITION, {}).setdefault(method, {}).setdefault(placement, {})[metric] = {
            "value": r.value, "tolerance": r.tolerance, "unit": r.unit, "provenance": "study"}
    data = {"schema": baselines.SCHEMA, "system": system, "toolchain": "2023b",
            "provenance": {"study": {"description": "hand-set ReFrame references of the May 2025 study "
                                     f"(repository commit {REFERENCES_IN_FORCE[system]})",
                                     "runs": 1, "collected": "2025-05-21"}},
            "references": references}
    return baselines.parse(yaml.safe_load(yaml.safe_dump(data)), Path(f"<study {system}>"))


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    csv_path = Path(argv[0]) if argv else DEFAULT_CSV
    if not csv_path.exists():
        sys.exit(f"seed_study: {csv_path} does not exist (give the study CSV as the argument)")
    rows = seed_data.read(csv_path)
    runs, refs = read_repo_history(REPO_HISTORY)
    measured = {(r.system, r.placement, r.method, r.metric): r for r in rows}

    # 0. Do the recorded reference tuples explain the study's statuses?
    agree = {s: [0, 0] for s in REFERENCES_IN_FORCE}
    for key, row in measured.items():
        ref = refs[REFERENCES_IN_FORCE[row.system]][key]
        agree[row.system][0] += reframe_passes(row.value, ref) == (row.status_in_study == "pass")
        agree[row.system][1] += 1
    print("0. The repository's reference tuples reproduce the study's pass/fail: " + "; ".join(
        f"{s} {a}/{n} (references at {REFERENCES_IN_FORCE[s]})" for s, (a, n) in agree.items()))

    # Cross-method values of the study's run, and of the per-series noise we do not know (default 5 %).
    values = consistency.method_values(
        type("R", (), dict(system=r.system, partition=PARTITION, method=r.method, placement=r.placement,
                           metric=r.metric, status="pass", message_size=METRICS[r.metric].message_size,
                           samples=[], value=r.value))() for r in rows)
    behind = {(f.system, f.placement, f.method, f.metric): f for f in consistency.check(values)}
    books = {s: study_baselines(s, refs[REFERENCES_IN_FORCE[s]]) for s in REFERENCES_IN_FORCE}
    lenient = consistency.baseline_gaps(books.values(), values)

    # 1. The whole table: study status vs our verdict on the same reference vs history vs cross-method.
    print("\n1. Every check of the study (measured value; study's ReFrame tuple and status; our gate on the same "
          "reference read one-sided;\n   our gate on the earlier runs of the same check, history >= 2 runs; "
          "cross-method finding)")
    header = (f"{'system':<5} {'placement':<12} {'method':<9} {'metric':<9} {'value':>8}  {'study reference':<22} "
              f"{'study':<5} | {'gate vs reference':<17} | {'gate vs history':<15} {'earlier runs':<17} | cross-method")
    print(header)
    print("-" * len(header))
    for key in sorted(measured, key=lambda k: (k[0], k[3], list(seed_data.SCENARIO_TO_PLACEMENT.values()).index(k[1]),
                                               k[2])):
        row = measured[key]
        system, placement, method, metric = key
        ref = refs[REFERENCES_IN_FORCE[system]][key]
        series = (system, PARTITION, method, placement, metric)
        vs_ref = judge_values(series, [row.value], [], REPLAY, baseline=one_sided(metric, ref, "study"))
        earlier = [runs[c][key][0] for c in EARLIER_RUNS[system] if key in runs[c]]
        vs_hist = judge_values(series, [row.value], [[v] for v in earlier], REPLAY)
        finding = behind.get(key)
        flag = f"{finding.gap:.0%} behind {finding.best_method}" if finding else ""
        history_text = vs_hist.verdict if vs_hist.basis == "history" else "(too short)"
        print(f"{system:<5} {placement:<12} {method:<9} {metric:<9} {format_value(row.value):>8}  {tuple_text(ref):<22} "
              f"{row.status_in_study:<5} | {vs_ref.verdict:<17} | {history_text:<15} "
              f"{', '.join(format_value(v) for v in earlier):<17} | {flag}")

    # 2. The three findings, one by one.
    print("\n2. The study's three findings, as the tooling states them")
    print("\n(a) Iris EESSI same-NUMA is a genuine problem: builds of one toolchain disagree (measured, one run)")
    for f in consistency.check(values):
        if f.system == "iris" and f.placement == "same_numa" and f.method == "eessi":
            print(f"    {f.sentence()}")
    key = ("iris", "same_numa", "eessi", "bandwidth")
    earlier = [runs[c][key][0] for c in EARLIER_RUNS["iris"]]
    v = judge_values(("iris", PARTITION, "eessi", "same_numa", "bandwidth"), [measured[key].value],
                     [[x] for x in earlier], REPLAY)
    print(f"    gate vs the same check's earlier runs ({', '.join(format_value(x) for x in earlier)} MB/s): "
          f"{v.verdict}: {v.reason}")
    eb_first = runs["2c5d0ff"][("iris", "same_numa", "easybuild", "bandwidth")][0]
    src = [runs[c][("iris", "same_numa", "source", "bandwidth")][0] for c in EARLIER_RUNS["iris"]]
    print(f"    caveat (recorded runs): source measured {', '.join(format_value(x) for x in src)} and "
          f"{format_value(measured[('iris', 'same_numa', 'source', 'bandwidth')].value)} MB/s in every run, and "
          f"EasyBuild measured {format_value(eb_first)} MB/s on May 20:\n"
          f"    the ~4900 MB/s level follows runs/nodes, not one build method: cross-method says 'look here', "
          f"the history says 'not only EESSI'.")

    print("\n(b) Aion same-NUMA latency is an improvement over a stale baseline, not a failure")
    for method in ("eessi", "easybuild", "source"):
        key = ("aion", "same_numa", method, "latency")
        ref = refs[REFERENCES_IN_FORCE["aion"]][key]
        v = judge_values(("aion", PARTITION, method, "same_numa", "latency"), [measured[key].value], [], REPLAY,
                         baseline=one_sided("latency", ref, "study"))
        print(f"    {method:<9} {measured[key].value} us, study reference {tuple_text(ref)} -> ReFrame "
              f"{'pass' if reframe_passes(measured[key].value, ref) else 'fail'} (below the lower bound "
              f"{ref[0] * (1 + ref[1]):.3g} us); ours: {v.verdict} (exit 0)")
    first = {m: runs["2c5d0ff"][("aion", "same_numa", m, "latency")][0] for m in ("eessi", "easybuild", "source")}
    print(f"    measured history: on May 20 (osu -x 10 -i 100) the same checks gave "
          f"{', '.join(f'{m} {x}' for m, x in first.items())} us; the references were set from that run and the "
          f"rerun with 100/1000 iterations (repository commit d483c2d) gives 0.57-0.59 us: the baseline is stale.")
    print("    cross-method: all three builds agree (0.57-0.59 us), so no build is behind: "
          + ("confirmed" if not any(f.system == "aion" and f.placement == "same_numa" and f.metric == "latency"
                                    for f in behind.values()) else "NOT confirmed"))
    guess = judge_values(("aion", PARTITION, "eessi", "same_numa", "latency"), [0.57], [], REPLAY,
                         baseline=one_sided("latency", (0.5, None, 0.1), "seed-guess"))
    print(f"    modelled alternative: seed 000 §3.3 guessed the reference was (0.5, None, 0.1); read one-sided "
          f"that band ends at 0.55 us and our verdict would be {guess.verdict} ({guess.reason}).\n"
          f"    The repository shows the real tuple was two-sided around 2.3 us, failing 0.57 us for being better.")

    print("\n(c) Iris source-build bandwidth baselines are far too lenient (baseline-quality check)")
    for f in lenient:
        if f.kind == "lenient" and f.system == "iris" and f.method == "source" and f.metric == "bandwidth":
            print(f"    {f.sentence()}")
    src_first = runs["2c5d0ff"][("iris", "same_numa", "source", "bandwidth")][0]
    print(f"    the same-NUMA reference (4700 MB/s) sits just below the source build's own first run "
          f"({format_value(src_first)} MB/s): a reference copied from a broken configuration passes it forever.")
    others = [f for f in lenient if not (f.system == "iris" and f.method == "source" and f.metric == "bandwidth")]
    print(f"    other baseline findings ({len(others)}), largest first:")
    for f in others[:8]:
        print(f"      {f.kind}: {f.sentence()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
