"""Reports: one self-contained HTML page, the MR Markdown, JUnit that parses; the report command."""
from __future__ import annotations

import base64
import io
import re
import xml.etree.ElementTree as ET

import pytest
from PIL import Image

from mpiregress import cli, report
from mpiregress.errors import ERROR, OK
from mpiregress.history import store as history
from mpiregress.model.results import Result, dump, pt2pt
from mpiregress.report import html, junit, markdown, verdict_text

BASE = {("latency", "same_numa"): 0.58, ("latency", "cross_node"): 4.1,
        ("bandwidth", "same_numa"): 14500.0, ("bandwidth", "cross_node"): 12300.0}


def result(method, placement, metric, factor=1.0, week=0, status="pass", reason="", size=None, commit=None):
    wobble = 1 + 0.004 * ((week * 7 + len(method)) % 5 - 2)
    value = BASE[(metric, placement)] * factor * wobble
    samples = [] if status != "pass" else [value, value * 1.003, value * 0.998]
    return pt2pt("aion", "batch", method, placement, metric, value if samples else None, status=status, size=size,
                 reason=reason, samples=samples,
                  toolchain="2023b", time=f"2025-{1 + week // 4:02d}-{1 + 7 * (week % 4):02d}T02:00:00+00:00",
                  commit=commit or f"sha{week:02d}", pipeline=f"{500 + week}")


def matrix(week, step_week=6, overrides=None):
    overrides = overrides or {}
    out = []
    for method in ("source", "eessi"):
        for placement in ("same_numa", "cross_node"):
            for metric in ("latency", "bandwidth"):
                factor = 1.0
                if (method, placement, metric) == ("eessi", "same_numa", "bandwidth") and week >= step_week:
                    factor = 0.3                      # the seed's failure, accepted into the history at week 6
                factor = overrides.get((method, placement, metric), factor)
                out.append(result(method, placement, metric, factor, week))
    return out


@pytest.fixture
def db(store):
    with history.open_history(store) as h:
        for week in range(14):
            h.import_results(matrix(week), run_id=f"w{week:02d}")
        yield h


def current_run():
    run = matrix(20, overrides={("source", "cross_node", "latency"): 1.25})
    for r in run:
        if (r.method, r.placement, r.metric) == ("source", "same_numa", "latency"):
            r.status, r.value, r.samples, r.reason = "error", None, [], "rank 0 died of signal 4 (illegal instruction)"
    return run


def test_html_is_self_contained_and_shows_everything(db):
    data = report.build(current_run(), db, {}, results_source="results.json", history_source=str(db.location))
    page = html.render(data)
    assert not re.search(r"""(src|href)\s*=\s*["']?\s*https?:""", page, re.I)
    assert "http://" not in page and "https://" not in page and "url(" not in page
    assert len(re.findall(r'src="data:image/png;base64,[A-Za-z0-9+/=]{200,}"', page)) >= 3
    section = page.split("<h2>Latency and bandwidth vs message size</h2>")[1].split("<h2>")[0]
    assert "No message-size sweep in these results" in section and "data:image" not in section
    assert "aion/batch source cross_node latency" in page or "cross_node" in page
    # the verdicts, the accepted-but-broken series seen across methods, and its change point with its commit
    assert "regression" in page and "illegal instruction" in page
    assert "eessi 4" in page and "behind source" in page
    assert "sha05..sha06" in page


def test_a_sweep_is_drawn_when_there_is_one(db):
    run = current_run()
    for size in (1024, 4096, 65536, 1048576 * 4):
        run.append(result("source", "same_numa", "bandwidth", size / 1048576, 20, size=size))
        run.append(result("eessi", "same_numa", "bandwidth", size / 1048576, 20, size=size))
    page = html.render(report.build(run, db, {}))
    section = page.split("<h2>Latency and bandwidth vs message size</h2>")[1].split("<h2>")[0]
    assert "No message-size sweep" not in section
    assert section.count('src="data:image/png;base64,') == 1          # aion/batch bandwidth; no latency sweep


def test_markdown_summary_lists_what_needs_a_look(db):
    text = markdown.render(report.build(current_run(), db, {}))
    assert text.startswith("## MPI performance: ⛔ error: 1 regression, 1 error, 2 findings to look at (exit 2)")
    assert "| ❌ regression | aion/batch source cross_node latency |" in text
    assert "| ⛔ error | aion/batch source same_numa latency |" in text
    assert "behind source" in text and "<details>" in text


def test_junit_has_one_testcase_per_series_and_fails_on_regression_and_error(db):
    data = report.build(current_run(), db, {})
    root = ET.fromstring(junit.render(data))
    suite = root.find("testsuite")
    cases = suite.findall("testcase")
    assert suite.get("name") == "mpiregress — " + verdict_text.headline(data.pipeline_verdict)
    # One case per series, then one per finding about no single series (here: cross-method, to look at).
    assert len(cases) == len(data.verdicts) + len(data.pipeline_verdict.of("needs a look")) == 10
    failures = [c for c in cases if c.find("failure") is not None]
    errors = [c for c in cases if c.find("error") is not None]
    assert [c.get("classname") + "." + c.get("name") for c in failures] == ["aion.batch.source.cross_node.latency"]
    assert len(errors) == 1 and "illegal instruction" in errors[0].find("error").get("message")
    assert suite.get("failures") == "1" and suite.get("errors") == "1"


def test_report_without_history_says_so(tmp_path):
    data = report.build(current_run(), None, {})
    page = html.render(data)
    assert "No history was given" in page and "No accepted history yet" in page


def test_the_report_command_writes_three_files_and_gates_only_when_asked(db, tmp_path, capsys):
    results = tmp_path / "results.json"
    results.write_text(dump(current_run()))
    out = tmp_path / "reports"
    args = ["report", str(results), "--db", str(db.location), "--baselines-dir", str(tmp_path / "none"),
            "--out-dir", str(out)]
    assert cli.main(args) == OK
    assert {p.name for p in out.iterdir()} == {"report.html", "summary.md", "junit.xml"}
    ET.parse(out / "junit.xml")
    assert cli.main([*args, "--gate"]) == ERROR


def test_a_collective_sweep_gets_its_findings_figures_and_a_deployable_rules_file(tmp_path):
    from mpiregress.families.coll import rules_file

    def bcast(algorithm, size, value):
        return Result(system="aion", partition="batch", method="source", benchmark="osu_bcast",
                      parameters={"nprocs": 4, "nodes": 1, "distribution": "block:block", "algorithm": algorithm,
                                  "size": size}, metric="latency", unit="us", value=value, status="pass",
                      samples=[value, value * 1.01, value * 0.99], toolchain="2023b", time="2025-06-01T00:00:00")

    found = [bcast("default", 1024, 10.0), bcast("binomial", 1024, 5.0), bcast("chain", 1024, 9.0),
             bcast("default", 2048, 6.0), bcast("binomial", 2048, 6.1), bcast("chain", 2048, 9.0)]
    data = report.build(found, None, {})
    assert data.collectives is not None
    (finding,) = data.collectives.findings
    assert finding.startswith("bcast, 4 ranks (1 node, block:block), 1 KiB: ")
    assert "default 100 % slower than binomial" in data.collectives.findings[0]
    page = html.write(data, tmp_path / "report.html").read_text()
    assert "Collectives: default vs the best coll/tuned algorithm" in page and "best-bcast-block_block.png" in page
    rules = (tmp_path / "coll_tuned_rules-block_block.conf").read_text()
    parsed = rules_file.parse(rules)
    assert rules_file.select(parsed, 7, 4, 1024) == 6        # binomial where it beats the default
    assert rules_file.select(parsed, 7, 4, 2048) == 0        # the fixed decision where the default is as good


def test_point_to_point_results_have_no_collective_section():
    data = report.build([result("source", "same_numa", "latency")], None, {})
    assert data.collectives is None and "Collectives:" not in html.render(data)


def placed(run, nodes_of):
    """The run with each series' nodes: ``nodes_of(result)`` -> node names."""
    for r in run:
        r.nodelist = list(nodes_of(r))
    return run


def test_a_failing_series_gets_its_likely_cause_in_every_format(db):
    run = placed(current_run(), lambda r: ["n1", "n2"] if r.placement == "cross_node" else ["n1"])
    data = report.build(run, db, {})
    (cause,) = data.causes.values()
    (failed,) = [v for v in data.verdicts if v.verdict == "regression"]
    assert cause == (f"build: aion/batch source cross_node latency is {failed.effect:+.1%} vs history, only the "
                     f"source build: eessi passed on the same nodes (n1, n2) in this run")
    assert 0.2 < failed.effect < 0.3
    assert f"### Likely cause\n\n- {cause}\n" in markdown.render(data)
    failure = ET.fromstring(junit.render(data)).find("testsuite/testcase/failure")
    assert failure.text.endswith(f"; likely cause: {cause}")
    assert "<h3>Likely cause</h3>" in html.render(data) and "only the source build" in html.render(data)


def test_the_cause_follows_a_node_or_names_the_link_matrix(db):
    # The same measurement regressed wherever n03 took part and passed on n05/n06, in both build methods.
    slow = {("source", "same_numa", "latency"): 1.3, ("eessi", "cross_node", "latency"): 1.3}

    def nodes(r):
        if r.metric == "latency" and (r.method, r.placement) in {(m, p) for m, p, _ in slow}:
            return ["n03"] if r.placement == "same_numa" else ["n03", "n04"]
        return ["n05"] if r.placement == "same_numa" else ["n05", "n06"]

    run = placed(matrix(20, overrides=slow), nodes)
    data = report.build(run, db, {})
    assert len(data.causes) == 2 and all(c.startswith("node: ") for c in data.causes.values())
    assert "; in this run the same measurements regressed wherever n03 took part (2 series, eessi, source) and " \
           "passed on other nodes (2 series, on n05, n06)" in data.causes[run[0].key()]
    # The weekly link matrix flagged n03: that is named first, with the run it came from.
    from helpers.linkrun import make_run

    from mpiregress.families.links import analysis, series

    found = analysis.analyse(make_run([f"n{i:02d}" for i in range(8)], slow_ranks=[3]))
    db.import_results(series.series_results(found, {"system": "aion", "partition": "batch", "method": "source",
                                                    "toolchain": "2023b", "time": "2025-05-01T02:00:00+00:00"}),
                      run_id="links")
    data = report.build(run, db, {})
    assert len(data.causes) == 2 and all(c.startswith("link: ") and "the link matrix of 2025-05-01 flagged node "
                                         "n03" in c for c in data.causes.values())


def test_issue_18_a_local_main_job_with_one_regression_and_no_history_is_unexplained():
    """The run of issue 18: local, source only, no history; cross_node latency 8.26x its baseline, the other
    node1 series passed, 28 series skipped (two placements the VM cannot offer and the 24 collective points
    of the MR set). It said 'follows node1 across 3 series and 3 placements; the 28 series that did
    not run on node1 are fine'."""
    from mpiregress.model import baselines
    from mpiregress.paths import REPO_ROOT

    book = baselines.for_system("local", REPO_ROOT / "baselines")

    def measured(placement, metric, value, nodes):
        return pt2pt("local", "batch", "source", placement, metric, value, samples=[value] * 3, nodelist=nodes,
                     toolchain="2023b", time="2026-11-24T10:00:00+00:00", commit="abc")

    # 8.257x the cross_node latency baseline, whatever baselines/local.yaml holds today (8.4 us then).
    reference = book.lookup(pt2pt("local", "batch", "source", "cross_node", "latency", 1.0).key())
    assert reference is not None
    run = [measured("cross_node", "latency", reference.value * 8.257, ["node1", "node2"]),
           measured("cross_node", "bandwidth", 1400.0, ["node1", "node2"]),
           measured("same_numa", "latency", 3.6, ["node1"]), measured("same_numa", "bandwidth", 7800.0, ["node1"])]
    run += [pt2pt("local", "batch", "source", p, m, None, status="skip", toolchain="2023b",
                  reason=f"{p} does not exist on this host") for p in ("cross_numa", "cross_socket")
            for m in ("latency", "bandwidth")]
    run += [Result(system="local", partition="batch", method="source", benchmark=k.benchmark,
                   parameters=dict(k.parameters), metric="latency", unit="us", value=None, status="skip",
                   reason="family coll not asked for", toolchain="2023b")
            for k in book.keys() if k.benchmark.startswith("osu_") and k.benchmark not in ("osu_latency", "osu_bw")]
    run += [Result(system="local", partition="batch", method="source", benchmark="osu_alltoall",
                   parameters={"nprocs": n, "nodes": n // 4, "distribution": "block:block", "algorithm": "default",
                               "size": 1048576}, metric="latency", unit="us", value=None, status="skip",
                   reason="family coll not asked for", toolchain="2023b") for n in (4, 8)]
    data = report.build(run, None, {"local": book})
    assert data.counts["skip"] == 28 and data.counts["regression"] == 1
    (cause,) = data.causes.values()
    assert cause == ("unexplained: local/batch source cross_node latency is +725.7% vs its baseline on node1, "
                     "node2; only this series regressed, and the 3 other series measured on node1 or node2 "
                     "passed; no other node ran it in this run, and there is no history of it; confirm it in a "
                     "fresh allocation")
    assert f"- {cause}" in markdown.render(data)


def _legend(fig):
    return [t.get_text() for t in fig.legends[0].get_texts()]


def test_figures_name_only_the_methods_that_ran_and_draw_the_gate_limit(db):
    from mpiregress.report import figures

    only_source = [r for r in current_run() if r.method == "source"]
    data = report.build(only_source, db, {})
    by_key = {v.key: v for v in data.verdicts}
    legend = _legend(figures.bars_figure(data.results, by_key, "aion", "batch"))
    assert "source" in legend and not {"eessi", "spack", "easybuild"} & set(legend)
    assert "regression / error" in legend and "noisy" not in legend and "improvement (stale reference)" not in legend

    limits = figures.gate_limits(data.verdicts)
    (failed,) = [v for v in data.verdicts if v.verdict == "regression"]
    assert limits[failed.key] == (failed.limit, "history") and failed.limit is not None
    mine = {k: runs for k, runs in data.trends.items() if k.method == "source" and k.metric == "latency"}
    current = {v.key: v.value for v in data.verdicts if v.key in mine and v.value is not None}
    fig = figures.trends_figure("aion", "batch", "latency", mine, {}, None, current, limits=limits)
    legend = _legend(fig)
    assert legend == ["source", "gate limit for this run (history)", "this run"]
    drawn = [(line.get_linestyle(), tuple(line.get_ydata())) for ax in fig.axes for line in ax.get_lines()]
    assert ("-.", (failed.limit, failed.limit)) in drawn
    # Without history the baseline judged it: that limit is the one drawn, and said so.
    fig = figures.trends_figure("aion", "batch", "latency", mine, {}, None, current,
                                limits={failed.key: (5.0, "baseline")})
    assert "gate limit for this run (baseline)" in _legend(fig)


def test_the_report_says_agree_only_when_two_methods_ran(db):
    both = report.build(matrix(20, overrides={("eessi", "same_numa", "bandwidth"): 1.0}), db, {})
    assert "agree within the noise on the" in html.render(both)
    alone = report.build([r for r in matrix(20) if r.method == "source"], db, {})
    page = html.render(alone)
    assert "Only one build method ran (source): there is nothing to compare it with." in page
    assert "agree within the noise" not in page


def test_only_the_panels_that_need_a_look_are_drawn_in_full_the_quiet_ones_as_rows(db):
    from mpiregress.report import figures, trend_panels

    data = report.build(current_run(), db, {})
    why = {p.title(): reason for p, reason in trend_panels.notable(data).items()}
    # The regression, the crashed series and the EESSI bandwidth the cross-method check finds behind source.
    assert why == {"aion/batch latency cross_node": "source moved (worse)",
                   "aion/batch latency same_numa": "source: error",
                   "aion/batch bandwidth same_numa": "eessi: behind"}
    full, quiet = trend_panels.split(data, list(data.trends))
    assert [p.title() for p in full] == ["aion/batch bandwidth same_numa", "aion/batch latency same_numa",
                                         "aion/batch latency cross_node"]
    assert [p.title() for p in quiet] == ["aion/batch bandwidth cross_node"]
    page = html.render(data)
    assert page.split("<h2>")[1].startswith("What changed this week</h2>")
    trends = page.split("<h2>Trends</h2>")[1].split("<h2>")[0]
    assert re.findall(r"<h3>([^<]*)</h3>", trends) == [
        "aion/batch latency (same_numa: source: error; cross_node: source moved (worse))",
        "aion/batch bandwidth (same_numa: eessi: behind)", "Quiet series"]
    # The quiet figure has one row per quiet panel, named on the left.
    keys = [k for k in data.trends if trend_panels.Panel.of(k) in quiet]
    fig = figures.quiet_trends_figure([(p.title(), keys) for p in quiet], data.trends, data.changes, {})
    assert [t.get_text() for t in fig.axes[0].texts][0] == "aion/batch bandwidth cross_node"
    assert len(fig.axes) == 1
    # Figures are 256-colour PNGs.
    png = re.search(r'src="data:image/png;base64,([^"]+)"', trends).group(1)
    assert Image.open(io.BytesIO(base64.b64decode(png))).mode == "P"


def test_date_ticks_are_quarters_over_a_year_and_months_over_a_season():
    from datetime import datetime, timezone

    from mpiregress.report import figures

    def utc(*when):
        return datetime(*when, tzinfo=timezone.utc)

    ticks, labels = figures.date_ticks(utc(2025, 1, 6), utc(2026, 1, 12))
    assert labels == ["Apr 2025", "Jul", "Oct", "Jan 2026"] and ticks[0] == utc(2025, 4, 1)
    assert figures.date_ticks(utc(2025, 1, 1), utc(2025, 4, 20))[1] == ["Jan 2025", "Feb", "Mar", "Apr"]
