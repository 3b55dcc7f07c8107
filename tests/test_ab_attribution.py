"""Attribution: one sentence per failing series, one test per cause."""
from __future__ import annotations

import numpy as np

from mpiregress.model.names import PT2PT
from mpiregress.model.series import SeriesKey
from mpiregress.verdict.ab import paired
from mpiregress.verdict.ab.attribution import Observation, attribute, by_kind, flagged_nodes, observation

METHODS = ("source", "easybuild", "spack")


def _obs(method, placement, verdict="pass", nodes=("n1", "n2"), ab=None, a_hist=None, b_hist=None,
         metric="latency"):
    key = SeriesKey("iris", "skylake", method, PT2PT[metric].benchmark,
                    (("placement", placement), ("size", PT2PT[metric].size)), metric)
    return Observation(key=key, verdict=verdict, nodes=tuple(nodes),
                       ab_effect=ab, a_vs_history=a_hist, b_vs_history=b_hist)


def test_toolchain_b_worse_than_a_on_the_same_nodes_in_every_method():
    obs = [_obs(m, "cross_node", "regression", ab=0.12) for m in METHODS]
    causes = attribute(obs)
    assert len(causes) == 3 and by_kind(causes) == {"toolchain": 3}
    assert "worse in B (the MR) than in A (the target branch) on the same nodes (n1, n2)" in causes[0].sentence
    assert "as do easybuild, spack" in causes[0].sentence


def test_build_one_method_only_the_others_fine_on_the_same_nodes():
    obs = [_obs("spack", "cross_node", "regression", ab=0.09), _obs("source", "cross_node", ab=0.004),
           _obs("easybuild", "cross_node", ab=-0.002)]
    (cause,) = attribute(obs)
    assert cause.kind == "build"
    assert "only the spack build" in cause.sentence and "easybuild -0.2%, source +0.4%" in cause.sentence


def test_system_a_and_b_both_worse_than_history_names_the_nodes():
    obs = [_obs("source", "cross_node", "pass", nodes=("n7", "n9"), ab=0.002, a_hist=0.11, b_hist=0.115),
           _obs("source", "same_numa", "pass", nodes=("n7",), ab=0.0, a_hist=0.001, b_hist=0.002)]
    (cause,) = attribute(obs)
    assert cause.kind == "system" and cause.key.placement == "cross_node"
    assert "in A (+11.0%) and in B (+11.5%) alike" in cause.sentence and "n7, n9" in cause.sentence


def test_node_the_same_measurements_fail_with_it_and_pass_without_it():
    obs = [_obs("source", "same_numa", "regression", nodes=("n3",), b_hist=0.09),
           _obs("easybuild", "same_numa", "regression", nodes=("n3",), b_hist=0.08),
           _obs("spack", "same_numa", "pass", nodes=("n5",), b_hist=0.004),
           _obs("source", "cross_node", "regression", nodes=("n3", "n4"), b_hist=0.07),
           _obs("easybuild", "cross_node", "pass", nodes=("n5", "n6"), b_hist=-0.01),
           _obs("spack", "cross_node", "skip", nodes=("n4", "n7"))]          # a skip is no evidence
    causes = attribute(obs)
    assert by_kind(causes) == {"node": 3}
    assert causes[0].sentence == (
        "node: iris/skylake source same_numa latency is +9.0% vs history; in this run the same measurements "
        "regressed wherever n3 took part (3 series, easybuild, source) and passed on other nodes (2 series, "
        "on n5, n6)")


def test_node_is_not_named_when_the_passes_are_other_placements():
    """The old rule named n3 here: the passes were other placements, so they say nothing of n3."""
    obs = [_obs("source", "same_numa", "regression", nodes=("n3",), b_hist=0.09),
           _obs("source", "cross_node", "regression", nodes=("n3", "n4"), b_hist=0.07),
           _obs("source", "cross_socket", "pass", nodes=("n5",), b_hist=0.004),
           _obs("easybuild", "cross_socket", "pass", nodes=("n6",), b_hist=-0.01)]
    assert "node" not in by_kind(attribute(obs))


def test_node_is_not_named_when_the_build_could_explain_it_alone():
    """source regressed on n3, only easybuild ran the same measurement elsewhere: node or build, unknown."""
    obs = [_obs("source", "same_numa", "regression", nodes=("n3",), b_hist=0.09),
           _obs("easybuild", "same_numa", "pass", nodes=("n5",), b_hist=0.0)]
    (cause,) = attribute(obs)
    assert cause.kind == "unexplained"
    assert "on other nodes easybuild on n5 passed, which does not tell the node from the build" in cause.sentence


def test_node_needs_a_contrast_otherwise_it_is_not_named():
    obs = [_obs("source", "same_numa", "regression", nodes=("n3",), b_hist=0.09),
           _obs("source", "cross_node", "regression", nodes=("n3", "n4"), b_hist=0.07),
           _obs("source", "cross_socket", "regression", nodes=("n5",), b_hist=0.06)]
    assert "node" not in by_kind(attribute(obs))


def _local(placement, metric, verdict, nodes, effect=None, basis="baseline", runs=0):
    key = SeriesKey("local", "batch", "source", PT2PT[metric].benchmark,
                    (("placement", placement), ("size", PT2PT[metric].size)), metric)
    return Observation(key=key, verdict=verdict, nodes=tuple(nodes), b_vs_history=effect, basis=basis,
                       history_runs=runs)


def test_issue_18_one_regression_no_history_is_unexplained_not_a_node():
    """A local main job: one regression, no history, two placements ran, the other node1 series passed and
    28 series were skipped. It used to say 'cross_node latency is +725.7 % vs history, and the regression
    follows node1 across 3 series and 3 placements; the 28 series that did not run on node1 are fine'."""
    obs = [_local("cross_node", "latency", "regression", ("node1", "node2"), 7.257),
           _local("cross_node", "bandwidth", "pass", ("node1", "node2"), 0.31),
           _local("same_numa", "latency", "pass", ("node1",), 0.45),
           _local("same_numa", "bandwidth", "pass", ("node1",), 0.2)]
    obs += [_local(p, m, "skip", ()) for p in ("cross_numa", "cross_socket") for m in ("latency", "bandwidth")]
    obs += [Observation(key=SeriesKey("local", "batch", "source", "osu_allreduce", (("nprocs", n), ("size", s)),
                                      "latency"), verdict="skip", nodes=()) for n in (4, 8) for s in range(12)]
    assert sum(o.verdict == "skip" for o in obs) == 28
    (cause,) = attribute(obs)
    assert cause.kind == "unexplained"
    assert cause.sentence == (
        "unexplained: local/batch source cross_node latency is +725.7% vs its baseline on node1, node2; only this "
        "series regressed, and the 3 other series measured on node1 or node2 passed; no other node ran it in "
        "this run, and there is no history of it; confirm it in a fresh allocation")
    assert "vs history" not in cause.sentence and "fine" not in cause.sentence


def test_a_short_history_is_said_as_such():
    (cause,) = attribute([_local("cross_node", "latency", "regression", ("node1", "node2"), 0.5, runs=3)])
    assert cause.sentence.endswith("no other node ran it in this run, and its history has 3 accepted run(s), "
                                   "too few to judge by; confirm it in a fresh allocation")
    (cause,) = attribute([_local("cross_node", "latency", "regression", ("n1", "n2"), 0.5, "history", 12)])
    assert "is +50.0% vs history on n1, n2; only this series regressed; no other node ran it in this run; " \
           "confirm" in cause.sentence


def test_build_without_a_one_method_worse_than_history():
    obs = [_obs("eessi", "cross_node", "regression", b_hist=0.08), _obs("source", "cross_node", b_hist=0.01),
           _obs("easybuild", "cross_node", b_hist=0.0)]
    (cause,) = attribute(obs)
    assert cause.kind == "build" and cause.sentence == (
        "build: iris/skylake eessi cross_node latency is +8.0% vs history, only the eessi build: easybuild, source "
        "passed on the same nodes (n1, n2) in this run")
    # A skipped peer is no evidence: with only skips beside it, nothing points at the build.
    (cause,) = attribute([obs[0], _obs("source", "cross_node", "skip"), _obs("easybuild", "cross_node", "error")])
    assert cause.kind == "unexplained"


def test_build_without_a_some_methods_fail_some_pass():
    obs = [_obs("eessi", "cross_node", "regression", b_hist=0.08), _obs("spack", "cross_node", "regression",
                                                                        b_hist=0.07),
           _obs("source", "cross_node", b_hist=0.0)]
    causes = attribute(obs)
    assert by_kind(causes) == {"build": 2}
    assert "on the same nodes (n1, n2) eessi, spack regressed while source passed in this run" in causes[0].sentence


def test_system_without_a_every_method_worse():
    obs = [_obs(m, "cross_node", "regression", b_hist=0.08) for m in METHODS]
    causes = attribute(obs)
    assert by_kind(causes) == {"system": 3}
    assert "every other build method measured on the same nodes (n1, n2) regressed too (source, spack)" \
        in causes[1].sentence


def test_noise_probe_flags_a_node_involved():
    probe = {"n2": (0.71, (0.93, 0.99)), "n1": (0.96, (0.93, 0.99))}
    obs = [_obs("source", "cross_node", "regression", b_hist=0.09)]
    (cause,) = attribute(obs, noise=probe)
    assert cause.kind == "noise"
    assert "the noise probe flagged n2 (efficiency 0.71, usual 0.93-0.99)" in cause.sentence


def test_link_matrix_flags_a_link_or_node():
    obs = [_obs("source", "cross_node", "regression", b_hist=0.2)]
    (cause,) = attribute(obs, links={"bad_nodes": [], "bad_links": [["n2", "n1"]]})
    assert cause.kind == "link" and "link n2-n1" in cause.sentence
    assert flagged_nodes(["n1"], None, {"bad_links": [["n1", "n2"]]}) == ("", "")   # one end is not the link
    assert flagged_nodes(["n1"], None, {"bad_nodes": ["n1"]})[0] == "link"


def test_a_flagged_node_does_not_excuse_a_paired_regression():
    probe = {"n2": (0.71, (0.93, 0.99))}
    (cause,) = attribute([_obs("source", "cross_node", "regression", ab=0.1)], noise=probe)
    assert cause.kind == "toolchain" and "but A ran on it too" in cause.sentence


def test_passing_series_get_no_sentence():
    assert attribute([_obs("source", "cross_node", ab=0.01), _obs("spack", "same_numa", "improvement")]) == []


def test_observation_from_a_paired_verdict():
    rng = np.random.default_rng(1)
    records = []
    for method in ("source", "spack"):
        for pair in range(6):
            for side in "AB":
                value = 3.0 * float(np.exp(abs(rng.standard_t(3)) * 0.005))
                if side == "B" and method == "spack":
                    value *= 1.1
                records.append(dict(system="local", partition="batch", method=method, placement="same_numa",
                                    metric="latency", value=value, status="pass", ab_side=side, ab_pair=pair,
                                    nodelist=["node1"], target="t"))
    verdicts = paired.judge(records, paired.PairedConfig(draws=5000, min_pool=4))
    causes = attribute([observation(v) for v in verdicts])
    assert [c.kind for c in causes] == ["build"]
