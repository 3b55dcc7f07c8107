"""The A/B section of the MR report: rows for JUnit and HTML, and a Markdown/HTML fragment.

:func:`rows` turns paired verdicts and their causes into flat rows (series,
effect %, interval, verdict, cause sentence), the one shape every writer reads;
:func:`markdown` and :func:`html` render the section with Jinja2 (autoescaped for
HTML: reasons are data, never markup). The main report embeds the fragment.
"""
from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass
from typing import Any, Mapping, Optional, Sequence

import jinja2

from mpiregress.report.template import TEMPLATE
from mpiregress.verdict import compose
from mpiregress.verdict.ab.paired import PAIRED_VERDICTS, PairedConfig, PairedVerdict, SeriesId

ICONS = {"regression": "❌", "error": "⛔", "inconclusive": "〰️", "noisy": "〰️", "improvement": "⬆️",
         "skip": "⏭️", "pass": "✅"}
ORDER = {name: i for i, name in enumerate((*PAIRED_VERDICTS, "noisy", "skip"))}


@dataclass(frozen=True)
class Row:
    """One series of the A/B section."""

    series: str
    key: SeriesId
    verdict: str
    basis: str                      # paired | history | baseline | none
    effect: Optional[float]         # hurting-side ratio - 1 (B/A latency, A/B bandwidth), positive = B worse
    low: Optional[float]
    high: Optional[float]
    p_adjusted: Optional[float]
    pairs: int
    dropped: int
    looks: int
    a_value: Optional[float]
    b_value: Optional[float]
    unit: str
    cause: str                      # one sentence when the series fails, else ""
    reason: str

    @property
    def effect_text(self) -> str:
        return "—" if self.effect is None else f"{self.effect:+.1%}"

    @property
    def pairs_text(self) -> str:
        """Pairs used, with the looks when the series got extra rounds: "7 (2 looks)"."""
        return f"{self.pairs} ({self.looks} looks)" if self.looks > 1 else str(self.pairs)

    @property
    def interval_text(self) -> str:
        if self.low is None or self.high is None:
            return "—"
        return f"{self.low:+.1%} … {self.high:+.1%}"

    @property
    def junit_message(self) -> str:
        """The sentence a JUnit failure/error carries: cause first when there is one."""
        return f"{self.cause} ({self.reason})" if self.cause else self.reason


def rows(verdicts: Sequence[PairedVerdict], causes: Optional[Mapping[SeriesId, str]] = None) -> list[Row]:
    """Rows for the report: gating verdicts first, then by series name."""
    causes = causes or {}
    out = [Row(series=v.name(), key=v.key, verdict=v.verdict, basis=v.basis, effect=v.effect, low=v.low,
               high=v.high, p_adjusted=v.p_adjusted, pairs=v.pairs, dropped=v.dropped, looks=v.looks, a_value=v.a_value,
               b_value=v.b_value, unit=v.unit, cause=causes.get(v.key, ""), reason=v.reason) for v in verdicts]
    return sorted(out, key=lambda r: (ORDER.get(r.verdict, 99), r.series))


def junit_cases(section_rows: Sequence[Row]) -> list[dict[str, Any]]:
    """JUnit testcase data (classname, name, outcome, message): regression=failure, error=error, rest pass."""
    cases = []
    for r in section_rows:
        outcome = {"regression": "failure", "error": "error", "skip": "skipped"}.get(r.verdict, "pass")
        system_partition, _, rest = r.series.partition(" ")
        cases.append({"classname": f"ab.{system_partition.replace('/', '.')}", "name": rest.replace(" ", "."),
                      "outcome": outcome, "message": r.junit_message})
    return cases


_MARKDOWN = """\
### A/B on the same nodes: {{ icons.get(status, "") }} {{ status }} (exit {{ code }})

B is this MR's build, A the target branch's, run alternately (A B B A …) in one allocation on the same nodes; \
effect = Hodges–Lehmann estimate over the pairs of the ratio B/A (latency) or A/B (bandwidth) − 1, \
+ = worse, never below −100 %, with its {{ "%.0f"|format(config.interval * 100) }} % interval; a series still \
inconclusive beyond the minimum effect gets more pairs (looks); a series fails when it is worse than \
{{ "%.0f"|format(min_effect * 100) }} % at {{ "%.0f"|format(config.alpha * 100) }} % family-wise error over \
the looks (Holm over {{ paired_count }} series).

| verdict | series | effect | interval | pairs | cause / why |
|---|---|---|---|---|---|
{% for r in rows %}| {{ icons.get(r.verdict, "") }} {{ r.verdict }}{% if r.basis in ("history", "baseline") %} ({{ r.basis }}){% endif %} \
| {{ r.series }} | {{ r.effect_text }} | {{ r.interval_text }} | {{ r.pairs_text }}{% if r.dropped %} (−{{ r.dropped }}){% endif %} \
| {{ (r.cause or r.reason)|replace("|", "\\\\|") }} |
{% endfor %}"""

_HTML = """\
<section class="ab">
<h2>A/B on the same nodes <span class="status s-{{ status }}">{{ status }}</span></h2>
<p class="meta">B is this MR's build, A the target branch's, run alternately (A B B A …) in one allocation on the
same nodes. Effect: Hodges–Lehmann estimate over the pairs of the ratio B/A (latency) or A/B (bandwidth) − 1
(+ = worse, never below −100 %), with its {{ "%.0f"|format(config.interval * 100) }} % interval. A series still
inconclusive beyond the minimum effect gets more pairs (looks). A series fails when it is worse than
{{ "%.0f"|format(min_effect * 100) }} % at {{ "%.0f"|format(config.alpha * 100) }} % family-wise error over the
looks (Holm over {{ paired_count }} series). Series with no A are judged by the history gate and say so.</p>
<table><tr><th>verdict</th><th>series</th><th>A (median)</th><th>B (median)</th><th>effect (+ worse)</th>
<th>interval</th><th>pairs</th><th>cause</th><th>why</th></tr>
{% for r in rows %}<tr class="v-{{ r.verdict }}"><td>{{ r.verdict }}{% if r.basis in ("history", "baseline") %} ({{ r.basis }}){% endif %}</td>
<td>{{ r.series }}</td><td class="num">{{ "—" if r.a_value is none else "%.4g"|format(r.a_value) }}</td>
<td class="num">{{ "—" if r.b_value is none else "%.4g"|format(r.b_value) }} {{ r.unit }}</td>
<td class="num">{{ r.effect_text }}</td><td class="num">{{ r.interval_text }}</td>
<td class="num">{{ r.pairs_text }}{% if r.dropped %} ({{ r.dropped }} dropped){% endif %}</td>
<td>{{ r.cause }}</td><td>{{ r.reason }}</td></tr>
{% endfor %}</table>
</section>
"""


def _context(section_rows: Sequence[Row], verdicts: Sequence[PairedVerdict], config: PairedConfig) -> dict:
    code = compose.exit_code_of_paired(verdicts)
    return dict(rows=section_rows, icons=ICONS, config=config, code=code,
                status={0: "pass", 1: "regression"}.get(code, "error"),
                min_effect=max(config.min_effect.values()),
                paired_count=sum(v.basis == "paired" and v.p_value is not None for v in verdicts))


def markdown(verdicts: Sequence[PairedVerdict], causes: Optional[Mapping[SeriesId, str]] = None,
             config: PairedConfig = PairedConfig()) -> str:
    """The MR note's A/B section as Markdown."""
    env = jinja2.Environment(autoescape=False, undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    return env.from_string(_MARKDOWN).render(**_context(rows(verdicts, causes), verdicts, config))


def html(verdicts: Sequence[PairedVerdict], causes: Optional[Mapping[SeriesId, str]] = None,
         config: PairedConfig = PairedConfig()) -> str:
    """The HTML report's A/B section (a fragment, styled by the report's stylesheet)."""
    env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True,
                             lstrip_blocks=True)
    return env.from_string(_HTML).render(**_context(rows(verdicts, causes), verdicts, config))


def junit_xml(section_rows: Sequence[Row], suite: str = "mpiregress-ab") -> str:
    """The A/B section as a JUnit document (GitLab's MR test widget): one testcase per series."""

    cases = junit_cases(section_rows)
    counts = {o: sum(c["outcome"] == o for c in cases) for o in ("failure", "error", "skipped")}
    root = ET.Element("testsuites", name=suite, tests=str(len(cases)), failures=str(counts["failure"]),
                      errors=str(counts["error"]))
    tests = ET.SubElement(root, "testsuite", name=suite, tests=str(len(cases)), failures=str(counts["failure"]),
                          errors=str(counts["error"]), skipped=str(counts["skipped"]))
    for row, case in zip(section_rows, cases, strict=True):
        element = ET.SubElement(tests, "testcase", classname=case["classname"], name=case["name"], time="0")
        if case["outcome"] in ("failure", "error"):
            ET.SubElement(element, case["outcome"], type=row.verdict, message=case["message"]).text = case["message"]
        elif case["outcome"] == "skipped":
            ET.SubElement(element, "skipped", message=case["message"])
        ET.SubElement(element, "system-out").text = (f"{row.verdict}: effect {row.effect_text}, interval "
                                                     f"{row.interval_text}, {row.pairs} pairs, {row.looks or 1} "
                                                     f"look(s): {row.reason}")
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def html_page(fragment: str, title: str, notes: Sequence[str] = ()) -> str:
    """A self-contained HTML page around the A/B section, styled like the main report (its stylesheet)."""

    style = TEMPLATE[TEMPLATE.index("<style>"):TEMPLATE.index("</style>") + len("</style>")]
    env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined)
    return env.from_string(
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n<title>{{ title }}</title>\n'
        '{{ style|safe }}\n</head>\n<body>\n<h1>{{ title }}</h1>\n'
        '{% for note in notes %}<p class="note">{{ note }}</p>\n{% endfor %}{{ fragment|safe }}</body>\n</html>\n'
    ).render(title=title, style=style, notes=list(notes), fragment=fragment)
