"""The weekly report's first section: what changed this week, a shared step in one sentence."""
from __future__ import annotations

import numpy as np

from mpiregress import report
from mpiregress.history import store as history
from mpiregress.model.results import pt2pt
from mpiregress.report import markdown, this_week

METHODS = ("source", "spack", "easybuild", "eessi")
PLACEMENTS = ("same_numa", "cross_socket", "cross_node")


def year(db, weeks, step_from=None):
    """``weeks`` weekly runs of Aion's latencies; from ``step_from`` every latency 6 % lower and toolchain 2024a."""
    rng = np.random.default_rng(4)
    for week in range(weeks):
        toolchain = "2024a" if step_from is not None and week >= step_from else "2023b"
        results = []
        for method in METHODS:
            for placement in PLACEMENTS:
                value = 2.0 * float(np.exp(rng.normal(0, 0.01))) * (0.94 if toolchain == "2024a" else 1.0)
                results.append(pt2pt("aion", "batch", method, placement, "latency", value,
                                     samples=[value, value * 1.001, value * 0.999], toolchain=toolchain,
                                     time=f"2025-{1 + week // 4:02d}-{1 + 7 * (week % 4):02d}T02:00:00+00:00",
                                     commit=f"c{week}", pipeline=f"p{week}"))
        db.import_results(results, run_id=f"w{week:02d}", new_toolchain=week == step_from)


def test_a_system_change_three_weeks_ago_is_one_sentence(tmp_path):
    with history.open_history(tmp_path / "h.sqlite") as db:
        year(db, 24, step_from=21)
        data = report.build([], db, {})
    [line] = this_week.sentences(data)
    # One sentence for the 12 series that moved together, naming the run, commits, pipelines and toolchain.
    assert line.startswith("new level: aion/batch: 12 series (latency; 4 build methods) ") and "better" in line
    assert "from run w21 (2025-06-08), commit c20..c21, pipelines p20 -> p21, toolchain 2023b -> 2024a" in line
    assert "### What changed this week\n\n- new level: aion/batch: 12 series" in markdown.render(data)


def test_an_older_change_is_not_this_weeks_and_nothing_is_said_plainly(tmp_path):
    with history.open_history(tmp_path / "h.sqlite") as db:
        year(db, 24, step_from=10)
        data = report.build([], db, {})
    assert this_week.sentences(data) == ["Nothing changed: every series is within its band and no series has a "
                                         "new level in its last 4 runs."]


def test_a_level_new_this_week_draws_its_panels_in_full_an_older_one_only_as_quiet_rows(tmp_path):
    from mpiregress.report import trend_panels

    with history.open_history(tmp_path / "new.sqlite") as db:
        year(db, 24, step_from=21)
        data = report.build([], db, {})
    full, quiet = trend_panels.split(data, list(data.trends))
    assert [p.label for p in full] == list(PLACEMENTS) and quiet == []
    with history.open_history(tmp_path / "old.sqlite") as db:
        year(db, 24, step_from=10)
        data = report.build([], db, {})
    full, quiet = trend_panels.split(data, list(data.trends))
    assert full == [] and [p.label for p in quiet] == list(PLACEMENTS)


def test_with_no_history_at_all_it_does_not_claim_runs_it_never_saw(tmp_path):
    with history.open_history(tmp_path / "h.sqlite") as db:
        data = report.build([], db, {})
    [line] = this_week.sentences(data)
    assert line.startswith("No history yet") and "last 4 runs" not in line


def test_with_two_runs_of_history_it_says_how_few_there_are(tmp_path):
    with history.open_history(tmp_path / "h.sqlite") as db:
        year(db, 2)
        data = report.build([], db, {})
    [line] = this_week.sentences(data)
    assert "only 2 run(s)" in line and "last 4 runs" not in line
