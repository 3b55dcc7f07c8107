"""``mpiregress coll analyse|verify`` on result records: findings, figures, rules files, exit codes."""
import json

from mpiregress import cli
from mpiregress.families.coll import rules_file, sweep
from mpiregress.families.coll.algorithms import load

BASE = {"system": "local", "partition": "batch", "method": "source"}


def records(rows):
    return sweep.records(sweep.make_table(rows), BASE, {"oversubscribed": True})


def row(alg, latency, size, nprocs=4, dist="block:block"):
    return dict(collective="bcast", distribution=dist, nodes=1, nprocs=nprocs, algorithm=alg, size=size, latency=latency)


def write(tmp_path, recs, name="results.json"):
    path = tmp_path / name
    path.write_text(json.dumps(recs))
    return path


def test_analyse_writes_findings_figures_and_a_rules_file_per_distribution(tmp_path, capsys):
    rows = []
    for dist in ("block:block", "block:cyclic"):
        for size in (1, 1024, 65536):
            rows += [row("default", 10.0, size, dist=dist), row("binomial", 6.0 if size == 65536 else 9.8, size, dist=dist),
                     row("pipeline", 20.0, size, dist=dist)]
    recs = records(rows) + [{**records([row("chain", 1.0, 8)])[0], "status": "error", "value": None,
                             "reason": "OpenMPI rejected coll_tuned_bcast_algorithm=12"}]
    out = tmp_path / "out"
    code = cli.main(["coll", "analyse", str(write(tmp_path, recs)), "--openmpi", "4.1.6", "--out", str(out)])
    printed = capsys.readouterr().out
    assert code == 0
    assert "left out: osu_bcast chain 4 ranks size 8: error (OpenMPI rejected" in printed
    assert "bcast, 4 ranks (1 node, block:block), 64 KiB: default 67 % slower than binomial" in printed
    assert len((out / "findings.txt").read_text().splitlines()) == 2
    assert (out / "best-bcast-block_block.png").stat().st_size > 1000
    text = (out / "coll_tuned_rules-block_cyclic.conf").read_text()
    rules = rules_file.parse(text)
    tuned = load("4.1.6")
    assert rules_file.select(rules, 7, 4, 65536) == tuned.algorithm("bcast", "binomial").id
    assert rules_file.select(rules, 7, 4, 1024) == 0


def test_verify_exits_1_when_the_rules_file_is_slower_beyond_the_noise(tmp_path, capsys):
    good = records([row("default", 10.0, 1), row(sweep.RULES_FILE, 10.2, 1)])
    assert cli.main(["coll", "verify", str(write(tmp_path, good))]) == 0
    bad = records([row("default", 10.0, 1), row(sweep.RULES_FILE, 14.0, 1)])
    assert cli.main(["coll", "verify", str(write(tmp_path, bad, "bad.json"))]) == 1
    assert "SLOWER beyond the noise" in capsys.readouterr().out


def test_results_without_collectives_are_one_sentence_and_exit_2(tmp_path, capsys):
    pt2pt = [{**BASE, "benchmark": "osu_latency", "parameters": {"placement": "same_numa", "size": 8192},
              "metric": "latency", "unit": "us", "value": 2.9, "status": "pass"}]
    assert cli.main(["coll", "verify", str(write(tmp_path, pt2pt))]) == 2
    assert "no collective latency measurement" in capsys.readouterr().err
    assert cli.main(["coll", "analyse", str(tmp_path / "missing.json"), "--openmpi", "4.1.6",
                     "--out", str(tmp_path / "o")]) == 2
