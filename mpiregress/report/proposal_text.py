"""A baseline proposal as a reviewer reads it: the Markdown description of its merge request.

Renders a :class:`~mpiregress.verdict.propose.Proposal` and decides nothing: per series the value proposed
(against the current one), the runs it was computed from, the toolchain generation, and every series
held back with the reason; then the series kept for lack of runs and the notes about the whole file.
"""
from __future__ import annotations

from typing import Any, Optional

from mpiregress.model.names import format_value as fv
from mpiregress.verdict.propose import Evidence, Proposal

MARKER = "<!-- mpiregress:proposal:{system} -->"


def _cell(text: str) -> str:
    """``text`` safe inside a Markdown table cell (a '|' would end the cell, a newline the row)."""
    return " ".join(str(text).split()).replace("|", "\\|")


def _reference(ref: Optional[dict[str, Any]], unit: str) -> str:
    if not ref:
        return "none"
    return f"{fv(ref['value'])} {unit} ±{ref['tolerance']:.0%}"


def _change(ev: Evidence) -> str:
    """'-3.2 %' from the current value to the proposed one ('new' without a current value)."""
    if not ev.old or not ev.proposed or not ev.old["value"]:
        return "new"
    return f"{(ev.proposed['value'] - ev.old['value']) / ev.old['value']:+.1%}"


def _runs(ev: Evidence) -> str:
    span = ev.first_run if ev.first_run == ev.last_run else f"{ev.first_run} .. {ev.last_run}"
    return f"{ev.runs} ({span})"


def _proposed_note(ev: Evidence) -> str:
    parts = []
    if ev.level_since:
        parts.append(ev.level_since)
    if ev.anomalies:
        parts.append("accepted anyway (--accept-anomalies): " + "; ".join(ev.anomalies))
    return "; ".join(parts) or "—"


def render(proposal: Proposal, source: str = "", pipeline_url: str = "", accept_anomalies: bool = False) -> str:
    """The merge request description of ``proposal``: a marker, a summary, then the evidence per series.

    ``source`` names the history the values come from, ``pipeline_url`` the pipeline that computed them.
    """
    proposed = [e for e in proposal.evidence if e.proposed and not e.held_back]
    held = [e for e in proposal.evidence if e.held_back]
    lines = [MARKER.format(system=proposal.system),
             f"## Baseline proposal: {proposal.system} (`{proposal.relpath}`)", ""]
    origin = f" from the history `{source}`" if source else ""
    by = f" in [this pipeline]({pipeline_url})" if pipeline_url else ""
    lines.append(f"Computed by `mpiregress baseline propose`{origin}{by}"
                 f"{' with `--accept-anomalies`' if accept_anomalies else ''}: "
                 f"**{len(proposed)}** series proposed, **{len(held)}** held back, "
                 f"{len(proposal.kept)} kept for lack of runs. Each value is the median of the series' last "
                 f"accepted runs of one toolchain generation; the tolerance is the band the history gate would "
                 f"use. The diff applies with `git apply`; comments and order of the file are kept.")
    lines.append("")
    lines += [f"### Proposed ({len(proposed)})", ""]
    if proposed:
        lines += ["| series | current | proposed | change | runs used | toolchain | note |",
                  "| --- | --- | --- | --- | --- | --- | --- |"]
        for ev in proposed:
            lines.append("| " + " | ".join(_cell(c) for c in (
                ev.series, _reference(ev.old, ev.unit), _reference(ev.proposed, ev.unit), _change(ev), _runs(ev),
                ev.toolchain, _proposed_note(ev))) + " |")
    else:
        lines.append("No series changes.")
    lines.append("")
    lines += [f"### Held back ({len(held)})", ""]
    if held:
        lines += ["A held-back series keeps its current reference: proposing it would make an anomaly the "
                  "reference. `mpiregress baseline propose --accept-anomalies` proposes it anyway.", "",
                  "| series | current (kept) | toolchain | why |", "| --- | --- | --- | --- |"]
        for ev in held:
            lines.append("| " + " | ".join(_cell(c) for c in (
                ev.series, _reference(ev.old, ev.unit), ev.toolchain, ev.held_back)) + " |")
    else:
        lines.append("None.")
    if proposal.kept:
        lines += ["", f"### Kept for lack of runs ({len(proposal.kept)})", ""]
        lines += [f"- {_cell(k)}" for k in proposal.kept]
    if proposal.notes:
        lines += ["", "### Notes", ""]
        lines += [f"- {_cell(n)}" for n in proposal.notes]
    return "\n".join(lines) + "\n"
