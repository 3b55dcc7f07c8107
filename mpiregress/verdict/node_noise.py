"""A node's noise history: the efficiencies it showed in earlier accepted runs, oldest first.

Two sources, both the seed's efficiency of one rank per core on the node: the
probe before every benchmark (``conditions["noise"]`` of the benchmark's rows, one
value per run: the median of that run's probes of the node) and the weekly FWQ
check's ``fwq``/``efficiency`` series in the ``all_cores`` layout (the same
placement as the probe, longer). :func:`noise.verdict.usual_band` makes the band.
"""
from __future__ import annotations

import json
import statistics
from collections.abc import Mapping, Sequence
from typing import Any, Optional

from mpiregress.families.noise import probe, records
from mpiregress.history.store import History
from mpiregress.verdict import noise as verdict

LAST_RUNS = 26   # as the gate's noise window: half a year of weekly runs


def node_efficiencies(history: History, system: str, partition: str, exclude_run: Optional[str] = None,
                      last: int = LAST_RUNS) -> dict[str, list[float]]:
    """Per node, one efficiency per accepted run of ``system:partition`` (oldest first, the last ``last``)."""
    per_run: dict[tuple[str, str], list[float]] = {}
    order: list[tuple[str, str]] = []
    for row in history.rows(system=system, partition=partition, accepted=True):
        if row.run_id == exclude_run:
            continue
        found: list[tuple[str, float]] = []
        if row.benchmark == records.BENCHMARK:
            params = dict(row.key().parameters)
            if row.metric == "efficiency" and params.get("layout") == "all_cores" and row.value is not None:
                found.append((str(params.get("node")), float(row.value)))
        elif row.sample == 0 and row.conditions:
            found += [(e["node"], float(e["efficiency"])) for e in probe.probed(_conditions(row.conditions))]
        for node, value in found:
            key = (node, row.run_id)
            if key not in per_run:
                per_run[key] = []
                order.append(key)
            per_run[key].append(value)
    out: dict[str, list[float]] = {}
    for node, run_id in order:
        out.setdefault(node, []).append(statistics.median(per_run[(node, run_id)]))
    return {node: values[-last:] for node, values in out.items()}


def _conditions(text: str) -> Mapping[str, Any]:
    try:
        value = json.loads(text)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def probe_entries(conditions: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The probed nodes of several results of one series: per node its worst (lowest) efficiency."""
    worst: dict[str, dict[str, Any]] = {}
    for c in conditions:
        for entry in probe.probed(c):
            if entry["node"] not in worst or entry["efficiency"] < worst[entry["node"]]["efficiency"]:
                worst[entry["node"]] = entry
    return [worst[n] for n in sorted(worst)]


def auto_repeats(latest: Mapping[str, float], tolerance: float, where: str) -> tuple[int, str]:
    """(repetitions, the sentence why) from each node's latest efficiency; the minimum without any."""
    if not latest:
        k = verdict.repeats_for([1.0], tolerance)
        return k, f"no node noise recorded in the history ({where}) yet, so the minimum of {k}"
    node, worst = min(latest.items(), key=lambda item: item[1])
    k = verdict.repeats_for(list(latest.values()), tolerance)
    return k, (f"the noisiest node's latest probe, {node} at efficiency {worst:.3f} (of {len(latest)} node(s) in "
               f"{where}), can stretch a run by {1 / worst - 1:.1%}; {k} repetitions keep that under a "
               f"{tolerance:.0%} effect (noise.verdict.repeats_for)")
