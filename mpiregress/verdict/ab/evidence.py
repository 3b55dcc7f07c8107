"""What the run and the history say of the nodes a series ran on, for attribution.

Two readers, one per kind of evidence: the noise probes the run recorded beside every
benchmark (against each node's own usual band from the history), and the link matrix's
bad nodes and links (the run's own linktest series, else the latest link run of the
partition in the history). The A/B judge and the history-gate reports both use them.
"""
from __future__ import annotations

import statistics
from typing import Any, Mapping, Optional, Sequence

from mpiregress.families.links import series as link_series
from mpiregress.families.links.series import BENCHMARK as LINKTEST
from mpiregress.families.noise import probe as noise_probe
from mpiregress.families.noise import records as noise_records
from mpiregress.history.store import History
from mpiregress.model.names import METRICS
from mpiregress.model.results import Result
from mpiregress.model.series import SeriesKey
from mpiregress.verdict import node_noise as nodehistory
from mpiregress.verdict import noise as noise_verdict
from mpiregress.verdict.ab import attribution

# A node whose probe kept less than this share of the others' median is singled out by it.
SINGLED_OUT = 0.8


def _partitions(records: Sequence[Mapping[str, Any]]) -> list[tuple[str, str]]:
    return sorted({(str(r.get("system")), str(r.get("partition"))) for r in records})


def probe_flags(records: Sequence[Mapping[str, Any]], history: Optional[History]) -> attribution.NoiseProbe:
    """What the run's own noise probes say of each node, for attribution: node -> (worst efficiency, usual band).

    The band is the node's own (its earlier probes in the history, noise.verdict.usual_band); a node
    without enough of them is held to its system's noise floor, as the judges' noisy rule does.
    """

    probed = nodehistory.probe_entries([r.get("conditions") or {} for r in records])
    if not probed:
        return {}
    usual: dict[str, Any] = {}
    if history is not None:
        for system, partition in _partitions(records):
            usual.update(nodehistory.node_efficiencies(history, system, partition))
    # A node without a band of its own is held to its system's floor (systems/<name>.yaml noise_floor).
    floors = {str(n): noise_verdict.floor_of(str(r.get("system"))).efficiency
              for r in records for n in r.get("nodelist") or ()}
    default = min(floors.values(), default=noise_verdict.NO_HISTORY_FLOOR)
    flags = {}
    for entry in probed:
        node, efficiency = str(entry["node"]), float(entry["efficiency"])
        band = noise_verdict.usual_band(node, usual.get(node, ()))
        flags[node] = (efficiency, (band.low, band.centre) if band else (floors.get(node, default), 1.0))
    return flags


def link_flags(records: Sequence[Mapping[str, Any]], history: Optional[History]) -> dict[str, Any]:
    """The link matrix's findings for attribution (:func:`mpiregress.families.links.series.findings`).

    The run's own linktest series when it measured any; otherwise the latest link run of the same
    system and partition in the history (the weekly link job's, accepted or not: a bad link is a
    fact about the machine, not a level to compare with); ``{}`` when there is neither.
    """

    own = link_series.record_findings(records)
    if own is not None:
        return own
    if history is None:
        return {}
    found: dict[str, Any] = {"bad_nodes": [], "bad_links": [], "measured": ""}
    for system, partition in _partitions(records):
        run_id = history.latest_run_with(system, partition, link_series.BENCHMARK)
        latest = history.rows(system=system, partition=partition, benchmark=link_series.BENCHMARK,
                              run_id=run_id) if run_id else []
        if latest:
            one = link_series.findings([(dict(row.key().parameters), row.status) for row in latest],
                                       measured=latest[-1].time)
            found["bad_nodes"] += one["bad_nodes"]
            found["bad_links"] += one["bad_links"]
            found["measured"] = max(found["measured"], one["measured"])
    return found if found["measured"] else {}


def run_causes(results: Sequence[Result]) -> dict[SeriesKey, str]:
    """A likely cause for each failing benchmark series of one run, from this run's own evidence only.

    In the order tried: the run's link matrix singles out a node the series ran on (its links slower than
    the others' by a factor) or a link between two of them; the run's noise probes single out such a node
    (it kept clearly less of its cores than the others); every probed node is alike beyond the system's
    noise floor, or every benchmark series of the partition regressed alike: the whole host/system.
    Nothing points anywhere: no entry (the verdict says no cause rather than guess).
    """
    out: dict[SeriesKey, str] = {}
    failing = [r for r in results if r.status == "fail" and r.benchmark not in (LINKTEST, noise_records.BENCHMARK)]
    for r in failing:
        nodes = set(r.nodelist) or {e["node"] for e in noise_probe.probed(r.conditions)}
        mine = [x for x in results if (x.system, x.partition) == (r.system, r.partition)]
        said = _link_cause(mine, nodes) or _probe_cause(mine, nodes, r.system) or _everywhere(mine, r)
        if said:
            out[r.key()] = said
    return out


def _link_cause(results: Sequence[Result], nodes: set[str]) -> str:
    """'node2: its links are 2.0x slower than the others' in this run (the link matrix)' for a node or link of
    ``nodes`` the run's link matrix failed."""
    links = [r for r in results if r.benchmark == LINKTEST and r.value is not None]
    for r in sorted(links, key=lambda r: str(r.parameters)):
        node = r.parameters.get("node")
        if r.status != "fail" or node not in nodes:
            continue
        others = [float(x.value) for x in links if x.metric == r.metric and "node" in x.parameters
                  and x.parameters["node"] != node and x.value]
        if not others or not r.value:
            return f"{node}: the link matrix of this run flagged it ({r.reason})"
        typical, value = statistics.median(others), float(r.value)
        ratio = typical / value if METRICS[r.metric].higher_is_better else value / typical
        return (f"{node}: its links are {ratio:.1f}x slower than the others' in this run ({r.metric} "
                f"{value:.4g} {r.unit} against {typical:.4g}, the link matrix)")
    for r in links:
        a, _, b = str(r.parameters.get("link", "")).partition("--")
        if r.status == "fail" and {a, b} <= nodes:
            return f"the link {a}-{b}: the link matrix of this run found it slow ({r.reason})"
    return ""


def _probe_efficiencies(results: Sequence[Result]) -> dict[str, float]:
    """Each probed node's worst probe efficiency over the run's benchmark series."""
    worst: dict[str, float] = {}
    for r in results:
        for e in noise_probe.probed(r.conditions):
            worst[e["node"]] = min(worst.get(e["node"], 1.0), float(e["efficiency"]))
    return worst


def _probe_cause(results: Sequence[Result], nodes: set[str], system: str) -> str:
    """'node2: its noise probe in this run kept 0.55 of its cores against 0.95 on the others' for a node of
    ``nodes`` the probes single out, or the whole host when every probed node is alike beyond the floor."""
    worst = _probe_efficiencies(results)
    if len(worst) < 2:
        return ""
    floor = noise_verdict.floor_of(system)
    for node in sorted(nodes & set(worst)):
        others = [v for n, v in worst.items() if n != node]
        typical = statistics.median(others)
        if worst[node] < SINGLED_OUT * typical:
            return (f"{node}: its noise probe in this run kept {worst[node]:.2f} of its cores against "
                    f"{typical:.2f} on the others")
    if all(v < floor.efficiency for v in worst.values()):
        low, high = min(worst.values()), max(worst.values())
        return (f"the whole host/system: every node's noise probe in this run is alike ({low:.2f}-{high:.2f}), "
                f"all below a quiet node's {floor.efficiency:.2f} ({floor.source} noise_floor): the load, not one "
                f"node")
    return ""


def _everywhere(results: Sequence[Result], failed: Result) -> str:
    """'the whole host/system: ...' when every judged benchmark series of the partition in this run regressed."""
    judged = [r for r in results if r.status in ("pass", "fail") and r.value is not None
              and r.benchmark not in (LINKTEST, noise_records.BENCHMARK)]
    if len(judged) >= 2 and all(r.status == "fail" for r in judged):
        nodes = sorted({n for r in judged for n in r.nodelist})
        return (f"the whole host/system: every benchmark series of {failed.system}/{failed.partition} measured in "
                f"this run regressed alike ({len(judged)} of {len(judged)}, on {', '.join(nodes) or 'its nodes'})")
    return ""
