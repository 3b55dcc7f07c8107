"""The history on both stores: schema versions, copy between stores, PostgreSQL's failures, credentials,
the read-only role and the Grafana views (against the session's real PostgreSQL server)."""
from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import threading

import psycopg
import pytest
from helpers.postgres import free_port
from sqlalchemy import text
from test_history import REPO, result

from mpiregress import cli
from mpiregress.errors import ERROR, INFRASTRUCTURE, OK, InfrastructureError, InputError
from mpiregress.history import migrate as history_migrate
from mpiregress.history import store as history
from mpiregress.history import url as history_url
from mpiregress.model.results import dump, pt2pt, pt2pt_key
from mpiregress.verdict import changepoint

KEY = pt2pt_key("aion", "batch", "eessi", "same_numa", "latency")


def weekly(db: history.History, weeks: int = 30, step_at: int = 18) -> None:
    """``weeks`` weekly runs of one series whose level rises 10 % from week ``step_at``."""
    for i in range(weeks):
        v = 2.0 * (1.10 if i >= step_at else 1.0) * (1 + 0.002 * ((i * 7) % 5 - 2))
        db.import_results([pt2pt("aion", "batch", "eessi", "same_numa", "latency", v, samples=[v, v * 1.001],
                                 toolchain="2023b", time=f"2025-{1 + i // 4:02d}-{1 + 7 * (i % 4):02d}T00:00:00+00:00",
                                 commit=f"sha{i}")], run_id=f"w{i:02d}")


def run_cli(*argv: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mpiregress", *argv], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})})


# -- schema versions ----------------------------------------------------------

def test_a_new_history_is_at_the_newest_revision_and_a_newer_one_is_refused_untouched(store, capsys):
    with history.open_history(store) as db:
        db.import_results([result()], run_id="r1")
        assert history_migrate.current(db._conn) == history_migrate.head()
        db._conn.exec_driver_sql("UPDATE alembic_version SET version_num='9999'")
    with pytest.raises(InputError, match="schema revision 9999, newer than this mpiregress knows"):
        history.open_history(store)
    assert cli.main(["history", "list", "--db", store]) == ERROR
    err = capsys.readouterr().err
    assert "newer than this mpiregress" in err and "nothing was changed" in err and len(err.strip().splitlines()) == 1
    # Nothing was changed: put the revision back and every row is still there.
    if store.endswith(".sqlite"):
        with sqlite3.connect(store) as con:
            con.execute("UPDATE alembic_version SET version_num=?", (history_migrate.head(),))
        con.close()
    else:
        with psycopg.connect(store, autocommit=True) as con:
            con.execute("UPDATE alembic_version SET version_num=%s", (history_migrate.head(),))
    with history.open_history(store) as db:
        assert db.counts()["measurements"] == 3


def test_a_schema_2_file_from_before_alembic_is_stamped_and_migrated_keeping_its_rows(tmp_path, capsys):
    from mpiregress.history import sqlite as history_sqlite

    path = tmp_path / "h.sqlite"
    with sqlite3.connect(path) as con:
        con.executescript(history_sqlite._DDL)
        con.execute("INSERT INTO meta VALUES ('schema', 'mpiregress-history/2')")
        con.execute("INSERT INTO runs VALUES ('r1','schedule',1,'d','2025-01-01','2025-01-01','c','p','s')")
        con.execute("INSERT INTO measurements(run_id, system, partition, target, method, benchmark, params, metric, "
                    "sample, value, unit, toolchain, commit_sha, pipeline, nodelist, time, status, reason) VALUES "
                    "('r1','iris','skylake','t','source','osu_latency','{}','latency',0,1.5,'us','2023b','c','p',"
                    "'n','2025-01-01','pass','')")
    con.close()
    with history.open_history(path) as db:
        assert "migrated from revision 0002 to" in db.upgraded
        assert db.counts() == {"runs": 1, "measurements": 1, "change_points": 0}
    assert "schema migrated from revision 0002" in capsys.readouterr().err


def test_two_imports_of_one_series_with_two_toolchains_at_once_cannot_both_pass(store):
    """The toolchain check and the rows it checks are one step for concurrent writers too: while one import
    of a series is open, another waits, and then sees it."""
    with history.open_history(store) as first:
        outcome: list = []
        history_migrate.begin(first._conn)
        first._import_tx(first._conn, [result(toolchain="2023b")], "a", "schedule", False, "", "d-a")

        def other() -> None:
            try:
                with history.open_history(store) as second:     # another writer, its own connection
                    outcome.append(second.import_results([result(toolchain="2024a")], run_id="b"))
            except InputError as err:
                outcome.append(err)
        waiting = threading.Thread(target=other)
        waiting.start()
        waiting.join(timeout=1.5)
        assert waiting.is_alive() and outcome == []         # the second import waits for the first
        first._conn.exec_driver_sql("COMMIT")
        waiting.join(timeout=60)
        assert len(outcome) == 1 and isinstance(outcome[0], InputError) and "not mixed" in str(outcome[0])
        assert [r.run_id for r in first.runs()] == ["a"]


# -- copy ---------------------------------------------------------------------

def test_copy_moves_a_whole_history_to_postgresql_and_back_with_counts_checked(tmp_path, postgres_server):
    sqlite_a, sqlite_b = tmp_path / "a.sqlite", tmp_path / "b.sqlite"
    server = postgres_server.new_database()
    with history.open_history(sqlite_a) as db:
        weekly(db)
        db.import_results([result(status="error", samples=())], run_id="mr-1", kind="mr")
        stored = db.store_change_points(changepoint.scan(db))
        assert stored == 1
        before = db.table_rows("measurements")
    done = run_cli("history", "copy", "--from", str(sqlite_a), "--to", server)
    assert done.returncode == OK, done.stderr
    assert "copied 31 run(s) with 61 measurement row(s) and 1 change point(s)" in done.stdout
    assert postgres_server.password not in done.stdout + done.stderr and "***" in done.stdout
    again = run_cli("history", "copy", "--from", str(sqlite_a), "--to", server)
    assert "copied 0 run(s)" in again.stdout and "31 run(s) were already there" in again.stdout
    assert cli.main(["history", "copy", "--from", server, "--to", str(sqlite_b)]) == OK
    with history.open_history(sqlite_b) as db:
        after = db.table_rows("measurements")
        assert [{k: v for k, v in r.items() if k != "id"} for r in after] == \
            [{k: v for k, v in r.items() if k != "id"} for r in before]
        assert db.counts() == {"runs": 31, "measurements": 61, "change_points": 1}
        assert {r.run_id: r.accepted for r in db.runs()}["mr-1"] is False     # still waits for its merge


def test_copy_stops_with_nothing_written_when_a_run_differs(tmp_path, store):
    source = tmp_path / "src.sqlite"
    with history.open_history(source) as db:
        db.import_results([result()], run_id="r0")
        db.import_results([result(samples=(2.0, 2.0, 2.0))], run_id="r1")
    with history.open_history(store) as db:
        db.import_results([result(samples=(3.0, 3.0, 3.0))], run_id="r1")
    done = run_cli("history", "copy", "--from", str(source), "--to", store)
    assert done.returncode == ERROR and "with different results: nothing was copied" in done.stderr
    with history.open_history(store) as db:
        assert [r.run_id for r in db.runs()] == ["r1"]


def test_copy_from_a_history_that_does_not_exist_is_one_sentence(tmp_path):
    done = run_cli("history", "copy", "--from", str(tmp_path / "none.sqlite"), "--to", str(tmp_path / "x.sqlite"))
    assert done.returncode == ERROR and "does not exist" in done.stderr and "Traceback" not in done.stderr


# -- PostgreSQL's failures and credentials -------------------------------------

def test_mask_hides_every_password():
    assert history_url.mask("postgresql://ci:s3cr%40t@db.example:5432/h") == "postgresql://ci:***@db.example:5432/h"
    assert history_url.mask("x postgresql://ci@db/h?password=abc&sslmode=require y") == \
        "x postgresql://ci@db/h?password=***&sslmode=require y"
    assert history_url.mask("host=db password='a b' user=ci") == "host=db password=*** user=ci"
    assert history_url.mask("/var/history.sqlite") == "/var/history.sqlite"


def test_an_unreachable_server_is_exit_3_in_one_sentence_and_the_results_file_stays(tmp_path):
    results = tmp_path / "results.json"
    results.write_text(dump([result()]))
    before = results.read_text()
    url = f"postgresql://ci:topsecret@127.0.0.1:{free_port()}/history"
    done = run_cli("history", "import", str(results), "--db", url)
    assert done.returncode == INFRASTRUCTURE, done.stderr
    assert "cannot be used" in done.stderr and "results files stay as they are" in done.stderr
    assert "topsecret" not in done.stderr + done.stdout and "ci:***@" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and results.read_text() == before
    env_done = run_cli("history", "list", env={"MPIREGRESS_HISTORY_URL": url})
    assert env_done.returncode == INFRASTRUCTURE and "topsecret" not in env_done.stderr


def test_a_server_lost_in_the_middle_of_an_import_is_exit_3_and_leaves_nothing_half_written(postgres_server):
    url = postgres_server.new_database()
    with history.open_history(url) as db:
        db.import_results([result()], run_id="r1")

        def dies_half_way(conn):
            conn.execute(text("INSERT INTO runs VALUES ('r2','schedule',1,'d','t','t','c','p','s')"))
            # The server ends this session as a shutdown or a lost network would, inside the transaction.
            conn.exec_driver_sql("SELECT pg_terminate_backend(pg_backend_pid())")
        with pytest.raises(InfrastructureError, match="cannot be used .*no import was left half-done"):
            db.transaction(dies_half_way)
    with history.open_history(url) as db:
        assert [r.run_id for r in db.runs()] == ["r1"] and db.counts()["measurements"] == 3


def test_a_wrong_password_is_exit_3_and_is_never_printed(tmp_path, postgres_server):
    url = postgres_server.url(postgres_server.new_database().rsplit("/", 1)[1], password="wrong-pw-123")
    done = run_cli("history", "list", "--db", url)
    assert done.returncode == INFRASTRUCTURE and "password authentication failed" in done.stderr
    assert "wrong-pw-123" not in done.stderr and postgres_server.password not in done.stderr


def test_pgpass_and_the_service_file_are_used_when_the_url_has_no_password(tmp_path, postgres_server):
    database = postgres_server.new_database().rsplit("/", 1)[1]
    pgpass = tmp_path / "pgpass"
    pgpass.write_text(f"127.0.0.1:{postgres_server.port}:*:mpiregress:{postgres_server.password}\n")
    pgpass.chmod(0o600)
    services = tmp_path / "services.conf"
    services.write_text(f"[history]\nhost=127.0.0.1\nport={postgres_server.port}\nuser=mpiregress\n"
                        f"dbname={database}\n")
    env = {"PGPASSFILE": str(pgpass), "PGSERVICEFILE": str(services)}
    results = tmp_path / "results.json"
    results.write_text(dump([result()]))
    plain = postgres_server.url(database, password="")
    done = run_cli("history", "import", str(results), "--db", plain, env=env)
    assert done.returncode == OK, done.stderr
    listed = run_cli("history", "list", "--db", "postgresql:///?service=history", env=env)
    assert listed.returncode == OK, listed.stderr
    assert "service history" in listed.stdout and "sha256-" in listed.stdout


def test_a_read_only_role_with_the_documented_grants_reads_reports_and_views_but_cannot_import(
        tmp_path, postgres_server):
    url = postgres_server.new_database()
    database = url.rsplit("/", 1)[1]
    with history.open_history(url) as db:
        weekly(db)
        db.store_change_points(changepoint.scan(db))
    grants = _documented_grants().replace("mpiregress_history", f'"{database}"')
    role = f"reader_{os.getpid()}_{database[-3:]}"
    postgres_server.psql(grants.replace("history_reader", role).replace("change-me", "readerpw"), database)
    reader = postgres_server.url(database, user=role, password="readerpw")
    listed = run_cli("history", "changes", "--db", reader)
    assert listed.returncode == OK and "10.0% worse" in listed.stdout, listed.stderr
    results = tmp_path / "results.json"
    results.write_text(dump([pt2pt("aion", "batch", "eessi", "same_numa", "latency", 2.2, samples=[2.2, 2.2],
                                   toolchain="2023b", time="2025-09-01T00:00:00+00:00")]))
    out = tmp_path / "report"
    report = run_cli("report", str(results), "--db", reader, "--baselines-dir", str(tmp_path / "none"),
                     "--out-dir", str(out))
    assert report.returncode == OK, report.stderr
    assert "readerpw" not in (out / "report.html").read_text() + report.stdout + report.stderr
    refused = run_cli("history", "import", str(results), "--db", reader)
    assert refused.returncode == ERROR and "may read but not write" in refused.stderr
    assert "readerpw" not in refused.stderr
    rows = postgres_server.psql("SELECT count(*) FROM history_band", database)
    assert int(rows) == 30


def _documented_grants() -> str:
    """The read-only role's SQL as docs/history.md gives it (the test runs exactly that block)."""
    text = (REPO / "docs" / "history.md").read_text()
    block = text.split("<!-- read-only-grants -->", 1)[1].split("```sql", 1)[1].split("```", 1)[0]
    return block


# -- the Grafana views ---------------------------------------------------------

def test_the_grafana_views_give_one_series_per_key_with_its_band_and_change_points(postgres_server):
    url = postgres_server.new_database()
    database = url.rsplit("/", 1)[1]
    with history.open_history(url) as db:
        weekly(db)
        db.import_results([result()], run_id="other")
        db.import_results([result(samples=(9.0,))], run_id="mr-1", kind="mr")
        db.store_change_points(changepoint.scan(db))
    rows = [line.split("|") for line in postgres_server.psql(
        "SELECT series, to_char(time AT TIME ZONE 'UTC', 'YYYY-MM-DD'), value, band_low, band_center, band_high, "
        "band_runs FROM history_band ORDER BY series, time", database).splitlines()]
    series = sorted({r[0] for r in rows})
    assert series == ['aion/batch eessi osu_latency {"placement":"same_numa","size":8192} latency',
                      'iris/skylake source osu_latency {"placement":"same_numa","size":8192} latency']
    aion = [r for r in rows if r[0] == series[0]]
    assert len(aion) == 30 and aion[0][3] == "" and aion[0][6] == "0"     # no band before the first run
    with history.open_history(url) as db:
        points = db.series_runs(KEY)
    assert [round(float(r[2]), 9) for r in aion] == [round(p.median, 9) for p in points]
    # Before the step the value sits inside the band of the 10 runs before it; the step leaves it.
    assert all(float(r[3]) <= float(r[2]) <= float(r[5]) for r in aion[11:18])
    assert float(aion[18][2]) > float(aion[18][5]) and aion[18][6] == "10"
    changes = postgres_server.psql("SELECT series, to_char(time AT TIME ZONE 'UTC', 'YYYY-MM-DD'), worse, text "
                                   "FROM history_changes", database).splitlines()
    assert len(changes) == 1 and changes[0].startswith(series[0] + "|2025-05-15|t|")
    assert "10.0% worse" in changes[0]
    # The MR run that waits for its merge is a point but not part of the band's (accepted) history.
    assert postgres_server.psql("SELECT count(*) FROM history_points WHERE NOT accepted", database).strip() == "1"
    dashboard = json.loads((REPO / "docs" / "grafana-history-dashboard.json").read_text())
    queries = [t["rawSql"] for panel in dashboard["panels"] for t in panel.get("targets", [])]
    queries += [a["target"]["rawSql"] for a in dashboard["annotations"]["list"]]
    queries += [v["query"] for v in dashboard["templating"]["list"]]
    for query in queries:
        sql = (query.replace("$__timeFilter(time)", "time > now() - interval '10 years'")
               .replace("$system", "'aion', 'iris'"))
        # Each of the dashboard's queries runs and finds rows for one of the two series.
        assert any(postgres_server.psql(sql.replace("${series:sqlstring}", f"'{name}'"), database).strip()
                   for name in series), sql
