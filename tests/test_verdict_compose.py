"""One verdict per pipeline event: which judge gates, what is only evidence, and every surface saying the same."""
from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mpiregress import errors
from mpiregress.errors import InputError
from mpiregress.families.links.series import BENCHMARK as LINKTEST
from mpiregress.model.results import Result, pt2pt, pt2pt_key
from mpiregress.report import verdict_text
from mpiregress.verdict import compose, policy
from mpiregress.verdict.ab.confirm import REPRODUCED, TRANSIENT, Confirmation
from mpiregress.verdict.ab.paired import PairedVerdict
from mpiregress.verdict.compose import EVIDENCE, Evidence, Finding, PipelineVerdict
from mpiregress.verdict.cross_method import Finding as CrossFinding
from mpiregress.verdict.history_gate import Verdict

KEY = pt2pt_key("iris", "skylake", "source", "same_numa", "latency")
OTHER = pt2pt_key("iris", "skylake", "source", "cross_node", "latency")


def measured(key=KEY, status="pass", reason="", **conditions):
    r = pt2pt(key.system, key.partition, key.method, dict(key.parameters)["placement"], key.metric, 2.0,
              status=status, reason=reason)
    r.conditions.update(conditions)
    return r


def history(verdict: str, key=KEY, effect=0.12) -> Verdict:
    return Verdict(key=key, verdict=verdict, reason=f"history says {verdict}", effect=effect, basis="history")


def pair(verdict: str, key=KEY, effect=0.0, basis="paired") -> PairedVerdict:
    return PairedVerdict(key=key, verdict=verdict, reason=f"A/B says {verdict}", basis=basis, metric=key.metric,
                         effect=effect, low=effect - 0.02, high=effect + 0.02, pairs=5)


def behind(method="spack", stack="") -> CrossFinding:
    return CrossFinding("behind", "iris", "skylake", "osu_latency", (("placement", "same_numa"), ("size", 8192)),
                        "latency", method, 3.0, "easybuild", 2.0, 0.5, 0.2, "us", stack=stack)


def test_a_toolchain_mr_is_judged_by_its_pairs_and_the_history_gates_nothing():
    v = compose.compose("toolchain_mr", Evidence(results=[measured()], history=[history("regression")],
                                                 paired=[pair("pass", effect=0.004)]))
    assert v.state == "pass" and compose.exit_code(v) == errors.OK
    [evidence] = v.of(EVIDENCE)
    assert evidence.judge == "history gate"
    assert "A/B on the same nodes says pass (+0.4%, 5 pairs)" in evidence.sentence
    assert "the system or the day, not this change" in evidence.sentence


def test_a_paired_regression_turns_the_toolchain_mr_red_with_its_cause():
    v = compose.compose("toolchain_mr", Evidence(paired=[pair("regression", effect=0.6)],
                                                 causes={KEY: "toolchain: B worse than A on the same nodes"}))
    [gating] = v.of("regression")
    assert (gating.judge, gating.cause, gating.effect) == ("paired A/B", "toolchain: B worse than A on the same nodes",
                                                           0.6)
    assert compose.exit_code(v) == errors.REGRESSION
    assert verdict_text.headline(v) == "❌ regression: 1 regression (exit 1)"


def test_inconclusive_beyond_the_minimum_effect_needs_a_look_and_within_it_is_evidence():
    big = compose.compose("toolchain_mr", Evidence(paired=[pair("inconclusive", effect=0.61)]))
    assert big.state == "needs a look" and compose.exit_code(big) == errors.NEEDS_A_LOOK
    assert "+61.0% [+59.0%, +63.0%]" in verdict_text.markdown(big)
    small = compose.compose("toolchain_mr", Evidence(paired=[pair("inconclusive", effect=0.01)]))
    assert small.state == "pass" and small.of(EVIDENCE)


def test_a_series_with_no_a_gates_only_once_confirmed():
    no_a = pair("regression", effect=0.2, basis="history")
    unconfirmed = compose.compose("toolchain_mr", Evidence(paired=[no_a]))
    assert unconfirmed.state == "needs a look" and "not confirmed" in unconfirmed.findings[0].sentence
    reproduced = compose.compose("toolchain_mr", Evidence(paired=[no_a], confirmations=[
        Confirmation(KEY, REPRODUCED, "reproduced on other nodes")]))
    assert reproduced.state == "regression"


@pytest.mark.parametrize("confirmations, state, words", [
    (None, "needs a look", "not confirmed: no re-measurement was made"),
    ([Confirmation(KEY, REPRODUCED, "reproduced on other nodes: +12.0% then +11.0%")], "regression", "reproduced"),
    ([Confirmation(KEY, TRANSIENT, "was transient on n1")], "needs a look", "transient: was transient on n1"),
    ([Confirmation(KEY, "error", "could not be measured again")], "error", "could not be measured again"),
])
def test_the_schedule_fails_only_on_a_confirmed_history_regression(confirmations, state, words):
    v = compose.compose("schedule", Evidence(history=[history("regression")], confirmations=confirmations))
    assert v.state == state and words in v.findings[0].sentence


def test_a_standalone_run_is_judged_by_its_baselines_and_says_what_needs_a_look():
    v = compose.compose("run", Evidence(results=[measured(status="fail", reason="beyond the limit"),
                                                 measured(OTHER)], cross=[behind()]))
    assert v.state == "regression" and [f.judge for f in v.of("regression")] == ["baseline band"]
    assert [f.judge for f in v.of("needs a look")] == ["cross-method"]
    assert verdict_text.headline(v) == "❌ regression: 1 regression, 1 finding to look at (exit 1)"
    assert compose.exit_code(v, measure_only=True) == errors.OK


def test_noisy_results_need_a_look_and_nothing_measured_is_not_available():
    noisy = compose.compose("run", Evidence(results=[measured(reason="noisy: node1", verdict="noisy")]))
    assert noisy.state == "needs a look"
    nothing = compose.compose("run", Evidence(results=[measured(status="skip", reason="one socket")]))
    nothing.series.clear()
    assert nothing.state == "not available" and compose.exit_code(nothing) == errors.SKIPPED


def test_errors_beat_regressions_and_infrastructure_is_its_own_state():
    v = compose.compose("run", Evidence(results=[measured(status="fail"), measured(OTHER, status="error",
                                                                                     reason="rank died")]))
    assert v.state == "error" and compose.exit_code(v) == errors.ERROR
    infra = compose.compose("run", Evidence(results=[measured(OTHER, status="error", reason="node lost",
                                                              infrastructure=True), measured()]))
    assert infra.state == "infrastructure" and compose.exit_code(infra) == errors.INFRASTRUCTURE
    # A regression among the finished checks wins over Slurm's fault: never retried into a pass.
    both = compose.compose("run", Evidence(results=[measured(status="fail"), measured(
        OTHER, status="error", reason="node lost", infrastructure=True)]))
    assert both.state == "regression"


def test_a_baselines_mr_gates_on_the_files_it_changes_only():
    results = [measured(status="fail", reason="beyond"),
               measured(pt2pt_key("aion", "batch", "source", "same_numa", "latency"), status="fail", reason="beyond")]
    v = compose.compose("baselines_mr", Evidence(results=results, changed_baselines=frozenset({"iris"})))
    assert [f.key.system for f in v.of("regression")] == ["iris"]
    assert [f.key.system for f in v.of(EVIDENCE)] == ["aion"]


def test_a_method_the_mr_rebuilds_falling_behind_is_a_build_regression():
    spack_mr = compose.compose("toolchain_mr", Evidence(cross=[behind("spack", "spack: hwloc ~pci")],
                                                        changed_methods=frozenset({"spack"})))
    [gating] = spack_mr.of("regression")
    assert gating.cause == "build (method spack): spack: hwloc ~pci"
    assert "the latest accepted run had it in line" not in gating.sentence     # no history given
    other = compose.compose("toolchain_mr", Evidence(cross=[behind("spack")], changed_methods=frozenset({"easybuild"})))
    # A method the MR did not rebuild: not what it changed, evidence for the weekly issue.
    assert other.state == "not available" and other.of(EVIDENCE)[0].judge == "cross-method"
    # Behind already before the MR (the latest accepted run): not this MR's doing: evidence, not yellow.
    old = compose.compose("toolchain_mr", Evidence(cross=[behind("spack")], cross_before=[behind("spack")],
                                                   changed_methods=frozenset({"spack"})))
    assert not old.of("needs a look") and "already behind" in old.findings[0].sentence
    assert old.findings[0].state == EVIDENCE and "evidence for the weekly issue" in old.findings[0].sentence
    new = compose.compose("toolchain_mr", Evidence(cross=[behind("spack")], cross_before=[],
                                                   changed_methods=frozenset({"spack"})))
    assert new.state == "regression" and "the latest accepted run had it in line" in new.findings[0].sentence


def test_a_check_error_and_the_gate_saying_so_are_one_error():
    v = compose.compose("history", Evidence(results=[measured(status="error", reason="SIGILL")],
                                            history=[Verdict(key=KEY, verdict="error",
                                                             reason="the check failed: SIGILL")]))
    assert verdict_text.counts_phrase(v) == "1 error"


def test_junit_carries_every_finding_apart_from_passes_and_regressions():
    v = compose.compose("toolchain_mr", Evidence(results=[measured(), measured(OTHER)], paired=[
        pair("regression", effect=0.3), pair("inconclusive", key=OTHER, effect=0.4)], cross=[behind()]))
    suite = ET.fromstring(verdict_text.junit_xml(v)).find("testsuite")
    assert suite.get("name") == f"mpiregress — {verdict_text.headline(v)}"
    cases = {c.get("name"): c for c in suite.findall("testcase")}
    assert cases["same_numa.latency"].find("failure") is not None
    skipped = cases["cross_node.latency"].find("skipped")
    assert skipped is not None and skipped.get("message").startswith("needs a look (does not gate): inconclusive")
    # A method behind that the MR did not rebuild is evidence there (no case of its own) ...
    assert not any(name.startswith("needs a look: iris/skylake") for name in cases)
    assert (suite.get("failures"), suite.get("errors"), suite.get("skipped")) == ("1", "0", "1")
    # ... and a case of its own where it needs a look (a standalone run).
    run = compose.compose("run", Evidence(results=[measured()], cross=[behind()]))
    cases = {c.get("name") for c in ET.fromstring(verdict_text.junit_xml(run)).find("testsuite").findall("testcase")}
    assert any(name.startswith("needs a look: iris/skylake") for name in cases)


STATES = st.sampled_from(["regression", "error", "infrastructure", "needs a look", EVIDENCE])


@settings(max_examples=200, deadline=None)
@given(st.lists(STATES, max_size=6), st.booleans())
def test_every_surface_says_the_state_of_the_worst_finding(states, anything_measured):
    findings = [Finding(s, "judge", f"series {i}", f"finding {i}") for i, s in enumerate(states)]
    v = PipelineVerdict(event="run", gating=("baseline_band",), findings=findings,
                        series=[KEY] if anything_measured else [], judged=1)
    order = ("error", "regression", "infrastructure", "needs a look")
    expected = next((s for s in order if s in states), "pass" if anything_measured else "not available")
    assert v.state == expected
    code = compose.exit_code(v)
    assert code == {"pass": 0, "needs a look": 5, "regression": 1, "error": 2, "infrastructure": 3,
                    "not available": 4}[expected]
    assert verdict_text.headline(v).endswith(f"(exit {code})") and expected in verdict_text.headline(v)
    assert verdict_text.markdown(v).startswith(f"## MPI performance: {verdict_text.headline(v)}")
    suite = ET.fromstring(verdict_text.junit_xml(v)).find("testsuite")
    assert (int(suite.get("failures")) > 0) == ("regression" in states)
    assert (int(suite.get("errors")) > 0) == bool({"error", "infrastructure"} & set(states))
    # Only a judged regression exits 1.
    assert (code == errors.REGRESSION) == (expected == "regression")


@pytest.mark.parametrize("env, changed, event", [
    ({"CI_PIPELINE_SOURCE": "merge_request_event"}, ["toolchains/2023b.yaml"], "toolchain_mr"),
    ({"CI_PIPELINE_SOURCE": "merge_request_event"}, ["baselines/iris.yaml"], "baselines_mr"),
    ({"CI_PIPELINE_SOURCE": "merge_request_event"}, ["baselines/iris.yaml", "spack-envs/x.yaml"], "toolchain_mr"),
    ({"CI_PIPELINE_SOURCE": "schedule"}, None, "schedule"),
    ({"CI_PIPELINE_SOURCE": "push", "CI_COMMIT_BRANCH": "main", "CI_DEFAULT_BRANCH": "main"}, None, "default_branch"),
    ({}, None, "run"),
])
def test_the_event_of_a_pipeline_comes_from_gitlabs_variables(env, changed, event):
    assert policy.pipeline_event(env, changed) == event


def test_changed_paths_name_the_methods_and_baselines_they_touch():
    changed = ["spack-envs/common.yaml", "baselines/aion.yaml", "README.md"]
    assert policy.changed_methods(changed) == {"spack"}
    assert policy.changed_baselines(changed) == {"aion"}
    assert policy.changed_baselines(None) is None


@pytest.mark.parametrize("text, words", [
    ("events: [", "cannot be read"),
    ("events: {}", "'events' must map"),
    ("events: {x: {gates: [crystal_ball]}}", "unknown judge(s) ['crystal_ball']"),
    ("events: {x: {gates: []}}", "gates on nothing"),
])
def test_a_broken_gating_policy_is_one_sentence(tmp_path: Path, text, words):
    path = tmp_path / "gating.yaml"
    path.write_text(text)
    with pytest.raises(InputError, match=r"gating policy .*") as err:
        policy.load.__wrapped__(path)
    assert words in str(err.value) and "\n" not in str(err.value)


def test_the_shipped_policy_gates_as_the_design_says():
    rules = policy.load()
    assert rules["toolchain_mr"].gates == ("paired_ab", "build_method", "baseline_band_changed")
    assert rules["schedule"].gates == ("history_gate", "links") and rules["schedule"].confirm_history
    assert rules["run"].gates == ("baseline_band", "links")
    assert all("links" in r.evidence for r in (rules["toolchain_mr"], rules["baselines_mr"]))
    assert rules["baselines_mr"].gates == ("baseline_band_changed",)


def bad_link() -> Result:
    """A link series the link matrix failed (links.series makes these from a judged run)."""
    return Result("aion", "batch", "source", LINKTEST, {"link": "aion-0001--aion-0003"}, "bandwidth", "MB/s",
                  3000.0, "fail", "bad link aion-0001--aion-0003 (ranks 0-4): bandwidth 4.4x typical, 4.4x on re-test",
                  nodelist=["aion-0001", "aion-0003"])


@pytest.mark.parametrize(("event", "state"), [("schedule", "regression"), ("run", "regression"),
                                              ("toolchain_mr", "pass"), ("baselines_mr", "pass")])
def test_a_bad_link_is_the_link_matrixs_finding_gating_where_no_change_is_judged(event, state):
    """The link matrix named it, against the typical pair of its own run: the finding says so (not a baseline
    band), fails the weekly run and a standalone run, and is evidence on a merge request (it names hardware)."""
    v = compose.compose(event, Evidence(results=[bad_link(), measured()], changed_baselines=frozenset()))
    [found] = [f for f in v.findings if f.key == bad_link().key()]
    assert found.judge == "link matrix" and "bad link aion-0001--aion-0003" in found.sentence
    assert v.state == state and found.state == ("regression" if state == "regression" else EVIDENCE)
    if state == "pass":
        assert "evidence only" in found.sentence


def test_a_toolchain_mr_is_judged_for_what_it_changed_not_for_what_main_has_too():
    from mpiregress.verdict.cross_method import Finding as Cross

    stale = Cross("strict", "iris", "skylake", "osu_bw", (("placement", "same_numa"), ("size", 1048576)),
                  "bandwidth", "source", 1500.0, "baseline", 9000.0, 0.8, 0.2, "MB/s")
    evidence = Evidence(results=[measured(), measured(OTHER, reason="noisy: node3 probe", verdict="noisy")],
                        paired=[pair("pass", effect=0.004), pair("pass", key=OTHER, effect=0.01)],
                        cross=[behind("spack")], baseline_findings=[stale])
    mr = compose.compose("toolchain_mr", evidence)
    # A good MR stays green: the gap, the stale baseline and the noisy node are evidence for the weekly issue.
    assert mr.state == "pass" and compose.exit_code(mr) == errors.OK, mr.findings
    assert {f.judge for f in mr.of(EVIDENCE)} >= {"cross-method", "baselines", "noise"}
    assert all("evidence for the weekly issue" in f.sentence for f in mr.of(EVIDENCE) if f.judge != "history gate")
    # The same findings on the weekly schedule still need a look.
    weekly = compose.compose("schedule", Evidence(results=evidence.results, cross=evidence.cross,
                                                  baseline_findings=evidence.baseline_findings))
    assert weekly.state == "needs a look"
    # What the MR did cause still does: an inconclusive pair beyond the minimum effect.
    yellow = compose.compose("toolchain_mr", Evidence(paired=[pair("inconclusive", effect=0.2)], cross=[behind()]))
    assert [f.judge for f in yellow.of("needs a look")] == ["paired A/B"]


def test_a_policy_look_at_naming_an_unknown_kind_is_one_sentence(tmp_path: Path):
    path = tmp_path / "gating.yaml"
    path.write_text("events:\n  mr:\n    gates: [paired_ab]\n    look_at: [paired_ab, vibes]\n")
    with pytest.raises(InputError, match="look_at names unknown finding kind"):
        policy.load.__wrapped__(path)
