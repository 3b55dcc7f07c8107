"""Judge a linktest run: pair kinds, typical values, slow pairs, bad nodes, bad links, transients.

Every pair is compared with the typical pair of its own kind (intra-node,
same-switch, inter-switch, or inter-node without a topology file) by robust
statistics: the better quartile of that kind and the spread of its better half
(``_robust_centre``: a fault on one node of four hurts half the inter-node pairs). A pair is slow in a metric when
it is both ``ratio`` times worse than the typical pair AND ``z`` robust sigmas away
(the ratio keeps a very tight kind from flagging harmless jitter, the z keeps a
noisy kind from flagging its own spread).

Attribution, per metric, one rule for every system (only the thresholds are data, per
partition in systems/*.yaml):
- a rank is bad when more than ``majority`` of its pairs are slow; its node is a **bad node**.
  A slow pair that its re-test (serial, with more iterations: linktest -R) found normal counts
  as normal here: a busy moment of a shared node is not a fault;
  Nothing less makes a node bad: one slow pair, or a few meeting at one rank, are bad links
  (a rate-limited cable, a congested port), since a node's fault (its NIC, its CPU, its
  link to the switch) slows most of what it sends;
- a slow pair whose two ends are not bad and that is slow again on re-test is a **bad link**;
- a slow pair that is normal on re-test is **transient**; one the program did not re-test is
  **unconfirmed** (listed, not judged: raise linktest -Z).

All work is on the pair arrays (N(N-1)/2 entries), never on an N x N matrix.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Optional

import numpy as np

from mpiregress.errors import InputError
from mpiregress.families.links.resultsfile import LinkRun
from mpiregress.model import systems

KINDS = ("intra-node", "same-switch", "inter-switch", "inter-node")
INTRA, SAME_SWITCH, INTER_SWITCH, INTER_NODE = range(4)
# metric -> (unit, higher is better)
METRICS = {"latency": ("us", False), "bandwidth": ("MB/s", True)}
# statistic -> metric -> record field. The median is the default: on a shared or busy node a few
# preempted iterations move the mean by milliseconds, while a link slow on every message moves both.
COLUMNS = {"median": {"latency": "lat_median_us", "bandwidth": "bw_median_mbs"},
           "mean": {"latency": "lat_us", "bandwidth": "bw_mbs"},
           # The fastest iteration: what the link can do. Scheduling noise only ever adds time, so on an
           # oversubscribed node this is the statistic that a constant per-message fault still moves
           # and the noise does not; a fault that slows only some iterations (a CPU hog) it misses.
           "min": {"latency": "lat_min_us", "bandwidth": "bw_max_mbs"}}
MAD_TO_SIGMA = 1.4826
# A kind of fewer than 6 pairs has no spread to judge against (its better quartile and spread come from two
# or three values): its pairs are measured and kept, not judged. Four nodes with two ranks each have
# four intra-node pairs; on a 2-core host whose scheduler sometimes puts two ranks of a node on one
# core, one of the four was 3x the others on both measurements, undisturbed.
MIN_KIND_PAIRS = 6


# What a partition may set of the judging (systems/<name>.yaml links:); majority is the rule's own.
SITE_SETTINGS = ("ratio", "z", "statistic", "metrics")


@dataclass(frozen=True)
class Thresholds:
    """How far from typical a pair must be to count as slow, and how many slow pairs make a bad rank."""

    ratio: float = 2.0       # at least this many times worse than the kind's median
    statistic: str = "median"  # per-pair value judged: median, mean or min of its iterations
    z: float = 5.0           # and at least this many robust sigmas away
    majority: float = 0.5    # a rank with more than this fraction of slow pairs is bad
    # Metrics judged (both are always measured and recorded). A host whose scheduler decides
    # every small message's time (an oversubscribed shared machine) judges bandwidth only.
    metrics: tuple[str, ...] = ("latency", "bandwidth")

    def __post_init__(self) -> None:
        # A ratio of 1 or less, or a z of 0, would call every pair slow; one sentence instead.
        if isinstance(self.ratio, bool) or not isinstance(self.ratio, (int, float)) or not self.ratio > 1:
            raise InputError(f"the link judging's ratio must be a number above 1 (a slow pair is that many times "
                             f"worse than the typical one), found {self.ratio!r}")
        if isinstance(self.z, bool) or not isinstance(self.z, (int, float)) or not self.z > 0:
            raise InputError(f"the link judging's z must be a number above 0 (robust sigmas), found {self.z!r}")
        if not isinstance(self.majority, (int, float)) or not 0 < self.majority < 1:
            raise InputError(f"the link judging's majority must be a fraction between 0 and 1, "
                             f"found {self.majority!r}")
        if self.statistic not in COLUMNS:
            raise InputError(f"the link judging's statistic must be one of {', '.join(COLUMNS)}, "
                             f"found {self.statistic!r}")
        if not self.metrics or any(m not in METRICS for m in self.metrics):
            raise InputError(f"the link judging's metrics must name some of {', '.join(METRICS)}, "
                             f"found {', '.join(map(str, self.metrics)) or 'none'}")

    @classmethod
    def from_site(cls, links: Mapping[str, Any], **given: Any) -> "Thresholds":
        """A partition's judging (``links:`` in systems/<name>.yaml) with each of ``given`` that is set
        (not None, 0 or empty) over it; InputError (one sentence) for a value that cannot judge."""
        chosen = {key: links[key] for key in SITE_SETTINGS if key in links}
        chosen.update({key: value for key, value in given.items() if value})
        if "metrics" in chosen:
            chosen["metrics"] = metric_names(chosen["metrics"])
        return cls(**chosen)


@systems.section_check("links", extras=True)
def _check_site(links: Any, path: Path, key: str) -> None:
    """A partition's ``reframe.extras.links``: the check's run settings and the judging's, nothing misspelt."""
    systems.known_settings(links, systems.LINK_RUN_SETTINGS + SITE_SETTINGS)
    try:
        Thresholds.from_site(links)
    except InputError as err:
        raise ValueError(str(err).replace("the link judging's ", "")) from None


def metric_names(value: Any) -> tuple[str, ...]:
    """Metrics to judge from a YAML list or a comma-separated string (``latency,bandwidth``)."""
    if isinstance(value, (list, tuple)):
        return tuple(str(m) for m in value)
    return tuple(m.strip() for m in str(value).split(",") if m.strip())


@dataclass
class SlowPair:
    """One pair slow in one metric at its first measurement, with its attribution."""

    rank_a: int
    rank_b: int
    node_a: str
    node_b: str
    kind: str
    metric: str
    unit: str
    first: float
    second: Optional[float]          # re-test value, None when not re-tested
    typical: float                   # typical pair of the same kind (its better quartile)
    ratio_first: float               # how many times worse than typical (>= 1 is worse)
    ratio_second: Optional[float]
    z_first: float                   # robust sigmas from typical, on the hurting side
    attribution: str                 # bad node | bad link | transient | unconfirmed

    def link(self) -> str:
        return f"{self.node_a}--{self.node_b}"


@dataclass
class BadNode:
    """A node with at least one rank that is slow against most of its peers in one metric."""

    node: str
    metric: str
    ranks: list[int]
    slow_pairs: int
    pairs: int
    mean_ratio: float              # geometric mean over the node's pairs of (how many times worse than typical)

    def sentence(self) -> str:
        """'bad node node2 (rank 6): latency slow in 7 of its 7 pairs, 5.1x typical (geometric mean)'."""
        ranks = f"rank{'s' if len(self.ranks) > 1 else ''} {', '.join(map(str, self.ranks))}"
        return (f"bad node {self.node} ({ranks}): {self.metric} slow in {self.slow_pairs} of its {self.pairs} "
                f"pairs, {self.mean_ratio:.1f}x typical (geometric mean)")


ATTRIBUTIONS = ("bad node", "bad link", "transient", "unconfirmed")


@dataclass
class LinkAnalysis:
    """What one run says about its nodes and links (pair-level results kept as arrays: 50 M pairs fit)."""

    run: LinkRun
    thresholds: Thresholds
    nodes: list[str]                 # distinct node names, in rank order of first appearance
    rank_node: np.ndarray            # node index of each rank
    a: np.ndarray                    # pair arrays: lower rank, higher rank, kind code
    b: np.ndarray
    kind: np.ndarray
    first: dict[str, np.ndarray]     # metric -> first measurement per pair
    columns: dict[str, str]          # metric -> record field judged (the statistic)
    # (metric, kind) -> (median, robust sigma, number of pairs)
    typical: dict[tuple[str, str], tuple[float, float, int]] = field(default_factory=dict)
    bad_ranks: dict[str, list[int]] = field(default_factory=dict)
    bad_nodes: list[BadNode] = field(default_factory=list)
    missing_pairs: int = 0
    # metric -> pair indices slow at the first measurement (worst first), their attribution codes,
    # and per-pair ratio / re-test ratio / z of those slow pairs
    slow_index: dict[str, np.ndarray] = field(default_factory=dict)
    slow_code: dict[str, np.ndarray] = field(default_factory=dict)
    slow_ratio: dict[str, np.ndarray] = field(default_factory=dict)
    slow_ratio2: dict[str, np.ndarray] = field(default_factory=dict)
    slow_z: dict[str, np.ndarray] = field(default_factory=dict)

    def second_of(self, metric: str, index: np.ndarray) -> np.ndarray:
        """Re-test value of the pairs at ``index`` (NaN when not re-tested; the last re-test wins).

        Only the re-tested pairs (Z of them) are sorted; the N(N-1)/2 pairs are never searched whole.
        """
        out = np.full(len(index), np.nan)
        retest = self.run.retest
        if len(retest) == 0 or len(index) == 0:
            return out
        n = np.int64(self.run.nranks)
        keys = retest["rank_a"].astype(np.int64) * n + retest["rank_b"]
        order = np.argsort(keys, kind="stable")
        sorted_keys = keys[order]
        wanted = self.a[index] * n + self.b[index]
        pos = np.searchsorted(sorted_keys, wanted, side="right") - 1
        found = (pos >= 0) & (sorted_keys[np.maximum(pos, 0)] == wanted)
        out[found] = retest[self.columns[metric]][order[pos[found]]]
        return out

    @property
    def second(self) -> dict[str, np.ndarray]:
        """metric -> re-test value of every pair (NaN when not re-tested)."""
        everything = np.arange(len(self.a))
        return {metric: self.second_of(metric, everything) for metric in METRICS}

    def slow_pairs(self, attributions: Optional[set[str]] = None) -> list[SlowPair]:
        """Slow pairs as objects (all, or those with the given attributions), worst first."""
        out = []
        hosts = self.run.hosts
        for metric, (unit, _) in METRICS.items():
            codes = self.slow_code.get(metric, np.empty(0, dtype=np.int8))
            keep = np.ones(codes.shape, dtype=bool) if attributions is None else \
                np.isin(codes, [ATTRIBUTIONS.index(x) for x in attributions])
            chosen = np.flatnonzero(keep)
            seconds = self.second_of(metric, self.slow_index[metric][chosen])
            for j, second in zip(chosen, seconds):
                i = int(self.slow_index[metric][j])
                ra, rb = int(self.a[i]), int(self.b[i])
                retested = bool(np.isfinite(second))
                out.append(SlowPair(
                    rank_a=ra, rank_b=rb, node_a=hosts[ra], node_b=hosts[rb], kind=KINDS[self.kind[i]],
                    metric=metric, unit=unit, first=float(self.first[metric][i]),
                    second=float(second) if retested else None,
                    typical=self.typical[(metric, KINDS[self.kind[i]])][0],
                    ratio_first=float(self.slow_ratio[metric][j]),
                    ratio_second=float(self.slow_ratio2[metric][j]) if retested else None,
                    z_first=float(self.slow_z[metric][j]), attribution=ATTRIBUTIONS[codes[j]]))
        out.sort(key=lambda p: -p.ratio_first)
        return out

    @property
    def slow(self) -> list[SlowPair]:
        return self.slow_pairs()

    @property
    def bad_links(self) -> list[SlowPair]:
        return self.slow_pairs({"bad link"})

    def count(self, attribution: str) -> int:
        code = ATTRIBUTIONS.index(attribution)
        return int(sum((c == code).sum() for c in self.slow_code.values()))

    @property
    def judged_bad(self) -> bool:
        return bool(self.bad_nodes) or self.count("bad link") > 0

    def kinds_present(self) -> list[str]:
        return [KINDS[k] for k in np.unique(self.kind)]


def node_index(hosts: list[str]) -> tuple[list[str], np.ndarray]:
    """Distinct node names (order of first appearance) and each rank's index into them."""
    nodes: dict[str, int] = {}
    # int32: a gather of it over every pair (the pair's node) is half the memory of an int64 one.
    index = np.array([nodes.setdefault(h, len(nodes)) for h in hosts], dtype=np.int32)
    return list(nodes), index


def classify(rank_node: np.ndarray, nodes: list[str], a: np.ndarray, b: np.ndarray,
             switches: Optional[dict[str, str]] = None, na: Optional[np.ndarray] = None,
             nb: Optional[np.ndarray] = None) -> np.ndarray:
    """Kind code of every pair: intra-node, else same-/inter-switch with a topology, else inter-node.
    ``na``/``nb``: the node index of each pair's ends, when the caller has them already."""
    na = rank_node[a] if na is None else na
    nb = rank_node[b] if nb is None else nb
    kind = np.full(a.shape, INTER_NODE, dtype=np.int8)
    if switches:
        names = sorted(set(switches.values()))
        switch_of = np.array([names.index(switches[n]) for n in nodes], dtype=np.int64)
        same = switch_of[na] == switch_of[nb]
        kind[same] = SAME_SWITCH
        kind[~same] = INTER_SWITCH
    kind[na == nb] = INTRA
    return kind


def _robust_centre(values: np.ndarray, higher_better: bool = False) -> tuple[float, float]:
    """Typical value of a kind and its robust sigma on the log scale: its better quartile and the
    spread of its better half.

    Not the median: on a small cluster one faulty node holds a large share of a kind's
    pairs (one node of four: half of the inter-node pairs), and the median would sit among
    them, hiding the fault. The better quartile stays among healthy pairs while fewer than
    three quarters of the kind are hurt. The spread is the MAD of the better half around it,
    doubled: half a distribution's deviations from its quartile are about half its full MAD.
    On the log scale, because slowness is a factor: a bandwidth can fall only to 0, so on a
    linear scale a kind as spread as its own typical value (a shared host's TCP) would put even
    a dead link less than 5 sigmas below typical; a quarter of typical is as far below as 4x
    a latency is above.
    """
    worse = -np.log(values) if higher_better else np.log(values)
    median = float(np.median(worse))
    centre = float(np.quantile(worse, 0.25))
    better = worse[worse <= median]
    spread = 2.0 * MAD_TO_SIGMA * float(np.median(np.abs(better - centre)))
    typical = float(np.exp(-centre if higher_better else centre))
    # A floor on sigma: a kind whose pairs are all identical (MAD 0) must not make 1 % jitter infinite.
    return typical, max(spread, float(np.log(1.01)))


def _badness(values: np.ndarray, typical: float | np.ndarray, sigma: float | np.ndarray,
             higher_better: bool) -> tuple[np.ndarray, np.ndarray]:
    """How many times worse than typical, and how many robust (log-scale) sigmas on the hurting side."""
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = typical / values if higher_better else values / typical
        return ratio, np.log(ratio) / sigma


def _beyond(values: np.ndarray, kind: np.ndarray, kind_count: np.ndarray, limit: np.ndarray,
            higher_better: bool) -> np.ndarray:
    """Per pair: is its value beyond its kind's ``limit`` (at or below it when higher is better)?"""
    present = np.flatnonzero(kind_count)
    compare = np.less_equal if higher_better else np.greater_equal
    if len(present) == 1:
        return compare(values, limit[present[0]])
    slow = np.zeros(values.shape, dtype=bool)
    for code in present:
        slow |= compare(values, limit[code]) & (kind == code)
    return slow


def analyse(run: LinkRun, switches: Optional[dict[str, str]] = None,
            thresholds: Thresholds = Thresholds()) -> LinkAnalysis:
    """Classify, compare with typical, attribute. ``switches`` maps node -> switch (optional)."""
    nodes, rank_node = node_index(run.hosts)
    main = run.main
    a = main["rank_a"].astype(np.int64)
    b = main["rank_b"].astype(np.int64)
    na, nb = rank_node[a], rank_node[b]
    kind = classify(rank_node, nodes, a, b, switches, na, nb)
    columns = COLUMNS[thresholds.statistic]
    first = {m: main[columns[m]].astype(np.float64) for m in METRICS}
    result = LinkAnalysis(run=run, thresholds=thresholds, nodes=nodes, rank_node=rank_node, a=a, b=b, kind=kind,
                          first=first, columns=columns, missing_pairs=max(run.expected_pairs - len(main), 0))
    n = run.nranks
    peers = np.bincount(a, minlength=n) + np.bincount(b, minlength=n)
    # Not np.bincount: it would first copy the int8 codes of every pair into an intp array.
    kind_count = np.array([np.count_nonzero(kind == code) for code in range(len(KINDS))])
    stats: dict[str, tuple[np.ndarray, ...]] = {}
    for metric, (_, higher_better) in METRICS.items():
        values = first[metric]
        med_of = np.full(len(KINDS), np.nan)  # per kind code
        sig_of = np.full(len(KINDS), np.nan)
        for code in np.flatnonzero(kind_count >= MIN_KIND_PAIRS):
            if kind_count[code] > 2_000_000:
                # A large kind: its typical pair from an evenly strided sample of about 1 M of its pairs.
                step = int(kind_count[code] // 1_000_000)
                vals = values[::step][kind[::step] == code]
            else:
                vals = values[kind == code]
            vals = vals[np.isfinite(vals) & (vals > 0)]
            if vals.size == 0:
                continue
            median, sigma = _robust_centre(vals, higher_better)
            result.typical[(metric, KINDS[code])] = (median, sigma, int(kind_count[code]))
            med_of[code], sig_of[code] = median, sigma
        # slow <=> ratio >= r and z >= Z <=> beyond one threshold per kind: a compare per pair against
        # its kind's threshold (per kind, so no per-pair array of thresholds is ever made); ratio and z
        # are then computed for the slow pairs (and a bad rank's pairs) only.
        with np.errstate(invalid="ignore"):
            factor = np.maximum(thresholds.ratio, np.exp(thresholds.z * sig_of))
            limit = med_of / factor if higher_better else med_of * factor
            slow = _beyond(values, kind, kind_count, limit, higher_better)
        if metric not in thresholds.metrics:
            slow = np.zeros(values.shape, dtype=bool)
        idx = np.flatnonzero(slow)
        ratio, z = _badness(values[idx], med_of[kind[idx]], sig_of[kind[idx]], higher_better)
        stats[metric] = (ratio, z, idx, med_of, sig_of)
        # A slow pair that its re-test (serial, more iterations) found normal was a busy moment, not a
        # fault: it counts towards no bad rank (LinkTest's own way of not naming noise).
        second = result.second_of(metric, idx)
        ratio2, z2 = _badness(second, med_of[kind[idx]], sig_of[kind[idx]], higher_better)
        with np.errstate(invalid="ignore"):
            cleared = np.isfinite(second) & ~((ratio2 >= thresholds.ratio) & (z2 >= thresholds.z))
        slow[idx[cleared]] = False
        kept = idx[~cleared]
        slow_count = np.bincount(a[kept], minlength=n) + np.bincount(b[kept], minlength=n)
        fraction = slow_count / np.maximum(peers, 1)
        # A rank needs at least two peers: with one, the pair cannot say which end is bad.
        bad_mask = (peers >= 2) & (fraction > thresholds.majority)
        result.bad_ranks[metric] = np.flatnonzero(bad_mask).tolist()
        if bad_mask.any():
            touching = np.flatnonzero(bad_mask[a] | bad_mask[b])
            ta, tb = a[touching], b[touching]
            t_ratio, _ = _badness(values[touching], med_of[kind[touching]], sig_of[kind[touching]], higher_better)
            with np.errstate(divide="ignore", invalid="ignore"):
                logr = np.where(np.isfinite(t_ratio) & (t_ratio > 0), np.log(t_ratio), 0.0)
            t_slow = slow[touching]
            log_sum = np.bincount(ta, logr, minlength=n) + np.bincount(tb, logr, minlength=n)
            # Pairs between two bad ranks of one node are counted from both ends: count them once.
            both = bad_mask[ta] & bad_mask[tb] & (rank_node[ta] == rank_node[tb])
            node_of = rank_node[ta]
            inner_pairs = np.bincount(node_of[both], minlength=len(nodes))
            inner_slow = np.bincount(node_of[both & t_slow], minlength=len(nodes))
            inner_log = np.bincount(node_of[both], logr[both], minlength=len(nodes))
            for node_i in np.unique(rank_node[bad_mask]):
                ranks = np.flatnonzero(bad_mask & (rank_node == node_i))
                pairs = int(peers[ranks].sum() - inner_pairs[node_i])
                result.bad_nodes.append(BadNode(
                    node=nodes[node_i], metric=metric, ranks=ranks.tolist(),
                    slow_pairs=int(slow_count[ranks].sum() - inner_slow[node_i]), pairs=pairs,
                    mean_ratio=float(np.exp((log_sum[ranks].sum() - inner_log[node_i]) / max(pairs, 1)))))
    any_bad = np.zeros(n, dtype=bool)
    for bad_ranks in result.bad_ranks.values():
        any_bad[bad_ranks] = True
    for metric, (_, higher_better) in METRICS.items():
        ratio, z, idx, med_of, sig_of = stats[metric]
        order = np.argsort(-ratio, kind="stable")
        idx, ratio, z = idx[order], ratio[order], z[order]
        second = result.second_of(metric, idx)
        ratio2, z2 = _badness(second, med_of[kind[idx]], sig_of[kind[idx]], higher_better)
        slow_again = (ratio2 >= thresholds.ratio) & (z2 >= thresholds.z)
        retested = np.isfinite(second)
        slow_codes = np.where(retested, np.where(slow_again, 1, 2), 3).astype(np.int8)
        slow_codes[any_bad[a[idx]] | any_bad[b[idx]]] = 0
        result.slow_index[metric], result.slow_code[metric] = idx, slow_codes
        result.slow_ratio[metric], result.slow_ratio2[metric], result.slow_z[metric] = ratio, ratio2, z
    return result


def node_matrix(analysis: LinkAnalysis, metric: str) -> np.ndarray:
    """Node x node mean of the first measurements of the rank pairs between two nodes (NaN: no pair)."""
    count = len(analysis.nodes)
    values = analysis.first[metric]
    keep = np.isfinite(values)
    na, nb = analysis.rank_node[analysis.a[keep]], analysis.rank_node[analysis.b[keep]]
    # One bincount over the pairs as stored, then symmetrised: no concatenated copy of N(N-1)/2 pairs.
    keys = na.astype(np.int64) * count + nb   # int64: nodes² overflows the int32 node index past 46,340 nodes
    sums = np.bincount(keys, weights=values[keep], minlength=count * count).reshape(count, count)
    counts = np.bincount(keys, minlength=count * count).reshape(count, count)
    diagonal = np.diag(np.diag(sums)), np.diag(np.diag(counts))
    sums = sums + sums.T - diagonal[0]
    counts = counts + counts.T - diagonal[1]
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)


def rank_matrix(analysis: LinkAnalysis, metric: str) -> np.ndarray:
    """Rank x rank first measurements, symmetric, NaN on the diagonal and for unmeasured pairs (float32)."""
    n = analysis.run.nranks
    matrix = np.full((n, n), np.nan, dtype=np.float32)
    matrix[analysis.a, analysis.b] = analysis.first[metric]
    matrix[analysis.b, analysis.a] = analysis.first[metric]
    return matrix
