"""Seed 002's latency models (section 3.2): small-message collective latency from point-to-point latencies.

The seed assumes instantaneous data transfer (4-byte messages), so a collective costs
the set-up latencies of its point-to-point messages, which depend on where the two
ranks sit (the topology region of the pair). With T(i, j) the point-to-point latency of
ranks i and j (from the project's pt2pt placements: same_numa, cross_numa, cross_socket,
cross_node), n ranks and root 0:

- pipeline (eq. 1): T = sum over i = 0..n-2 of T(i, i+1), hop by hop;
- linear (eq. 2): T = sum over i = 1..n-1 of T(0, i) * discount(i), the root sending to
  each rank in turn; the seed's empirical discount (later sends overlap) defaults to 1
  here: no discount, so the model is an upper bound the report can show as such;
- binary tree (eq. 3): T = n_proc_pen(n) + sum over the H(n) levels of
  T_max(level) * (1 + comm_pen(level)), T_max being the slowest parent-child message of a
  level (children of i are 2i+1, 2i+2); the seed's empirical penalties default to 0;
- binomial: the same level sum over a binomial tree (at step k rank r < 2^k sends to
  r + 2^k), which the seed used for scatter's binomial algorithm.

Ranks are laid out like Slurm's ``--distribution``: nodes in blocks, then within a node
``block`` (consecutive cores, the seed's ``--map-by core``) or ``cyclic`` (round robin
over sockets, the seed's ``--map-by socket``).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Mapping, Optional, Sequence, Union

from mpiregress.errors import InputError
from mpiregress.families.coll.sweep import format_size
from mpiregress.model.topology import Topology

Penalty = Union[float, Callable[[int], float]]


def _call(value: Penalty, arg: int) -> float:
    return value(arg) if callable(value) else float(value)


def layout(topology: Topology, nprocs: int, nodes: int, distribution: str) -> list[tuple[int, int]]:
    """(node, core) of every rank for ``srun -N nodes -n nprocs --distribution=...``; InputError if it cannot fit."""
    if nodes < 1 or nprocs < 1 or nprocs % nodes:
        raise InputError(f"{nprocs} ranks do not split evenly over {nodes} node(s)")
    per_node = nprocs // nodes
    cores = list(topology.cores)
    if per_node > len(cores):
        raise InputError(f"{per_node} ranks per node do not fit the {len(cores)} cores of a node")
    parts = distribution.split(":")
    within = parts[1] if len(parts) > 1 else "block"
    if within == "block":
        order = cores
    elif within == "cyclic":
        sockets = [group for _, group in sorted(topology.sockets().items())]
        order = [group[i] for i in range(max(len(g) for g in sockets)) for group in sockets if i < len(group)]
    else:
        raise InputError(f"distribution {distribution!r} is not block:block or block:cyclic")
    return [(rank // per_node, order[rank % per_node]) for rank in range(nprocs)]


def region(topology: Topology, a: tuple[int, int], b: tuple[int, int]) -> str:
    """The project's placement name for two ranks at (node, core) a and b."""
    if a[0] != b[0]:
        return "cross_node"
    if topology.socket_of[a[1]] != topology.socket_of[b[1]]:
        return "cross_socket"
    if topology.numa_of[a[1]] != topology.numa_of[b[1]]:
        return "cross_numa"
    return "same_numa"


@dataclass(frozen=True)
class Pt2pt:
    """Point-to-point latency (us) between two ranks of a layout, from per-region latencies."""

    topology: Topology
    ranks: Sequence[tuple[int, int]]
    latency: Mapping[str, float]

    def __call__(self, i: int, j: int) -> float:
        where = region(self.topology, self.ranks[i], self.ranks[j])
        if where not in self.latency:
            raise InputError(f"no point-to-point latency for region {where} (ranks {i} and {j}); "
                             f"measured: {', '.join(sorted(self.latency)) or 'none'}")
        return self.latency[where]


def pipeline(t: Pt2pt, n: int) -> float:
    """Seed eq. 1: sum of the hops between consecutive ranks."""
    return sum(t(i, i + 1) for i in range(n - 1))


def linear(t: Pt2pt, n: int, discount: Penalty = 1.0) -> float:
    """Seed eq. 2: the root's messages to every rank, each weighted by ``discount(i)``."""
    return sum(t(0, i) * _call(discount, i) for i in range(1, n))


def _levels_binary(n: int) -> list[list[tuple[int, int]]]:
    levels: list[list[tuple[int, int]]] = []
    frontier = [0]
    while True:
        edges = [(p, c) for p in frontier for c in (2 * p + 1, 2 * p + 2) if c < n]
        if not edges:
            return levels
        levels.append(edges)
        frontier = [c for _, c in edges]


def _levels_binomial(n: int) -> list[list[tuple[int, int]]]:
    return [[(r, r + (1 << k)) for r in range(1 << k) if r + (1 << k) < n]
            for k in range(math.ceil(math.log2(n))) if n > 1]


def tree(t: Pt2pt, n: int, kind: str = "binary", n_proc_pen: Penalty = 0.0, comm_pen: Penalty = 0.0) -> float:
    """Seed eq. 3: per level the slowest parent-child message, plus the seed's penalties (default 0)."""
    levels = _levels_binary(n) if kind == "binary" else _levels_binomial(n)
    return _call(n_proc_pen, n) + sum(max(t(p, c) for p, c in edges) * (1 + _call(comm_pen, level))
                                      for level, edges in enumerate(levels, start=1))


def predict(model: str, topology: Topology, nprocs: int, nodes: int, distribution: str,
            latency: Mapping[str, float]) -> float:
    """The model's latency (us) for ``nprocs`` ranks laid out by ``distribution`` over ``nodes``."""
    t = Pt2pt(topology, layout(topology, nprocs, nodes, distribution), latency)
    if model == "pipeline":
        return pipeline(t, nprocs)
    if model == "linear":
        return linear(t, nprocs)
    if model in ("binary", "binomial"):
        return tree(t, nprocs, model)
    raise InputError(f"unknown latency model {model!r} (known: pipeline, linear, binary, binomial)")


@dataclass(frozen=True)
class ModelPoint:
    collective: str
    algorithm: str
    model: str
    nprocs: int
    nodes: int
    distribution: str
    size: int
    measured: float
    predicted: float

    @property
    def error(self) -> float:
        """(model - measured) / measured: negative when the model underestimates."""
        return (self.predicted - self.measured) / self.measured if self.measured > 0 else float("inf")

    def sentence(self) -> str:
        return (f"{self.collective} {self.algorithm}, {self.nprocs} ranks ({self.nodes} node"
                f"{'s' if self.nodes > 1 else ''}, {self.distribution}), {format_size(self.size)}: measured "
                f"{self.measured:.2f} us, {self.model} model {self.predicted:.2f} us ({self.error * 100:+.0f} %)")


def compare(measured: Mapping[tuple[str, str, int, int, str, int], float],
            models_of: Mapping[tuple[str, str], Optional[str]],
            topology: Topology, latency: Mapping[str, float]) -> list[ModelPoint]:
    """Model against measurement for every measured (collective, algorithm, nprocs, nodes, distribution, size)
    whose algorithm has a model in ``models_of`` ((collective, algorithm) -> model name)."""
    out = []
    for (coll, alg, nprocs, nodes, dist, size), value in sorted(measured.items()):
        model = models_of.get((coll, alg))
        if model is None:
            continue
        out.append(ModelPoint(coll, alg, model, nprocs, nodes, dist, size, value,
                              predict(model, topology, nprocs, nodes, dist, latency)))
    return out


def far_from_model(points: Sequence[ModelPoint], limit: float = 0.5) -> list[str]:
    """Sentences for the points whose relative error exceeds ``limit`` (0.5 = 50 %), worst first."""
    far = [p for p in points if abs(p.error) > limit]
    far.sort(key=lambda p: -abs(p.error))
    return [p.sentence() for p in far]
