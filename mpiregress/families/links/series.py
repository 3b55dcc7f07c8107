"""Per-node and per-link summaries as result records (benchmark ``linktest``) for history and the gate."""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Optional

import numpy as np

from mpiregress.families.links.analysis import INTRA, KINDS, METRICS, LinkAnalysis, SlowPair
from mpiregress.model.names import METRICS as METRIC_NAMES
from mpiregress.model.results import Result, power_conditions

BENCHMARK = "linktest"


def series_records(analysis: LinkAnalysis, context: dict[str, Any], all_links: bool = False) -> list[dict[str, Any]]:
    """Result dicts: one per node and metric (median over its inter-node pairs, or over all its pairs on a
    one-node run) and one per node pair ``a--b`` that was slow, judged bad, or every pair when ``all_links``.

    ``context`` carries the run's fields (system, partition, method, toolchain, commit, pipeline, jobid,
    time, target); parameters are ordered most significant first. A bad node or link has status "fail".
    """
    records: list[dict[str, Any]] = []
    count = len(analysis.nodes)
    na, nb = analysis.rank_node[analysis.a], analysis.rank_node[analysis.b]
    inter = analysis.kind != INTRA
    bad_node = {(b.node, b.metric): b for b in analysis.bad_nodes}
    link_power, node_power = analysis.weakest_power()
    conditions = {"nranks": analysis.run.nranks, "nodes": len(analysis.nodes),
                  "mode": "serial" if analysis.run.serial else "parallel",
                  "small_size": analysis.run.small_size, "large_size": analysis.run.large_size,
                  "rounds": analysis.run.rounds,
                  "power_statement": power_statement(analysis), "power_link": round(link_power, 2),
                  "power_node": round(node_power, 2)}
    # What this run could have seen (links.analysis._power), in the shape of the verdict's per-series
    # power (verdict/power.py reads conditions["power"]): a node's series states the node bar, a link's the link bar.
    # No target in it: the link judge itself decides, once per run, whether the run fell short of the system's
    # targets after its extra rounds (short_of_target, one "needs a look" below), not every series again.
    node_conditions = {**conditions, "power": _power("link matrix (node)", node_power)}
    link_conditions = {**conditions, "power": _power("link matrix (link)", link_power)}
    short = analysis.short_of_target()
    short_node = _most_suspect(analysis) if short else None
    link_key = np.minimum(na, nb).astype(np.int64) * count + np.maximum(na, nb)   # int64: nodes² can pass 2³¹
    for metric, (unit, _) in METRICS.items():
        values = analysis.first[metric]
        finite = np.isfinite(values)
        # A node's value: the median over its inter-node pairs (all its pairs on a one-node run).
        chosen = finite & inter if (finite & inter).any() else finite
        node_values = _group_medians(np.concatenate([na[chosen], nb[chosen]]),
                                     np.concatenate([values[chosen], values[chosen]]))
        for i, node in enumerate(analysis.nodes):
            if i not in node_values:
                continue
            judged = bad_node.get((node, metric))
            record = _record(context, {"node": node}, metric, unit, node_values[i][0], [], [node],
                             judged.sentence() if judged else None, node_conditions)
            if short and (node, metric) == short_node:
                # The run's power fell short of its targets at its budget: "needs a look" (the verdict's
                # noisy path), on the series of the node that came nearest to being named.
                record["conditions"] = {**node_conditions, "verdict": "noisy"}
                record["reason"] = record["reason"] or f"needs a look: {short}"
            records.append(record)
        # Links of a bad node are the node's story (its own series); the other slow links get theirs.
        listed = analysis.slow_pairs({"bad link", "transient", "unconfirmed"})
        # ``listed`` is worst first: the first pair of a link is its worst, later ones must not replace it.
        bad: dict[tuple[str, str], list[SlowPair]] = {}
        for s in listed:
            if s.metric == metric and s.attribution == "bad link":
                bad.setdefault((s.node_a, s.node_b), []).append(s)
        wanted = _link_keys(analysis, link_key, {(s.node_a, s.node_b) for s in listed if s.metric == metric},
                            all_links)
        selected = np.isin(link_key, wanted) & finite
        link_values = _group_medians(link_key[selected], values[selected], keep_samples=64)
        for key in wanted:
            if int(key) not in link_values:
                continue
            i, j = divmod(int(key), count)
            a_name, b_name = analysis.nodes[i], analysis.nodes[j]
            judged_link = bad.get((a_name, b_name)) or bad.get((b_name, a_name))
            median, sample = link_values[int(key)]
            records.append(_record(context, {"link": f"{a_name}--{b_name}"}, metric, unit, median, sample,
                                   [a_name, b_name],
                                   link_sentence(analysis, metric, judged_link) if judged_link else None,
                                   link_conditions))
    return records


def link_sentence(analysis: LinkAnalysis, metric: str, slow: list[SlowPair]) -> str:
    """'bad link node1--node3 (worst pair ranks 1-6): bandwidth 2.9x typical, 2.7x on re-test; median of the
    link's 4 pairs 2.6x': the worst pair quoted, and the median of every pair of the link (slow or not)
    against the same typical pair."""
    worst = slow[0]
    ratios = link_ratios(analysis, metric, worst)
    return (f"bad link {worst.node_a}--{worst.node_b} (worst pair ranks {worst.rank_a}-{worst.rank_b}): {metric} "
            f"{worst.ratio_first:.1f}x typical, {worst.ratio_second or 0:.1f}x on re-test; median of the link's "
            f"{len(ratios)} pair{'s' if len(ratios) > 1 else ''} {float(np.median(ratios)):.1f}x")


def link_ratios(analysis: LinkAnalysis, metric: str, pair: SlowPair) -> np.ndarray:
    """How many times worse than ``pair``'s typical value each rank pair between its two nodes was."""
    na, nb = analysis.rank_node[analysis.a], analysis.rank_node[analysis.b]
    index = {name: i for i, name in enumerate(analysis.nodes)}
    x, y = index[pair.node_a], index[pair.node_b]
    mine = ((na == x) & (nb == y)) | ((na == y) & (nb == x))
    values = analysis.first[metric][mine]
    values = values[np.isfinite(values)]
    higher_better = METRICS[metric][1]
    ratios = pair.typical / values if higher_better else values / pair.typical
    return ratios if ratios.size else np.array([pair.ratio_first])


def power_statement(analysis: LinkAnalysis) -> str:
    """The run's power as one sentence: what it named or that it named nothing, and what it could have seen."""
    named = analysis.judged_bad
    return (("bad node(s) or link(s) named" if named else "no bad node and no bad link")
            + f" — {analysis.power_sentence()}")


def _power(judge: str, detectable: float) -> dict[str, Any]:
    return power_conditions(judge, round(float(detectable), 2), "factor",
                            "from this run's spread of the pairs between nodes")


def _most_suspect(analysis: LinkAnalysis) -> Optional[tuple[str, str]]:
    """(node, metric) of the node whose pairs between nodes were slowest against typical (the judged metric
    with the weakest power); the "needs a look" of a run short of its targets goes on its series."""
    metrics = [m for m in analysis.thresholds.metrics if m in analysis.power]
    if not metrics:
        return None
    metric = max(metrics, key=lambda m: analysis.power[m][1])
    values = analysis.first[metric]
    typical = {kind: analysis.typical[(metric, kind)][0] for (m, kind) in analysis.typical if m == metric}
    higher_better = METRICS[metric][1]
    worst, worst_ratio = analysis.nodes[0], -np.inf
    na, nb = analysis.rank_node[analysis.a], analysis.rank_node[analysis.b]
    between = analysis.kind != INTRA
    reference = np.array([typical.get(kind, np.nan) for kind in KINDS])[analysis.kind]
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = reference / values if higher_better else values / reference
    for i, node in enumerate(analysis.nodes):
        mine = between & ((na == i) | (nb == i)) & np.isfinite(ratio)
        if mine.any() and float(np.median(ratio[mine])) > worst_ratio:
            worst, worst_ratio = node, float(np.median(ratio[mine]))
    return worst, metric


def _group_medians(groups: np.ndarray, values: np.ndarray, keep_samples: int = 0
                   ) -> dict[int, tuple[float, list[float]]]:
    """Median (and up to ``keep_samples`` values) of ``values`` per group id: one sort, no loop over pairs."""
    if groups.size == 0:
        return {}
    order = np.lexsort((values, groups))
    groups, values = groups[order], values[order]
    starts = np.flatnonzero(np.r_[True, groups[1:] != groups[:-1]])
    ends = np.r_[starts[1:], groups.size]
    out = {}
    for start, end in zip(starts, ends):
        mid = (start + end - 1) / 2
        median = float((values[int(np.floor(mid))] + values[int(np.ceil(mid))]) / 2)
        out[int(groups[start])] = (median, [float(x) for x in values[start:end][:keep_samples]])
    return out


def _link_keys(analysis: LinkAnalysis, link_key: np.ndarray, wanted: set[tuple[str, str]],
               all_links: bool) -> np.ndarray:
    """Sorted link keys (low node index * nodes + high node index) of the links that get a series."""
    count = len(analysis.nodes)
    if all_links:
        keys = np.unique(link_key[link_key // count != link_key % count])
        return keys
    index = {n: i for i, n in enumerate(analysis.nodes)}
    pairs = {(min(index[x], index[y]), max(index[x], index[y])) for x, y in wanted if x != y}
    return np.array(sorted(i * count + j for i, j in pairs), dtype=np.int64)


def _record(context: dict[str, Any], parameters: dict[str, Any], metric: str, unit: str, value: float,
            samples: list[float], nodelist: list[str], failure: Optional[str], conditions: dict[str, Any]
            ) -> dict[str, Any]:
    record = {"system": context.get("system", ""), "partition": context.get("partition", ""),
              "method": context.get("method", ""), "benchmark": BENCHMARK, "parameters": parameters,
              "metric": metric, "unit": unit, "value": value, "samples": samples or [value],
              "status": "fail" if failure else "pass", "reason": failure or "", "nodelist": nodelist,
              "conditions": conditions}
    for key in ("target", "toolchain", "commit", "pipeline", "jobid", "time"):
        record[key] = context.get(key, "")
    return record


def series_results(analysis: LinkAnalysis, context: dict[str, Any], all_links: bool = False) -> list[Result]:
    """``series_records`` as the project's Result objects (history, gate and reports take these)."""
    results = []
    for record in series_records(analysis, context, all_links):
        assert record["unit"] == METRIC_NAMES[record["metric"]].unit  # one unit per metric, project-wide
        results.append(Result(**record))
    return results


def findings(series: Iterable[tuple[Mapping[str, Any], str]], measured: str = "") -> dict[str, Any]:
    """What a link run flagged, for attribution, from its linktest series as (parameters, status):
    ``{"bad_nodes": [node], "bad_links": [[a, b]], "measured": time}``. A failing node series is a
    bad node and a failing link series (``a--b``) a bad link; nothing else is read."""
    bad_nodes: set[str] = set()
    bad_links: set[tuple[str, str]] = set()
    for parameters, status in series:
        if status != "fail":
            continue
        if "node" in parameters:
            bad_nodes.add(str(parameters["node"]))
        elif "link" in parameters:
            a, _, b = str(parameters["link"]).partition("--")
            bad_links.add((a, b))
    return {"bad_nodes": sorted(bad_nodes), "bad_links": [list(link) for link in sorted(bad_links)],
            "measured": measured}


def record_findings(records: Iterable[Mapping[str, Any]]) -> Optional[dict[str, Any]]:
    """:func:`findings` of the linktest records among result ``records``; None when there are none."""
    own = [r for r in records if r.get("benchmark") == BENCHMARK]
    if not own:
        return None
    return findings([(r.get("parameters") or {}, str(r.get("status"))) for r in own],
                    measured=max(str(r.get("time") or "") for r in own))
