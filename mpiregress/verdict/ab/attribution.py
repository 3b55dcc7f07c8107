"""Why a series failed: one sentence per failing series, from evidence already measured.

Causes, in the order they are tried (the first that fits names the cause):

* **noise / link** - the noise probe (``{node: (efficiency, (low, high))}``) or the
  link matrix (``{"bad_nodes": [...], "bad_links": [[n1, n2], ...], "measured": time}``, see
  :func:`mpiregress.families.links.series.findings`) flagged a node
  or link the series ran on. For a paired verdict this is only a remark: A ran on
  the same nodes, so a noisy node cannot make B alone worse.
* **build** - one build method only: B is worse than A for this method while the
  other methods on the same series and nodes are fine (paired), or, without A,
  this method regressed while the other methods measured on the same nodes passed.
* **toolchain** - B (the MR) is worse than A (the target branch) on the same nodes,
  in several methods or in the only one measured.
* **system** - A and B both worse than history (the paired verdict passes: the MR
  is innocent, the machine changed), or, without A, every method measured on the same
  nodes regressed; the sentence names the nodes the samples ran on.
* **node** - without A: in this run the same measurement (the series apart from its
  method) regressed wherever one node took part and passed on other nodes, and the
  build method is ruled out (two methods regressed on the node, or one method both
  regressed on it and passed elsewhere).
* **unexplained** - nothing above holds; the sentence says what is known (how many
  series regressed, what passed on the same nodes, whether another node ran it,
  whether there is history) and asks for a confirmation in a fresh allocation.

Only judged series are evidence: a skipped, errored or noisy series is neither a pass
nor a failure. A level is said "vs history" only when history judged it (``basis``).

Pure functions over plain data: :class:`Observation` per series (what the paired
and history verdicts found) plus the probe and link findings passed in as dicts.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Optional, Sequence

from mpiregress.verdict.ab.paired import SeriesId, series_name

FAILING: frozenset[str] = frozenset({"regression"})
PASSED: frozenset[str] = frozenset({"pass", "improvement"})
JUDGED: frozenset[str] = FAILING | PASSED      # skip, error, noisy, inconclusive: not evidence either way

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
    b_vs_history: Optional[float] = None   # B's (or the only run's) level vs history (or vs ``basis``)
    basis: str = "history"              # what the levels are against: history | baseline | run | none
    history_runs: Optional[int] = None  # accepted runs of history the verdict had (None: not known)

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


def _level(o: Observation) -> str:
    """'is +9.0% vs history': the level against what judged it, never 'vs history' without history."""
    if o.b_vs_history is None:
        return "regressed"
    against = {"history": "vs history", "baseline": "vs its baseline"}.get(o.basis, "vs its reference")
    return f"is {_pct(o.b_vs_history)} {against}"


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
        return Cause(o.key, flag_kind, f"{flag_kind}: {name} {_level(o)} and {flag}")
    if _system_suspect(o, delta):
        return Cause(o.key, "system", f"system: {name} is worse than history in A ({_pct(o.a_vs_history)}) and "
                     f"in B ({_pct(o.b_vs_history)}) alike, so the machine changed, not the MR; samples ran on "
                     f"{_nodes(o.nodes)}")
    node = _node_contrast(o, every)
    if node:
        return node
    peers = [p for p in _judged(every) if p.where == o.where and p.method != o.method
             and set(p.nodes) == set(o.nodes)]
    failed = sorted(p.method for p in peers if p.verdict in FAILING)
    passed = sorted(p.method for p in peers if p.verdict in PASSED)
    if passed and not failed:
        return Cause(o.key, "build", f"build: {name} {_level(o)}, only the {o.method} build: {', '.join(passed)} "
                     f"passed on the same nodes ({_nodes(o.nodes)}) in this run")
    if passed:
        return Cause(o.key, "build", f"build: {name} {_level(o)}; on the same nodes ({_nodes(o.nodes)}) "
                     f"{', '.join([o.method, *failed])} regressed while {', '.join(passed)} passed in this run")
    if failed:
        return Cause(o.key, "system", f"system: {name} {_level(o)}, and every other build method measured on "
                     f"the same nodes ({_nodes(o.nodes)}) regressed too ({', '.join(failed)}): the machine or "
                     f"these nodes changed, not one build")
    return Cause(o.key, "unexplained", _unexplained(o, every))


def _judged(every: Sequence[Observation]) -> list[Observation]:
    """The series of the run without A that were judged: skips, errors and noisy series are no evidence."""
    return [p for p in every if p.ab_effect is None and p.verdict in JUDGED]


def _unexplained(o: Observation, every: Sequence[Observation]) -> str:
    """What is known when nothing points at a cause, each clause from the run's own series."""
    judged = _judged(every)
    regressed = [p for p in judged if p.verdict in FAILING]
    mine = set(o.nodes)
    beside = [p for p in judged if p.key != o.key and p.verdict in PASSED and mine & set(p.nodes)]
    clauses = ["only this series regressed" if len(regressed) <= 1 else f"{len(regressed)} series regressed"]
    if beside:
        where = " or ".join(sorted(mine & {n for p in beside for n in p.nodes}))
        clauses[0] += f", and the {len(beside)} other series measured on {where} passed"
    elsewhere = [p for p in judged if p.where == o.where and not (mine & set(p.nodes))]
    if not elsewhere:
        clauses.append("no other node ran it in this run")
    else:
        said = ", ".join(f"{p.method} on {_nodes(p.nodes)} {'regressed' if p.verdict in FAILING else 'passed'}"
                         for p in sorted(elsewhere, key=lambda p: (p.method, p.nodes)))
        clauses.append(f"on other nodes {said}, which does not tell the node from the build")
    if o.history_runs == 0:
        clauses[-1] += ", and there is no history of it"
    elif o.basis != "history" and o.history_runs is not None:
        clauses[-1] += f", and its history has {o.history_runs} accepted run(s), too few to judge by"
    return (f"unexplained: {series_name(o.key)} {_level(o)} on {_nodes(o.nodes)}; {'; '.join(clauses)}; "
            f"confirm it in a fresh allocation")


def _node_contrast(o: Observation, every: Sequence[Observation]) -> Optional[Cause]:
    """A node of ``o`` with which the same measurements regressed and without which they passed, in this run.

    A slot is one measurement apart from its method (:attr:`Observation.where`); it contrasts on a node
    when every judged series of it that ran there regressed and every one that did not passed. ``o``'s
    own slot must contrast, and the build method must be ruled out over the contrasting slots: two
    methods regressed on the node, or one method both regressed on it and passed elsewhere.
    """
    slots: dict[tuple[Any, ...], list[Observation]] = {}
    for p in _judged(every):
        slots.setdefault(p.where, []).append(p)
    found: list[tuple[int, str, list[Observation], list[Observation]]] = []
    for node in sorted(set(o.nodes)):
        on: list[Observation] = []
        off: list[Observation] = []
        mine = False
        for where, group in slots.items():
            with_node = [p for p in group if node in p.nodes]
            without = [p for p in group if node not in p.nodes]
            if with_node and without and all(p.verdict in FAILING for p in with_node) \
                    and all(p.verdict in PASSED for p in without):
                on += with_node
                off += without
                mine = mine or where == o.where
        failing_methods = {p.method for p in on}
        if mine and (len(failing_methods) > 1 or failing_methods & {p.method for p in off}):
            found.append((len(on) + len(off), node, on, off))
    if not found:
        return None
    best = max(score for score, *_ in found)
    (_, node, on, off), *tied = [f for f in found if f[0] == best]
    suspect = node if not tied else "one of " + ", ".join([node, *(t[1] for t in tied)])
    methods = ", ".join(sorted({p.method for p in on}))
    others = _nodes(n for p in off for n in p.nodes)
    return Cause(o.key, "node", f"node: {series_name(o.key)} {_level(o)}; in this run the same measurements "
                 f"regressed wherever {suspect} took part ({len(on)} series, {methods}) and passed on other "
                 f"nodes ({len(off)} series, on {others})")


def observation(verdict: Any, a_vs_history: Optional[float] = None,
                b_vs_history: Optional[float] = None) -> Observation:
    """An Observation from a :class:`~mpiregress.verdict.ab.paired.PairedVerdict` (history figures optional)."""
    paired_basis = verdict.basis == "paired"
    own = b_vs_history is None and not paired_basis      # the level is the verdict's own effect, on its basis
    return Observation(key=verdict.key, verdict=verdict.verdict, nodes=tuple(verdict.nodes),
                       ab_effect=verdict.effect if paired_basis else None, a_vs_history=a_vs_history,
                       b_vs_history=verdict.effect if own else b_vs_history,
                       basis=verdict.basis if own else "history")


def sentences(causes: Iterable[Cause]) -> dict[SeriesId, str]:
    """Cause sentence by series, for the report rows."""
    return {c.key: c.sentence for c in causes}


def by_kind(causes: Iterable[Cause]) -> Mapping[str, int]:
    """How many failing series each cause explains."""
    out: dict[str, int] = {}
    for c in causes:
        out[c.kind] = out.get(c.kind, 0) + 1
    return out
