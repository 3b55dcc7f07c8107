"""Per-node and per-link summaries as result records (benchmark ``linktest``) for history and the gate."""
from __future__ import annotations

from typing import Any, Optional

import numpy as np

from ..names import METRICS as METRIC_NAMES
from ..results import Result
from .analysis import INTRA, METRICS, LinkAnalysis

BENCHMARK = "linktest"


def series_records(analysis: LinkAnalysis, context: dict[str, Any], all_links: bool = False) -> list[dict[str, Any]]:
    """Result dicts: one per node and metric (median over its inter-node pairs, or over all its pairs on a
    one-node run) and one per node pair ``a--b`` that was slow, judged bad, or every pair when ``all_links``.

    ``context`` carries the run's fields (system, partition, method, toolchain, commit, pipeline, jobid,
    time, target); parameters are ordered most significant first. A bad node or link has status "fail".
    """
    records: list[dict[str, Any]] = []
    na, nb = analysis.rank_node[analysis.a], analysis.rank_node[analysis.b]
    inter = analysis.kind != INTRA
    bad_node = {(b.node, b.metric): b for b in analysis.bad_nodes}
    conditions = {"nranks": analysis.run.nranks, "nodes": len(analysis.nodes),
                  "mode": "serial" if analysis.run.serial else "parallel",
                  "small_size": analysis.run.small_size, "large_size": analysis.run.large_size}
    for metric, (unit, _) in METRICS.items():
        values = analysis.first[metric]
        for i, node in enumerate(analysis.nodes):
            touching = (na == i) | (nb == i)
            chosen = touching & inter if (touching & inter).any() else touching
            sample = values[chosen & np.isfinite(values)]
            if sample.size == 0:
                continue
            judged = bad_node.get((node, metric))
            records.append(_record(context, {"node": node}, metric, unit, float(np.median(sample)), [], [node],
                                   f"node {node} is slow in {judged.slow_pairs} of its {judged.pairs} pairs "
                                   f"({judged.mean_ratio:.1f}x typical)" if judged else None, conditions))
        # Links of a bad node are the node's story (its own series); the other slow links get theirs.
        wanted = {(s.node_a, s.node_b) for s in analysis.slow_pairs({"bad link", "transient", "unconfirmed"})
                  if s.metric == metric}
        bad = {(s.node_a, s.node_b): s for s in analysis.bad_links if s.metric == metric}
        for i, j in _link_keys(analysis, na, nb, wanted, all_links):
            pair = (na == i) & (nb == j) | (na == j) & (nb == i)
            sample = values[pair & np.isfinite(values)]
            if sample.size == 0:
                continue
            a_name, b_name = analysis.nodes[i], analysis.nodes[j]
            judged_link = bad.get((a_name, b_name)) or bad.get((b_name, a_name))
            records.append(_record(context, {"link": f"{a_name}--{b_name}"}, metric, unit, float(np.median(sample)),
                                   [float(x) for x in sample[:64]], [a_name, b_name],
                                   f"link {a_name}--{b_name} is {judged_link.ratio_first:.1f}x then "
                                   f"{judged_link.ratio_second or 0:.1f}x slower than typical" if judged_link else None,
                                   conditions))
    return records


def _link_keys(analysis: LinkAnalysis, na: np.ndarray, nb: np.ndarray, wanted: set[tuple[str, str]],
               all_links: bool) -> list[tuple[int, int]]:
    index = {n: i for i, n in enumerate(analysis.nodes)}
    if all_links:
        keys = {(int(min(x, y)), int(max(x, y))) for x, y in zip(na, nb) if x != y}
    else:
        keys = {(min(index[x], index[y]), max(index[x], index[y])) for x, y in wanted if x != y}
    return sorted(keys)


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
