"""A point-to-point regression says which node or link this run's own evidence singles out, or that it
hit the whole host alike (issue 31): the cause column of the run's verdict, summary.md included."""
from __future__ import annotations

from mpiregress.model.results import Result, pt2pt
from mpiregress.report import summary, verdict_text
from mpiregress.verdict import compose
from mpiregress.verdict.ab import evidence


def bw(placement: str, value: float, status: str, nodes: list[str], probe: dict | None = None) -> Result:
    return pt2pt("local", "batch", "source", placement, "bandwidth", value, status=status, nodelist=nodes,
                 samples=[value], reason="beyond the limit" if status == "fail" else "",
                 conditions={"noise": probe} if probe else {})


def link_node(node: str, value: float, status: str = "pass") -> Result:
    return Result(system="local", partition="batch", method="source", benchmark="linktest",
                  parameters={"node": node}, metric="bandwidth", unit="MB/s", value=value, samples=[value],
                  status=status, reason="slow node" if status == "fail" else "", nodelist=[node])


QUIET = {"efficiency": 0.95, "max_detour_us": 100.0}


def test_a_node_the_link_matrix_singles_out_is_the_cause() -> None:
    found = [bw("cross_node", 196.0, "fail", ["node1", "node2"]), bw("same_numa", 9000.0, "pass", ["node1"]),
             link_node("node1", 1000.0), link_node("node2", 500.0, "fail"), link_node("node3", 1000.0),
             link_node("node4", 1100.0)]
    causes = evidence.run_causes(found)
    (key, said), = causes.items()
    assert key == found[0].key()
    assert said.startswith("node2: its links are 2.0x slower than the others' in this run")
    judged = compose.of_run(found, causes=causes)
    text = summary.markdown(found, "t", [], [], top=verdict_text.markdown(judged))
    assert "node2: its links are 2.0x slower than the others'" in text.split("| series |")[1].split("\n\n")[0]


def test_a_node_the_probes_single_out_is_the_cause() -> None:
    found = [bw("cross_node", 196.0, "fail", ["node1", "node2"],
                {"node1": QUIET, "node2": {"efficiency": 0.50, "max_detour_us": 9000.0}}),
             bw("same_numa", 9000.0, "pass", ["node3"], {"node3": QUIET})]
    (said,) = evidence.run_causes(found).values()
    assert said == "node2: its noise probe in this run kept 0.50 of its cores against 0.95 on the others"


def test_every_node_alike_is_the_whole_host() -> None:
    loaded = {"efficiency": 0.40, "max_detour_us": 9000.0}
    found = [bw("cross_node", 196.0, "fail", ["node1", "node2"], {"node1": loaded, "node2": loaded}),
             bw("same_numa", 900.0, "fail", ["node1"], {"node1": loaded})]
    causes = evidence.run_causes(found)
    assert len(causes) == 2 and all(s.startswith("the whole host/system: every node's noise probe in this run is "
                                                 "alike (0.40-0.40)") for s in causes.values())
    unprobed = [bw("cross_node", 196.0, "fail", ["node1", "node2"]), bw("same_numa", 900.0, "fail", ["node1"])]
    assert all(s.startswith("the whole host/system: every benchmark series of local/batch measured in this run "
                            "regressed alike (2 of 2") for s in evidence.run_causes(unprobed).values())


def test_nothing_pointing_anywhere_is_no_cause() -> None:
    found = [bw("cross_node", 196.0, "fail", ["node1", "node2"]), bw("same_numa", 9000.0, "pass", ["node1"])]
    assert evidence.run_causes(found) == {}
