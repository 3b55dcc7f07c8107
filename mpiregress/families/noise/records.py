"""Node noise as series records (the open series model): history and the gate judge them like any other.

Series: benchmark "fwq", parameters {"node": X, "layout": L}, metrics
``efficiency`` (higher better) and ``max_detour`` (us, lower better), both in
names.METRICS. The per-core detail (lost share, detour rate, periods found) goes
into ``conditions``, so a new daemon shows up with its frequency next to its regression.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mpiregress.families.noise.analysis import NodeNoise, RunNoise
from mpiregress.model.names import METRICS
from mpiregress.model.results import Result

BENCHMARK = "fwq"
LAYOUTS = ("all_cores", "one_free_per_socket", "smt")
RECORDED = ("efficiency", "max_detour")
# The run judges its own noise: an event or stalls are findings of the noise judge (verdict/noise.py), so a
# system with no FWQ band in its baselines still has a verdict on them; a band, where a site sets one, applies.
JUDGED_BY = "noise analysis: each core's stalls and events in the same run"


def _values(node: NodeNoise) -> dict[str, float]:
    return {"efficiency": node.efficiency, "max_detour": node.max_detour_us}


def node_conditions(node: NodeNoise) -> dict[str, Any]:
    """Per-core detail kept with the record (free-form ``conditions``)."""
    return {"lost_fraction": round(node.lost_fraction, 5), "iterations": node.iterations,
            "cores": [{"cpu": c.cpu, "bound": c.bound, "lost_fraction": round(c.lost_fraction, 5),
                       "max_detour_us": round(c.max_detour_us, 1), "detours_per_s": round(c.detours_per_s, 1),
                       "periods_hz": [p.frequency_hz for p in c.periods],
                       "periods_detour_us": [p.detour_us for p in c.periods],
                       "tick_detour_us": c.tick_detour_us} for c in node.cores]}


def to_results(run: RunNoise, *, system: str, partition: str, method: str, layout: str,
               context: Mapping[str, Any] | None = None) -> list[Result]:
    """One Result per node and metric; ``context`` sets commit, pipeline, jobid, time, target, toolchain."""
    if layout not in LAYOUTS:
        raise ValueError(f"unknown FWQ layout {layout!r}; known: {', '.join(LAYOUTS)}")
    results = []
    for node in run.nodes:
        for metric, value in _values(node).items():
            results.append(Result(
                system=system, partition=partition, method=method, benchmark=BENCHMARK,
                parameters={"node": node.node, "layout": layout}, metric=metric, unit=METRICS[metric].unit,
                value=round(value, 6), status="pass", samples=[round(value, 6)], nodelist=[node.node],
                conditions={**node_conditions(node), "judged_by": JUDGED_BY}, **dict(context or {})))
    return results


def to_records(run: RunNoise, **kwargs: Any) -> list[dict[str, Any]]:
    """The same as plain dicts (results JSON)."""
    return [r.to_dict() for r in to_results(run, **kwargs)]


def probe_conditions(run: RunNoise) -> dict[str, Any]:
    """The noise probe's entry for a benchmark result's ``conditions``: per node, efficiency and largest detour."""
    return {"noise": {n.node: {"efficiency": round(n.efficiency, 4), "max_detour_us": round(n.max_detour_us, 1)}
                      for n in run.nodes}}
