"""Node noise as series records (the open series model): history and the gate judge them like any other.

Series: benchmark "fwq", parameters {"node": X, "layout": L}, metrics
efficiency (fraction, higher better), max_detour (us, lower better) and
lost_fraction (fraction, lower better). The periods found go into
``conditions`` so a new daemon shows up with its frequency next to its regression.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .analysis import NodeNoise, RunNoise

BENCHMARK = "fwq"
LAYOUTS = ("all_cores", "one_free_per_socket", "smt")

# name -> (unit, higher_is_better): what names.py's metric registry needs for them.
METRICS: dict[str, tuple[str, bool]] = {
    "efficiency": ("fraction", True),
    "max_detour": ("us", False),
    "lost_fraction": ("fraction", False),
}


def _values(node: NodeNoise) -> dict[str, float]:
    return {"efficiency": node.efficiency, "max_detour": node.max_detour_us, "lost_fraction": node.lost_fraction}


def node_conditions(node: NodeNoise) -> dict[str, Any]:
    """Per-core detail kept with the record (free-form ``conditions``)."""
    return {"cores": [{"cpu": c.cpu, "bound": c.bound, "lost_fraction": round(c.lost_fraction, 5),
                       "max_detour_us": round(c.max_detour_us, 1), "detours_per_s": round(c.detours_per_s, 1),
                       "periods_hz": [p.frequency_hz for p in c.periods]} for c in node.cores],
            "iterations": node.iterations}


def to_records(run: RunNoise, *, system: str, partition: str, method: str, layout: str,
               context: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
    """One record per node and metric; ``context`` adds commit, pipeline, jobid, time, target, toolchain."""
    if layout not in LAYOUTS:
        raise ValueError(f"unknown FWQ layout {layout!r}; known: {', '.join(LAYOUTS)}")
    records = []
    for node in run.nodes:
        for metric, value in _values(node).items():
            unit, _ = METRICS[metric]
            record: dict[str, Any] = {
                "system": system, "partition": partition, "method": method, "benchmark": BENCHMARK,
                "parameters": {"node": node.node, "layout": layout},
                "metric": metric, "unit": unit, "value": round(value, 6), "samples": [round(value, 6)],
                "status": "pass", "reason": "", "nodelist": [node.node],
                "conditions": node_conditions(node),
            }
            record.update(dict(context or {}))
            records.append(record)
    return records


def probe_conditions(run: RunNoise) -> dict[str, Any]:
    """The noise probe's entry for a benchmark result's ``conditions``: per node, efficiency and largest detour."""
    return {"noise_probe": [{"node": n.node, "efficiency": round(n.efficiency, 4),
                             "max_detour_us": round(n.max_detour_us, 1)} for n in run.nodes]}
