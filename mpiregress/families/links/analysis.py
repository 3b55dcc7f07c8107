"""Judge a linktest run: pair kinds, typical values, slow pairs, bad nodes, bad links, transients.

Every pair is compared with the typical pair of its own kind (intra-node,
same-switch, inter-switch, or inter-node without a topology file) by robust
statistics: the median of that kind and its scaled MAD, both taken WITHOUT the pairs of the
node or link under suspicion (``_references``: a fault on one node of four hurts half the
inter-node pairs, and must not set the value it is compared with). A pair is slow in a metric when
it is both ``ratio`` times worse than the typical pair AND ``z`` robust sigmas away
(the ratio keeps a very tight kind from flagging harmless jitter, the z keeps a
noisy kind from flagging its own spread). A link rests on one pair (its first measurement and its
re-test) where a node rests on the median of its k pairs, so a system may ask more of a link
(``link_ratio``, default ``ratio``).

Attribution, per metric, one rule for every system (only the thresholds are data, per
partition in systems/*.yaml):
- a rank is bad when more than ``majority`` of its pairs are slow for a rank: beyond ``ratio`` and
  beyond ``z`` times the spread of the median of its k pairs (sigma x 1.25 / sqrt(k): a node's
  fault moves every pair it has, so it is seen smaller than one pair's); its node is a **bad node**.
  A pair is taken at its re-test when it has one (serial, with more iterations: linktest -R):
  a busy moment of a shared node is not a fault. Nothing less makes a node bad: one slow pair,
  or a few meeting at one rank, are bad links (a rate-limited cable, a congested port);
- a slow pair whose two ends are not bad and whose re-test is still beyond the bar, or beyond the
  link target (the effect the run must see), is a **bad link**;
- a slow pair whose re-test is below both is **transient**; one the program did not re-test is
  **unconfirmed** (listed, not judged: raise linktest -Z).

Power: from the spread of the pairs touching no bad rank, the smallest link and node slowdown
that 95 of 100 runs of this spread would name (``LinkAnalysis.power``); a system file's
``node_target``/``link_target`` say what must be seen, ``short_of_target`` says when it was not.

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
# A kind of fewer than 6 pairs has no spread to judge against (its typical pair and spread come from two
# or three values): its pairs are measured and kept, not judged. Four nodes with two ranks each have
# four intra-node pairs; on a 2-core host whose scheduler sometimes puts two ranks of a node on one
# core, one of the four was 3x the others on both measurements, undisturbed.
MIN_KIND_PAIRS = 6


# What a partition may set of the judging (systems/<name>.yaml links:); majority is the rule's own.
SITE_SETTINGS = ("ratio", "link_ratio", "whole_nodes", "z", "statistic", "metrics", "node_target", "link_target",
                 "rounds")
# One-sided normal quantile of the detection probability a power is stated at: a fault at the stated
# power lands beyond the bar in 95 of 100 runs of this spread.
POWER_QUANTILE = 1.645
# The median of k values from a normal spreads sqrt(pi/2) times more than their mean would.
MEDIAN_SPREAD = 1.2533
# Up to this many nodes every node's typical pair is computed without that node's pairs; above it one
# node holds under 1 % of a kind's pairs and the typical of all pairs is the same to a percent.
EXCLUDE_UP_TO_NODES = 256
# Links whose typical pair is recomputed without their own pairs (the worst candidates first).
EXCLUDE_UP_TO_LINKS = 64


@dataclass(frozen=True)
class Thresholds:
    """How far from typical a pair must be to count as slow, and how many slow pairs make a bad rank."""

    ratio: float = 1.5       # at least this many times worse than typical (below the targets, or none is reachable)
    statistic: str = "median"  # per-pair value judged: median, mean or min of its iterations
    z: float = 5.0           # and at least this many robust sigmas away
    majority: float = 0.5    # a rank with more than this fraction of slow pairs is bad
    # Metrics judged (both are always measured and recorded). A host whose scheduler decides
    # every small message's time (an oversubscribed shared machine) judges bandwidth only.
    metrics: tuple[str, ...] = ("latency", "bandwidth")
    # The effect the run must be able to see (how many times slower; None: no target). A run whose power
    # (analysis.power) is short of it measures more rounds, up to ``rounds`` all-pairs rounds in its
    # allocation, and is "needs a look", never a pass, when still short.
    node_target: Optional[float] = None
    link_target: Optional[float] = None
    rounds: int = 1
    # How many times worse a pair must be, at its first measurement and at its re-test, for its link to be
    # named (None: ``ratio``). A node is judged on the median of its pairs, a link on one pair: on a host
    # whose pairs wander between measurements a link needs the higher bar (systems/local.yaml says why).
    link_ratio: Optional[float] = None
    # Judge a node on all its ranks' pairs together, and a link between two nodes on the median of every rank
    # pair between them. Where ranks share cores with other work (the local host), one rank starved of CPU
    # slows its pairs to every node: by one rank (False, LinkTest's view: a bad core or port of one rank
    # shows) that named its node, or its links, while the node's other rank and the links' other pairs were fine.
    whole_nodes: bool = False

    def __post_init__(self) -> None:
        # A ratio of 1 or less, or a z of 0, would call every pair slow; one sentence instead.
        if isinstance(self.ratio, bool) or not isinstance(self.ratio, (int, float)) or not self.ratio > 1:
            raise InputError(f"the link judging's ratio must be a number above 1 (a slow pair is that many times "
                             f"worse than the typical one), found {self.ratio!r}")
        if isinstance(self.z, bool) or not isinstance(self.z, (int, float)) or not self.z > 0:
            raise InputError(f"the link judging's z must be a number above 0 (robust sigmas), found {self.z!r}")
        link_ratio = self.link_ratio
        if link_ratio is not None and (isinstance(link_ratio, bool) or not isinstance(link_ratio, (int, float))
                                       or not link_ratio > 1):
            raise InputError(f"the link judging's link_ratio must be a number above 1 (a pair is that many times "
                             f"worse than the typical one for its link to be named), found {self.link_ratio!r}")
        if not isinstance(self.majority, (int, float)) or not 0 < self.majority < 1:
            raise InputError(f"the link judging's majority must be a fraction between 0 and 1, "
                             f"found {self.majority!r}")
        for name in ("node_target", "link_target"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 1):
                raise InputError(f"the link judging's {name} must be a number above 1 (how many times slower a "
                                 f"node or link must be seen), found {value!r}")
        if isinstance(self.rounds, bool) or not isinstance(self.rounds, int) or self.rounds < 1:
            raise InputError(f"the link judging's rounds must be a whole number from 1 (all-pairs rounds a run may "
                             f"measure), found {self.rounds!r}")
        if not isinstance(self.whole_nodes, bool):
            raise InputError(f"the link judging's whole_nodes must be true or false, found {self.whole_nodes!r}")
        if self.statistic not in COLUMNS:
            raise InputError(f"the link judging's statistic must be one of {', '.join(COLUMNS)}, "
                             f"found {self.statistic!r}")
        if not self.metrics or any(m not in METRICS for m in self.metrics):
            raise InputError(f"the link judging's metrics must name some of {', '.join(METRICS)}, "
                             f"found {', '.join(map(str, self.metrics)) or 'none'}")

    def cli_args(self) -> list[str]:
        """These thresholds as ``mpiregress links`` options (``links enough`` in a job script)."""
        given = {"ratio": self.ratio, "link-ratio": self.link_ratio, "z": self.z, "statistic": self.statistic,
                 "metrics": ",".join(self.metrics), "rounds": self.rounds, "node-target": self.node_target,
                 "link-target": self.link_target}
        return ([part for name, value in given.items() if value is not None for part in (f"--{name}", str(value))]
                + (["--whole-nodes"] if self.whole_nodes else []))

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
    typical: float                   # typical pair of the same kind, without this pair's node or link
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
    median_ratio: float = 1.0      # median over the node's pairs of the same
    worst_ratio: float = 1.0       # its worst pair's, and that pair's ranks
    worst_pair: tuple[int, int] = (0, 0)

    def sentence(self) -> str:
        """'bad node node2 (rank 6): bandwidth slow in 7 of its 7 pairs, median 2.1x typical, worst pair
        2.6x (ranks 3-6)'; typical: the pairs of its kind that do not touch this node."""
        ranks = f"rank{'s' if len(self.ranks) > 1 else ''} {', '.join(map(str, self.ranks))}"
        return (f"bad node {self.node} ({ranks}): {self.metric} slow in {self.slow_pairs} of its {self.pairs} "
                f"pairs, median {self.median_ratio:.1f}x typical, worst pair {self.worst_ratio:.1f}x "
                f"(ranks {self.worst_pair[0]}-{self.worst_pair[1]})")


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
    slow_typical: dict[str, np.ndarray] = field(default_factory=dict)   # each slow pair's own typical
    # metric -> (smallest link slowdown, smallest node slowdown) this run would have named (95 %)
    power: dict[str, tuple[float, float]] = field(default_factory=dict)

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
                    typical=float(self.slow_typical[metric][j]),
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

    def weakest_power(self) -> tuple[float, float]:
        """(link, node) power of the weakest judged metric: the smallest slowdowns this run would have named."""
        found = [self.power[m] for m in self.thresholds.metrics if m in self.power]
        if not found:
            return float("inf"), float("inf")
        return max(p[0] for p in found), max(p[1] for p in found)

    def power_sentence(self) -> str:
        """'a link slower than 3.1x would have been named; a node slower than 2.4x' (per metric when several
        are judged): 95 of 100 faults that large land beyond this run's bars at its own spread."""
        judged = [m for m in self.thresholds.metrics if m in self.power]
        parts = []
        for metric in judged:
            link, node = self.power[metric]
            said = f"a link slower than {link:.1f}x would have been named; a node slower than {node:.1f}x"
            parts.append(said if len(judged) == 1 else f"{metric}: {said}")
        return "; ".join(parts) if parts else "nothing was judged"

    def short_of_target(self) -> Optional[str]:
        """'could not see a 2x node at this noise (could see >= 3.4x) in 3 of 3 rounds', when this run's power
        is short of a target it did not meet by naming such a fault; None when the run could see its targets."""
        link, node = self.weakest_power()
        t = self.thresholds
        said = []
        if t.node_target and not self.bad_nodes and node > t.node_target:
            said.append(f"a {t.node_target:g}x node at this noise (could see >= {node:.1f}x)")
        if t.link_target and not self.count("bad link") and link > t.link_target:
            said.append(f"a {t.link_target:g}x link at this noise (could see >= {link:.1f}x)")
        if not said:
            return None
        return (f"could not see {' nor '.join(said)} in {self.run.rounds} of {t.rounds} all-pairs "
                f"round{'s' if t.rounds > 1 else ''}")

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
    """Typical value of a kind and its robust sigma on the log scale: the median and the scaled MAD.

    The values given never hold the node or link under suspicion (``_references`` leaves them out),
    so the median of the rest is the typical pair; one faulty node of four, which hurts half of the
    inter-node pairs, no longer drags it. On the log scale, because slowness is a factor: a bandwidth
    can fall only to 0, so on a linear scale a kind as spread as its own typical value (a shared
    host's TCP) would put even a dead link less than 5 sigmas below typical.
    """
    worse = -np.log(values) if higher_better else np.log(values)
    centre = float(np.median(worse))
    spread = MAD_TO_SIGMA * float(np.median(np.abs(worse - centre)))
    typical = float(np.exp(-centre if higher_better else centre))
    # A floor on sigma: a kind whose pairs are all identical (MAD 0) must not make 1 % jitter infinite.
    return typical, max(spread, float(np.log(1.01)))


# The fewest pairs of a kind a typical pair is taken from once the suspect's pairs are left out.
MIN_REFERENCE_PAIRS = 3


def _references(values: np.ndarray, kind: np.ndarray, kind_count: np.ndarray, higher_better: bool,
                keep: Optional[np.ndarray] = None) -> tuple[np.ndarray, np.ndarray]:
    """Per kind code: typical value and log-scale sigma of the pairs in ``keep`` (all when None);
    NaN for a kind of fewer than MIN_KIND_PAIRS pairs, or of too few left in ``keep``."""
    med_of = np.full(len(KINDS), np.nan)
    sig_of = np.full(len(KINDS), np.nan)
    for code in np.flatnonzero(kind_count >= MIN_KIND_PAIRS):
        if kind_count[code] > 2_000_000:
            # A large kind: its typical pair from an evenly strided sample of about 1 M of its pairs.
            step = int(kind_count[code] // 1_000_000)
            chosen = kind[::step] == code
            if keep is not None:
                chosen &= keep[::step]
            vals = values[::step][chosen]
        else:
            chosen = kind == code
            vals = values[chosen & keep] if keep is not None else values[chosen]
        vals = vals[np.isfinite(vals) & (vals > 0)]
        if vals.size < MIN_REFERENCE_PAIRS:
            continue
        med_of[code], sig_of[code] = _robust_centre(vals, higher_better)
    return med_of, sig_of


def _badness(values: np.ndarray, typical: float | np.ndarray, sigma: float | np.ndarray,
             higher_better: bool) -> tuple[np.ndarray, np.ndarray]:
    """How many times worse than typical, and how many robust (log-scale) sigmas on the hurting side."""
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = typical / values if higher_better else values / typical
        return ratio, np.log(ratio) / sigma


def _log_badness(values: np.ndarray, med: np.ndarray, sig: np.ndarray, higher_better: bool
                 ) -> tuple[np.ndarray, np.ndarray]:
    """Per pair: log of how many times worse than ``med``, and that in sigmas ``sig`` (NaN: not judged)."""
    ratio, z = _badness(values, med, sig, higher_better)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.log(ratio), z


def analyse(run: LinkRun, switches: Optional[dict[str, str]] = None,
            thresholds: Thresholds = Thresholds()) -> LinkAnalysis:
    """Classify, compare with typical, attribute, state the power. ``switches`` maps node -> switch (optional).

    Per judged metric:
    - each rank's pairs are compared with the typical pair of their kind among the pairs that do not
      touch the rank's node (re-tested pairs by their re-test); the rank is bad when more than
      ``majority`` of them are beyond the rank's bar: ``ratio`` times worse and ``z`` times the
      spread of the median of its k pairs (sigma * 1.25 / sqrt(k)) -- a node slowed on every link
      moves all its pairs, so its bar is lower than one pair's;
    - every other pair is compared with the typical pair of its kind among the pairs that touch no
      bad rank and are not of its own node pair; beyond ``ratio`` and ``z`` sigmas it is slow, and
      its re-test decides: still beyond the bar, or beyond the link target, a bad link; else
      transient; not re-tested, unconfirmed;
    - the power: the smallest slowdown of a link, and of a node on all its links, that lands beyond
      the bar in 95 of 100 runs with this run's spread (the sigma of the pairs touching no bad rank).
    """
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
    count = len(nodes)
    everything = np.arange(len(a))
    # Not np.bincount: it would first copy the int8 codes of every pair into an intp array.
    kind_count = np.array([np.count_nonzero(kind == code) for code in range(len(KINDS))])
    floor = float(np.log(thresholds.ratio))
    link_floor = float(np.log(thresholds.link_ratio or thresholds.ratio))
    exclude = count <= EXCLUDE_UP_TO_NODES
    link_key = np.minimum(na, nb).astype(np.int64) * count + np.maximum(na, nb)
    for metric, (_, higher_better) in METRICS.items():
        values = first[metric]
        empty = np.empty(0)
        result.slow_index[metric], result.slow_code[metric] = np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int8)
        result.slow_ratio[metric] = result.slow_ratio2[metric] = result.slow_z[metric] = empty
        result.slow_typical[metric] = empty
        result.bad_ranks[metric] = []
        if metric not in thresholds.metrics:
            med_of, sig_of = _references(values, kind, kind_count, higher_better)
            for code in np.flatnonzero(np.isfinite(med_of)):
                result.typical[(metric, KINDS[code])] = (float(med_of[code]), float(sig_of[code]),
                                                         int(kind_count[code]))
            continue
        second = result.second_of(metric, everything)
        judged = np.where(np.isfinite(second), second, values)
        # -- ranks and nodes: each node against the pairs that do not touch it
        node_med = np.empty((count, len(KINDS)))
        node_sig = np.empty((count, len(KINDS)))
        if exclude:
            for i in range(count):
                node_med[i], node_sig[i] = _references(values, kind, kind_count, higher_better,
                                                       (na != i) & (nb != i))
        else:
            node_med[:], node_sig[:] = _references(values, kind, kind_count, higher_better)
        lr_a, z_a = _log_badness(judged, node_med[na, kind], node_sig[na, kind], higher_better)
        lr_b, z_b = _log_badness(judged, node_med[nb, kind], node_sig[nb, kind], higher_better)
        counted_a, counted_b = np.isfinite(lr_a), np.isfinite(lr_b)
        # Who is judged: each rank, or each node with all its ranks' pairs (whole_nodes).
        of_a, of_b, m = (na, nb, count) if thresholds.whole_nodes else (a, b, n)
        k = np.bincount(of_a[counted_a], minlength=m) + np.bincount(of_b[counted_b], minlength=m)
        own_z = thresholds.z * MEDIAN_SPREAD / np.sqrt(np.maximum(k, 1))
        with np.errstate(invalid="ignore"):
            beyond_a = counted_a & (lr_a >= floor) & (z_a >= own_z[of_a])
            beyond_b = counted_b & (lr_b >= floor) & (z_b >= own_z[of_b])
        slow_count = np.bincount(of_a[beyond_a], minlength=m) + np.bincount(of_b[beyond_b], minlength=m)
        # A rank needs at least two peers: with one, the pair cannot say which end is bad.
        bad_owner = (k >= 2) & (slow_count / np.maximum(k, 1) > thresholds.majority)
        if thresholds.whole_nodes:
            bad_owner = _spread_over_peers(bad_owner, slow_count, na, nb, counted_a, counted_b, beyond_a, beyond_b,
                                           thresholds.majority)
        bad_mask = bad_owner[rank_node] if thresholds.whole_nodes else bad_owner
        result.bad_ranks[metric] = np.flatnonzero(bad_mask).tolist()
        node_pairs = []
        for node_i in np.unique(rank_node[bad_mask]):
            ranks = np.flatnonzero(bad_mask & (rank_node == node_i))
            from_a = np.isin(a, ranks)
            touching = np.flatnonzero(from_a | np.isin(b, ranks))
            # Each pair from its bad end (a pair between two bad ranks of one node, once).
            lr = np.where(from_a[touching], lr_a[touching], lr_b[touching])
            slow_here = np.where(from_a[touching], beyond_a[touching], beyond_b[touching])
            finite = np.isfinite(lr)
            worst = int(np.nanargmax(np.where(finite, lr, -np.inf)))
            result.bad_nodes.append(BadNode(
                node=nodes[node_i], metric=metric, ranks=ranks.tolist(), slow_pairs=int(slow_here.sum()),
                pairs=int(finite.sum()), mean_ratio=float(np.exp(np.mean(lr[finite]))),
                median_ratio=float(np.exp(np.median(lr[finite]))), worst_ratio=float(np.exp(lr[worst])),
                worst_pair=(int(a[touching[worst]]), int(b[touching[worst]]))))
            listed = touching[slow_here]
            typical = node_med[node_i, kind[listed]]
            ratio_first, z_first = _badness(values[listed], typical, node_sig[node_i, kind[listed]], higher_better)
            ratio_second, _ = _badness(second[listed], typical, node_sig[node_i, kind[listed]], higher_better)
            node_pairs.append((listed, np.zeros(len(listed), dtype=np.int8), ratio_first, ratio_second,
                               z_first, typical))
        # -- links: every pair touching no bad rank, against the others of its kind but its own node pair
        clean = ~(bad_mask[a] | bad_mask[b])
        med_c, sig_c = _references(values, kind, kind_count, higher_better, clean)
        for code in np.flatnonzero(np.isfinite(med_c)):
            result.typical[(metric, KINDS[code])] = (float(med_c[code]), float(sig_c[code]), int(kind_count[code]))
        bar = np.maximum(link_floor, thresholds.z * sig_c)              # per kind, log scale
        lr_c, z_c = _log_badness(values, med_c[kind], sig_c[kind], higher_better)
        with np.errstate(invalid="ignore"):
            candidate = clean & (lr_c >= bar[kind])
        pair_med, pair_sig = med_c[kind], sig_c[kind]
        if exclude and candidate.any():
            keys = np.unique(link_key[candidate])
            by_worst = sorted(keys.tolist(), key=lambda key: -float(np.nanmax(lr_c[candidate & (link_key == key)])))
            for key in by_worst[:EXCLUDE_UP_TO_LINKS]:
                own = link_key == key
                med_l, sig_l = _references(values, kind, kind_count, higher_better, clean & ~own)
                mine = np.flatnonzero(own & clean)
                pair_med[mine], pair_sig[mine] = med_l[kind[mine]], sig_l[kind[mine]]
                bar_l = np.maximum(link_floor, thresholds.z * sig_l)
                lr_l, _ = _log_badness(values[mine], med_l[kind[mine]], sig_l[kind[mine]], higher_better)
                with np.errstate(invalid="ignore"):
                    candidate[mine] = lr_l >= bar_l[kind[mine]]
        if thresholds.whole_nodes:
            candidate &= _whole_links(candidate, clean, link_key, values, pair_med, pair_sig, higher_better,
                                      link_floor, thresholds.z)
        idx = np.flatnonzero(candidate)
        ratio, z = _badness(values[idx], pair_med[idx], pair_sig[idx], higher_better)
        ratio2, _ = _badness(second[idx], pair_med[idx], pair_sig[idx], higher_better)
        pair_bar = np.exp(np.maximum(link_floor, thresholds.z * pair_sig[idx]))
        target = thresholds.link_target or np.inf
        retested = np.isfinite(second[idx])
        with np.errstate(invalid="ignore"):
            # A re-test still beyond the bar, or beyond the effect the run must see, is never transient.
            again = (ratio2 >= pair_bar) | (ratio2 >= target)
        link_codes = np.where(retested, np.where(again, 1, 2), 3).astype(np.int8)
        parts = node_pairs + [(idx, link_codes, ratio, ratio2, z, pair_med[idx])]
        every = [np.concatenate([p[i] for p in parts]) for i in range(6)]
        order = np.argsort(-every[2], kind="stable")
        result.slow_index[metric], result.slow_code[metric] = every[0][order].astype(np.int64), every[1][order]
        result.slow_ratio[metric], result.slow_ratio2[metric] = every[2][order], every[3][order]
        result.slow_z[metric], result.slow_typical[metric] = every[4][order], every[5][order]
        result.power[metric] = _power(sig_c, kind, kind_count, of_a, of_b, m, (link_floor, floor), thresholds.z)
    result.bad_nodes.sort(key=lambda node: (node.metric != "latency", node.node))
    return result


def _spread_over_peers(bad: np.ndarray, slow_count: np.ndarray, na: np.ndarray, nb: np.ndarray,
                       counted_a: np.ndarray, counted_b: np.ndarray, beyond_a: np.ndarray, beyond_b: np.ndarray,
                       majority: float) -> np.ndarray:
    """Nodes still bad without their pairs to the peer node they are slowest with: a bad link's pairs (every
    rank pair between its two nodes) plus a few slowed by load made most of a node's pairs slow, and named the
    node instead of its link (a link at a quarter, load 7.4). A node's own fault slows its pairs to every peer."""
    out = bad.copy()
    for i in np.flatnonzero(bad):
        peers = np.concatenate([nb[counted_a & (na == i)], na[counted_b & (nb == i)]])
        slow_peers = np.concatenate([nb[beyond_a & (na == i)], na[beyond_b & (nb == i)]])
        # Never empty: most of a bad node's pairs are slow.
        worst = int(np.argmax(np.bincount(slow_peers)))
        rest = int((peers != worst).sum())
        left = int(slow_count[i]) - int((slow_peers == worst).sum())
        out[i] = rest >= 2 and left / rest > majority
    return out


def _whole_links(candidate: np.ndarray, clean: np.ndarray, link_key: np.ndarray, values: np.ndarray,
                 pair_med: np.ndarray, pair_sig: np.ndarray, higher_better: bool, floor: float, z: float
                 ) -> np.ndarray:
    """Per pair: does its link stand beyond the bar as a whole (the median of every clean rank pair between its
    two nodes, whose spread is sigma * 1.25 / sqrt(m))? A cable or port slows every pair it carries."""
    keep = np.ones(candidate.shape, dtype=bool)
    lr, _ = _log_badness(values, pair_med, pair_sig, higher_better)
    for key in np.unique(link_key[candidate]):
        own = np.flatnonzero((link_key == key) & clean)
        finite = lr[own][np.isfinite(lr[own])]
        if not finite.size:
            keep[own] = False
            continue
        needed = max(floor, z * MEDIAN_SPREAD * float(np.nanmean(pair_sig[own])) / np.sqrt(finite.size))
        keep[own] = float(np.median(finite)) >= needed
    return keep


def _power(sig_of: np.ndarray, kind: np.ndarray, kind_count: np.ndarray, a: np.ndarray, b: np.ndarray,
           n: int, floors: tuple[float, float], z: float) -> tuple[float, float]:
    """(smallest link slowdown, smallest node slowdown) that lands beyond this run's bars in 95 of 100 runs,
    from the spread of the kind a fault between nodes is judged in (inter-node or its switch kinds, the
    one with most pairs; intra-node on a one-node run). A node's bar is on the median of its k pairs
    between nodes (k: the typical rank's, or node's when ``a``/``b`` are the pairs' nodes: whole_nodes),
    whose spread is sigma * 1.25 / sqrt(k). ``floors``: the link's and
    the node's ratio, log scale."""
    judged = [code for code in range(len(KINDS)) if np.isfinite(sig_of[code])]
    if not judged:
        return float("inf"), float("inf")
    between = [code for code in judged if code != INTRA] or judged
    code = max(between, key=lambda c: kind_count[c])
    sigma = float(sig_of[code])
    link = float(np.exp(max(floors[0], z * sigma) + POWER_QUANTILE * sigma))
    mine = kind == code
    per_rank = np.bincount(a[mine], minlength=n) + np.bincount(b[mine], minlength=n)
    k = max(float(np.median(per_rank[per_rank > 0])) if (per_rank > 0).any() else 1.0, 1.0)
    spread = MEDIAN_SPREAD * sigma / np.sqrt(k)
    node = float(np.exp(max(floors[1], z * spread) + POWER_QUANTILE * spread))
    return link, node


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
