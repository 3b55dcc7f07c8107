"""The link matrix's bad nodes and links reach the A/B attribution: from the run, the history or a file."""
from __future__ import annotations

import json

import numpy as np
from helpers.linkrun import make_run

from mpiregress.cli import main
from mpiregress.families.links import analysis, series
from mpiregress.history.store import open_existing, open_history
from mpiregress.verdict.ab import evidence, judge

HOSTS8 = [f"n{i:02d}" for i in range(8)]
CONTEXT = {"system": "iris", "partition": "skylake", "method": "source", "toolchain": "2023b",
           "time": "2026-11-20T03:00:00+00:00", "jobid": "7"}


def link_run(slow_ranks=(3,), slow_links=((1, 6),), transients=((2, 4),)):
    return analysis.analyse(make_run(HOSTS8, slow_ranks=slow_ranks, slow_links=slow_links, transients=transients))


def link_run_records(**faults):
    return series.series_records(link_run(**faults), CONTEXT)


def ab_records(nodes, step=0.2):
    rng = np.random.default_rng(5)
    out = []
    for pair in range(8):   # one series, alone in its class: 7+ pairs before its own signed ranks reach 1 %
        for side in "AB":
            value = 3.0 * float(np.exp(rng.normal(0, 0.003))) * (1 + step if side == "B" else 1)
            out.append(dict(system="iris", partition="skylake", method="source", placement="cross_node",
                            metric="latency", unit="us", value=value, status="pass", ab_side=side, ab_pair=pair,
                            nodelist=list(nodes), target="skylake_avx512"))
    return out


def test_findings_are_the_failing_node_and_link_series_only():
    found = series.record_findings(link_run_records())
    assert found == {"bad_nodes": ["n03"], "bad_links": [["n01", "n06"]], "measured": CONTEXT["time"]}
    assert series.record_findings(link_run_records(slow_ranks=(), slow_links=(), transients=((2, 4),))) == {
        "bad_nodes": [], "bad_links": [], "measured": CONTEXT["time"]}     # a transient flags nothing
    assert series.record_findings(ab_records(["n01"])) is None


def test_the_latest_link_run_in_the_history_flags_the_link_an_ab_series_ran_on(tmp_path):
    db = tmp_path / "history.sqlite"
    with open_history(db) as history:
        older = dict(CONTEXT, time="2026-11-13T03:00:00+00:00")
        history.import_results(series.series_results(link_run(slow_ranks=(5,), slow_links=()), older), "links-old")
        history.import_results(series.series_results(link_run(), CONTEXT), "links-new")
    with open_history(db) as history:
        flags = evidence.link_flags(ab_records(["n01", "n06"]), history)
    assert flags["bad_nodes"] == ["n03"] and flags["bad_links"] == [["n01", "n06"]]   # not n05: an older run
    _, causes = judge.judge_run(ab_records(["n01", "n06"]), db)
    (sentence,) = causes.values()
    assert sentence.startswith("toolchain: ")
    assert "the link matrix of 2026-11-20 flagged the link n01-n06, but A ran on it too" in sentence
    _, causes = judge.judge_run(ab_records(["n00", "n07"]), db)
    assert "link matrix" not in next(iter(causes.values()))        # the series ran elsewhere


def test_no_history_and_no_link_series_means_no_link_remark(tmp_path):
    assert open_existing(tmp_path / "none.sqlite") is None
    assert evidence.link_flags(ab_records(["n01", "n06"]), None) == {}
    own = ab_records(["n01", "n06"]) + link_run_records(slow_ranks=(), slow_links=((1, 6),))
    assert evidence.link_flags(own, None)["bad_links"] == [["n01", "n06"]]      # the run's own link series


def test_cli_takes_a_link_runs_results_file(tmp_path, capsys):
    (tmp_path / "ab.json").write_text(json.dumps(ab_records(["n03", "n04"])))
    (tmp_path / "links.json").write_text(json.dumps(link_run_records()))
    code = main(["ab", str(tmp_path / "ab.json"), "--db", str(tmp_path / "none.sqlite"),
                 "--links", str(tmp_path / "links.json")])
    out = capsys.readouterr().out
    assert code == 1 and "the link matrix of 2026-11-20 flagged node n03, but A ran on it too" in out


def test_cli_refuses_a_links_file_without_linktest_series(tmp_path, capsys):
    (tmp_path / "ab.json").write_text(json.dumps(ab_records(["n03", "n04"])))
    code = main(["ab", str(tmp_path / "ab.json"), "--db", str(tmp_path / "none.sqlite"),
                 "--links", str(tmp_path / "ab.json")])
    err = capsys.readouterr().err
    assert code == 2 and "holds no linktest series" in err and err.count("\n") == 1 and "Traceback" not in err
