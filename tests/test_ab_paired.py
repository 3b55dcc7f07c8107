"""The paired A/B verdict: effect, interval, Holm, bad inputs, history fallback."""
from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mpiregress.errors import ERROR, NEEDS_A_LOOK, REGRESSION, InputError
from mpiregress.model.series import SeriesKey
from mpiregress.run.ab.plan import Side, check_comparable, interleaved_order, plan_run, sample_record
from mpiregress.verdict import compose
from mpiregress.verdict.ab import paired

FAST = paired.PairedConfig(draws=20_000)


def _records(rng, *, series=12, pairs=6, step=None, jitter=0.01, metric="latency", crash=None, nodes=None,
             target_b="x86_64_v4"):
    """An A/B run: ``series`` placements-like series; ``step`` maps series index -> B worse by that much."""
    step = step or {}
    out = []
    for index in range(series):
        run = math.exp(rng.normal(0, 0.03))  # the allocation's effect: shared by A and B
        for pair in range(pairs):
            for side in "AB":
                jit = abs(rng.standard_t(3)) * jitter
                worse = math.exp(jit) if metric == "latency" else math.exp(-jit)
                value = 4.0 * run * worse
                if side == "B" and index in step:
                    value *= (1 + step[index]) if metric == "latency" else (1 - step[index])
                record = dict(system="local", partition="batch", method="source", placement=f"p{index:02d}",
                              metric=metric, unit="us", value=value, status="pass", ab_side=side, ab_pair=pair,
                              nodelist=list(nodes or ["node1", "node2"]),
                              target=target_b if side == "B" else "x86_64_v4")
                if crash and (index, pair, side) in crash:
                    record.update(status="error", value=None, reason="rank 1 killed by signal 9")
                out.append(record)
    return out


def _by_placement(verdicts):
    return {v.key.placement: v for v in verdicts}


def test_a_real_step_is_a_regression_and_the_rest_pass():
    rng = np.random.default_rng(1)
    verdicts = _by_placement(paired.judge(_records(rng, step={3: 0.08}), FAST))
    assert verdicts["p03"].verdict == "regression"
    assert 0.05 < verdicts["p03"].effect < 0.11
    assert verdicts["p03"].low < verdicts["p03"].effect < verdicts["p03"].high
    assert "Holm" in verdicts["p03"].reason and "same nodes" in verdicts["p03"].reason
    others = [v.verdict for k, v in verdicts.items() if k != "p03"]
    assert set(others) <= {"pass", "inconclusive"} and others.count("pass") >= 10
    assert compose.exit_code_of_paired(list(verdicts.values())) == REGRESSION


def test_bandwidth_down_is_the_hurting_side():
    rng = np.random.default_rng(2)
    verdicts = _by_placement(paired.judge(_records(rng, step={0: 0.08}, metric="bandwidth"), FAST))
    assert verdicts["p00"].verdict == "regression" and verdicts["p00"].effect > 0.05


def test_an_improvement_does_not_gate():
    rng = np.random.default_rng(3)
    verdicts = _by_placement(paired.judge(_records(rng, step={0: -0.10}), FAST))
    assert verdicts["p00"].verdict == "improvement"
    # Not a failure: a finding to look at (the baselines will be stale once it merges), exit 5.
    assert compose.exit_code_of_paired(list(verdicts.values())) == NEEDS_A_LOOK


def test_a_significant_effect_below_the_minimum_effect_passes():
    rng = np.random.default_rng(4)
    verdicts = _by_placement(paired.judge(_records(rng, step={0: 0.015}, jitter=0.001), FAST))
    v = verdicts["p00"]
    assert v.p_adjusted is not None and v.p_adjusted <= 0.01      # real ...
    assert v.verdict == "pass" and 0.01 < v.effect < 0.02           # ... but below 3 %: not worth failing an MR


def test_a_crashed_side_drops_its_pair_and_keeps_the_rest():
    rng = np.random.default_rng(5)
    records = _records(rng, step={0: 0.08}, crash={(0, 2, "B")})
    v = _by_placement(paired.judge(records, FAST))["p00"]
    assert v.pairs == 5 and v.dropped == 1
    assert v.verdict == "regression" and "pair 2 B error: rank 1 killed by signal 9" in v.reason


def test_too_few_complete_pairs_is_one_sentence_error():
    rng = np.random.default_rng(6)
    crash = {(0, p, "A") for p in range(4)}
    verdicts = paired.judge(_records(rng, crash=crash), FAST)
    v = _by_placement(verdicts)["p00"]
    assert v.verdict == "error" and v.reason.startswith("only 2 complete A/B pair(s) of 6")
    assert "signal 9" in v.reason and v.reason.count(".") <= 2
    assert compose.exit_code_of_paired(verdicts) == ERROR


def test_mismatched_targets_are_refused():
    rng = np.random.default_rng(7)
    with pytest.raises(InputError, match="different targets") as info:
        paired.judge(_records(rng, series=2, target_b="zen2"), FAST)
    assert info.value.exit_code == ERROR


def test_a_pair_on_different_nodes_is_refused():
    rng = np.random.default_rng(8)
    records = _records(rng, series=2)
    records[1]["nodelist"] = ["node3", "node2"]     # B of pair 0 moved to another node
    with pytest.raises(InputError, match="pair 0 ran on different nodes"):
        paired.judge(records, FAST)


def test_records_without_a_side_are_refused():
    rng = np.random.default_rng(9)
    records = _records(rng, series=1)
    for r in records:
        r.pop("ab_side")
    with pytest.raises(InputError, match="carry no A/B side"):
        paired.judge(records, FAST)


def test_no_a_falls_back_to_the_history_gate_and_says_so():
    rng = np.random.default_rng(10)
    records = [r for r in _records(rng, series=3) if not (r["placement"] == "p01" and r["ab_side"] == "A")]
    key = SeriesKey("local", "batch", "source", "osu_latency", (("placement", "p01"), ("size", 8192)), "latency")
    history = {key: [[4.0, 4.01, 4.02]] * 12}
    by = _by_placement(paired.judge(records, FAST, history=history))
    v = by["p01"]
    assert v.basis == "history" and v.gate is not None
    assert v.reason.startswith("no A build for this series")
    assert by["p00"].basis == "paired"
    # Same B, history 20 % faster: the gate's regression comes through.
    slow = {key: [[3.3, 3.31, 3.32]] * 12}
    assert _by_placement(paired.judge(records, FAST, history=slow))["p01"].verdict == "regression"


def test_no_a_and_no_history_is_an_error_not_a_pass():
    rng = np.random.default_rng(11)
    records = [r for r in _records(rng, series=2) if not (r["placement"] == "p00" and r["ab_side"] == "A")]
    v = _by_placement(paired.judge(records, FAST))["p00"]
    assert v.verdict == "error" and "no A build" in v.reason


def test_holm_matches_the_textbook_example():
    adjusted = paired.holm([0.01, 0.04, 0.03, 0.005])
    assert adjusted == pytest.approx([0.03, 0.06, 0.06, 0.02])


def test_verdicts_are_reproducible():
    records = _records(np.random.default_rng(12), step={1: 0.05})
    first = [(v.verdict, v.p_value, v.low) for v in paired.judge(records, FAST)]
    second = [(v.verdict, v.p_value, v.low) for v in paired.judge(records, FAST)]
    assert first == second


@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(-0.2, 0.2), min_size=2, max_size=12), st.floats(-0.1, 0.1))
def test_hodges_lehmann_is_shift_equivariant_and_bounded(d, shift):
    hl = paired.hodges_lehmann(d)
    assert min(d) - 1e-12 <= hl <= max(d) + 1e-12
    assert paired.hodges_lehmann([x + shift for x in d]) == pytest.approx(hl + shift, abs=1e-12)
    assert paired.hodges_lehmann([-x for x in d]) == pytest.approx(-hl, abs=1e-12)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.floats(1e-6, 1.0), min_size=1, max_size=30))
def test_holm_adjusted_values_are_monotone_and_dominate(p):
    adjusted = paired.holm(p)
    assert all(a >= x - 1e-15 and a <= 1.0 for a, x in zip(adjusted, p))
    ranked = sorted(range(len(p)), key=lambda i: p[i])
    assert all(adjusted[ranked[i]] <= adjusted[ranked[i + 1]] + 1e-15 for i in range(len(p) - 1))


@settings(max_examples=6, deadline=None)
@given(st.floats(0.9, 1.1), st.integers(0, 2**16))
def test_a_common_factor_on_both_sides_changes_nothing(factor, seed):
    """The allocation's effect multiplies A and B alike: the verdict must not see it."""
    records = _records(np.random.default_rng(seed), series=4, pairs=5, step={0: 0.1})
    scaled = [dict(r, value=r["value"] * factor) if r["value"] else r for r in records]
    first = [(v.verdict, round(v.effect, 9)) for v in paired.judge(records, FAST)]
    second = [(v.verdict, round(v.effect, 9)) for v in paired.judge(scaled, FAST)]
    assert first == second


def test_interleaved_order_is_balanced():
    order = interleaved_order(4)
    assert "".join(s.side for s in order) == "ABBAABBA"
    assert [s.pair for s in order] == [0, 0, 1, 1, 2, 2, 3, 3]
    for side in "AB":   # the same mean position: a linear drift hits both sides alike
        assert sum(s.position for s in order if s.side == side) == sum(range(8)) / 2
    with pytest.raises(InputError):
        interleaved_order(0)


def test_a_seeded_order_turns_blocks_at_random_and_stays_balanced_across_rounds():
    """A fixed ABBA puts B at positions 1-2, 5-6, ... every time: a load rhythm of two steps sided with B
    in every pair. Seeded, each block is ABBA or BAAB, the same for the seed in every round."""
    blocks = set()
    for seed in (f"run{i}/source/same_numa/latency" for i in range(20)):
        order = interleaved_order(10, seed=seed)
        for start in range(0, 20, 4):
            block = "".join(s.side for s in order[start:start + 4])
            assert block in ("ABBA", "BAAB")
            blocks.add(block)
        for side in "AB":   # every block balanced: a linear drift still hits both sides alike
            assert sum(s.position for s in order if s.side == side) == sum(range(20)) / 2
        assert order == interleaved_order(4, seed=seed) + interleaved_order(2, first=4, seed=seed) + \
            interleaved_order(4, first=6, seed=seed)
    assert blocks == {"ABBA", "BAAB"}
    assert interleaved_order(10, seed="x") != interleaved_order(10, seed="y") or \
        interleaved_order(10, seed="x") != interleaved_order(10, seed="z")


def test_plan_refuses_mismatched_builds_and_tags_samples():
    a = Side(manifest="main/source.json", method="source", target="x86_64_v4", toolchain="2023b")
    b = Side(manifest="mr/source.json", method="source", target="x86_64_v4", toolchain="2023b")
    run = plan_run(a, b, 6, ["node1", "node2"])
    assert run.steps == 12 and len(run.order) == 12
    record = sample_record({"metric": "latency", "value": 3.0}, run.order[1], run)
    assert record["ab_side"] == "B" and record["ab_pair"] == 0 and record["ab_manifest"] == "mr/source.json"
    assert record["nodelist"] == ["node1", "node2"]
    with pytest.raises(InputError, match="different targets"):
        check_comparable(a, Side(manifest="mr/x.json", method="source", target="zen2", toolchain="2023b"))
    with pytest.raises(InputError, match="different build methods"):
        check_comparable(a, Side(manifest="mr/x.json", method="spack", target="x86_64_v4", toolchain="2023b"))
    with pytest.raises(InputError, match="node list"):
        plan_run(a, b, 6, [])


def test_bandwidth_effect_lives_on_the_ratio_scale():
    """B at half A's bandwidth: A/B - 1 = +100 % worse (B needs twice A's time per byte), B/A 0.5 said too;
    on the ratio scale an effect and its interval can never read below -100 %."""
    records = []
    for index in range(3):
        for pair in range(6):
            for side in "AB":
                value = 1000.0 * (1 + 0.001 * ((pair * 7 + index) % 5))
                if side == "B" and index == 0:
                    value /= 2
                records.append({"system": "s", "partition": "p", "method": "source", "placement": f"p{index}",
                                "metric": "bandwidth", "value": value, "status": "pass", "ab_side": side,
                                "ab_pair": pair, "nodelist": ["n1"], "target": "t"})
    v = _by_placement(paired.judge(records, FAST))["p0"]
    assert v.effect == pytest.approx(1.0, abs=1e-9)
    assert v.b_over_a == pytest.approx(0.5, abs=1e-9)
    assert "100.0% worse" in v.reason and "B/A 0.5" in v.reason
    assert v.high >= v.effect >= v.low > -1


def test_open_series_model_records_collectives_included():
    """Records with benchmark + ordered parameters (any family) are paired the same way."""
    rng = np.random.default_rng(14)
    records = []
    for algorithm in ("binomial", "pipeline", "knomial"):
        for pair in range(6):
            for side in "AB":
                value = 12.0 * math.exp(abs(rng.standard_t(3)) * 0.005)
                if side == "B" and algorithm == "pipeline":
                    value *= 1.2
                records.append({"system": "local", "partition": "batch", "method": "source",
                                "benchmark": "osu_bcast", "metric": "latency", "value": value, "status": "pass",
                                "parameters": {"nprocs": 8, "algorithm": algorithm, "size": 65536},
                                "ab_side": side, "ab_pair": pair, "nodelist": ["n1", "n2"], "target": "t"})
    verdicts = {v.key.param("algorithm"): v for v in paired.judge(records, FAST)}
    assert verdicts["pipeline"].verdict == "regression"
    assert verdicts["pipeline"].name() == "local/batch source osu_bcast nprocs=8 algorithm=pipeline size=65536 latency"
    assert verdicts["binomial"].verdict == "pass"


# An unchanged MR measured on the local Slurm at load 8-33 (benchmarks/ab_local_mrs.py, green run 16 of
# 20): A's bandwidth jumped between 6.3 and 13.9 GB/s while B's stayed low. One series per metric gives
# a pool of 5 residuals; judged as if that pool were the exact jitter, it failed (+34 %, [+8.5 %, +52.5 %]).
UNCHANGED_UNDER_LOAD = {
    "latency": [(2.24, 2.89), (3.33, 2.89), (2.25, 2.23), (2.27, 2.27), (2.21, 2.67)],
    "bandwidth": [(13088.82, 6387.43), (6353.17, 5632.63), (13928.47, 7062.74), (11819.06, 5862.96),
                  (6534.72, 5821.34)],
}


def _recorded(values):
    return [dict(system="local", partition="batch", method="source", placement="same_numa", metric=metric,
                 unit="us" if metric == "latency" else "MB/s", value=value, status="pass", ab_side=side,
                 ab_pair=pair, nodelist=["node1"], target="x86_64_v4")
            for metric, pairs in values.items() for pair, both in enumerate(pairs) for side, value in zip("AB", both)]


def _gating(verdicts):
    return [v.verdict for v in verdicts if v.verdict in paired.GATING]


def test_a_pool_of_one_series_is_widened_by_its_own_uncertainty_and_bounded_by_its_own_signs(monkeypatch):
    verdicts = paired.judge(_recorded(UNCHANGED_UNDER_LOAD), replace(FAST, target=0.15))
    assert _gating(verdicts) == [], [v.reason for v in verdicts]
    bandwidth = next(v for v in verdicts if v.metric == "bandwidth")
    # B lower in all five pairs: the most its own signs can say is 1/32, which two series' Holm cannot call.
    assert "B worse in 5 of 5, signed-rank p 0.031 before Holm" in bandwidth.reason
    assert bandwidth.power.blind and bandwidth.power.short_sentence().startswith(
        "could not see a 15% change here (no effect could have been shown)")
    # Each guard alone keeps it green; both switched off is the false alarm they exist for.
    no_margin = (paired, "scale_margin", lambda dof, confidence=0.95: 1.0)
    no_floor = (paired, "signed_rank_p", lambda d: (0.0, 0.0))
    for guard in (no_margin, no_floor):
        with monkeypatch.context() as m:
            m.setattr(*guard)
            assert _gating(paired.judge(_recorded(UNCHANGED_UNDER_LOAD), FAST)) == []
    monkeypatch.setattr(*no_margin)
    monkeypatch.setattr(*no_floor)
    assert "regression" in _gating(paired.judge(_recorded(UNCHANGED_UNDER_LOAD), FAST))


def test_the_scale_margin_shrinks_with_the_pool_and_costs_little_on_a_full_mr():
    margins = [paired.scale_margin(dof) for dof in (4, 8, 20, 80, 320)]
    assert margins == sorted(margins, reverse=True)
    assert 1.8 < margins[0] < 2.1          # exact chi-square 90 % bound: sqrt(4 / 1.064) = 1.94
    assert 1.4 < margins[1] < 1.6
    assert margins[-1] < 1.1               # an 80-series MR of 5 pairs: 320 degrees of freedom
    assert paired.scale_margin(0) == 1.0


def _slowed(pairs):
    """An MR of one series per metric, B 1.8x worse in every pair with 2 % jitter."""
    latency = [2.24, 2.31, 2.25, 2.27, 2.21, 2.29, 2.23, 2.26][:pairs]
    bandwidth = [8100.0, 8350.0, 7900.0, 8020.0, 8200.0, 8050.0, 8300.0, 7950.0][:pairs]
    slowed = {"latency": [(a, a * 1.8) for a in latency], "bandwidth": [(a, a / 1.8) for a in bandwidth]}
    return {m: [(a, b * (1 + 0.02 * ((i % 3) - 1))) for i, (a, b) in enumerate(p)] for m, p in slowed.items()}


def test_a_real_toolchain_slowdown_fails_a_small_mr_once_its_own_signs_can_say_so():
    # Five pairs: its class has no other series, and five signs cannot reach two series' Holm level.
    few = {v.key.metric: v for v in paired.judge(_recorded(_slowed(5)), FAST)}
    assert {m: v.verdict for m, v in few.items()} == {"latency": "inconclusive", "bandwidth": "inconclusive"}
    assert all("B worse in 5 of 5, signed-rank p 0.031" in v.reason and v.power.blind for v in few.values())
    # Eight: 1/256 each, within Holm's 0.5 %.
    assert {v.key.metric: v.verdict for v in paired.judge(_recorded(_slowed(8)), FAST)} == {
        "latency": "regression", "bandwidth": "regression"}


@pytest.mark.parametrize("efficiency, flagged", [(0.80, True), (0.97, False)])
def test_the_runs_own_noise_probe_reaches_the_cause_sentence(tmp_path, efficiency, flagged):
    from mpiregress.verdict.ab import judge

    # Seven pairs: one series alone in its class is judged no bolder than its signs (1/128 is within 1 %).
    slowed = {"latency": [(2.2 + 0.01 * i, (2.2 + 0.01 * i) * (1.8 + 0.01 * (i % 2))) for i in range(7)]}
    records = _recorded(slowed)
    for r in records:
        r["conditions"] = {"noise": {"node1": {"efficiency": efficiency, "max_detour_us": 900.0}}}
    verdicts, causes = judge.judge_run(records, db=tmp_path / "no-history.sqlite", config=FAST)
    assert [v.verdict for v in verdicts] == ["regression"]
    (sentence,) = causes.values()
    assert sentence.startswith("toolchain: ")
    remark = f"the noise probe flagged node1 (efficiency {efficiency:.2f}, usual 0.90-1.00), but A ran on it too"
    assert (remark in sentence) is flagged, sentence


def test_a_b_step_killed_at_its_limit_where_a_finished_is_a_toolchain_regression_with_its_lower_bound():
    from mpiregress.verdict.ab import judge as ab_judge

    out = []
    for pair in range(4):
        common = dict(system="local", partition="batch", method="source", placement="cross_node",
                      metric="bandwidth", unit="MB/s", ab_pair=pair, nodelist=["node1", "node2"])
        out.append(dict(common, ab_side="A", value=1000.0, status="pass", ab_seconds=8.0 + pair))
        out.append(dict(common, ab_side="B", value=None, status="error", ab_timed_out=True, ab_step_limit=400,
                        ab_seconds=400.5, reason=f"B step of pair {pair} hit its 400 s time limit"))
    verdicts, causes = ab_judge.judge_run(out)
    [v] = verdicts
    assert v.verdict == "regression" and v.timed_out == 4
    # The most cautious bound: 400 s against A's slowest step (11 s).
    assert v.low == pytest.approx(400 / 11 - 1) and v.high is None
    assert "at least 36.4x slower than A" in v.reason and "not a failed check" in v.reason
    assert causes[v.key].startswith("toolchain:")
    decided = compose.compose("toolchain_mr", compose.Evidence(paired=verdicts, causes=causes))
    assert decided.state == "regression" and decided.of("regression")[0].cause.startswith("toolchain")
    # A step that ran out of time on both sides says nothing about B: an error, as before.
    for r in out:
        if r["ab_side"] == "A":
            r.update(status="error", value=None, ab_timed_out=True, ab_step_limit=400)
    [both] = paired.judge(out)
    assert both.verdict == "error"
