"""The Markdown summary posted on the MR: what needs a look first, the full table folded."""
from __future__ import annotations

from pathlib import Path

from mpiregress.model.names import format_value as fv
from mpiregress.report import ReportData, this_week, verdict_text

ICONS = {"regression": "❌", "error": "⛔", "noisy": "〰️", "improvement": "⬆️", "skip": "⏭️", "pass": "✅"}


def _value(v) -> str:
    return "—" if v.value is None else f"{fv(v.value)} {v.unit}"


def _ref(v) -> str:
    return "—" if v.reference is None else f"{fv(v.reference)} ({v.basis})"


def _pct(x) -> str:
    return "—" if x is None else f"{x:+.1%}"


def _row(v) -> str:
    reason = v.reason.replace("|", "\\|")
    return (f"| {ICONS[v.verdict]} {v.verdict} | {v.name()} | {_value(v)} | {_ref(v)} | {_pct(v.effect)} | "
            f"{'—' if v.band is None else f'{v.band:.1%}'} | {reason} |")


HEADER = ("| verdict | series | new (median) | reference | change (+ = worse) | band | why |\n"
          "|---|---|---|---|---|---|---|")


def render(data: ReportData) -> str:
    """The MR summary as Markdown text."""
    counts = data.counts
    lines = [verdict_text.markdown(data.pipeline_verdict, ungated=data.ungated).rstrip("\n"), ""]
    lines.append("History gate, per series: " + " · ".join(f"{ICONS[k]} {n} {k}" for k, n in counts.items() if n))
    lines.append("")
    if data.commits() or data.pipelines():
        lines.append(f"Commit {', '.join(data.commits()) or '—'}, pipeline {', '.join(data.pipelines()) or '—'}; "
                     f"history: {data.history_runs} accepted runs.")
        lines.append("")
    lines.extend(f"> {note}" for note in data.notes)
    lines += ["### What changed this week", "", *(f"- {s}" for s in this_week.sentences(data)), ""]
    attention = [v for v in data.verdicts if v.verdict not in ("pass", "skip")]
    if attention:
        lines += ["### History gate: series that did not pass", "", HEADER, *(_row(v) for v in attention), ""]
    if data.causes:
        lines += ["### Likely cause", ""]
        lines += [f"- {data.cause(v)}" for v in data.verdicts if data.cause(v)] + [""]
    if data.findings:
        lines += ["### Builds that disagree (cross-method)", ""]
        lines += [f"- {f.sentence()}" for f in data.findings] + [""]
    if data.baseline_findings:
        lines += ["### Baselines to revisit", ""]
        lines += [f"- {f.sentence()}" for f in data.baseline_findings] + [""]
    recent = [cp for points in data.changes.values() for cp in points]
    if recent:
        lines += ["### Change points in the history", ""]
        lines += [f"- {cp.sentence()}" for cp in sorted(recent, key=lambda c: c.run_after.time, reverse=True)[:20]]
        lines.append("")
    lines += ["<details><summary>All series</summary>", "", HEADER, *(_row(v) for v in data.verdicts), "",
              "</details>", ""]
    c = data.config
    lines.append(f"_Gate: median of k≥{c.min_samples} new samples vs the median of the last {c.last_runs} accepted "
                 f"runs; band = max({c.z:g} robust σ of run-to-run noise, 3 %), one-sided; fewer than "
                 f"{c.min_runs} runs → the baselines file's band._")
    return "\n".join(lines) + "\n"


def write(data: ReportData, path: Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render(data))
    return path
