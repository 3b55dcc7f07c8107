"""Baseline proposals: a diff with provenance that round-trips through baselines.parse; nothing written silently."""
from __future__ import annotations

import hashlib
from datetime import date

import pytest
import yaml

from mpiregress import baselines, cli, history
from mpiregress.errors import ERROR, OK
from mpiregress.names import METRICS
from mpiregress.propose import propose
from mpiregress.results import Result, pt2pt


def result(week, value, metric="latency", method="source", placement="same_numa", toolchain="2023b"):
    return pt2pt("iris", "skylake", method, placement, metric, value, samples=[value, value * 1.002, value * 0.998], toolchain=toolchain,
                  time=f"2025-03-{1 + week:02d}T02:00:00+00:00", commit=f"sha{week}", pipeline=f"{100 + week}")


@pytest.fixture
def db(tmp_path):
    with history.open_history(tmp_path / "h.sqlite") as h:
        for week in range(8):
            wobble = 1 + 0.01 * ((week * 3) % 5 - 2)
            runs = [result(week, 2.05 * wobble), result(week, 17400.0 * wobble, "bandwidth")]
            if week >= 5:    # a series too young to propose from
                runs.append(result(week, 4.4, placement="cross_node"))
            h.import_results(runs, run_id=f"w{week}")
        yield h


CURRENT = {
    "schema": baselines.SCHEMA, "system": "iris", "toolchain": "2023b",
    "provenance": {"seed-2025-05": {"description": "May 2025 study, one run", "runs": 1, "collected": "2025-05-21"}},
    "references": {"skylake": {"source": {
        "same_numa": {"bandwidth": {"value": 4700, "tolerance": 0.2, "unit": "MB/s", "provenance": "seed-2025-05"}},
        "cross_node": {"latency": {"value": 7.2, "tolerance": 0.2, "unit": "us", "provenance": "seed-2025-05"}}}}},
}


@pytest.fixture
def baselines_dir(tmp_path):
    directory = tmp_path / "baselines"
    directory.mkdir()
    (directory / "iris.yaml").write_text(yaml.safe_dump(CURRENT, sort_keys=False))
    return directory


def test_proposal_round_trips_and_carries_provenance(db, baselines_dir):
    path = baselines_dir / "iris.yaml"
    proposal = propose(db, "iris", baselines.load(path), path, today=date(2025, 6, 1))
    parsed = baselines.parse(yaml.safe_load(proposal.text), path)
    bw = parsed.lookup_pt2pt("skylake", "source", "same_numa", "bandwidth")
    assert bw.value == pytest.approx(17400, rel=0.02) and 0.03 <= bw.tolerance <= 0.15
    assert bw.provenance == "history-2025-06-01"
    record = parsed.provenance["history-2025-06-01"]
    assert record["runs"] == 8 and record["collected"] == "2025-03-08" and record["first"] == "2025-03-01"
    assert "100" in record["pipelines"] and "sha7" in record["commits"]
    # Untouched series keep their reference and its provenance; young ones are kept and said so.
    assert parsed.lookup_pt2pt("skylake", "source", "cross_node", "latency").value == 7.2
    assert "seed-2025-05" in parsed.provenance
    assert any("cross_node latency: 3 accepted" in line for line in proposal.kept)
    diff = proposal.diff.splitlines()
    assert diff[0] == f"--- {path}"
    assert any(line.startswith("-") and "4700" in line for line in diff)
    assert any(line.startswith("+") and "history-2025-06-01" in line and "bandwidth" in line for line in diff)


HAND_WRITTEN = """# Baselines for Iris (hand-written header, kept by proposals).
schema: mpiregress-baselines/1
system: iris
toolchain: "2023b"
provenance:
  seed-2025-05:
    description: >-
      May 2025 study, one run, wrapped the way a person
      wraps it.
    runs: 1
    collected: 2025-05-22
references:
  skylake:
    source:
      same_numa:  # study: bandwidth far below EasyBuild
        bandwidth: {value: 4910.72, tolerance: 0.15, unit: MB/s, provenance: seed-2025-05}
      cross_node:  # study: slower than the other builds
        latency: {value: 7.19, tolerance: 0.15, unit: us, provenance: seed-2025-05}
"""


def test_a_hand_written_file_changes_only_where_the_proposal_does(db, tmp_path):
    path = tmp_path / "iris.yaml"
    path.write_text(HAND_WRITTEN)
    proposal = propose(db, "iris", baselines.load(path), path, today=date(2025, 6, 1))
    removed = [line for line in proposal.diff.splitlines() if line.startswith("-") and not line.startswith("---")]
    assert removed == ["-      same_numa:  # study: bandwidth far below EasyBuild",
                       "-        bandwidth: {value: 4910.72, tolerance: 0.15, unit: MB/s, provenance: seed-2025-05}"]
    assert proposal.text.startswith("# Baselines for Iris (hand-written header, kept by proposals).")
    assert "      cross_node:  # study: slower than the other builds" in proposal.text
    assert "      wraps it." in proposal.text


def test_without_a_baselines_file_the_toolchain_must_be_named(db, tmp_path):
    with pytest.raises(Exception, match="--toolchain"):
        propose(db, "iris", None, tmp_path / "iris.yaml")
    proposal = propose(db, "iris", None, tmp_path / "iris.yaml", toolchain="2023b")
    assert proposal.diff.startswith("--- /dev/null")


def test_the_command_prints_a_diff_and_rewrites_nothing(db, baselines_dir, tmp_path, capsys):
    path = baselines_dir / "iris.yaml"
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    assert cli.main(["baseline", "propose", "--system", "iris", "--db", str(db.path),
                     "--baselines-dir", str(baselines_dir)]) == OK
    captured = capsys.readouterr()
    assert captured.out.startswith("--- ") and "+++ " in captured.out and "history-" in captured.out
    assert "proposed: iris/skylake source same_numa bandwidth: 4700 ±20% ->" in captured.err
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before
    out = tmp_path / "proposed" / "iris.yaml"
    assert cli.main(["baseline", "propose", "--system", "iris", "--db", str(db.path),
                     "--baselines-dir", str(baselines_dir), "--write", str(out)]) == OK
    assert baselines.load(out).lookup_pt2pt("skylake", "source", "same_numa", "latency") is not None
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before


def test_a_baseline_without_provenance_is_refused_with_a_sentence(db, tmp_path, capsys):
    directory = tmp_path / "bad"
    directory.mkdir()
    bad = yaml.safe_load(yaml.safe_dump(CURRENT))
    bad["provenance"] = {}
    (directory / "iris.yaml").write_text(yaml.safe_dump(bad))
    code = cli.main(["baseline", "propose", "--system", "iris", "--db", str(db.path), "--baselines-dir", str(directory)])
    assert code == ERROR
    err = capsys.readouterr().err
    assert "without provenance is not accepted" in err and "seed-2025-05" in err


def test_no_history_is_a_sentence_not_a_new_file(tmp_path, baselines_dir, capsys):
    missing = tmp_path / "missing.sqlite"
    assert cli.main(["baseline", "propose", "--system", "iris", "--db", str(missing),
                     "--baselines-dir", str(baselines_dir)]) == ERROR
    assert "does not exist" in capsys.readouterr().err and not missing.exists()
