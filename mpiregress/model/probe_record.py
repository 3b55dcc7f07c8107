"""The noise probe's entry in a result's ``conditions``: its shape, read and merged over repeats.

``{"noise": {"node1": {"efficiency": 0.97, "max_detour_us": 130.0}, ...}}`` or
``{"noise": "not probed: <why>"}``; written by the probe (families/noise/probe.py), folded by
the folding of repeats in :mod:`mpiregress.model.results`, read by the judges.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

NOT_PROBED = "not probed: "


def probed(conditions_: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The probe's nodes in a result's conditions as ``[{"node", "efficiency", "max_detour_us"}]`` (may be empty)."""
    noise = conditions_.get("noise")
    if not isinstance(noise, Mapping):
        return []
    return [{"node": str(node), **values} for node, values in sorted(noise.items())
            if isinstance(values, Mapping) and isinstance(values.get("efficiency"), (int, float))]


def merge(conditions_: Sequence[Mapping[str, Any]]) -> dict[str, Any] | str:
    """The probes of repeated runs of one series as one entry: per node the worst efficiency and detour.

    The worst, not the median: one disturbed repeat is enough to move a median of the
    benchmark's samples, so the verdict must see it.
    """
    entries = [e for c in conditions_ for e in probed(c)]
    if not entries:
        said = [c.get("noise") for c in conditions_ if isinstance(c.get("noise"), str)]
        return str(said[0]) if said else NOT_PROBED + "no repeat was probed"
    merged: dict[str, Any] = {}
    for e in entries:
        node = merged.setdefault(e["node"], {"efficiency": e["efficiency"], "max_detour_us": e.get("max_detour_us"),
                                              "probes": 0})
        node["efficiency"] = min(node["efficiency"], e["efficiency"])
        if e.get("max_detour_us") is not None:
            node["max_detour_us"] = max(node["max_detour_us"] or 0.0, e["max_detour_us"])
        node["probes"] += 1
    return merged
