"""The identity of a series: what is measured, where, built how, with which parameters.

A series is (system, partition, method, benchmark, parameters, metric), where
``parameters`` is an ordered mapping, most significant first: placement and
message size for point-to-point; nprocs, nodes, distribution, algorithm and size
for collectives; a node or a node pair for the link matrix; node and core layout
for noise. History, baselines, the gate, change points, consistency, proposals
and reports all key on this, so a new family of checks needs no new columns.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Mapping, Optional, Union

from mpiregress.model.names import PT2PT

Param = Union[str, int]
Params = tuple[tuple[str, Param], ...]


def freeze(parameters: Mapping[str, Any]) -> Params:
    """An ordered, hashable copy of ``parameters`` (ints stay ints, everything else becomes text)."""
    frozen = []
    for name, value in parameters.items():
        if isinstance(value, bool) or not isinstance(value, int):
            value = str(value)
        frozen.append((str(name), value))
    return tuple(frozen)


def params_json(parameters: Union[Params, Mapping[str, Any]]) -> str:
    """The canonical text of ``parameters`` (insertion order kept): how the history stores them."""
    items = parameters.items() if isinstance(parameters, Mapping) else parameters
    return json.dumps(dict(freeze(dict(items))), separators=(",", ":"))


def params_from_json(text: str) -> Params:
    """The inverse of :func:`params_json`."""
    data = json.loads(text)
    if not isinstance(data, dict):
        raise ValueError(f"series parameters must be a mapping, found {text!r}")
    return freeze(data)


def params_text(parameters: Params) -> str:
    """``placement=same_numa size=8192``: parameters in a sentence."""
    return " ".join(f"{name}={value}" for name, value in parameters)


def _sortable(parameters: Params) -> tuple:
    # Numbers sort as numbers (8 before 16) and never meet text in a comparison.
    return tuple((name, (0, value, "") if isinstance(value, int) else (1, 0, value)) for name, value in parameters)


@dataclass(frozen=True)
class SeriesKey:
    """One series: everything that must be equal for two measurements to be compared."""

    system: str
    partition: str
    method: str
    benchmark: str
    parameters: Params
    metric: str

    def param(self, name: str, default: Optional[Param] = None) -> Optional[Param]:
        """The value of parameter ``name``, or ``default``."""
        return dict(self.parameters).get(name, default)

    @property
    def placement(self) -> str:
        return str(self.param("placement", ""))

    def pt2pt_placement(self) -> Optional[str]:
        """The placement of a point-to-point series at its metric's own message size (the seed study's
        eight series per build); None for any other series."""

        spec = PT2PT.get(self.metric)
        if spec and self.benchmark == spec.benchmark and self.parameters == (("placement", self.placement),
                                                                              ("size", spec.size)):
            return self.placement
        return None

    def label(self) -> str:
        """The series apart from system, partition, method and metric: the placement for the standard
        point-to-point series, else the benchmark and its parameters."""
        placement = self.pt2pt_placement()
        if placement is not None:
            return placement
        params = params_text(self.parameters)
        return f"{self.benchmark} {params}" if params else self.benchmark

    def name(self) -> str:
        """``system/partition method label metric``: how a series is named in sentences."""
        return f"{self.system}/{self.partition} {self.method} {self.label()} {self.metric}"

    def sort_key(self) -> tuple:
        return (self.system, self.partition, self.method, self.benchmark, _sortable(self.parameters), self.metric)

    def __lt__(self, other: "SeriesKey") -> bool:
        return self.sort_key() < other.sort_key()

    def without(self, *names: str) -> tuple:
        """The key with ``method`` and the named parameters left out: what builds or variants are compared over."""
        kept = tuple((n, v) for n, v in self.parameters if n not in names)
        return (self.system, self.partition, self.benchmark, kept, self.metric)
