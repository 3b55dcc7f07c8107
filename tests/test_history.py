"""The SQLite history: import, idempotence, acceptance, toolchains, corrupt files, concurrency, export."""
from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from mpiregress import cli
from mpiregress.errors import InputError
from mpiregress.history import store as history
from mpiregress.model.results import Result, dump, pt2pt, pt2pt_key

REPO = Path(__file__).resolve().parent.parent


def result(method="source", placement="same_numa", metric="latency", samples=(1.0, 1.1, 1.2), toolchain="2023b",
           time="2025-05-01T00:00:00+00:00", commit="abc", pipeline="p1", system="iris", partition="skylake",
           status="pass", message_size=None, value=None) -> Result:
    return pt2pt(system, partition, method, placement, metric,
                 value if value is not None else (sorted(samples)[len(samples) // 2] if samples else None),
                 status=status, size=message_size, samples=list(samples), toolchain=toolchain, time=time,
                 commit=commit, pipeline=pipeline, nodelist=["iris-001"])


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_import_stores_one_row_per_sample_and_reads_series(store):
    with history.open_history(store) as db:
        summary = db.import_results([result(), result(metric="bandwidth", samples=(100.0, 101.0))], run_id="r1")
        assert summary.created and summary.rows == 5 and summary.accepted
        rows = db.rows(metric="latency")
        assert [r.value for r in rows] == [1.0, 1.1, 1.2]
        assert rows[0].commit == "abc" and rows[0].nodelist == "iris-001" and rows[0].toolchain == "2023b"
        runs = db.series_runs(pt2pt_key("iris", "skylake", "source", "same_numa", "latency"))
        assert len(runs) == 1 and runs[0].samples == (1.0, 1.1, 1.2) and runs[0].median == 1.1


def test_import_is_idempotent_per_run_id(store):
    with history.open_history(store) as db:
        db.import_results([result()], run_id="r1")
        again = db.import_results([result()], run_id="r1")
        assert not again.created
        assert len(db.rows()) == 3
        with pytest.raises(InputError, match="already in .* with different results"):
            db.import_results([result(samples=(9.0, 9.0, 9.0))], run_id="r1")
        assert len(db.rows()) == 3


def test_default_run_id_makes_reimport_of_a_file_a_no_op(tmp_path, store, capsys):
    results = tmp_path / "results.json"
    results.write_text(dump([result()]))
    db = store
    assert cli.main(["history", "import", str(results), "--db", str(db)]) == 0
    assert cli.main(["history", "import", str(results), "--db", str(db)]) == 0
    out = capsys.readouterr().out
    assert "already imported (unchanged)" in out
    with history.open_history(db) as h:
        assert len(h.runs()) == 1 and len(h.rows()) == 3


def test_mr_runs_join_the_reference_history_only_when_accepted(store):
    key = pt2pt_key("iris", "skylake", "source", "same_numa", "latency")
    with history.open_history(store) as db:
        db.import_results([result()], run_id="mr-7", kind="mr")
        assert db.series_runs(key) == []
        assert len(db.series_runs(key, accepted=None)) == 1
        db.accept("mr-7")
        assert [r.run_id for r in db.series_runs(key)] == ["mr-7"]
        with pytest.raises(InputError, match="not in"):
            db.accept("nope")


def test_toolchain_change_is_refused_with_a_sentence_unless_asked(store):
    path = store
    with history.open_history(path) as db:
        db.import_results([result(toolchain="2023b")], run_id="old")
        with pytest.raises(InputError) as err:
            db.import_results([result(toolchain="2024a", time="2025-06-01T00:00:00+00:00")], run_id="new")
        sentence = str(err.value)
        assert "'2024a'" in sentence and "'2023b'" in sentence and "not mixed" in sentence
        assert "--new-toolchain" in sentence
        assert [r.run_id for r in db.runs()] == ["old"]     # nothing half-imported
        db.import_results([result(toolchain="2024a", time="2025-06-01T00:00:00+00:00")], run_id="new",
                          new_toolchain=True)
        key = pt2pt_key("iris", "skylake", "source", "same_numa", "latency")
        assert db.toolchains(key) == ["2023b", "2024a"]
        assert [r.run_id for r in db.series_runs(key, toolchain="2024a")] == ["new"]


def test_unknown_names_are_refused_before_anything_is_written(store):
    with history.open_history(store) as db:
        bad = result()
        bad.parameters["placement"] = "same-numa"
        with pytest.raises(InputError, match="placement 'same-numa'"):
            db.import_results([result(), bad])
        assert db.runs() == []


def test_sweep_rows_do_not_leak_into_the_gated_series(store):
    with history.open_history(store) as db:
        db.import_results([result(), result(samples=(50.0,), message_size=65536)], run_id="r1")
        runs = db.series_runs(pt2pt_key("iris", "skylake", "source", "same_numa", "latency"))
        assert runs[0].samples == (1.0, 1.1, 1.2)
        assert len(db.rows()) == 4


def test_not_an_sqlite_file_is_refused_and_left_untouched(tmp_path, capsys):
    path = tmp_path / "h.sqlite"
    path.write_bytes(b"this is a CSV export, not a database\n" * 100)
    before = digest(path)
    with pytest.raises(InputError) as err:
        history.open_history(path)
    assert "is not an SQLite database" in str(err.value) and "move it aside" in str(err.value)
    results = tmp_path / "results.json"
    results.write_text(dump([result()]))
    assert cli.main(["history", "import", str(results), "--db", str(path)]) == 2
    assert "move it aside" in capsys.readouterr().err
    assert digest(path) == before
    assert not (tmp_path / "h.sqlite-wal").exists()


def test_damaged_history_is_refused_and_left_untouched(tmp_path):
    path = tmp_path / "h.sqlite"
    with history.open_history(path) as db:
        db.import_results([result(samples=tuple(float(i) for i in range(1, 401)))], run_id="r1")
    with sqlite3.connect(path) as con:     # fold the WAL back so the damage below hits real pages
        con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        page_size = con.execute("PRAGMA page_size").fetchone()[0]
    data = bytearray(path.read_bytes())
    for page in range(2, len(data) // page_size):
        data[page * page_size + 8: page * page_size + 200] = b"\xff" * 192
    path.write_bytes(bytes(data))
    before = digest(path)
    with pytest.raises(InputError, match="damaged.*left untouched: move it aside"):
        history.open_history(path)
    assert digest(path) == before


def test_someone_elses_sqlite_database_is_refused(tmp_path):
    path = tmp_path / "other.sqlite"
    with sqlite3.connect(path) as con:
        con.execute("CREATE TABLE jobs (id INTEGER)")
    with pytest.raises(InputError, match="not an mpiregress history"):
        history.open_history(path)


def test_export_csv_has_every_field(store):
    with history.open_history(store) as db:
        db.import_results([result(), result(status="error", samples=())], run_id="r1")
        out = io.StringIO()
        assert db.export_csv(out) == 4
    rows = list(csv.DictReader(io.StringIO(out.getvalue())))
    assert set(history.COLUMNS) == set(rows[0])
    assert rows[0]["commit"] == "abc" and rows[0]["run_id"] == "r1" and float(rows[0]["value"]) == 1.0
    assert rows[-1]["status"] == "error" and rows[-1]["value"] == ""


def test_results_file_errors_are_one_sentence(tmp_path):
    missing = tmp_path / "nope.json"
    with pytest.raises(InputError, match="does not exist"):
        history.read_results_file(missing)
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(InputError, match="not valid JSON"):
        history.read_results_file(bad)
    wrong = tmp_path / "wrong.json"
    wrong.write_text(json.dumps([{"system": "iris"}]))
    with pytest.raises(InputError, match="lacks the field"):
        history.read_results_file(wrong)


def test_two_processes_importing_at_once_lose_nothing(tmp_path, store):
    """Two CI jobs import into one history at the same moment: every run and every row arrives, once."""
    db = store
    files = {"a": [], "b": []}
    for writer in files:
        for i in range(16):
            path = tmp_path / f"{writer}{i}.json"
            samples = tuple(float(j) + i + 1 for j in range(250))
            path.write_text(dump([result(method=m, samples=samples, commit=f"{writer}{i}",
                                         time=f"2025-05-{i + 1:02d}T00:00:00+00:00")
                                  for m in ("source", "spack", "easybuild", "eessi")]))
            files[writer].append(path)
    shared = tmp_path / "shared.json"
    shared.write_text(dump([result(samples=(7.0, 7.0, 7.0), commit="shared")]))
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    procs = [subprocess.Popen([sys.executable, "-m", "mpiregress", "history", "import", "--db", str(db),
                               str(shared), *map(str, paths)], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
             for paths in files.values()]
    outputs = [p.communicate(timeout=120) for p in procs]
    for proc, (_out, err) in zip(procs, outputs):
        assert proc.returncode == 0, err
    with history.open_history(db) as h:
        runs = h.runs()
        assert len(runs) == 33                          # 2 x 16 distinct runs + the shared one once
        assert len(h.rows()) == 32 * 4 * 250 + 3
        assert sum(r.rows for r in runs) == len(h.rows())
    assert sum("already imported" in out for out, _ in outputs) == 1


def test_a_schema_1_history_is_upgraded_in_place_with_a_backup_and_keeps_every_row(tmp_path, capsys):
    """tests/data/history-v1.sqlite was written by the schema-1 code (two runs of the local pt2pt report)."""
    path = tmp_path / "h.sqlite"
    shutil.copy(REPO / "tests" / "data" / "history-v1.sqlite", path)
    with sqlite3.connect(path) as old:
        before = old.execute("SELECT COUNT(*), COUNT(DISTINCT run_id) FROM measurements").fetchone()
        old_rows = old.execute("SELECT run_id, placement, message_size, metric, value, status FROM measurements "
                               "ORDER BY time, id").fetchall()
    old.close()
    with history.open_history(path) as db:
        assert "upgraded from mpiregress-history/1 to mpiregress-history/2" in db.upgraded
        assert f"{before[1]} run(s) and {before[0]} measurement row(s) kept" in db.upgraded
        rows = db.rows()
        assert [(r.run_id, r.key().placement, r.key().param("size"), r.metric, r.value, r.status) for r in rows] \
            == old_rows
        key = pt2pt_key("local", "batch", "source", "same_numa", "latency")
        assert [run.run_id for run in db.series_runs(key)] == ["weekly-41"]          # the MR run is not accepted
        assert len(db.series_runs(key, accepted=None)) == 2
    assert "backed up as" in capsys.readouterr().err
    backup = path.with_name("h.sqlite.mpiregress-history-1.bak")
    with sqlite3.connect(backup) as copy:
        assert copy.execute("SELECT value FROM meta WHERE key='schema'").fetchone() == ("mpiregress-history/1",)
        assert copy.execute("SELECT COUNT(*) FROM measurements").fetchone() == (before[0],)
    copy.close()
    with history.open_history(path) as again:                 # the second open has nothing to upgrade
        assert again.upgraded == "" and len(again.rows()) == before[0]


def test_the_newest_row_of_a_series_is_read_from_an_index_not_by_sorting_its_history(tmp_path):
    """Every import asks it once per series; sorting a year of rows each time doubled the import's cost."""
    with history.open_history(tmp_path / "h.sqlite"):
        pass
    with sqlite3.connect(tmp_path / "h.sqlite") as db:
        plan = " | ".join(r[3] for r in db.execute("EXPLAIN QUERY PLAN " + history.NEWEST_TOOLCHAIN_SQL,
                                                   dict.fromkeys(("system", "partition", "method", "benchmark", "params", "metric"), "")))
    assert "USING INDEX measurements_series_time" in plan and "TEMP B-TREE" not in plan, plan
