"""The Jinja2 template of the HTML report.

Kept as a Python string, not a ``.j2`` file, so it ships with the package without
package-data configuration. Everything is inline: styles, and figures as data URIs.
"""

TEMPLATE = r"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>MPI performance report: {{ data.status }}</title>
<style>
 body { font-family: -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif; margin: 24px auto; max-width: 1320px; color: #222; }
 h1 { margin-bottom: 4px; } h2 { border-bottom: 2px solid #ddd; padding-bottom: 4px; margin-top: 36px; }
 .meta { color: #555; font-size: 0.9em; }
 .status { display: inline-block; padding: 4px 14px; border-radius: 4px; color: white; font-weight: bold; }
 .s-pass { background: #2e7d32; } .s-regression { background: #c62828; } .s-error { background: #6a1b9a; }
 .s-needs-a-look { background: #ef6c00; } .s-infrastructure { background: #455a64; } .s-not-available { background: #757575; }
 .chips span { display: inline-block; margin: 4px 6px 4px 0; padding: 3px 10px; border-radius: 12px; font-size: 0.9em; }
 .v-regression { background: #ffcdd2; } .v-error { background: #e1bee7; } .v-noisy { background: #fff9c4; }
 .v-improvement { background: #b2ebf2; } .v-skip { background: #eeeeee; } .v-pass { background: #c8e6c9; }
 table { border-collapse: collapse; width: 100%; font-size: 0.86em; margin: 8px 0 16px; }
 th, td { border: 1px solid #ddd; padding: 4px 6px; text-align: left; vertical-align: top; }
 th { background: #f5f5f5; } td.num { text-align: right; white-space: nowrap; font-variant-numeric: tabular-nums; }
 img { max-width: 100%; display: block; margin: 8px 0 20px; }
 .note { background: #fff8e1; border-left: 4px solid #ffb300; padding: 8px 12px; margin: 8px 0; }
 .empty { color: #666; font-style: italic; }
 ul.findings li { margin-bottom: 4px; }
 details summary { cursor: pointer; font-weight: bold; margin: 8px 0; }
</style>
</head>
<body>
<h1>MPI performance report <span class="status s-{{ data.status|replace(" ", "-") }}">{{ data.status }}</span></h1>
<p class="headline"><b>{{ headline }}</b></p>
<div class="meta">
 Generated {{ data.generated }} ·
 event {{ pv.event|replace("_", " ") }} (gating: {{ pv.gating|join(", ")|replace("_", " ") }}) ·
 results {{ data.results_source or "—" }} (commit {{ data.commits()|join(", ") or "—" }}, pipeline {{ data.pipelines()|join(", ") or "—" }}) ·
 history {{ data.history_source or "none" }} ({{ data.history_runs }} accepted runs)
</div>
{% for note in data.notes %}<div class="note">{{ note }}</div>{% endfor %}

<h2>What changed this week</h2>
<ul>{% for line in this_week %}<li>{{ line }}</li>{% endfor %}</ul>

<h2>Verdict</h2>
{% for state, title in [("regression", "Regressions (gating)"), ("error", "Errors"), ("infrastructure", "Infrastructure"), ("needs a look", "Needs a look (does not gate)")] %}
{% set found = pv.of(state) %}{% if found %}<h3>{{ title }} ({{ found|length }})</h3>
<table><tr><th>series</th><th>judge</th><th>effect [interval]</th><th>what was seen</th><th>likely cause</th></tr>
{% for f in found %}<tr class="v-{{ 'regression' if state == 'regression' else 'error' if state in ('error', 'infrastructure') else 'noisy' }}"><td>{{ f.subject }}</td><td>{{ f.judge }}</td>
<td class="num">{{ "—" if f.effect is none else "%+.1f%%"|format(f.effect * 100) }}{% if f.low is not none and f.high is not none %} [{{ "%+.1f%%"|format(f.low * 100) }}, {{ "%+.1f%%"|format(f.high * 100) }}]{% endif %}</td>
<td>{{ f.sentence }}</td><td>{{ f.cause or "—" }}</td></tr>{% endfor %}</table>{% endif %}
{% endfor %}
{% if pv.state == "pass" %}<p class="empty">Every series the gating judges looked at passed, and nothing else needs a look.</p>{% endif %}
{% set evidence = pv.of("evidence") %}{% if evidence %}<details><summary>Evidence that did not gate ({{ evidence|length }})</summary>
<ul class="findings">{% for f in evidence %}<li>{{ f.judge }}: {{ f.subject }}: {{ f.sentence }}</li>{% endfor %}</ul></details>{% endif %}
{% if pv.power %}<details class="power"><summary>{{ power_summary }}</summary>
<table><tr><th>series</th><th>judge</th><th>could have seen</th><th>target</th><th>from</th></tr>
{% for key, p in pv.power|dictsort %}<tr{% if p.short %} class="v-noisy"{% endif %}><td>{{ key.name() }}</td><td>{{ p.judge }}</td><td class="num">{{ "none" if p.blind else "≥ " ~ p.amount() }}</td><td class="num">{{ "—" if p.target is none else p.amount(p.target) }}</td><td>{{ p.how }}</td></tr>{% endfor %}</table></details>{% endif %}

<h2>History gate, per series</h2>
<div class="chips">
{% for name, n in data.counts.items() if n %}<span class="v-{{ name }}">{{ n }} {{ name }}</span>{% endfor %}
</div>
{% set attention = data.verdicts|rejectattr("verdict", "in", ["pass", "skip"])|list %}
{% if attention %}
{{ verdict_table(attention) }}
{% else %}<p class="empty">Every series passed the history gate (or was skipped with a reason).</p>{% endif %}
{% if data.causes %}<h3>Likely cause</h3>
<p class="meta">From what this run and the history measured: the nodes each series ran on, the run's noise probes, the latest link matrix and the other build methods on the same placement.</p>
<ul class="findings">{% for v in data.verdicts if data.cause(v) %}<li>{{ data.cause(v) }}</li>{% endfor %}</ul>{% endif %}

<h2>Builds that disagree (cross-method consistency)</h2>
<p class="meta">All builds use one toolchain, so on the same placement they should agree within run-to-run noise.</p>
{% if data.findings %}<ul class="findings">{% for f in data.findings %}<li>{{ f.sentence() }}</li>{% endfor %}</ul>
{% if cross_power %}<p class="meta">Power: {{ cross_power }}</p>{% endif %}
{% else %}<p class="empty">{{ agreement }}</p>{% endif %}

<h2>Baselines to revisit</h2>
<p class="meta">A band that admits values 25 % or more worse than the best build achieves on the same placement cannot catch a regression; a band no build meets is stale. <code>mpiregress baseline propose</code> writes values from the history.</p>
{% if data.baseline_findings %}<ul class="findings">{% for f in data.baseline_findings %}<li>{{ f.sentence() }}</li>{% endfor %}</ul>
{% else %}<p class="empty">No baseline band is far looser than what the best build achieves, and none is out of every build's reach.</p>{% endif %}

<h2>Change points in the history</h2>
{% if changes %}
<table><tr><th>series</th><th>from run</th><th>date</th><th>before</th><th>after</th><th>change</th><th>commits</th><th>toolchain</th></tr>
{% for cp in changes %}<tr class="{{ 'v-regression' if cp.worse else 'v-improvement' }}">
<td>{{ cp.key.name() }}</td><td>{{ cp.run_after.run_id }}</td><td>{{ cp.run_after.time[:10] }}</td>
<td class="num">{{ cp.before|fv }}</td><td class="num">{{ cp.after|fv }}</td>
<td class="num">{{ "%+.1f%%"|format(cp.change * 100) }}</td><td>{{ cp.commits }}</td>
<td>{{ cp.run_before.toolchain ~ " → " ~ cp.run_after.toolchain if cp.toolchain_changed else cp.run_after.toolchain }}</td></tr>
{% endfor %}</table>
{% elif data.trends %}<p class="empty">No lasting shift in any series ({{ changepoint_method }}, on log run medians).</p>
{% else %}<p class="empty">No history, so no change-point scan.</p>{% endif %}

<h2>This run: placement × build method</h2>
{% for fig in bar_figures %}<h3>{{ fig.title }}</h3><img alt="{{ fig.title }}" src="data:image/png;base64,{{ fig.png }}">{% else %}<p class="empty">No point-to-point check in this run.</p>{% endfor %}

<h2>Latency and bandwidth vs message size</h2>
{% if sweep_figures %}
{% for fig in sweep_figures %}<img alt="{{ fig.title }}" src="data:image/png;base64,{{ fig.png }}">{% endfor %}
{% elif not bar_figures %}<p class="empty">No point-to-point check in this run.</p>
{% else %}<p class="note">No message-size sweep in these results: only {{ sizes }} were measured, so there is no curve to draw. Run the checks with a size sweep to see one.</p>{% endif %}

{% if coll %}
<h2>Collectives: default vs the best coll/tuned algorithm</h2>
<p class="meta">Each point (collective, distribution, nodes, processes, message size) was measured with OpenMPI's default decision and with every coll/tuned algorithm forced. The default is flagged where it is slower than the best forced algorithm by more than the noise (max(10 %, the two spreads)). {{ coll.cells|length }} points{% if coll_note %}; {{ coll_note }}{% endif %}.</p>
{% if coll.findings %}<ul class="findings">{% for f in coll.findings[:30] %}<li>{{ f }}</li>{% endfor %}</ul>{% if coll.findings|length > 30 %}<p class="meta">… and {{ coll.findings|length - 30 }} more in default_vs_best.json.</p>{% endif %}
{% else %}<p class="empty">At every point the default is within the noise of the best forced algorithm.</p>{% endif %}
{% for name, png in coll_figures %}<h3>{{ name }}</h3><img alt="{{ name }}" src="data:image/png;base64,{{ png }}">{% endfor %}
{% for dist, text in coll.rules.items() %}<details><summary>coll/tuned dynamic rules file, {{ dist }} (deployable: {{ rules_name(dist) }} beside this report)</summary><pre>{{ text }}</pre></details>{% endfor %}
{% endif %}

{{ link_matrix }}
{{ noise_section }}

<h2>Trends</h2>
{% if trend_figures or quiet_figure %}
{% if trend_figures %}
<p class="meta">In full, the series that need a look this week (moved, failed, noisy, or named by a finding), with the other build methods on the same placement. Each point is the median of one accepted run; shaded: the baselines band per method; dashed verticals: change points (red worse, green better) with the commit; star: this run; dash-dotted: the limit this run was judged against (the history gate's, over the runs that made its level, or the baseline's when history was too short).</p>
{% for fig in trend_figures %}<h3>{{ fig.title }}</h3><img alt="{{ fig.title }}" src="data:image/png;base64,{{ fig.png }}">{% endfor %}
{% else %}<p class="empty">No series needs a look this week: every trend is quiet.</p>{% endif %}
{% if quiet_figure %}<h3>Quiet series</h3>
<p class="meta">Every other series, small: within its band this run, no new level in its last runs, no finding. Older change points are in the table above.</p>
<img alt="{{ quiet_figure.title }}" src="data:image/png;base64,{{ quiet_figure.png }}">{% endif %}
{% else %}<p class="empty">No accepted history yet: nothing to trend.</p>{% endif %}

<h2>All series</h2>
<details><summary>{{ data.verdicts|length }} series</summary>
{{ verdict_table(data.verdicts) }}
</details>

<h2>How verdicts are made</h2>
<p>Each series (system, partition, method, benchmark, parameters, metric) is judged on the median of its k ≥ {{ data.config.min_samples }} new samples against the median of the last {{ data.config.last_runs }} accepted (scheduled or merged) runs. The band is max({{ data.config.z }} × the robust run-to-run noise (MAD of consecutive run medians, last {{ data.config.noise_runs }} runs), 3 %), one-sided: only the hurting side fails (<b>regression</b>); beyond the band on the good side is an <b>improvement</b>, meaning the history or baseline is stale. A series whose band would exceed {{ "%.0f%%"|format(data.config.max_band * 100) }}, or whose new samples scatter far more than its history, is <b>noisy</b>; so is a regression measured on a node whose noise probe (FWQ in the benchmark's job) is below that node's usual band. With fewer than {{ data.config.min_runs }} accepted runs the baselines file's band is used, and the verdict says so. Only regression and error fail the pipeline.</p>
</body>
</html>
"""

VERDICT_TABLE = r"""<table><tr><th>verdict</th><th>system/partition</th><th>method</th><th>series</th><th>metric</th><th>new (median)</th><th>k</th><th>reference</th><th>change (+ worse)</th><th>band</th><th>basis</th><th>why</th></tr>
{% for v in verdicts %}<tr class="v-{{ v.verdict }}"><td>{{ v.verdict }}</td><td>{{ v.key.system }}/{{ v.key.partition }}</td><td>{{ v.key.method }}</td><td>{{ v.key.benchmark }} {{ v.key.parameters|map("join", "=")|join(" ") }}</td><td>{{ v.key.metric }}</td>
<td class="num">{{ "—" if v.value is none else (v.value|fv) ~ " " ~ v.unit }}</td><td class="num">{{ v.samples }}</td>
<td class="num">{{ "—" if v.reference is none else v.reference|fv }}</td>
<td class="num">{{ "—" if v.effect is none else "%+.1f%%"|format(v.effect * 100) }}</td>
<td class="num">{{ "—" if v.band is none else "%.1f%%"|format(v.band * 100) }}</td><td>{{ v.basis }} ({{ v.history_runs }} runs)</td><td>{{ v.reason }}</td></tr>
{% endfor %}</table>"""
