"""Why a series failed: one sentence per failing series, from evidence already measured.

Causes, in the order they are tried (the first that fits names the cause):

* **noise / link** - the noise probe (``{node: (efficiency, (low, high))}``) or the
  link matrix (``{"bad_nodes": [...], "bad_links": [[n1, n2], ...], "measured": time}``, see
  :func:`mpiregress.links.series.findings`) flagged a node
  or link the series ran on. For a paired verdict this is only a remark: A ran on
  the same nodes, so a noisy node cannot make B alone worse.
* **build** - one build method only: B is worse than A for this method while the
  other methods on the same series and nodes are fine (paired), or, without A,
  this method is worse than history while the others on the same nodes are not.
* **toolchain** - B (the MR) is worse than A (the target branch) on the same nodes,
  in several methods or in the only one measured.
* **system** - A and B both worse than history (the paired verdict passes: the MR
  is innocent, the machine changed), or, without A, every method on the series is
  worse than history; the sentence names the nodes the samples ran on.
* **node** - without A: the failing series share one node, across at least two
  placements (or parameter sets), and the series that did not run on it are fine.

Pure functions over plain data: :class:`Observation` per series (what the paired
and history verdicts found) plus the probe and link findings passed in as dicts.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Optional, Sequence

from .paired import SeriesId, series_name

FAILING: frozenset[str] = frozenset({"regression"})

NoiseProbe = Mapping[str, tuple[float, tuple[float, float]]]   # node -> (efficiency, usual band)
LinkFindings = Mapping[str, Any]        # bad_nodes: [node], bad_links: [[a, b]], measured: time (links.series)


@dataclass(frozen=True)
class Observation:
    """One series of the run, as attribution sees it."""

    key: SeriesId                       # (system, partition, method, benchmark, parameters, metric)
    verdict: str                        # the paired verdict, or the history gate's when there was no A
    nodes: tuple[str, ...]              # every node its samples ran on
    ab_effect: Optional[float] = None   # B vs A, relative, positive = worse; None without A
    a_vs_history: Optional[float] = None   # A's level vs the accepted history, positive = worse
    b_vs_history: Optional[float] = None   # B's (or the only run's) level vs history

    @property
    def method(self) -> str:
        return self.key.method

    @property
    def where(self) -> tuple[Any, ...]:
        """The series without its method: what other build methods measured alike."""
        return self.key.without()

    @property
    def placement(self) -> tuple[Any, ...]:
        """The series without method and metric: a placement (or parameter set) on a partition."""
        k = self.key
        return (k.system, k.partition, k.benchmark, k.parameters)


@dataclass(frozen=True)
class Cause:
    """The likely cause of one failing series."""

    key: SeriesId
    kind: str        # toolchain | build | system | node | noise | link | unexplained
    sentence: str


def _pct(x: Optional[float]) -> str:
    return "?" if x is None else f"{x:+.1%}"


def _nodes(nodes: Iterable[str]) -> str:
    listed = sorted(set(nodes))
    return ", ".join(listed) if listed else "nodes not recorded"


def flagged_nodes(nodes: Sequence[str], noise: Optional[NoiseProbe],
                  links: Optional[LinkFindings]) -> tuple[str, str]:
    """(kind, clause) when the noise probe or link matrix flagged one of ``nodes``, else ('', '')."""
    involved = set(nodes)
    for node in sorted(involved):
        if noise and node in noise:
            efficiency, (low, _high) = noise[node]
            if efficiency < low:
                return "noise", (f"the noise probe flagged {node} (efficiency {efficiency:.2f}, usual "
                                 f"{low:.2f}-{_high:.2f})")
    if links:
        matrix = f"the link matrix of {links['measured'][:10]}" if links.get("measured") else "the link matrix"
        bad = sorted(involved & set(links.get("bad_nodes", [])))
        if bad:
            return "link", f"{matrix} flagged node {', '.join(bad)}"
        for a, b in links.get("bad_links", []):
            if a in involved and b in involved:
                return "link", f"{matrix} flagged the link {a}-{b}"
    return "", ""


def _bad_vs_history(o: Observation, delta: float) -> bool:
    return o.b_vs_history is not None and o.b_vs_history > delta


def needing_a_cause(observations: Sequence[Observation], min_effect: float = 0.03) -> list[Observation]:
    """The series that get a cause: verdict regression, or A and B both worse than history. Callers read
    the noise and link evidence only when there is one (it costs a scan of the history)."""
    return [o for o in observations if o.verdict in FAILING or _system_suspect(o, min_effect)]


def attribute(observations: Sequence[Observation], noise: Optional[NoiseProbe] = None,
              links: Optional[LinkFindings] = None, min_effect: float = 0.03) -> list[Cause]:
    """One cause per series of :func:`needing_a_cause`."""
    return [_one(o, observations, noise, links, min_effect) for o in needing_a_cause(observations, min_effect)]


def _system_suspect(o: Observation, delta: float) -> bool:
    both = o.a_vs_history is not None and o.b_vs_history is not None
    return both and o.a_vs_history > delta and o.b_vs_history > delta  # type: ignore[operator]


def _one(o: Observation, every: Sequence[Observation], noise: Optional[NoiseProbe],
         links: Optional[LinkFindings], delta: float) -> Cause:
    name = series_name(o.key)
    flag_kind, flag = flagged_nodes(o.nodes, noise, links)
    if o.ab_effect is not None and o.verdict in FAILING:
        remark = f"; {flag}, but A ran on it too, so that does not explain B alone" if flag else ""
        peers = [p for p in every if p.where == o.where and p.method != o.method and p.ab_effect is not None
                 and set(p.nodes) == set(o.nodes)]
        if peers and all(p.verdict not in FAILING and p.ab_effect <= delta for p in peers):  # type: ignore[operator]
            fine = ", ".join(f"{p.method} {_pct(p.ab_effect)}" for p in sorted(peers, key=lambda p: p.method))
            return Cause(o.key, "build", f"build: {name} is {_pct(o.ab_effect)} in B vs A, only the {o.method} "
                         f"build, while {fine} on the same nodes ({_nodes(o.nodes)}){remark}")
        also = sorted(p.method for p in peers if p.verdict in FAILING)
        spread = f", as do {', '.join(also)}" if also else ""
        return Cause(o.key, "toolchain", f"toolchain: {name} is {_pct(o.ab_effect)} worse in B (the MR) than in A "
                     f"(the target branch) on the same nodes ({_nodes(o.nodes)}){spread}{remark}")
    if flag_kind:
        return Cause(o.key, flag_kind, f"{flag_kind}: {name} is {_pct(o.b_vs_history)} vs history and {flag}")
    if _system_suspect(o, delta):
        return Cause(o.key, "system", f"system: {name} is worse than history in A ({_pct(o.a_vs_history)}) and "
                     f"in B ({_pct(o.b_vs_history)}) alike, so the machine changed, not the MR; samples ran on "
                     f"{_nodes(o.nodes)}")
    node = _follows_node(o, every, delta)
    if node:
        return node
    peers = [p for p in every if p.where == o.where and p.method != o.method and set(p.nodes) == set(o.nodes)]
    if peers and all(not _bad_vs_history(p, delta) and p.verdict not in FAILING for p in peers):
        fine = ", ".join(sorted(p.method for p in peers))
        return Cause(o.key, "build", f"build: {name} is {_pct(o.b_vs_history)} vs history, only the {o.method} "
                     f"build, while {fine} are fine on the same nodes ({_nodes(o.nodes)})")
    if peers:
        return Cause(o.key, "system", f"system: {name} is {_pct(o.b_vs_history)} vs history and every build "
                     f"method on it is worse too, on {_nodes(o.nodes)}")
    return Cause(o.key, "unexplained", f"unexplained: {name} is {_pct(o.b_vs_history)} vs history on "
                 f"{_nodes(o.nodes)} and nothing else measured points at a cause; confirm it in a fresh allocation")


def _follows_node(o: Observation, every: Sequence[Observation], delta: float) -> Optional[Cause]:
    """A node shared by every failing series, across placements, whose absence means a pass."""
    failing = [p for p in every if p.ab_effect is None and (p.verdict in FAILING or _bad_vs_history(p, delta))]
    if len({p.placement for p in failing}) < 2:
        return None
    common = set.intersection(*(set(p.nodes) for p in failing))
    for node in sorted(common & set(o.nodes)):
        without = [p for p in every if node not in p.nodes and p.ab_effect is None]
        if without and all(p.verdict not in FAILING and not _bad_vs_history(p, delta) for p in without):
            places = len({p.placement for p in failing})
            return Cause(o.key, "node", f"node: {series_name(o.key)} is {_pct(o.b_vs_history)} vs history, and "
                         f"the regression follows {node} across {len(failing)} series and {places} placements; "
                         f"the {len(without)} series that did not run on {node} are fine")
    return None


def observation(verdict: Any, a_vs_history: Optional[float] = None,
                b_vs_history: Optional[float] = None) -> Observation:
    """An Observation from a :class:`~mpiregress.ab.paired.PairedVerdict` (history figures optional)."""
    paired_basis = verdict.basis == "paired"
    return Observation(key=verdict.key, verdict=verdict.verdict, nodes=tuple(verdict.nodes),
                       ab_effect=verdict.effect if paired_basis else None, a_vs_history=a_vs_history,
                       b_vs_history=b_vs_history if b_vs_history is not None or paired_basis else verdict.effect)


def sentences(causes: Iterable[Cause]) -> dict[SeriesId, str]:
    """Cause sentence by series, for the report rows."""
    return {c.key: c.sentence for c in causes}


def by_kind(causes: Iterable[Cause]) -> Mapping[str, int]:
    """How many failing series each cause explains."""
    out: dict[str, int] = {}
    for c in causes:
        out[c.kind] = out.get(c.kind, 0) + 1
    return out
