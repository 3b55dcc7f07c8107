"""Attribution: one sentence per failing series, one test per cause."""
from __future__ import annotations

import numpy as np

from mpiregress.ab import paired
from mpiregress.ab.attribution import Observation, attribute, by_kind, flagged_nodes, observation
from mpiregress.names import PT2PT
from mpiregress.series import SeriesKey

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


def test_node_follows_one_node_across_series_and_placements():
    obs = [_obs("source", "same_numa", "regression", nodes=("n3",), b_hist=0.09),
           _obs("source", "cross_node", "regression", nodes=("n3", "n4"), b_hist=0.07),
           _obs("easybuild", "same_numa", "regression", nodes=("n3",), b_hist=0.08),
           _obs("source", "cross_socket", "pass", nodes=("n5",), b_hist=0.004),
           _obs("easybuild", "cross_socket", "pass", nodes=("n6",), b_hist=-0.01)]
    causes = attribute(obs)
    assert by_kind(causes) == {"node": 3}
    assert "follows n3 across 3 series and 2 placements" in causes[0].sentence
    assert "the 2 series that did not run on n3 are fine" in causes[0].sentence


def test_node_needs_a_contrast_otherwise_it_is_not_named():
    obs = [_obs("source", "same_numa", "regression", nodes=("n3",), b_hist=0.09),
           _obs("source", "cross_node", "regression", nodes=("n3", "n4"), b_hist=0.07),
           _obs("source", "cross_socket", "regression", nodes=("n5",), b_hist=0.06)]
    assert "node" not in by_kind(attribute(obs))


def test_build_without_a_one_method_worse_than_history():
    obs = [_obs("eessi", "cross_node", "regression", b_hist=0.08), _obs("source", "cross_node", b_hist=0.01),
           _obs("easybuild", "cross_node", b_hist=0.0)]
    (cause,) = attribute(obs)
    assert cause.kind == "build" and "only the eessi build" in cause.sentence


def test_system_without_a_every_method_worse():
    obs = [_obs(m, "cross_node", "regression", b_hist=0.08) for m in METHODS]
    causes = attribute(obs)
    assert by_kind(causes) == {"system": 3} and "every build method on it is worse too" in causes[0].sentence


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
