"""One shared PostgreSQL history: concurrent writers, the year's report from each store, and the fault cases.

A private PostgreSQL server (Debian's package, initdb in /tmp, its own port on 127.0.0.1; stopped and
removed at the end) receives a year of weekly runs of ``--clusters`` clusters (system/partition
pairs: iris/broadwell, iris/skylake, aion/batch, local/<first partition>, ...; the full
point-to-point matrix of 4 methods x placements x 2 metrics, k samples each), written as
results.json files and imported by ``--writers`` concurrent ``mpiregress history import``
processes. Every file is imported by one writer, and ``--duplicates`` of them by a second writer
too (a retried job, a second runner): those must be stored once. Then:

* rows expected vs stored, runs expected vs stored, imports that found their run already there
  (conflicts), wall time of the whole import;
* the year's report (report build + HTML render of the last week's run against the rest) from
  PostgreSQL and from an SQLite copy (``history copy``): CPU seconds of this process, and for
  PostgreSQL also of the server backend that answered (from /proc; the target is < 5 s each);
* fault cases, each with exit code, sentence and rows before/after: the server stopped in the
  middle of an import, a wrong password, a schema newer than the code.

Usage: python benchmarks/history_postgres.py [--writers 8] [--clusters 4] [--weeks 52] [--k 5]
Evidence, not a test: prints the figures, asserts nothing.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(REPO / "tests"))
import _synth  # noqa: E402
from helpers.postgres import start_server  # noqa: E402

from mpiregress import report
from mpiregress.history import migrate as history_migrate
from mpiregress.history import store as history
from mpiregress.model import systems  # noqa: E402
from mpiregress.model.names import PT2PT  # noqa: E402
from mpiregress.model.results import Result, dump, pt2pt  # noqa: E402
from mpiregress.report import html  # noqa: E402

PLACEMENTS = {"iris": _synth.SYSTEM_PLACEMENTS["iris"], "aion": _synth.SYSTEM_PLACEMENTS["aion"],
              "local": ("same_numa", "cross_node")}


def clusters(n: int) -> list[tuple[str, str]]:
    known = [("iris", "broadwell"), ("iris", "skylake"), ("aion", "batch"),
             *(("local", p.name) for p in systems.get("local").partitions)]
    return known[:n]


def run_results(rng: np.random.Generator, system: str, partition: str, when: str, week: int, k: int) -> list[Result]:
    out = []
    for method in _synth.METHODS:
        for placement in PLACEMENTS[system]:
            for metric in PT2PT:
                noise = _synth.NOISE[(metric, _synth.locality(placement))]
                samples = _synth.run_samples(rng, metric, _synth.BASE[(metric, placement)], *noise, k)
                out.append(pt2pt(system, partition, method, placement, metric, float(np.median(samples)),
                                 status="pass", samples=[float(v) for v in samples], toolchain="2023b", time=when,
                                 commit=f"{0xc0ffee00 + week:08x}", pipeline=f"p{1000 + week}",
                                 nodelist=[f"{system}-{rng.integers(1, 100):03d}"]))
    return out


def cli(*argv: str, env: dict | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mpiregress", *argv], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})})


def counts(url: str) -> dict[str, int]:
    with history.open_history(url) as db:
        return db.counts()


def backend_cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def report_cpu(location: str | Path, current: list[Result]) -> tuple[float, float, float, int]:
    """(wall s, this process' CPU s, the server backend's CPU s, series) of the year's report."""
    wall, cpu = time.perf_counter(), time.process_time()
    with history.open_history(location) as db:
        pid = None
        if db.dialect == "postgresql":
            pid = db._conn.exec_driver_sql("SELECT pg_backend_pid()").scalar_one()
            server_before = backend_cpu(pid)
        data = report.build(current, db, {}, results_source="the week after", history_source=str(db.path))
        server = backend_cpu(pid) - server_before if pid else 0.0
    html.render(data)
    return time.perf_counter() - wall, time.process_time() - cpu, server, len(data.trends)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--writers", type=int, default=8)
    parser.add_argument("--clusters", type=int, default=4)
    parser.add_argument("--weeks", type=int, default=52)
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument("--duplicates", type=float, default=0.25, help="share of files a second writer imports too")
    parser.add_argument("--seed", type=int, default=5)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    work = Path(tempfile.mkdtemp(prefix="mpiregress-pgbench-"))
    server = start_server()
    try:
        return _bench(args, rng, work, server)
    finally:
        server.destroy()
        print(f"server stopped and removed; files in {work}")


def _bench(args, rng, work: Path, server) -> int:
    print(f"PostgreSQL {server.psql('SHOW server_version').strip()} on 127.0.0.1:{server.port}; "
          f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    start = datetime(2025, 1, 6, 2, 0, tzinfo=timezone.utc)
    files: list[Path] = []
    expected: dict[str, int] = {}
    for week in range(args.weeks):
        when = (start + timedelta(weeks=week)).isoformat()
        for system, partition in clusters(args.clusters):
            results = run_results(rng, system, partition, when, week, args.k)
            path = work / f"w{week:02d}-{system}-{partition}.json"
            path.write_text(dump(results))
            files.append(path)
            expected[path.name] = sum(max(1, len(r.samples)) for r in results)
    plan: list[list[Path]] = [[] for _ in range(args.writers)]
    for i, path in enumerate(files):
        plan[i % args.writers].append(path)
    dup_rng = np.random.default_rng(args.seed + 1)
    duplicated = dup_rng.choice(len(files), int(len(files) * args.duplicates), replace=False)
    for i in duplicated:
        plan[(i + 1 + dup_rng.integers(0, args.writers - 1)) % args.writers].append(files[i])
    for paths in plan:
        dup_rng.shuffle(paths)        # writers meet the same run at different moments
    imports = sum(len(p) for p in plan)

    url = server.new_database("year")
    with history.open_history(url):
        pass                           # the schema exists before the writers start (they would race for it)
    wall = time.perf_counter()
    # The URL (with its password) reaches the writers through the environment, as in the CI jobs.
    procs = [subprocess.Popen([sys.executable, "-m", "mpiregress", "history", "import", *[str(p) for p in paths]],
                              env={**os.environ, "PYTHONPATH": str(REPO), "MPIREGRESS_HISTORY_URL": url},
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for paths in plan]
    outs = [p.communicate(timeout=1800) for p in procs]
    wall = time.perf_counter() - wall
    codes = [p.returncode for p in procs]
    conflicts = sum(out.count("already imported (unchanged)") for out, _ in outs)
    stored = counts(url)
    # The file name is not the run id (a digest of the content is): map through the sources.
    with history.open_history(url) as db:
        per_run = db.rows_per_run()
        source_of = {r.run_id: Path(r.source).name for r in db.runs()}
    mismatched = [r for r, n in per_run.items() if expected.get(source_of.get(r, "")) != n]
    print(f"\n== {args.writers} concurrent writers, {args.weeks} weeks x {args.clusters} clusters "
          f"({', '.join('/'.join(c) for c in clusters(args.clusters))}), k={args.k}")
    print(f"imports attempted: {imports} ({len(files)} runs, {len(duplicated)} imported twice by two writers)")
    print(f"exit codes: {sorted(set(codes))}; conflicts (run already there, nothing stored): {conflicts} "
          f"(expected {len(duplicated)})")
    print(f"runs expected {len(files)}, stored {stored['runs']}; rows expected {sum(expected.values())}, stored "
          f"{stored['measurements']}; runs whose row count differs from their file: {len(mismatched)}")
    print(f"wall time {wall:.1f} s ({imports / wall:.1f} imports/s, {stored['measurements'] / wall:.0f} rows/s)")
    for code, (_, err) in zip(codes, outs):
        if code:
            print(f"  writer failed: {err.strip()[:300]}")

    # The year's report from PostgreSQL and from an SQLite copy of the same history.
    sqlite_path = work / "year.sqlite"
    copied = cli("history", "copy", "--from", url, "--to", str(sqlite_path))
    print(f"\n== copy to SQLite: exit {copied.returncode}: {(copied.stdout or copied.stderr).strip()}")
    # The week after the year, every cluster: the run the report judges against the whole year.
    when = (datetime(2025, 1, 6, 2, 0, tzinfo=timezone.utc) + timedelta(weeks=args.weeks)).isoformat()
    current = [r for system, partition in clusters(args.clusters)
               for r in run_results(rng, system, partition, when, args.weeks, args.k)]
    print(f"\n== the year's report (build + HTML render of week {args.weeks + 1}, {len(current)} series of "
          f"{args.clusters} clusters, against the year)")
    print(f"{'store':12s} {'wall s':>7s} {'CPU s':>7s} {'server CPU s':>13s} {'series':>7s}")
    for name, location in (("PostgreSQL", url), ("SQLite", sqlite_path)):
        report_cpu(location, current)      # warm: imports, caches
        w, c, s, n = report_cpu(location, current)
        print(f"{name:12s} {w:7.2f} {c:7.2f} {s:13.2f} {n:7d}")

    _faults(server, files, expected)
    return 0


def _faults(server, files: list[Path], expected: dict[str, int]) -> None:
    print("\n== fault cases")
    # 1. The server stopped in the middle of an import.
    url = server.new_database("stop")
    with history.open_history(url):
        pass
    sample = files[: min(len(files), 60)]
    proc = subprocess.Popen([sys.executable, "-m", "mpiregress", "history", "import", *map(str, sample)],
                            env={**os.environ, "PYTHONPATH": str(REPO), "MPIREGRESS_HISTORY_URL": url},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        runs = int(server.psql("SELECT count(*) FROM runs", url.rsplit("/", 1)[1]) or 0)
        if runs >= 5:
            break
        time.sleep(0.05)
    server.stop(mode="immediate")
    out, err = proc.communicate(timeout=300)
    done = out.count(": run ")
    server.start()
    db_name = url.rsplit("/", 1)[1]
    after_stop = _stored(server, db_name, expected)
    again = cli("history", "import", *map(str, sample), env={"MPIREGRESS_HISTORY_URL": url})
    print(f"server stopped mid-import: exit {proc.returncode}; {done} import(s) reported done before the stop; "
          f"sentence: {err.strip()}")
    print(f"  rows after restart: {after_stop}; import again: exit {again.returncode}, "
          f"{again.stdout.count('already imported')} already there; now: {_stored(server, db_name, expected)}")

    # 2. A wrong password.
    before = _stored(server, db_name, expected)
    wrong = server.url(db_name, password="not-the-password")
    bad = cli("history", "import", str(files[-1]), env={"MPIREGRESS_HISTORY_URL": wrong})
    print(f"wrong password: exit {bad.returncode}; sentence: {bad.stderr.strip()}")
    print(f"  password printed: {'not-the-password' in bad.stderr + bad.stdout}; rows before {before}, after "
          f"{_stored(server, db_name, expected)}")

    # 3. A schema newer than the code.
    server.psql("UPDATE alembic_version SET version_num='9999'", db_name)
    before = _stored(server, db_name, expected)
    newer = cli("history", "import", str(files[-1]), env={"MPIREGRESS_HISTORY_URL": url})
    print(f"newer schema (revision 9999, code {history_migrate.head()}): exit {newer.returncode}; "
          f"sentence: {newer.stderr.strip()}")
    print(f"  rows before {before}, after {_stored(server, db_name, expected)}")
    server.psql(f"UPDATE alembic_version SET version_num='{history_migrate.head()}'", db_name)


def _stored(server, db_name: str, expected: dict[str, int]) -> str:
    rows = server.psql("SELECT r.source, count(m.id) FROM runs r LEFT JOIN measurements m USING (run_id) "
                       "GROUP BY r.source", db_name).splitlines()
    per_run = {Path(line.split("|")[0]).name: int(line.split("|")[1]) for line in rows if line}
    partial = sum(1 for name, n in per_run.items() if expected.get(name) != n)
    return f"{len(per_run)} runs / {sum(per_run.values())} rows, {partial} partial"


if __name__ == "__main__":
    sys.exit(main())
