"""Baseline proposals from the history: new values and tolerances, as a diff ``git apply`` accepts.

For every accepted series of a system, of the baselines file's toolchain generation only:
* value = median of the last N run medians (the gate's own centre);
* tolerance = max(z x run-to-run noise x sqrt(1 + pi/2N), minimum), rounded *up* to
  the percent, capped at 50 %: the band the gate would use.

A proposal must be safe to accept, so a series is *held back* (keeps its reference, and
the proposal says why) when
* cross-method consistency flags it: its build is behind the best build of the same
  placement by more than the noise allows (the seed study's EESSI same-NUMA bandwidth);
  baking that into a baseline would make the anomaly the reference;
* the change-point scan (mpiregress.verdict.changepoint, the partition's series pooled) finds a
  change point that is not yet confirmed: fewer than N runs at the new level. A
  confirmed one splits the history: only the runs of the new level are used, never a
  mix of two levels;
* a newer toolchain generation has accepted runs of the series: a baselines file is one
  generation, and the old generation's values would judge nothing;
unless the caller passes ``accept_anomalies`` (then the evidence still names the anomaly).

Only series a baselines file judges are proposed: the gated point-to-point series, and any
series the file already has a reference for. The weekly families (size sweeps, the collective
sweep, links, noise) reach the history by the hundred and are judged by it alone; a note counts them.

The file is edited with a round-trip YAML library (ruamel.yaml): comments, key order,
quoting and flow style of baselines/*.yaml stay as they were; only the values that
change are rewritten. The diff names repository-relative paths (``a/baselines/x.yaml``)
so ``git apply`` takes it, and every changed or held-back series has its evidence as
data (:class:`Evidence`) for a merge request or an issue.
"""
from __future__ import annotations

import difflib
import io
import math
import statistics
from dataclasses import asdict, dataclass, field
from datetime import date
from pathlib import Path
from typing import Any, Optional

import yaml as pyyaml
from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.scalarstring import DoubleQuotedScalarString, FoldedScalarString

from mpiregress.errors import InputError
from mpiregress.history.store import History, RunPoint
from mpiregress.model import baselines as baselines_mod
from mpiregress.model.baselines import SCHEMA, Baselines
from mpiregress.model.names import METRICS
from mpiregress.model.names import format_value as fv
from mpiregress.model.series import SeriesKey
from mpiregress.verdict import changepoint
from mpiregress.verdict import cross_method as consistency
from mpiregress.verdict.history_gate import GateConfig, relative_noise, series_noise

MAX_TOLERANCE = 0.5


@dataclass
class Evidence:
    """What a proposal did with one series, and from what: the data a reviewer (or a merge request) needs."""

    series: str                          # SeriesKey.name()
    partition: str
    method: str
    label: str                           # the placement, or the benchmark and its parameters
    metric: str
    unit: str
    old: Optional[dict[str, Any]]        # {value, tolerance, provenance} of the current file, or None
    proposed: Optional[dict[str, Any]]   # {value, tolerance}, or None when held back
    runs: int                            # runs the proposed value was computed from (0 when held back)
    first_run: str = ""
    last_run: str = ""
    toolchain: str = ""
    held_back: str = ""                  # why it was not proposed ("" when proposed)
    anomalies: list[str] = field(default_factory=list)   # what was found, whether it held the series back or not
    newer_toolchain: str = ""            # a newer generation with accepted runs of the series, if any
    level_since: str = ""                # a confirmed change point: only the runs of the new level are used

    def line(self) -> str:
        """One line for people: ``series: old -> new`` or ``series: held back: why``."""
        was = f"{fv(self.old['value'])} ±{self.old['tolerance']:.0%}" if self.old else "none"
        if self.held_back:
            return f"{self.series}: held back ({was} kept): {self.held_back}"
        assert self.proposed is not None
        text = (f"{self.series}: {was} -> {fv(self.proposed['value'])} {self.unit} ±{self.proposed['tolerance']:.0%} "
                f"(median of {self.runs} {self.toolchain} run(s), {self.first_run} .. {self.last_run})")
        if self.level_since:
            text += f"; {self.level_since}"
        if self.anomalies:
            text += "; accepted anyway: " + "; ".join(self.anomalies)
        return text

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Proposal:
    """A proposed baselines file for one system and how it differs from the current one."""

    system: str
    path: Path                      # the current baselines file (may not exist)
    relpath: str                    # its path relative to the repository root, as the diff names it
    text: str                       # the proposed file
    diff: str                       # unified diff current -> proposed ("" when identical), git-apply-able
    evidence: list[Evidence] = field(default_factory=list)   # every series proposed or held back
    kept: list[str] = field(default_factory=list)      # series left as they are for lack of runs, and why
    notes: list[str] = field(default_factory=list)     # sentences about the whole proposal (e.g. newer toolchain)

    @property
    def changed(self) -> list[str]:
        return [e.line() for e in self.evidence if not e.held_back]

    @property
    def held_back(self) -> list[str]:
        return [e.line() for e in self.evidence if e.held_back]


def _round_value(value: float) -> float | int:
    rounded = float(f"{value:.4g}")
    return int(rounded) if rounded.is_integer() else rounded


def _tolerance(runs: list[RunPoint], config: GateConfig, metric: str) -> float:
    medians = [r.median for r in runs]
    recent = medians[-config.last_runs:]
    noise = relative_noise(medians, metric, config)
    band = max(config.z * noise * math.sqrt(1 + math.pi / (2 * len(recent))), config.min_effect[metric])
    return min(math.ceil(band * 100 - 1e-9) / 100, MAX_TOLERANCE)


def _yaml() -> YAML:
    yaml = YAML()            # round-trip mode: comments, order, quotes and flow style survive
    yaml.preserve_quotes = True
    yaml.width = 4096        # never re-wrap a long flow line (series entries); descriptions fold themselves
    yaml.indent(mapping=2, sequence=4, offset=2)
    return yaml


def repo_relative(path: Path) -> str:
    """``path`` relative to the root of the git work tree holding it (a ``.git`` file or folder),
    else relative to the current directory when inside it, else ``baselines/<name>``."""
    path = Path(path).absolute()
    for parent in path.parents:
        if (parent / ".git").exists():
            return path.relative_to(parent).as_posix()
    try:
        return path.relative_to(Path.cwd()).as_posix()
    except ValueError:
        return f"baselines/{path.name}"


def git_diff(before: str, after: str, relpath: str) -> str:
    """A unified diff of ``before`` -> ``after`` that ``git apply`` (and ``patch -p1``) accept."""
    if before == after:
        return ""
    old_lines, new_lines = before.splitlines(keepends=True), after.splitlines(keepends=True)
    body = list(difflib.unified_diff(old_lines, new_lines, fromfile=f"a/{relpath}" if before else "/dev/null",
                                     tofile=f"b/{relpath}", n=3))
    # difflib leaves a last line without its newline glued to the next one: git needs the marker.
    lines = []
    for line in body:
        if not line.endswith("\n"):
            line += "\n\\ No newline at end of file\n"
        lines.append(line)
    header = f"diff --git a/{relpath} b/{relpath}\n" + ("new file mode 100644\n" if not before else "")
    return header + "".join(lines)


def _entry(value: Any, tolerance: float, unit: str, provenance: str) -> CommentedMap:
    entry = CommentedMap([("value", value), ("tolerance", tolerance), ("unit", unit), ("provenance", provenance)])
    entry.fa.set_flow_style()
    return entry


def _flow_list(values: list) -> CommentedSeq:
    seq = CommentedSeq(values)
    seq.fa.set_flow_style()
    return seq


def _folded(text: str, width: int = 86) -> FoldedScalarString:
    """``text`` as a folded block scalar (``>-``), lines of about ``width``: how the hand-written files keep
    a long description readable (and no line ends in a space, which git would flag)."""
    folded = FoldedScalarString(text)
    positions, start, last = [], 0, None
    for i, char in enumerate(text):
        if char == " ":
            if i - start > width and last is not None:
                positions.append(last)
                start = last + 1
            last = i
    folded.fold_pos = positions
    return folded


def _anomalies(history: History, system: str, toolchain: str, config: GateConfig
               ) -> tuple[dict[SeriesKey, list[RunPoint]], dict[SeriesKey, list[str]], dict[SeriesKey, str]]:
    """Per series of ``system``: the runs to propose from, what holds it back, and what was found anyway.

    Returns (runs, blockers, confirmed) where ``runs`` are the accepted runs of ``toolchain`` (of
    the current level only, after a confirmed change point), ``blockers`` the sentences that hold
    a series back, and ``confirmed`` the sentence of a confirmed change point whose new level is used.
    """
    keys = [k for k in history.series_keys() if k.system == system]
    window = max(config.last_runs, config.noise_runs)
    full = {key: history.series_runs(key, toolchain=toolchain) for key in keys}
    changes = changepoint.scan_runs(full)
    runs: dict[SeriesKey, list[RunPoint]] = {}
    blockers: dict[SeriesKey, list[str]] = {}
    confirmed: dict[SeriesKey, str] = {}
    for key, series in full.items():
        start = 0
        for cp in changes.get(key, []):
            after = len(series) - cp.index
            if after < config.last_runs:
                blockers.setdefault(key, []).append(
                    f"unconfirmed change point: {abs(cp.change):.1%} {'worse' if cp.worse else 'better'} from run "
                    f"{cp.run_after.run_id} (commit {cp.commits}), only {after} run(s) at the new level "
                    f"(a proposal needs {config.last_runs})")
            else:
                start = cp.index
                confirmed[key] = (f"new level since run {cp.run_after.run_id} ({abs(cp.change):.1%} "
                                  f"{'worse' if cp.worse else 'better'}, commit {cp.commits}): only its runs are used")
        runs[key] = series[start:][-window:]
    # Cross-method consistency on the values the proposal would write.
    values: dict[tuple, dict[str, float]] = {}
    noise: dict[SeriesKey, float] = {}
    for key, series in runs.items():
        if len(series) >= config.min_runs:
            values.setdefault(key.without(), {})[key.method] = statistics.median(
                r.median for r in series[-config.last_runs:])
            measured = series_noise(series)
            if measured is not None:
                noise[key] = measured
    for finding in consistency.check(values, noise):
        key = SeriesKey(finding.system, finding.partition, finding.method, finding.benchmark, finding.parameters,
                        finding.metric)
        blockers.setdefault(key, []).append(f"cross-method: {finding.sentence()}")
    return runs, blockers, confirmed


def _newer_toolchain(history: History, key: SeriesKey, toolchain: str) -> str:
    """The newest toolchain generation of ``key``'s accepted history when it is not ``toolchain``, with its
    run count, e.g. ``2024a (9 run(s) since 2025-11-03)``; else ''."""
    generations = history.toolchains(key)
    if not generations or generations[-1] == toolchain:
        return ""
    return _generation_text(history, key, generations[-1])


def _generation_text(history: History, key: SeriesKey, generation: str) -> str:
    runs = history.series_runs(key, toolchain=generation)
    since = runs[0].time[:10] if runs else "?"
    return f"{generation} ({len(runs)} run(s) since {since})"


def propose(history: History, system: str, current: Optional[Baselines], path: Path, toolchain: Optional[str] = None,
            config: GateConfig = GateConfig(), today: Optional[date] = None, source: str = "",
            accept_anomalies: bool = False, relpath: Optional[str] = None) -> Proposal:
    """Propose baselines for ``system`` from ``history``; ``current`` is the file at ``path`` (or None)."""
    toolchain = toolchain or (current.toolchain if current else None)
    if not toolchain:
        raise InputError(f"no baselines file at {path} says which toolchain {system} uses: pass --toolchain")
    relpath = relpath or repo_relative(path)
    today = today or date.today()
    name = f"history-{today.isoformat()}"
    yaml = _yaml()
    before = path.read_text() if path.exists() else ""
    if before.strip():
        data = yaml.load(before)
    else:
        data = CommentedMap([("schema", SCHEMA), ("system", system), ("toolchain", DoubleQuotedScalarString(toolchain)),
                             ("provenance", CommentedMap()), ("references", CommentedMap())])
        data.yaml_set_start_comment(f"Baselines for {system}: reference values as data "
                                    f"(see mpiregress/model/baselines.py for the format).")
    switching = current is not None and current.toolchain != toolchain

    runs, blockers, confirmed = _anomalies(history, system, toolchain, config)
    evidence: list[Evidence] = []
    kept: list[str] = []
    notes: list[str] = []
    used: dict[str, RunPoint] = {}
    newer: dict[str, int] = {}
    proposed_keys: set[SeriesKey] = set()
    history_only = 0
    for key in sorted(runs):
        series = runs[key]
        metric, unit = key.metric, METRICS[key.metric].unit
        old = current.lookup(key) if current else None
        if old is None and key.pt2pt_placement() is None:
            # The weekly families (size sweeps, collective sweep, link matrix, noise) are judged by the history
            # alone: a proposal would add hundreds of references nobody asked for. A series gets a first
            # reference here only if it is a gated point-to-point one; any other keeps the reference a person
            # wrote for it, updated.
            history_only += 1
            continue
        later = _newer_toolchain(history, key, toolchain)
        if later:
            newer[later.split()[0]] = newer.get(later.split()[0], 0) + 1
        if len(series) < config.min_runs:
            kept.append(f"{key.name()}: {len(series)} accepted {toolchain} run(s), fewer than {config.min_runs}")
            continue
        recent = series[-config.last_runs:]
        value = _round_value(statistics.median(r.median for r in recent))
        tolerance = _tolerance(series, config, metric)
        found = blockers.get(key, []) + ([f"newer toolchain {later}: a baselines file is one generation; "
                                          f"propose with --toolchain {later.split()[0]}"] if later else [])
        old_dict = {"value": old.value, "tolerance": old.tolerance, "provenance": old.provenance} if old else None
        ev = Evidence(series=key.name(), partition=key.partition, method=key.method, label=key.label(), metric=metric,
                      unit=unit, old=old_dict, proposed=None, runs=0, toolchain=toolchain,
                      anomalies=list(found), newer_toolchain=later, level_since=confirmed.get(key, ""))
        if found and not accept_anomalies:
            ev.held_back = "; ".join(found)
            evidence.append(ev)
            continue
        if old and old.value == value and old.tolerance == tolerance:
            continue
        ev.proposed = {"value": value, "tolerance": tolerance}
        ev.runs, ev.first_run, ev.last_run = len(recent), recent[0].run_id, recent[-1].run_id
        evidence.append(ev)
        used.update({r.run_id: r for r in recent})
        proposed_keys.add(key)
        _set(data, key, _entry(value, tolerance, unit, name))

    if switching:
        assert current is not None
        left = [k.name() for k in current.keys() if k not in proposed_keys]
        if left:
            raise InputError(
                f"{path} is toolchain {current.toolchain}; a proposal for {toolchain} would leave {len(left)} "
                f"reference(s) of {current.toolchain} in a {toolchain} file (e.g. {left[0]}): generations are not "
                f"mixed; wait until every series has {config.min_runs} accepted {toolchain} runs, or start a new "
                f"file for {toolchain}")
        data["toolchain"] = toolchain
    if history_only:
        notes.append(f"{history_only} series of {system} in the history have no reference in this file and are not "
                     f"gated point-to-point series (size sweeps, the collective sweep, links, noise): the history "
                     f"judges them, no reference is proposed")
    for generation, count in sorted(newer.items()):
        notes.append(f"toolchain {generation} has accepted runs of {count} series of {system} newer than this "
                     f"file's {toolchain}: propose for it with --toolchain {generation}")
    if used:
        counts = sorted({e.runs for e in evidence if e.proposed})
        times = sorted(r.time for r in used.values())
        per_series = f"{counts[0]}" if len(counts) == 1 else f"{counts[0]} to {counts[-1]}"
        floors = sorted({config.min_effect[e.metric] for e in evidence if e.proposed})
        floor = f"{floors[0]:.0%}" if len(floors) == 1 else f"{floors[0]:.0%} to {floors[-1]:.0%} by metric"
        at_most = f" (at most {config.last_runs})" if counts[0] < config.last_runs else ""
        description = (f"median of the last {per_series} accepted {toolchain} run(s) per series{at_most} in the "
                       f"history{' ' + source if source else ''}; tolerance = max({config.z:g} x robust run-to-run "
                       f"noise, {floor}), proposed by mpiregress baseline propose"
                       f"{' with --accept-anomalies' if accept_anomalies else ''}")
        record = CommentedMap([
            ("description", _folded(description)),
            ("runs", len(used)),
            ("collected", date.fromisoformat(times[-1][:10])),
            ("first", date.fromisoformat(times[0][:10])),
            ("toolchain", DoubleQuotedScalarString(toolchain)),
            ("pipelines", _flow_list(sorted({p for r in used.values() for p in r.pipeline.split(",") if p}))),
            ("commits", _flow_list(sorted({c for r in used.values() for c in r.commit.split(",") if c}))),
        ])
        data["provenance"][name] = record
    _drop_unreferenced(data)
    out = io.StringIO()
    yaml.dump(data, out)
    text = out.getvalue()
    baselines_mod.parse(pyyaml.safe_load(text), path)   # a proposal that would not load is a bug, not a file
    return Proposal(system, path, relpath, text, git_diff(before, text, relpath), evidence, kept, notes)


def _set(data: CommentedMap, key: SeriesKey, entry: CommentedMap) -> None:
    """Put ``entry`` as the reference of ``key``, in place (an existing entry keeps its position)."""
    placement = key.pt2pt_placement()
    if placement is not None:
        refs = data.setdefault("references", CommentedMap())
        node = refs
        for part in (key.partition, key.method, placement):
            if part not in node or node[part] is None:
                node[part] = CommentedMap()
            node = node[part]
        if key.metric in node and isinstance(node[key.metric], dict):
            for field_name in ("value", "tolerance", "unit", "provenance"):
                node[key.metric][field_name] = entry[field_name]
        else:
            node[key.metric] = entry
        return
    series = data.setdefault("series", CommentedSeq())
    for item in series:
        if (item.get("partition"), item.get("method"), item.get("benchmark"), item.get("metric")) == (
                key.partition, key.method, key.benchmark, key.metric) and \
                tuple(dict(item.get("parameters", {})).items()) == tuple(key.parameters):
            for field_name in ("value", "tolerance", "unit", "provenance"):
                item[field_name] = entry[field_name]
            return
    params = CommentedMap(key.parameters)
    params.fa.set_flow_style()
    item = CommentedMap([("partition", key.partition), ("method", key.method), ("benchmark", key.benchmark),
                         ("parameters", params), ("metric", key.metric), *entry.items()])
    item.fa.set_flow_style()
    series.append(item)


def _drop_unreferenced(data: CommentedMap) -> None:
    """Provenance records nothing points at any more would fail review, not parse: drop them."""
    pointed = set()
    for methods in (data.get("references") or {}).values():
        for placements in (methods or {}).values():
            for metrics in (placements or {}).values():
                for entry in (metrics or {}).values():
                    pointed.add(entry.get("provenance"))
    pointed |= {item.get("provenance") for item in data.get("series") or []}
    provenance = data.get("provenance")
    if provenance:
        for record in [k for k in provenance if k not in pointed]:
            del provenance[record]
