"""The report's "Node noise" section: the placement experiments, their recommendation, findings,
spectra and the kernel's view (the FWQ check's results), and the probe in every benchmark's job.
"""
from __future__ import annotations

import base64
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import jinja2
from markupsafe import Markup

from mpiregress.families.noise import findings, probe, records
from mpiregress.model.results import Result
from mpiregress.verdict.noise import MIN_BAND

LABELS = {"all_cores": "all cores", "one_free_per_socket": "one core per socket left free",
          "smt": "SMT siblings left free"}
ADVICE = {"one_free_per_socket": "leave one core per socket free", "smt": "leave the SMT siblings free"}


@dataclass
class Partition:
    """One partition's placement experiments."""

    name: str
    efficiency: dict[str, float] = field(default_factory=dict)      # layout -> mean over nodes
    nodes: dict[str, dict[str, float]] = field(default_factory=dict)  # layout -> node -> efficiency
    skipped: dict[str, dict[str, str]] = field(default_factory=dict)  # layout -> method -> why
    cores: dict[str, dict[str, list[str]]] = field(default_factory=dict)  # layout -> node -> "core 0: lost ..."
    priority: dict[str, str] = field(default_factory=dict)           # layout -> how FWQ was scheduled
    findings: dict[str, list[str]] = field(default_factory=dict)
    rtla: dict[str, str] = field(default_factory=dict)
    spectra: dict[str, str] = field(default_factory=dict)            # layout -> base64 PNG
    problems: list[str] = field(default_factory=list)
    single_rank: set[str] = field(default_factory=set)               # layouts of one rank a node: efficiency 1

    @property
    def recommendation(self) -> str:
        said = recommendation({k: v for k, v in self.efficiency.items() if k not in self.single_rank})
        for layout in sorted(self.single_rank):
            said += (f" ({LABELS.get(layout, layout)} leaves one rank a node here, whose efficiency is 1 by "
                     f"definition: not compared)")
        return said

    def skip_lines(self) -> list[tuple[str, str]]:
        """(layout, what to say) for each layout no method measured (its own reasons), and for a measured
        layout the methods that did not measure it: a method's skip never hides another's measurement."""
        out = []
        for layout, why in self.skipped.items():
            said = "; ".join(f"{reason} ({method})" for method, reason in sorted(why.items()))
            out.append((layout, f"skipped: {said}" if layout not in self.nodes else f"also asked of "
                        f"{', '.join(sorted(why))}, not measured there: {said}"))
        return out


def recommendation(efficiency: Mapping[str, float]) -> str:
    """The sentence an admin acts on, from the mean node efficiency of each layout measured."""
    base = efficiency.get("all_cores")
    if base is None:
        return "no all-cores run to compare with: no recommendation"
    better = {k: v for k, v in efficiency.items() if k in ADVICE}
    if not better:
        return f"all cores: efficiency {base:.2f}; no other layout could run here to compare"
    layout, best = max(better.items(), key=lambda item: item[1])
    if best - base >= MIN_BAND:
        return f"{ADVICE[layout]}: efficiency {base:.2f} → {best:.2f}"
    return (f"use all cores: {LABELS[layout]} gains {best - base:+.3f} in efficiency ({base:.2f} → {best:.2f}), "
            f"less than {MIN_BAND:.2f}")


def _png(path: Path) -> str:
    try:
        return base64.b64encode(path.read_bytes()).decode("ascii")
    except OSError:
        return ""


def _measured_methods(results: Sequence[Result]) -> dict[str, set[str]]:
    """Per system/partition, the build methods whose FWQ runs measured an efficiency there."""
    out: dict[str, set[str]] = {}
    for r in results:
        if r.benchmark == records.BENCHMARK and r.metric == "efficiency" and r.value is not None:
            out.setdefault(f"{r.system}/{r.partition}", set()).add(r.method)
    return out


def experiments(results: Sequence[Result], base: Path = Path(".")) -> list[Partition]:
    """The FWQ check's results, per system/partition; ``base``: the run's report folder (artifacts are relative).

    Where two build methods measured one partition, each has its own experiments ("local/batch (easybuild)"):
    the layouts are compared within one build's runs, and one method's efficiency never sits beside another's
    findings (two at once on the local 2-core host saw 0.85 and 0.46). A method that measured nothing there says
    its skip reasons under each."""
    measured = _measured_methods(results)
    parts: dict[str, Partition] = {}
    for r in results:
        if r.benchmark != records.BENCHMARK:
            continue
        where = f"{r.system}/{r.partition}"
        here = measured.get(where, set())
        if len(here) <= 1:
            names = [where]
        elif r.method in here:
            names = [f"{where} ({r.method})"]
        else:               # a method that measured nothing here: its skips under each method's experiments
            names = [f"{where} ({m})" for m in sorted(here)]
        for name in names:
            _add(parts.setdefault(name, Partition(name)), r, base)
    for part in parts.values():
        part.efficiency = {layout: statistics.mean(nodes.values()) for layout, nodes in part.nodes.items()}
    return [parts[k] for k in sorted(parts)]


def _add(part: Partition, r: Result, base: Path) -> None:
    """One FWQ result into its partition's experiments."""
    layout = str(r.parameters.get("layout"))
    if r.status == "skip":
        part.skipped.setdefault(layout, {})[r.method] = r.reason
    elif r.status == "error":
        part.problems.append(f"{LABELS.get(layout, layout)} ({r.method}): {r.reason}")
    # Measured is shown, judged or not (a run without a baseline for it still measured it); of repeats, the last
    # run's efficiency, cores, findings and spectrum, all of one run (each node's record carries its run's).
    if r.metric == "efficiency" and r.value is not None:
        node = str(r.parameters.get("node"))
        part.nodes.setdefault(layout, {})[node] = r.value
        c = r.conditions
        if len(c.get("cores") or ()) == 1:
            part.single_rank.add(layout)
        if c.get("priority") or layout not in part.priority:
            part.priority[layout] = str(c.get("priority") or "not recorded")
        detail = ((c.get("nodes") or {}).get(node) or {}).get("cores") or []
        part.cores.setdefault(layout, {})[node] = [
            f"core {k.get('cpu')}: {float(k.get('lost_fraction') or 0):.1%} lost"
            + (f", periods {', '.join(_period(k, i) for i in range(len(k['periods_hz'])))}"
               if k.get("periods_hz") else "")
            for k in detail]
        if c.get("findings") or layout not in part.findings:
            part.findings[layout] = list(c.get("findings") or [])
        if c.get("rtla"):
            part.rtla[layout] = str(c["rtla"])
        if c.get("artifacts"):
            part.spectra[layout] = _png(base / c["artifacts"] / "spectrum.png")


def probes(results: Sequence[Result]) -> tuple[dict[str, dict[str, float]], list[str]]:
    """Per node the worst probe efficiency and largest detour over the run's benchmarks, and why some were not."""
    nodes: dict[str, dict[str, float]] = {}
    why: set[str] = set()
    for r in results:
        if r.benchmark == records.BENCHMARK or "noise" not in r.conditions:
            continue
        if isinstance(r.conditions["noise"], str):
            why.add(r.conditions["noise"])
        for e in probe.probed(r.conditions):
            seen = nodes.setdefault(f"{r.system}/{r.partition} {e['node']}",
                                    {"efficiency": e["efficiency"], "max_detour_us": 0.0, "probes": 0})
            seen["efficiency"] = min(seen["efficiency"], e["efficiency"])
            seen["max_detour_us"] = max(seen["max_detour_us"], float(e.get("max_detour_us") or 0.0))
            seen["probes"] += int(e.get("probes") or 1)
    return nodes, sorted(why)


SECTION = r"""<h2>Node noise</h2>
{% if not parts and not probed and not unprobed %}<p class="empty">No FWQ measurement in these results (the noise family runs weekly; the probe runs in each benchmark's job).</p>{% endif %}
{% for part in parts %}
<h3>{{ part.name }}: placement experiments (FWQ, one rank per core, seed 004)</h3>
<p><b>Recommendation: {{ part.recommendation }}.</b></p>
<table><tr><th>layout</th><th>FWQ priority</th><th>efficiency (mean of nodes)</th><th>per node</th><th>per core</th></tr>
{% for layout, eff in part.efficiency.items() %}<tr><td>{{ labels.get(layout, layout) }}</td><td>{{ part.priority.get(layout, "") }}</td><td class="num">{{ "%.3f"|format(eff) }}</td><td>{% for n, v in part.nodes[layout].items() %}{{ n }} {{ "%.3f"|format(v) }}<br>{% endfor %}</td><td>{% for n, cores in part.cores.get(layout, {}).items() %}{{ n }}: {{ cores|join("; ") }}<br>{% endfor %}</td></tr>
{% endfor %}{% for layout, said in part.skip_lines() %}<tr><td>{{ labels.get(layout, layout) }}</td><td colspan="4">{{ said }}</td></tr>
{% endfor %}</table>
{% for p in part.problems %}<p class="note">{{ p }}</p>{% endfor %}
{% for layout, lines in part.findings.items() %}<h4>{{ labels.get(layout, layout) }}</h4>
<div style="display:flex;gap:1em;flex-wrap:wrap"><div style="flex:1;min-width:30em"><ul class="findings">{% for f in lines %}<li>{{ f }}</li>{% endfor %}</ul>
<p class="meta">{{ part.rtla.get(layout, "kernel cross-check (rtla osnoise): not recorded") }}</p></div>
{% if part.spectra.get(layout) %}<div><img alt="spectrum {{ layout }}" src="data:image/png;base64,{{ part.spectra[layout] }}"></div>{% endif %}</div>
{% endfor %}
{% endfor %}
{% if probed or unprobed %}<h3>Noise probe in each benchmark's job (right after it, on its nodes)</h3>
{% if probed %}<table><tr><th>node</th><th>worst efficiency</th><th>largest detour (us)</th><th>probes</th></tr>
{% for node, p in probed.items() %}<tr><td>{{ node }}</td><td class="num">{{ "%.3f"|format(p.efficiency) }}</td><td class="num">{{ "%.0f"|format(p.max_detour_us) }}</td><td class="num">{{ p.probes }}</td></tr>
{% endfor %}</table>{% endif %}
{% for w in unprobed %}<p class="note">{{ w }}</p>{% endfor %}
{% endif %}
"""


def render(results: Sequence[Result], base: Path = Path(".")) -> Markup:
    """The section's HTML (autoescaped: reasons and findings are data); ``base`` as for :func:`experiments`."""
    env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    probed, unprobed = probes(results)
    return Markup(env.from_string(SECTION).render(parts=experiments(results, base), probed=probed, unprobed=unprobed,
                                                   labels=LABELS))


def _period(core: dict, i: int) -> str:
    """'76.9 Hz (1 ms each)' of a core's i-th period, its size where the record has it (records.node_conditions)."""
    hz = f"{core['periods_hz'][i]:g} Hz"
    sizes = core.get("periods_detour_us") or []
    return f"{hz} ({findings.length(sizes[i])} each)" if i < len(sizes) and sizes[i] else hz
