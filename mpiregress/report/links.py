"""The HTML report's "Link matrix" block: what the link matrix check left in the run folder.

``mpiregress run --families links`` writes one folder per partition and build method under
``<run folder>/links/`` (mpiregress.families.links.judge.ARTIFACTS). This block shows each: the heatmap
with node labels and the histogram (embedded), the verdict sentences, the bad-links table and a
link to the full CSV. It reads those files only; it judges nothing.
"""
from __future__ import annotations

import base64
import csv
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import jinja2
from markupsafe import Markup

from mpiregress.families.links.analysis import ATTRIBUTIONS
from mpiregress.families.links.judge import ARTIFACTS

MAX_ROWS = 50   # the table shows the worst slow pairs; the CSV has them all
# Worst first: what an admin acts on (bad node, bad link) before what was normal on re-test.
ORDER = {name: i for i, name in enumerate(ATTRIBUTIONS)}


@dataclass
class LinkFolder:
    """One link matrix run as the report shows it."""

    name: str                      # <system>-<partition>-<method>
    heatmap: str                   # base64 PNG ("" when absent)
    histogram: str
    summary: list[str]
    rows: list[dict[str, str]]     # bad_links.csv rows, worst attribution first
    total_rows: int
    csv_href: str

    @property
    def verdict(self) -> str:
        return next((line for line in self.summary if line.startswith("verdict:")), "verdict: unknown")

    @property
    def bad(self) -> bool:
        return any(r["attribution"] in ("bad node", "bad link") for r in self.rows)


def _png(path: Path) -> str:
    return base64.b64encode(path.read_bytes()).decode("ascii") if path.is_file() else ""


def gather(run_folder: Path, base: Optional[Path] = None) -> list[LinkFolder]:
    """Every link matrix folder under ``run_folder/links/`` (none: an empty list).

    ``base``: where the page is written, so the CSV link is relative to it.
    """
    found = []
    for folder in sorted(p for p in (Path(run_folder) / "links").glob("*") if (p / "summary.txt").is_file()):
        rows: list[dict[str, str]] = []
        csv_path = folder / "bad_links.csv"
        if csv_path.is_file():
            with open(csv_path, newline="") as f:
                rows = list(csv.DictReader(f))
        rows.sort(key=lambda r: (ORDER.get(r.get("attribution", ""), len(ORDER)), -float(r.get("ratio_first") or 0)))
        href = os.path.relpath(csv_path, base) if base else str(csv_path)
        found.append(LinkFolder(name=folder.name, heatmap=_png(folder / "heatmap.png"),
                                histogram=_png(folder / "histogram.png"),
                                summary=(folder / "summary.txt").read_text(errors="replace").splitlines(),
                                rows=rows[:MAX_ROWS], total_rows=len(rows), csv_href=href))
    return found


SECTION = r"""<h2>Link matrix</h2>
<p class="meta">All node pairs measured by ping-pong (linktest), the slowest re-tested. A pair is slow when it is far worse than the typical pair of its kind (intra-node, same switch, inter-switch or inter-node) in the same run. <b>bad node</b>: a rank slow against most of its peers; <b>bad link</b>: one pair slow again on re-test while both ends are fine with everyone else; <b>transient</b>: normal on re-test. Artifacts of each run: {{ artifacts }}.</p>
{% for f in folders %}
<h3>{{ f.name }}: <span class="{{ 'v-regression' if f.bad else 'v-pass' }}">{{ f.verdict }}</span></h3>
<ul class="findings">{% for line in f.summary if not line.startswith("verdict:") %}<li>{{ line }}</li>{% endfor %}</ul>
{% if f.heatmap %}<img alt="{{ f.name }} heatmap" src="data:image/png;base64,{{ f.heatmap }}">{% endif %}
{% if f.histogram %}<img alt="{{ f.name }} histogram" src="data:image/png;base64,{{ f.histogram }}">{% endif %}
{% if f.rows %}
<table><tr><th>from</th><th>to</th><th>nodes</th><th>kind</th><th>metric</th><th>1st</th><th>2nd (re-test)</th><th>typical</th><th>× typical (1st, 2nd)</th><th>attribution</th></tr>
{% for r in f.rows %}<tr class="{{ 'v-regression' if r.attribution in ('bad node', 'bad link') else 'v-noisy' }}">
<td>rank {{ r.from_rank }}</td><td>rank {{ r.to_rank }}</td><td>{{ r.from_node }}–{{ r.to_node }}</td><td>{{ r.kind }}</td><td>{{ r.metric }}</td>
<td class="num">{{ r.first }} {{ r.unit }}</td><td class="num">{{ (r.second ~ " " ~ r.unit) if r.second else "not re-tested" }}</td>
<td class="num">{{ r.typical }} {{ r.unit }}</td><td class="num">{{ "%.1f"|format(r.ratio_first|float) }}×{% if r.ratio_second %}, {{ "%.1f"|format(r.ratio_second|float) }}×{% endif %}</td><td>{{ r.attribution }}</td></tr>
{% endfor %}</table>
{% if f.total_rows > f.rows|length %}<p class="meta">The {{ f.rows|length }} worst of {{ f.total_rows }} slow pair measurements.</p>{% endif %}
{% else %}<p class="empty">No pair was slow.</p>{% endif %}
<p class="meta">Every slow pair: <a href="{{ f.csv_href }}">bad_links.csv</a></p>
{% endfor %}
"""


def section(run_folder: Optional[Path], base: Optional[Path] = None) -> Markup:
    """The block's HTML, or nothing when the run folder holds no link matrix."""
    folders = gather(run_folder, base) if run_folder else []
    if not folders:
        return Markup("")
    env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True,
                             lstrip_blocks=True)
    return Markup(env.from_string(SECTION).render(folders=folders, artifacts=", ".join(ARTIFACTS)))
