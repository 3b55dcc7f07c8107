"""What the run and the history say of the nodes a series ran on, for attribution.

Two readers, one per kind of evidence: the noise probes the run recorded beside every
benchmark (against each node's own usual band from the history), and the link matrix's
bad nodes and links (the run's own linktest series, else the latest link run of the
partition in the history). The A/B judge and the history-gate reports both use them.
"""
from __future__ import annotations

from typing import Any, Mapping, Optional, Sequence

from mpiregress.families.links import series as link_series
from mpiregress.history.store import History
from mpiregress.verdict import node_noise as nodehistory
from mpiregress.verdict import noise as noise_verdict
from mpiregress.verdict.ab import attribution


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
