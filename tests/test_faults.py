"""Issue 8's fault matrix, fast part: every fault gets its exit code and one sentence, no traceback.

Each case runs the real command line in a subprocess. The slow faults (killing slurmd or
slurmctld mid-run, time limits) are in benchmarks/fault_matrix.py.
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from helpers.faults import (
    FAST_FAULTS,
    GOOD_RESULT,
    cli,
    fast_specs,
    missing_binary_manifest,
    report_state,
    run_spec,
    sentence,
    stale_folder,
)

from mpiregress import cli as mpiregress_cli
from mpiregress.cluster.local import LocalCluster
from mpiregress.run.folder import RunFolder, write_atomic


@pytest.fixture()
def env(tmp_path):
    environ = dict(os.environ)
    environ["MPIREGRESS_STATE_DIR"] = str(tmp_path / "state")
    environ["MPIREGRESS_REPORTS_DIR"] = str(tmp_path / "reports")
    environ.pop("MPIREGRESS_DEBUG", None)
    return environ


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory):
    """Every fast fault injected once, through the real command line."""
    root = tmp_path_factory.mktemp("faults")
    environ = dict(os.environ, MPIREGRESS_STATE_DIR=str(root / "state"))
    environ.pop("MPIREGRESS_DEBUG", None)
    return {spec[0]: run_spec(spec, root, environ) for spec in fast_specs(root)}


@pytest.mark.parametrize("fault", FAST_FAULTS)
def test_fault_gets_its_exit_code_and_one_sentence(fault, outcomes):
    outcome = outcomes[fault]
    assert outcome.code == outcome.expected, f"{fault}: exit {outcome.code}, said {outcome.message!r}"
    assert "Traceback" not in outcome.message
    assert outcome.message.startswith("mpiregress ") and ": error: " in outcome.message, outcome.message


def test_messages_name_the_cause(outcomes):
    said = {name: outcome.message for name, outcome in outcomes.items()}
    assert "garbage.json is binary, not text" in said["binary garbage results -> compare"]
    assert "samples must be a list of numbers, found null" in said["samples: null -> history import"]
    assert "metric 'latencyy' is not one of latency, bandwidth" in said["unknown metric name -> report --gate"]
    assert "holds no results" in said["empty results list -> compare"]
    assert "Not a directory" in said["unwritable report --out-dir"]
    assert "--iterations -5 is out of range" in said["run --iterations -5"]
    assert "--repeat 0 is out of range" in said["run --repeat 0"]
    assert "--min-samples 0 is out of range" in said["compare --min-samples 0"]
    assert "--z nan is out of range" in said["report --gate --z nan"]
    assert outcomes["run --repeat 0"].kept.startswith("status failed (exit 2)")


def test_a_failed_run_replaces_the_previous_verdict(tmp_path, env):
    """A run that fails early leaves reports saying it failed, not the last run's 'pass'."""
    reports = tmp_path / "r"
    stale_folder(reports)
    done = cli(["run", "--system", "local", "--repeat", "0", "--report-dir", str(reports)], env)
    assert done.returncode == 2
    assert not (reports / "results.json").exists(), "the previous run's results must not survive"
    summary = (reports / "summary.md").read_text()
    assert summary.startswith("# MPI regression run FAILED (exit 2)") and "--repeat 0 is out of range" in summary
    status = json.loads((reports / "status.json").read_text())
    assert status["state"] == "failed" and status["exit_code"] == 2
    junit = ET.parse(reports / "junit.xml").getroot()
    assert junit.find(".//error") is not None, "CI's JUnit view must show the failure"


def test_a_folder_as_history_file_is_one_sentence(tmp_path, env, monkeypatch, capsys):
    """--db naming a folder: exit 2 and one line, not a traceback."""
    monkeypatch.setenv("MPIREGRESS_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.delenv("MPIREGRESS_DEBUG", raising=False)
    results = tmp_path / "results.json"
    # A history file the reader has never seen: a folder where a file must be is refused in one sentence.
    results.write_text(json.dumps([GOOD_RESULT]))
    (tmp_path / "db").mkdir()
    code = mpiregress_cli.main(["compare", str(results), "--db", str(tmp_path / "db")])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err and err.count("\n") == 1, err


def test_crash_becomes_exit_2_naming_inputs_and_log(tmp_path, monkeypatch, capsys):
    """A real bug (here: a command whose function raises) never exits 1 and never shows a traceback."""
    monkeypatch.setenv("MPIREGRESS_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.delenv("MPIREGRESS_DEBUG", raising=False)
    parser = mpiregress_cli.build_parser
    results = tmp_path / "results.json"
    results.write_text(json.dumps([GOOD_RESULT]))

    def broken_parser(command=None):
        p = parser(command)
        args_of = p.parse_args

        def parse(argv):
            args = args_of(argv)
            args.func = lambda a: [][1]   # an IndexError, as a bug would raise
            return args
        p.parse_args = parse
        return p
    monkeypatch.setattr(mpiregress_cli, "build_parser", broken_parser)
    code = mpiregress_cli.main(["compare", str(results)])
    err = capsys.readouterr().err
    assert code == 2
    assert "unexpected IndexError" in err and str(results) in err and "the traceback is in" in err
    log = Path(err.rsplit("the traceback is in ", 1)[1].strip())
    assert "Traceback" in log.read_text() and "Traceback" not in err


def test_manifest_binary_is_checked_before_any_job(tmp_path, env):
    manifests = tmp_path / "manifests"
    missing_binary_manifest(manifests, target="broadwell")
    done = cli(["run", "--system", "iris", "--methods", "source", "--manifest-dir", str(manifests),
                "--report-dir", str(tmp_path / "r")], env)
    assert done.returncode == 2, done.stderr
    assert "which does not exist" in sentence(done) and "gone/libexec" in sentence(done)
    assert "sbatch" not in done.stdout and not (tmp_path / "r" / "reframe").exists(), "no job may be sent"


def test_manifest_binary_not_executable_is_refused(tmp_path, env):
    manifests = tmp_path / "manifests"
    path = missing_binary_manifest(manifests, target="broadwell")
    bin_dir = Path(json.loads(path.read_text())["bin_dir"]) / "pt2pt"
    bin_dir.mkdir(parents=True)
    for name in ("osu_latency", "osu_bw"):
        (bin_dir / name).write_text("#!/bin/sh\n")
        (bin_dir / name).chmod(0o644)
    done = cli(["run", "--system", "iris", "--methods", "source", "--manifest-dir", str(manifests),
                "--report-dir", str(tmp_path / "r")], env)
    assert done.returncode == 2 and "is not executable" in sentence(done), done.stderr


def test_second_run_on_a_report_folder_is_refused(tmp_path, env):
    reports = tmp_path / "r"
    with RunFolder(reports, "first run"):
        done = cli(["run", "--system", "local", "--report-dir", str(reports)], env)
    assert done.returncode == 3
    assert f"report folder {reports} is in use by another mpiregress run (PID {os.getpid()}" in sentence(done)


def test_second_run_on_a_cluster_is_refused_and_start_does_not_restart_it(tmp_path, env):
    """A run holds its cluster: another run is refused, and `cluster start` leaves it alone."""
    # Under /tmp and open to others, as munged needs (like the session's cluster in conftest).
    root = Path(tempfile.mkdtemp(prefix="mpiregress-lock-", dir="/tmp"))
    root.chmod(0o755)
    state = root / "local-cluster"
    env = dict(env, MPIREGRESS_LOCAL_CLUSTER_DIR=str(state))
    cluster = LocalCluster(state)
    cluster.claim("report folder /somewhere")
    try:
        done = cli(["run", "--system", "local", "--report-dir", str(tmp_path / "r2")], env)
        assert done.returncode == 3, done.stderr
        assert "is in use by another mpiregress run" in sentence(done) and "/somewhere" in sentence(done)
        started = cli(["cluster", "start", "--state-dir", str(state)], env)
        assert started.returncode == 3, started.stderr
        assert "it is not restarted under that run" in sentence(started)
        stopped = cli(["cluster", "stop", "--state-dir", str(state)], env)
        assert stopped.returncode == 3 and "not stopped under it" in sentence(stopped)
        assert not (state / "run" / "slurmctld.pid").exists(), "nothing was started under the run"
    finally:
        cluster.release()
        shutil.rmtree(root, ignore_errors=True)


def test_atomic_write_names_the_file_it_cannot_write(tmp_path):
    """`run` after measuring: results.json cannot be written (a folder is in the way) -> one sentence."""
    (tmp_path / "results.json").mkdir()
    from mpiregress.errors import InputError
    with pytest.raises(InputError, match=r"cannot write .*results.json: Is a directory"):
        write_atomic(tmp_path / "results.json", "[]")
    write_atomic(tmp_path / "summary.md", "ok\n")
    assert (tmp_path / "summary.md").read_text() == "ok\n"
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == [], "no temp file left behind"


def test_report_state_reads_a_failed_folder(tmp_path, env):
    cli(["run", "--system", "local", "--iterations", "0", "--report-dir", str(tmp_path / "r")], env)
    assert report_state(tmp_path / "r").startswith("status failed (exit 2); no results.json")


def test_history_uses_wal_on_a_local_disk_and_says_so(tmp_path, env):
    from helpers.faults import write_inputs
    files = write_inputs(tmp_path / "inputs")
    db = tmp_path / "h.sqlite"
    assert cli(["history", "import", str(files["good"]), "--db", str(db)], env).returncode == 0
    listed = cli(["history", "list", "--db", str(db)], env)
    assert listed.returncode == 0 and "journal mode wal" in listed.stdout and "local disk" in listed.stdout
    import sqlite3
    assert sqlite3.connect(db).execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_history_on_a_network_file_system_uses_the_rollback_journal(tmp_path):
    from mpiregress.history import journal as history_journal
    mounts = f"server:/export {tmp_path} nfs4 rw,relatime 0 0\n/dev/sda1 / ext4 rw 0 0\n"
    journal = history_journal.choose(tmp_path / "h.sqlite", mounts)
    assert journal.mode == "delete" and journal.fs_type == "nfs4"
    assert "rollback journal" in journal.sentence() and "network file system" in journal.sentence()
    local = history_journal.choose(tmp_path / "h.sqlite", "/dev/sda1 / ext4 rw 0 0\n")
    assert local.mode == "wal"


def test_collective_binaries_are_checked_before_any_job(tmp_path, env):
    """The pt2pt binaries exist, the collective one the coll family launches does not: refused up front."""
    manifests = tmp_path / "manifests"
    path = missing_binary_manifest(manifests, target="broadwell")
    bin_dir = Path(json.loads(path.read_text())["bin_dir"])
    (bin_dir / "pt2pt").mkdir(parents=True)
    for name in ("osu_latency", "osu_bw"):
        (bin_dir / "pt2pt" / name).write_text("#!/bin/sh\n")
        (bin_dir / "pt2pt" / name).chmod(0o755)
    done = cli(["run", "--system", "iris", "--methods", "source", "--families", "pt2pt,coll",
                "--collectives", "bcast", "--manifest-dir", str(manifests), "--report-dir", str(tmp_path / "r")], env)
    assert done.returncode == 2, done.stderr
    assert "collective/osu_bcast, which does not exist" in sentence(done)
    assert not (tmp_path / "r" / "reframe").exists(), "no job may be sent"


def _unusable_db(tmp_path: Path, kind: str) -> tuple[Path, str]:
    """A --db path no history can live at, and the words its sentence must hold."""
    if kind == "symlink loop":
        (tmp_path / "loop").symlink_to(tmp_path / "loop")
        return tmp_path / "loop", "a symlink loop"
    if kind == "loop in its folder":
        (tmp_path / "loop").symlink_to(tmp_path / "loop")
        return tmp_path / "loop" / "h.sqlite", "a symlink loop"
    if kind == "link to nothing":
        (tmp_path / "dangling").symlink_to(tmp_path / "nowhere" / "h.sqlite")
        return tmp_path / "dangling", "which does not exist"
    if kind == "folder":
        (tmp_path / "db").mkdir()
        return tmp_path / "db", "is a folder, not a file"
    if kind == "under a file":
        (tmp_path / "plain").write_text("x")
        return tmp_path / "plain" / "h.sqlite", "not a folder"
    return Path("/dev/null"), "not a regular file"


@pytest.mark.parametrize("kind", ["symlink loop", "loop in its folder", "link to nothing", "folder", "under a file",
                                  "device"])
@pytest.mark.parametrize("command", ["report", "compare", "history import", "verdict"])
def test_every_unusable_db_path_is_one_sentence_and_exit_2(tmp_path, monkeypatch, capsys, kind, command):
    monkeypatch.setenv("MPIREGRESS_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.delenv("MPIREGRESS_DEBUG", raising=False)
    monkeypatch.delenv("CI_PIPELINE_SOURCE", raising=False)
    results = tmp_path / "results.json"
    results.write_text(json.dumps([GOOD_RESULT]))
    db, words = _unusable_db(tmp_path, kind)
    argv = {"report": ["report", str(results), "--db", str(db), "--out-dir", str(tmp_path / "out")],
            "compare": ["compare", str(results), "--db", str(db)],
            "history import": ["history", "import", "--db", str(db), str(results)],
            "verdict": ["verdict", str(results), "--db", str(db), "--out-dir", str(tmp_path / "out")]}[command]
    code = mpiregress_cli.main(argv)
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    assert f"history file {db}" in err and words in err, err


def test_report_without_gate_claims_no_exit_code_it_does_not_return(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("MPIREGRESS_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.delenv("MPIREGRESS_DEBUG", raising=False)
    results = tmp_path / "results.json"
    results.write_text(json.dumps([dict(GOOD_RESULT, value=1e6, samples=[1e6], toolchain="2023b")]))
    out = tmp_path / "out"
    gated = mpiregress_cli.main(["report", str(results), "--db", str(tmp_path / "none.sqlite"), "--out-dir", str(out),
                                 "--gate"])
    assert gated != 0 and f"(exit {gated})" in (out / "summary.md").read_text().splitlines()[0]
    capsys.readouterr()
    code = mpiregress_cli.main(["report", str(results), "--db", str(tmp_path / "none.sqlite"), "--out-dir", str(out)])
    printed = capsys.readouterr().out.strip().splitlines()[-1]
    first = (out / "summary.md").read_text().splitlines()[0]
    assert code == 0
    for line in (printed, first):
        assert f"(exit 0 without --gate; {gated} with --gate)" in line, line


def test_the_cli_finds_the_tools_installed_beside_it_without_path_edits(tmp_path):
    """`.venv/bin/mpiregress build --method easybuild` must find `eb` in .venv/bin with PATH=/usr/bin:/bin."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", "import shutil; from mpiregress import cli; cli.tools_beside(); "
                           "print(shutil.which('reframe')); print(shutil.which('eb'))"],
                          env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}, capture_output=True, text=True,
                          timeout=120, cwd=Path(__file__).resolve().parent.parent)
    here = str(Path(sys.executable).parent)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [f"{here}/reframe", f"{here}/eb"], done.stdout
