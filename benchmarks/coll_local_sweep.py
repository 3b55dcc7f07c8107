#!/usr/bin/env python3
"""Run a small collective sweep on this host with real OpenMPI and print what the report would show.

    python benchmarks/coll_local_sweep.py --bin-dir <prefix>/libexec/osu-micro-benchmarks/mpi/collective \
        [--nprocs 2,4,8] [--collectives bcast,scatter] [--sizes 1:65536] [--repeats 3] [--out DIR] \
        [--trace tests/coll_trace/libcolltrace.so]

For every repeat, process count and algorithm (default + every coll/tuned algorithm of the
local OpenMPI), one OSU invocation (``-f -m MIN:MAX``) is launched with mpirun, repeats
interleaved so that slow phases of a busy machine hit every algorithm alike. It prints the
best-algorithm map, the default-vs-best table and the findings beyond the noise, writes a
coll/tuned dynamic rules file from the map, then runs default and rules-file runs
interleaved and prints the verification (is the rules file slower than the default beyond
the noise anywhere). With ``--trace`` (the tests' LD_PRELOAD observer) it also prints which
algorithm OpenMPI ran under the rules file at every size. Figures go to ``--out``.

This host has 2 cores: runs of more ranks are oversubscribed (mpirun --oversubscribe), so
their timings are contention, not the algorithms; every figure printed says so. It uses
mpirun, not the project's Slurm path (that is the ReFrame check's job).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from mpiregress.families import osu_output  # noqa: E402
from mpiregress.families.coll import algorithms, components, figures, models, rules_file, sweep  # noqa: E402
from mpiregress.model.topology import Topology  # noqa: E402

_TRACE = re.compile(r"^coll_trace: (\w+) (\w+) count=(\d+) segsize=(\d+)", re.M)


def mpirun(binary: Path, args: list[str], nprocs: int, env: dict[str, str]) -> subprocess.CompletedProcess:
    command = ["mpirun", "--oversubscribe", "-np", str(nprocs)]
    for key, value in env.items():
        command += ["-x", f"{key}={value}"]
    run_env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    return subprocess.run(command + [str(binary), *args], capture_output=True, text=True, timeout=600,
                          env=run_env, check=False)


def measure(binary: Path, collective: str, alg: str, nprocs: int, env: dict[str, str], low: int, high: int,
            osu_args: list[str]) -> tuple[dict[int, float], str]:
    """Avg latency per size of one run, and what went wrong (empty when nothing)."""
    result = mpirun(binary, ["-f", "-m", f"{low}:{high}", *osu_args], nprocs, env)
    text = result.stdout + result.stderr
    problem = components.forced_run_problem(text)
    if problem:
        return {}, problem
    try:
        out = osu_output.parse(result.stdout)
    except osu_output.OsuOutputError as err:
        return {}, f"{collective} {alg} on {nprocs} ranks: {err} (exit {result.returncode})"
    gap = osu_output.sweep_gap(out, low, high)
    return out.series(0), gap or ""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bin-dir", type=Path, required=True, help="folder of osu_bcast, osu_scatter, ...")
    parser.add_argument("--nprocs", default="2,4,8")
    parser.add_argument("--collectives", default="bcast,scatter")
    parser.add_argument("--sizes", default="1:65536")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--osu-args", default="-i 200 -x 20", help="iterations/warm-up passed to OSU")
    parser.add_argument("--openmpi", default=None, help="OpenMPI version (default: ompi_info's)")
    parser.add_argument("--out", type=Path, default=Path("coll-local-sweep"))
    parser.add_argument("--osu-latency", type=Path, default=None,
                        help="osu_latency binary: measure the same-NUMA 4 B latency and compare the seed's models")
    parser.add_argument("--trace", type=Path, default=None, help="libcolltrace.so (tests/coll_trace) to show "
                                                                 "the algorithms run under the rules file")
    args = parser.parse_args()

    version = args.openmpi or re.search(r"Open MPI: (\S+)", subprocess.run(
        ["ompi_info"], capture_output=True, text=True, check=True).stdout).group(1)
    tuned = algorithms.load(version)
    low, high = osu_output.parse_size_range(args.sizes)
    counts = [int(n) for n in args.nprocs.split(",")]
    collectives = args.collectives.split(",")
    osu_args = args.osu_args.split()
    cores = os.cpu_count() or 1
    args.out.mkdir(parents=True, exist_ok=True)
    print(f"local collective sweep: OpenMPI {version}, {cores} cores; runs of more than {cores} ranks are "
          f"OVERSUBSCRIBED (timings are contention); binaries {args.bin_dir}")

    rows, problems = [], []
    for repeat in range(args.repeats):
        for nprocs in counts:
            for coll in collectives:
                for alg in tuned.names(coll):
                    a = None if alg == algorithms.DEFAULT else tuned.algorithm(coll, alg)
                    if a is not None and a.only_nprocs not in (None, nprocs):
                        continue
                    env = algorithms.forced_env(tuned, coll, alg, nprocs=nprocs)
                    series, problem = measure(args.bin_dir / f"osu_{coll}", coll, alg, nprocs, env, low, high, osu_args)
                    if problem:
                        problems.append(problem)
                    for size, value in series.items():
                        rows.append(dict(collective=coll, distribution="block:block", nodes=1, nprocs=nprocs,
                                         algorithm=alg, size=size, latency=value))
        print(f"repeat {repeat + 1}/{args.repeats} done ({len(rows)} measurements)", flush=True)
    for problem in sorted(set(problems)):
        print(f"problem: {problem}")
    table = sweep.make_table(rows)
    cells = sweep.best_map(table)

    print("\nbest forced algorithm per (nprocs, size); '*' = default slower beyond the noise")
    for coll in collectives:
        sizes = sorted({c.point.size for c in cells if c.point.collective == coll})
        print(f"{coll:>9} " + " ".join(f"{sweep.format_size(s).replace(' ', ''):>14}" for s in sizes))
        for nprocs in counts:
            by_size = {c.point.size: c for c in cells if c.point.collective == coll and c.point.nprocs == nprocs}
            print(f"{nprocs:>4} rnks " + " ".join(
                f"{(by_size[s].best.algorithm[:13] + ('*' if by_size[s].beyond_noise else '')):>14}"
                if s in by_size else f"{'-':>14}" for s in sizes))

    print("\ndefault vs best (median of repeats, us)")
    print(f"{'coll':9} {'ranks':>5} {'size':>8} {'default':>9} {'best':>22} {'best us':>9} {'slower':>7} beyond noise")
    for r in sweep.default_vs_best_table(cells):
        print(f"{r['collective']:9} {r['nprocs']:5d} {sweep.format_size(r['size']):>8} {r['default_us']:9.2f} "
              f"{r['best']:>22} {r['best_us']:9.2f} {r['default_slower_pct']:6.0f}% {'yes' if r['beyond_noise'] else 'no'}")
    found = sweep.findings(cells)
    print(f"\nfindings ({len(found)}):")
    for sentence in found:
        print(f"  {sentence}")

    for coll in collectives:
        coll_cells = [c for c in cells if c.point.collective == coll]
        names = tuned.names(coll)
        note = f"local, {cores} cores: runs of more ranks are oversubscribed" if max(counts) > cores else ""
        figures.best_map(coll_cells, args.out / f"best_{coll}.png", names, note)
        figures.default_vs_best(coll_cells, args.out / f"default_vs_best_{coll}.png", note)

    rules = rules_file.build(cells, tuned)
    text = rules_file.render(rules, tuned, [f"coll/tuned dynamic rules from a local sweep, OpenMPI {version}",
                                            "oversubscribed runs: a demonstration, not a tuning"])
    rules_file.parse(text)
    rules_path = (args.out / "coll_tuned_rules.conf").resolve()
    rules_path.write_text(text)
    print(f"\nrules file {rules_path}:\n{text}")

    verify_rows = []
    env_rules = algorithms.rules_file_env(tuned, rules_path)
    for _ in range(args.repeats):
        for nprocs in counts:
            for coll in collectives:
                for label, env in ((algorithms.DEFAULT, {}), (sweep.RULES_FILE, env_rules)):
                    series, problem = measure(args.bin_dir / f"osu_{coll}", coll, label, nprocs, env, low, high, osu_args)
                    if problem:
                        print(f"problem: {problem}")
                    for size, value in series.items():
                        verify_rows.append(dict(collective=coll, distribution="block:block", nodes=1, nprocs=nprocs,
                                                algorithm=label, size=size, latency=value))
    comparisons = sweep.verify_rules(sweep.make_table(verify_rows))
    flagged = [c for c in comparisons if c.flagged]
    print(f"verification: {len(comparisons)} points, rules file slower beyond the noise at {len(flagged)}")
    for c in comparisons:
        print(f"  {c.sentence()}")

    if args.trace:
        for coll in collectives:
            for nprocs in counts:
                result = mpirun(args.bin_dir / f"osu_{coll}", ["-m", f"{low}:{high}", "-i", "2", "-x", "1"], nprocs,
                                dict(env_rules, LD_PRELOAD=str(args.trace.resolve())))
                ran = {}
                for _coll, alg, count, seg in _TRACE.findall(result.stderr):
                    ran.setdefault(int(count), f"{alg}/seg {seg}")
                print(f"traced under the rules file, {coll} {nprocs} ranks: " +
                      ", ".join(f"{sweep.format_size(k)} {v}" for k, v in sorted(ran.items())))

    if args.osu_latency:
        result = mpirun(args.osu_latency, ["-m", "4:4", "-i", "1000", "-x", "100"], 2, {})
        pt2pt = osu_output.parse(result.stdout).value(4)
        # This host: one socket, one NUMA node; only counts that fit its cores can be modelled.
        mask = hex(sum(1 << c for c in range(cores)))
        local = Topology.from_processor_info({"topology": {"cores": [hex(1 << c) for c in range(cores)],
                                                           "numa_nodes": [mask], "sockets": [mask]}})
        models_of = {(c, a.name): a.model for c in collectives for a in tuned.collective(c).algorithms}
        smallest = min(c.point.size for c in cells)
        measured = {(p.collective, alg, p.nprocs, p.nodes, p.distribution, p.size): m.median
                    for (p, alg), m in table.items() if p.size == smallest and p.nprocs <= cores}
        points = models.compare(measured, models_of, local, {"same_numa": pt2pt})
        print(f"\nseed 002 models vs measured at {sweep.format_size(smallest)} (osu_latency 4 B same NUMA: "
              f"{pt2pt:.2f} us; only rank counts that fit {cores} cores):")
        for p in points:
            print(f"  {p.sentence()}")
        far = models.far_from_model(points)
        print(f"far from their model (> 50 %): {len(far)} of {len(points)}")

    (args.out / "default_vs_best.json").write_text(json.dumps(sweep.default_vs_best_table(cells), indent=1))
    print(f"\nfigures and tables in {args.out.resolve()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
