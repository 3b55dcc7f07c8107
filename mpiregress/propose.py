"""Baseline proposals from the history: new values and tolerances, as a reviewable diff.

For every accepted series of a system (of the baselines file's toolchain):
* value = median of the last N run medians (the gate's own centre);
* tolerance = max(z x run-to-run noise x sqrt(1 + pi/2N), minimum), rounded *up* to
  the percent, capped at 50 %: the band the gate would use, so the baselines file and
  the gate agree on what "too slow" is when the history is short.

Every proposed reference points at a provenance record that names the runs, their
dates, pipelines and commits. Series with too few runs keep their current reference.
Nothing is written unless the caller asks: the default product is a unified diff
against baselines/<system>.yaml, and the proposal always round-trips through
:func:`mpiregress.baselines.parse` before it is shown.
"""
from __future__ import annotations

import difflib
import math
import statistics
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any, Optional

import yaml

from . import baselines as baselines_mod
from .baselines import SCHEMA, Baselines
from .errors import InputError
from .gate import GateConfig, relative_noise
from .history import History, RunPoint, SeriesKey, series_name
from .names import METRICS

MAX_TOLERANCE = 0.5


@dataclass
class Proposal:
    """A proposed baselines file for one system and how it differs from the current one."""

    system: str
    path: Path                      # the current baselines file (may not exist)
    text: str                       # the proposed file
    diff: str                       # unified diff current -> proposed ("" when identical)
    changed: list[str] = field(default_factory=list)   # one line per new or changed reference
    kept: list[str] = field(default_factory=list)      # series left as they are, and why


def _round_value(value: float) -> float:
    return float(f"{value:.4g}")


def _tolerance(runs: list[RunPoint], config: GateConfig, metric: str) -> float:
    medians = [r.median for r in runs]
    recent = medians[-config.last_runs:]
    noise = relative_noise(medians, metric, config)
    band = max(config.z * noise * math.sqrt(1 + math.pi / (2 * len(recent))), config.min_effect[metric])
    return min(math.ceil(band * 100 - 1e-9) / 100, MAX_TOLERANCE)


def _current_text(path: Path) -> str:
    try:
        return path.read_text()
    except FileNotFoundError:
        return ""


def propose(history: History, system: str, current: Optional[Baselines], path: Path, toolchain: Optional[str] = None,
            config: GateConfig = GateConfig(), today: Optional[date] = None, source: str = "") -> Proposal:
    """Propose baselines for ``system`` from ``history``; ``current`` is the file at ``path`` (or None)."""
    toolchain = toolchain or (current.toolchain if current else None)
    if not toolchain:
        raise InputError(f"no baselines file at {path} says which toolchain {system} uses: pass --toolchain")
    today = today or date.today()
    name = f"history-{today.isoformat()}"
    provenance: dict[str, dict[str, Any]] = {k: dict(v) for k, v in (current.provenance if current else {}).items()}
    references: dict[str, Any] = {}
    if current:
        for (partition, method, placement, metric), ref in current.references.items():
            references.setdefault(partition, {}).setdefault(method, {}).setdefault(placement, {})[metric] = {
                "value": ref.value, "tolerance": ref.tolerance, "unit": ref.unit, "provenance": ref.provenance}
    used: list[RunPoint] = []
    changed, kept = [], []
    keys = [k for k in history.series_keys() if k[0] == system]
    for key in keys:
        _, partition, method, placement, metric = key
        runs = history.series_runs(key, toolchain=toolchain, last=max(config.last_runs, config.noise_runs))
        if len(runs) < config.min_runs:
            kept.append(f"{series_name(key)}: {len(runs)} accepted {toolchain} run(s), fewer than {config.min_runs}")
            continue
        value = _round_value(statistics.median(r.median for r in runs[-config.last_runs:]))
        tolerance = _tolerance(runs, config, metric)
        old = current.lookup(partition, method, placement, metric) if current else None
        if old and old.value == value and old.tolerance == tolerance:
            continue
        used.extend(runs[-config.last_runs:])
        references.setdefault(partition, {}).setdefault(method, {}).setdefault(placement, {})[metric] = {
            "value": value, "tolerance": tolerance, "unit": METRICS[metric].unit, "provenance": name}
        was = f"{old.value:.4g} ±{old.tolerance:.0%}" if old else "none"
        changed.append(f"{series_name(key)}: {was} -> {value:.4g} {METRICS[metric].unit} ±{tolerance:.0%}")
    if used:
        distinct = {r.run_id: r for r in used}
        times = sorted(r.time for r in distinct.values())
        provenance[name] = {
            "description": (f"median of the last {config.last_runs} accepted runs per series in the history"
                            f"{' ' + source if source else ''}; tolerance = max({config.z:g} x robust run-to-run "
                            f"noise, {min(config.min_effect.values()):.0%}), proposed by mpiregress baseline propose"),
            "runs": len(distinct),
            "collected": times[-1][:10],
            "first": times[0][:10],
            "pipelines": sorted({p for r in distinct.values() for p in r.pipeline.split(",") if p}),
            "commits": sorted({c for r in distinct.values() for c in r.commit.split(",") if c}),
        }
    # Provenance records nothing points at any more would fail review, not parse: drop them.
    pointed = {e["provenance"] for methods in references.values() for placements in methods.values()
               for metrics in placements.values() for e in metrics.values()}
    provenance = {k: v for k, v in provenance.items() if k in pointed}
    data = {"schema": SCHEMA, "system": system, "toolchain": toolchain, "provenance": provenance,
            "references": references}
    text = (f"# Baselines for {system}, proposed from the history on {today.isoformat()}.\n"
            f"# Review the diff; see mpiregress/baselines.py for the format.\n"
            + yaml.safe_dump(data, sort_keys=False, default_flow_style=None, width=120))
    baselines_mod.parse(yaml.safe_load(text), path)   # a proposal that would not load is a bug, not a file
    before = _current_text(path)
    diff = "".join(difflib.unified_diff(before.splitlines(keepends=True), text.splitlines(keepends=True),
                                        fromfile=str(path) if before else "/dev/null",
                                        tofile=f"{path} (proposed)"))
    return Proposal(system, path, text, diff, changed, kept)
