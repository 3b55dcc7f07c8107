"""Confirm before failing: re-measure plan excluding the first nodes, outcome rule, cost."""
from __future__ import annotations

from mpiregress.model.series import SeriesKey
from mpiregress.verdict.ab.confirm import confirm, cost, outcome, remeasure_plan
from mpiregress.verdict.history_gate import Verdict

LAT = SeriesKey("iris", "skylake", "source", "osu_latency", (("placement", "cross_node"), ("size", 8192)), "latency")
BW = SeriesKey("iris", "skylake", "source", "osu_bw", (("placement", "same_numa"), ("size", 1048576)), "bandwidth")


def _v(key, verdict, effect=None):
    return Verdict(key=key, verdict=verdict, reason="r", effect=effect)


def test_plan_measures_only_the_failing_series_away_from_their_nodes():
    first = [_v(LAT, "regression", 0.08), _v(BW, "pass", 0.0)]
    plan = remeasure_plan(first, {LAT: ["iris-011", "iris-012"], BW: ["iris-040"]}, samples=5)
    assert plan.series == (LAT,)
    assert plan.slurm_options() == ["--exclude=iris-011,iris-012"]
    assert plan.steps == 5
    c = cost(plan, series_in_run=48, samples=5)
    assert (c.extra_steps, c.allocations) == (5, 1) and abs(c.relative - 5 / 240) < 1e-12
    assert "5 more benchmark executions in 1 more allocation(s), 2.1%" in c.sentence()


def test_a_partition_too_small_to_avoid_the_nodes_keeps_them_and_says_so():
    plan = remeasure_plan([_v(LAT, "regression", 0.08)], {LAT: ["node1", "node2"]}, samples=3,
                          partition_nodes=["node1", "node2"])
    assert plan.slurm_options() == []
    (c,) = confirm([_v(LAT, "regression", 0.08)], [_v(LAT, "regression", 0.07)], plan)
    assert c.outcome == "regression" and "on the same nodes (the partition has no others)" in c.sentence


def test_only_a_reproduced_regression_gates():
    first = _v(LAT, "regression", 0.08)
    plan = remeasure_plan([first], {LAT: ["iris-011", "iris-012"]}, samples=5)
    reproduced = outcome(first, _v(LAT, "regression", 0.07), plan)
    assert reproduced.gates and "reproduced on other nodes: +8.0% then +7.0%" in reproduced.sentence
    transient = outcome(first, _v(LAT, "pass", 0.004), plan)
    assert not transient.gates and transient.outcome == "transient"
    assert "was transient on iris-011, iris-012: +8.0% there, +0.4% on other nodes (pass)" in transient.sentence


def test_a_confirmation_that_could_not_run_is_an_error_not_a_pass():
    first = _v(LAT, "regression", 0.08)
    plan = remeasure_plan([first], {LAT: ["n1"]}, samples=5)
    missing = outcome(first, None, plan)
    assert missing.gates and missing.outcome == "error" and "was not measured again" in missing.sentence


def test_nothing_failing_costs_nothing():
    plan = remeasure_plan([_v(LAT, "pass", 0.0)], {LAT: ["n1"]}, samples=5)
    assert plan.series == () and cost(plan, 80, 5).sentence().startswith("no series needed confirming")
