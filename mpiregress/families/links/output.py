"""The files of an analysis: matrices (.npz), bad-links CSV, text summary."""
from __future__ import annotations

import csv
import math
from pathlib import Path

import numpy as np

from mpiregress.families.links.analysis import KINDS, METRICS, MIN_KIND_PAIRS, LinkAnalysis, node_matrix, rank_matrix

# Rank matrices up to this size are stored as N x N float32 (64 MB at 4096);
# above it the pair arrays (half the size, exact) are the rank-level data.
MAX_STORED_RANK_MATRIX = 4096
MAX_LISTED = 50  # bad links named in the summary; the CSV has them all
CSV_FIELDS = ("from_rank", "to_rank", "from_node", "to_node", "kind", "metric", "unit", "first", "second",
              "typical", "ratio_first", "ratio_second", "z_first", "attribution")


def write_matrices(analysis: LinkAnalysis, path: Path) -> Path:
    """node x node matrices, pair arrays and, for runs up to 4096 ranks, rank x rank matrices."""
    data: dict[str, np.ndarray] = {
        "nodes": np.array(analysis.nodes), "rank_node": analysis.rank_node.astype(np.int32),
        "hosts": np.array(analysis.run.hosts), "kinds": np.array(KINDS),
        "pair_a": analysis.a.astype(np.uint32), "pair_b": analysis.b.astype(np.uint32),
        "pair_kind": analysis.kind,
    }
    for metric in METRICS:
        data[f"node_{metric}"] = node_matrix(analysis, metric).astype(np.float32)
        data[f"pair_{metric}"] = analysis.first[metric].astype(np.float32)
        data[f"pair_{metric}_retest"] = analysis.second[metric].astype(np.float32)
        if analysis.run.nranks <= MAX_STORED_RANK_MATRIX:
            data[f"rank_{metric}"] = rank_matrix(analysis, metric)
    np.savez(path, **data)  # type: ignore[arg-type]
    return Path(path)


def write_bad_links(analysis: LinkAnalysis, path: Path) -> Path:
    """Every pair slow at its first measurement, one row per (pair, metric), with its attribution."""
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(CSV_FIELDS)
        for s in analysis.slow:
            writer.writerow([s.rank_a, s.rank_b, s.node_a, s.node_b, s.kind, s.metric, s.unit, f"{s.first:.6g}",
                             "" if s.second is None else f"{s.second:.6g}", f"{s.typical:.6g}",
                             f"{s.ratio_first:.3f}", "" if s.ratio_second is None else f"{s.ratio_second:.3f}",
                             f"{s.z_first:.1f}", s.attribution])
    return Path(path)


def summary_lines(analysis: LinkAnalysis, focus: list[str] | None = None) -> list[str]:
    """The verdict in a few sentences: problems with the input, bad nodes, bad links, transients."""
    run, t = analysis.run, analysis.thresholds
    lines = []
    if run.problem:
        lines.append(f"input: {run.problem}.")
    if analysis.missing_pairs:
        lines.append(f"input: {analysis.missing_pairs} of {run.expected_pairs} pairs were not measured.")
    lines.append(f"{run.nranks} ranks on {len(analysis.nodes)} nodes, {len(analysis.a)} pairs measured "
                 f"({'serial' if run.serial else 'parallel'}), {len(run.retest)} re-tested; slow means the "
                 f"{t.statistic} of a pair's iterations is >= {t.ratio:g}x"
                 + (f" (>= {t.link_ratio:g}x, first and on re-test, to name its link)" if t.link_ratio else "")
                 + f" and >= {t.z:g} robust sigmas worse "
                 f"than the typical pair of the same kind (the median of the pairs not touching the node or link "
                 f"judged; a node's bar is on the median of its pairs)"
                 + ("; a node is judged on all its ranks' pairs together, a link on the median of its rank pairs"
                    if t.whole_nodes else "")
                 + ("." if set(t.metrics) >= set(METRICS) else f"; judged: {', '.join(t.metrics)} only."))
    for (metric, kind), (median, sigma, count) in sorted(analysis.typical.items()):
        unit = METRICS[metric][0]
        lines.append(f"typical {kind} {metric}: {median:.4g} {unit} (robust sigma x{math.exp(sigma):.3g}, "
                     f"{count} pairs)")
    for kind in analysis.kinds_present():
        count = int((analysis.kind == KINDS.index(kind)).sum())
        if count < MIN_KIND_PAIRS:
            lines.append(f"{kind} pairs not judged: {count} are too few for a typical pair and its spread "
                         f"(at least {MIN_KIND_PAIRS}).")
    for node in analysis.bad_nodes:
        lines.append("BAD NODE" + node.sentence()[len("bad node"):])
    for s in analysis.bad_links[:MAX_LISTED]:
        lines.append(f"BAD LINK {s.link()} (ranks {s.rank_a}-{s.rank_b}, {s.kind}): {s.metric} 1st {s.first:.4g} "
                     f"2nd {s.second:.4g} {s.unit}, typical {s.typical:.4g} ({s.ratio_first:.1f}x, then "
                     f"{s.ratio_second:.1f}x)")
    if analysis.count("bad link") > MAX_LISTED:
        lines.append(f"... {analysis.count('bad link') - MAX_LISTED} more bad link measurements in bad_links.csv")
    counts = {a: analysis.count(a) for a in ("transient", "unconfirmed")}
    if counts["transient"]:
        worst = analysis.slow_pairs({"transient"})[0]
        lines.append(f"{counts['transient']} slow pair measurement(s) were normal on re-test (transient; worst "
                     f"{worst.link()} ranks {worst.rank_a}-{worst.rank_b}: {worst.metric} {worst.ratio_first:.1f}x "
                     f"typical, {worst.ratio_second or 0:.1f}x on re-test).")
    if counts["unconfirmed"]:
        lines.append(f"{counts['unconfirmed']} slow pair measurement(s) were not re-tested (unconfirmed; "
                     f"raise linktest -Z to confirm them).")
    for name in focus or []:
        named = [b for b in analysis.bad_nodes if b.node == name]
        links = [s for s in analysis.bad_links if name in (s.node_a, s.node_b)]
        lines.append(f"node {name}: {'BAD' if named or links else 'fine'}"
                     f"{' (' + str(len(links)) + ' bad link(s))' if links else ''}")
    targets = [f"a {t.node_target:g}x node" if t.node_target else "",
               f"a {t.link_target:g}x link" if t.link_target else ""]
    lines.append(f"power: {analysis.power_sentence()} (95 of 100 such faults land beyond this run's bars at its "
                 f"own spread; {run.rounds} all-pairs round{'s' if run.rounds > 1 else ''})"
                 + (f"; must see {' and '.join(x for x in targets if x)}" if any(targets) else "") + ".")
    short = analysis.short_of_target()
    verdict = ("bad node(s) or link(s) found" if analysis.judged_bad
               else "no bad node and no bad link — " + analysis.power_sentence())
    lines.append("verdict: " + verdict)
    if short:
        lines.append(f"needs a look: {short}.")
    return lines
