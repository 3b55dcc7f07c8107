"""The pipeline verdict as people read it: the top line, the Markdown section and the JUnit test cases.

Renders a :class:`~mpiregress.verdict.compose.PipelineVerdict` and decides nothing: every surface
(summary.md of a run, the report's Markdown and HTML, JUnit, the MR note) takes its first line and its
findings from here, so they cannot say different things.
"""
from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Optional

from mpiregress.verdict.compose import EVIDENCE, Finding, PipelineVerdict, exit_code

ICONS = {"pass": "✅", "needs a look": "👀", "regression": "❌", "error": "⛔", "infrastructure": "🔌",
         "not available": "⏭️", EVIDENCE: "ℹ️"}
# Plural labels of the counts on the top line, in the order they are said.
_COUNTED = (("regression", "regression", "regressions"), ("error", "error", "errors"),
            ("infrastructure", "infrastructure fault", "infrastructure faults"),
            ("needs a look", "finding to look at", "findings to look at"))


def counts_phrase(v: PipelineVerdict) -> str:
    """'2 regressions, 5 findings to look at' (or 'no finding')."""
    n = v.counts()
    parts = [f"{n[s]} {one if n[s] == 1 else many}" for s, one, many in _COUNTED if n.get(s)]
    return ", ".join(parts) or "no finding"


def headline(v: PipelineVerdict, measure_only: bool = False, ungated: bool = False) -> str:
    """The first line of every surface: the state, the count of findings, the exit code.

    ``ungated``: the command that writes it exits 0 whatever the verdict (``mpiregress report`` without
    ``--gate``), so the line says that, and which code ``--gate`` would give: never a code not returned."""
    code = exit_code(v, measure_only)
    if measure_only and v.state in ("regression", "needs a look", "pass"):
        return (f"{ICONS['pass']} measured {v.measured} series ({counts_phrase(v)} by this job's own look; "
                f"the pipeline's verdict job judges) (exit {code})")
    said = f"exit 0 without --gate; {code} with --gate" if ungated and code != 0 else f"exit {code}"
    return f"{ICONS[v.state]} {v.state}: {counts_phrase(v)} ({said})"


def _fmt_effect(f: Finding) -> str:
    if f.effect is None:
        return "—"
    text = f"{f.effect:+.1%}"
    if f.low is not None and f.high is not None:
        text += f" [{f.low:+.1%}, {f.high:+.1%}]"
    return text


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def markdown(v: PipelineVerdict, heading: str = "##", measure_only: bool = False,
             report_link: Optional[str] = None, ungated: bool = False) -> str:
    """The verdict as Markdown: top line, what gates, what to look at, what was only evidence."""
    lines = [f"{heading} MPI performance: {headline(v, measure_only, ungated)}", ""]
    lines.append(f"Event: {v.event.replace('_', ' ')}; gating: {', '.join(g.replace('_', ' ') for g in v.gating)}; "
                 f"{v.measured} series measured.")
    if report_link:
        lines.append(f"[Full report]({report_link})")
    lines.append("")
    for state, title in (("regression", "Regressions (gating)"), ("error", "Errors"),
                         ("infrastructure", "Infrastructure"), ("needs a look", "Needs a look (does not gate)")):
        found = v.of(state)
        if not found:
            continue
        lines += [f"{heading}# {ICONS[state]} {title}", "",
                  "| series | judge | effect [interval] | what was seen | likely cause |", "|---|---|---|---|---|"]
        lines += [f"| {_cell(f.subject)} | {f.judge} | {_fmt_effect(f)} | {_cell(f.sentence)} | "
                  f"{_cell(f.cause) or '—'} |" for f in found]
        lines.append("")
    evidence = v.of(EVIDENCE)
    if evidence:
        lines += [f"<details><summary>Evidence that did not gate ({len(evidence)})</summary>", ""]
        lines += [f"- {f.judge}: {f.subject}: {f.sentence}" for f in evidence]
        lines += ["", "</details>", ""]
    lines += power_lines(v)
    return "\n".join(lines) + "\n"


def power_summary(v: PipelineVerdict) -> str:
    """'What the judges could have seen: 14 series, 2 short of their target; smallest 3.2 %, largest 14 %'."""
    if not v.power:
        return ""
    short = sum(p.short for p in v.power.values())
    by_scale: dict[str, list] = {}
    for p in v.power.values():
        by_scale.setdefault(p.scale, []).append(p)
    ranges = "; ".join(f"from {min(ps, key=lambda p: p.detectable).amount()} to "
                       f"{max(ps, key=lambda p: p.detectable).amount()}" for ps in by_scale.values())
    blind = sum(p.blind for p in v.power.values())
    return (f"What the judges could have seen: {len(v.power)} series, "
            f"{f'{short} short of their target' if short else 'every one at its target or without one'}; {ranges}"
            + (f" ({blind} too few pairs to show any effect)" if blind else ""))


def power_lines(v: PipelineVerdict) -> list[str]:
    """The per-series power of the gating judges, as Markdown (a folded list under a one-line summary)."""
    if not v.power:
        return []
    lines = [f"<details><summary>{power_summary(v)}</summary>", "",
             "| series | judge | could have seen | target | from |", "|---|---|---|---|---|"]
    for key, p in sorted(v.power.items(), key=lambda kp: (not kp[1].short, kp[0])):
        target = "—" if p.target is None else (f"❗ {p.amount(p.target)}" if p.short else p.amount(p.target))
        seen = "none" if p.blind else f">= {p.amount()}"
        lines.append(f"| {_cell(key.name())} | {p.judge} | {seen} | {target} | {_cell(p.how)} |")
    return lines + ["", "</details>", ""]


_WORST = ("error", "infrastructure", "regression", "needs a look")


def _case(suite: ET.Element, classname: str, name: str, found: list[Finding], said: str = "",
          power: str = "") -> None:
    """A test case whose status is the worst of ``found`` (a pass when nothing but evidence was found);
    ``said``, what the gating judge said of it, is its output when nothing was found; ``power``, what its
    judge could have seen, is its ``power`` property (a pass has no message of its own)."""
    case = ET.SubElement(suite, "testcase", classname=classname, name=name, time="0")
    if power:
        ET.SubElement(ET.SubElement(case, "properties"), "property", name="power", value=power)
    states = [f.state for f in found]
    worst = next((s for s in _WORST if s in states), None)
    text = "\n".join(f"{f.state} ({f.judge}): {f.sentence}" + (f"; likely cause: {f.cause}" if f.cause else "")
                     for f in found)
    message = next((f.sentence for f in found if f.state == worst), "")
    if worst == "regression":
        ET.SubElement(case, "failure", type="regression", message=message).text = text
    elif worst in ("error", "infrastructure"):
        ET.SubElement(case, "error", type=worst, message=message).text = text
    elif worst == "needs a look":
        ET.SubElement(case, "skipped", message=f"needs a look (does not gate): {message}")
    ET.SubElement(case, "system-out").text = text or said or "pass: nothing found"


def junit_suite(v: PipelineVerdict, ungated: bool = False) -> ET.Element:
    """The verdict as a test suite named by its top line: one case per series measured (the worst of its
    findings decides) and one per finding about no single series.

    A regression is a <failure>, an error or infrastructure fault an <error>; a finding to look at is
    <skipped> with "needs a look" in its message, so GitLab's widget lists it apart from both. A run
    that measured nothing has one case saying so, never an empty (green) suite.
    """
    suite = ET.Element("testsuite", name=f"mpiregress — {headline(v, ungated=ungated)}")
    if v.state == "not available":
        _case(suite, "mpiregress.verdict", "verdict",
              [Finding("needs a look", "verdict", "verdict", headline(v, ungated=ungated))])
    by_key: dict = {}
    for f in v.findings:
        if f.key is not None:
            by_key.setdefault(f.key, []).append(f)
    for key in sorted(set(v.series) | set(by_key)):
        power = v.power.get(key)
        _case(suite, f"{key.system}.{key.partition}.{key.method}", f"{key.label()}.{key.metric}",
              by_key.get(key, []), v.said.get(key, ""), f"{power.judge}: {power.sentence()}" if power else "")
    for f in v.findings:
        if f.key is None and f.state != EVIDENCE:
            _case(suite, f"mpiregress.{f.judge.replace(' ', '_')}",
                  f"{f.state}: {f.subject}" if f.state == "needs a look" else f.subject, [f])
    cases = suite.findall("testcase")
    suite.set("tests", str(len(cases)))
    suite.set("failures", str(sum(c.find("failure") is not None for c in cases)))
    suite.set("errors", str(sum(c.find("error") is not None for c in cases)))
    suite.set("skipped", str(sum(c.find("skipped") is not None for c in cases)))
    return suite


def junit_xml(v: PipelineVerdict, *extra: ET.Element, ungated: bool = False) -> str:
    """A JUnit document: the verdict's suite first, then ``extra`` suites (e.g. skipped checks)."""
    suites = [junit_suite(v, ungated), *extra]
    root = ET.Element("testsuites", name="mpiregress")
    for key in ("tests", "failures", "errors", "skipped"):
        root.set(key, str(sum(int(s.get(key, "0")) for s in suites)))
    root.extend(suites)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
