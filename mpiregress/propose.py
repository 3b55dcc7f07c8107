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
from .history import History, RunPoint
from .names import METRICS
from .series import SeriesKey
from .verdict.history_gate import GateConfig, relative_noise

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


def _scalar(value: Any) -> str:
    """One YAML scalar as the baselines files write it (integral floats as integers)."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    text = yaml.safe_dump(value, default_flow_style=True, width=10_000).strip()
    return text[:-4].strip() if text.endswith("\n...") else text


def _flow(mapping: dict) -> str:
    items = (f"{k}: {_list(v) if isinstance(v, list) else _flow(v) if isinstance(v, dict) else _scalar(v)}"
             for k, v in mapping.items())
    return "{" + ", ".join(items) + "}"


def _list(values: list) -> str:
    return "[" + ", ".join(_scalar(v) for v in values) + "]"


def _folded(text: str, indent: str, width: int = 100) -> list[str]:
    """A long description as a folded block scalar, the way the hand-written files keep it readable."""
    lines, line = [], ""
    for word in text.split():
        if line and len(indent) + len(line) + 1 + len(word) > width:
            lines.append(indent + line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    return lines + [indent + line]


@dataclass
class Layout:
    """What a hand-written file carries besides data: its header, provenance text, comments."""

    header: str = ""
    provenance: dict[str, list[str]] = field(default_factory=dict)   # record name -> its original lines
    comments: dict[tuple, str] = field(default_factory=dict)         # key path -> trailing "  # ..." comment


def layout_of(text: str) -> Layout:
    """Read the layout of a baselines file written in the documented shape (2-space indents)."""
    layout = Layout()
    lines = text.splitlines()
    header = []
    for line in lines:
        if not line.startswith("#"):
            break
        header.append(line)
    layout.header = "\n".join(header)
    section, record = None, None
    path: list[str] = []
    for line in lines[len(header):]:
        stripped = line.lstrip(" ")
        if not stripped or stripped.startswith("#"):
            continue
        depth = (len(line) - len(stripped)) // 2
        key, _, rest = stripped.partition(":")
        if depth == 0:
            section, record = key, None
            continue
        if section == "provenance":
            if depth == 1:
                record = key
                layout.provenance[record] = []
            if record is not None:
                layout.provenance[record].append(line)
        elif section == "references":
            path = path[:depth - 1] + [key]
            if "  #" in rest:
                layout.comments[tuple(path)] = "  #" + rest.split("  #", 1)[1]
    return layout


def emit(data: dict, layout: Optional[Layout] = None, changed: frozenset = frozenset()) -> str:
    """The baselines layout of mpiregress/baselines.py: block structure, one flow mapping per reference.

    Written by hand rather than by yaml.safe_dump so a proposal diffs line by line
    against the hand-written file: its header, the text of provenance records it
    keeps and the comments on entries the proposal does not change stay as they were.
    ``changed`` holds the (partition, method, placement, metric) keys the proposal sets.
    """
    layout = layout or Layout()
    out = [layout.header] if layout.header else []
    out += [f"schema: {data['schema']}", f"system: {data['system']}", f'toolchain: "{data["toolchain"]}"',
            "provenance:" + (" {}" if not data["provenance"] else "")]
    for name, record in data["provenance"].items():
        if name in layout.provenance:
            out += layout.provenance[name]
            continue
        out.append(f"  {name}:")
        for key, value in record.items():
            if key == "description" and len(str(value)) > 70:
                out += [f"    {key}: >-", *_folded(str(value), "      ")]
            elif isinstance(value, list):
                out.append(f"    {key}: {_list(value)}")
            else:
                out.append(f"    {key}: {_scalar(value)}")
    out.append("references:" + (" {}" if not data["references"] else ""))
    notes = layout.comments
    for partition, methods in data["references"].items():
        out.append(f"  {partition}:{notes.get((partition,), '')}")
        for method, placements in methods.items():
            out.append(f"    {method}:{notes.get((partition, method), '')}")
            for placement, metrics in placements.items():
                # A comment on a placement describes its values: it goes when they change.
                touched = any((partition, method, placement, m) in changed for m in metrics)
                note = "" if touched else notes.get((partition, method, placement), "")
                out.append(f"      {placement}:{note}")
                for metric, entry in metrics.items():
                    key = (partition, method, placement, metric)
                    note = "" if key in changed else notes.get(key, "")
                    out.append(f"        {metric}: {_flow(entry)}{note}")
    if data.get("series"):
        out.append("series:")
        out += [f"  - {_flow(entry)}" for entry in data["series"]]
    return "\n".join(out) + "\n"




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
    series: dict[SeriesKey, dict[str, Any]] = {}

    def put(key: SeriesKey, entry: dict[str, Any]) -> None:
        placement = key.pt2pt_placement()
        if placement is not None:
            references.setdefault(key.partition, {}).setdefault(key.method, {}).setdefault(
                placement, {})[key.metric] = entry
        else:
            series[key] = {"partition": key.partition, "method": key.method, "benchmark": key.benchmark,
                           "parameters": dict(key.parameters), "metric": key.metric, **entry}

    if current:
        for key in current.keys():
            ref = current.lookup(key)
            assert ref is not None
            put(key, {"value": ref.value, "tolerance": ref.tolerance, "unit": ref.unit, "provenance": ref.provenance})
    used: list[RunPoint] = []
    changed, kept = [], []
    set_keys: set[tuple] = set()
    keys = [k for k in history.series_keys() if k.system == system]
    for key in keys:
        metric = key.metric
        runs = history.series_runs(key, toolchain=toolchain, last=max(config.last_runs, config.noise_runs))
        if len(runs) < config.min_runs:
            kept.append(f"{key.name()}: {len(runs)} accepted {toolchain} run(s), fewer than {config.min_runs}")
            continue
        value = _round_value(statistics.median(r.median for r in runs[-config.last_runs:]))
        tolerance = _tolerance(runs, config, metric)
        old = current.lookup(key) if current else None
        if old and old.value == value and old.tolerance == tolerance:
            continue
        used.extend(runs[-config.last_runs:])
        set_keys.add((key.partition, key.method, key.placement, metric))
        put(key, {"value": value, "tolerance": tolerance, "unit": METRICS[metric].unit, "provenance": name})
        was = f"{old.value:.4g} ±{old.tolerance:.0%}" if old else "none"
        changed.append(f"{key.name()}: {was} -> {value:.4g} {METRICS[metric].unit} ±{tolerance:.0%}")
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
    pointed |= {e["provenance"] for e in series.values()}
    provenance = {k: v for k, v in provenance.items() if k in pointed}
    data = {"schema": SCHEMA, "system": system, "toolchain": toolchain, "provenance": provenance,
            "references": references, "series": [series[k] for k in sorted(series)]}
    before = _current_text(path)
    layout = layout_of(before)
    layout.header = layout.header or (f"# Baselines for {system}: reference values as data "
                                      f"(see mpiregress/baselines.py for the format).")
    text = emit(data, layout, frozenset(set_keys))
    baselines_mod.parse(yaml.safe_load(text), path)   # a proposal that would not load is a bug, not a file
    diff = "".join(difflib.unified_diff(before.splitlines(keepends=True), text.splitlines(keepends=True),
                                        fromfile=str(path) if before else "/dev/null",
                                        tofile=f"{path} (proposed)"))
    return Proposal(system, path, text, diff, changed, kept)
