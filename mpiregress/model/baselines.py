"""Baselines: reference values as data, with provenance, one YAML file per system.

File layout (``baselines/<system>.yaml``)::

    schema: mpiregress-baselines/1
    system: iris
    toolchain: "2023b"
    provenance:
      <name>: {description: ..., runs: N, collected: YYYY-MM-DD, pipelines: [...]}
    references:
      <partition>:
        <method>:
          <placement>:
            <metric>: {value: 2.05, tolerance: 0.15, unit: us, provenance: <name>}

``tolerance`` is a fraction, one-sided in the direction that hurts: latency may
rise by at most value*tolerance (above 1 allowed: a noisy shared host), bandwidth
may fall by at most that much (below 1). A value
better than the band is not a failure of the system but a stale baseline; the
verdict module says so.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from mpiregress.errors import InputError
from mpiregress.model import inputs
from mpiregress.model.names import METHODS, METRICS, PLACEMENTS, PT2PT, SYSTEMS
from mpiregress.model.results import pt2pt_key
from mpiregress.model.series import SeriesKey, freeze

SCHEMA = "mpiregress-baselines/1"


@dataclass(frozen=True)
class Reference:
    """One reference value and its one-sided tolerance band."""

    value: float
    tolerance: float
    unit: str
    provenance: str
    metric: str

    def bounds(self) -> tuple[Optional[float], Optional[float]]:
        """ReFrame-style (lower, upper) fractional thresholds: only the hurting side is bounded."""
        if METRICS[self.metric].higher_is_better:
            return -self.tolerance, None
        return None, self.tolerance

    def limit(self) -> float:
        """The worst value still inside the band."""
        return METRICS[self.metric].limit(self.value, self.tolerance)

    def reframe(self) -> tuple[float, Optional[float], Optional[float], str]:
        """This reference as a ReFrame ``reference`` tuple."""
        lower, upper = self.bounds()
        return (self.value, lower, upper, self.unit)


@dataclass
class Baselines:
    """All references of one system, and where they came from."""

    path: Path
    system: str
    toolchain: str
    provenance: dict[str, dict[str, Any]]
    references: dict[SeriesKey, Reference] = field(default_factory=dict)

    def lookup(self, key: SeriesKey) -> Optional[Reference]:
        """The reference of series ``key``, or None."""
        return self.references.get(key)

    def lookup_pt2pt(self, partition: str, method: str, placement: str, metric: str) -> Optional[Reference]:
        """The reference of a point-to-point series, named the short way."""
        return self.references.get(pt2pt_key(self.system, partition, method, placement, metric))

    def keys(self) -> list[SeriesKey]:
        """Every series this file has a reference for."""
        return list(self.references)


def _fail(path: Path, key: str, message: str) -> InputError:
    return InputError(f"baselines file {path}: {key}: {message}")


def _mapping(path: Path, key: str, value: Any) -> dict:
    if not isinstance(value, dict):
        raise _fail(path, key, f"must be a mapping, found {type(value).__name__}")
    return value


def _number(path: Path, key: str, value: Any, positive: bool = True) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _fail(path, key, f"must be a number, found {value!r}")
    if positive and value <= 0:
        raise _fail(path, key, f"must be positive, found {value!r}")
    return float(value)


def _reference(path: Path, key: str, metric: str, entry: Any, provenance: dict[str, Any]) -> Reference:
    entry = _mapping(path, key, entry)
    value = _number(path, f"{key}.value", entry.get("value"))
    tolerance = _number(path, f"{key}.tolerance", entry.get("tolerance"))
    if METRICS[metric].higher_is_better and tolerance >= 1:
        raise _fail(path, f"{key}.tolerance",
                    f"is the fraction {metric} may fall, below 1 (0.10 = 10 %), found {tolerance!r}")
    unit = entry.get("unit")
    if unit != METRICS[metric].unit:
        raise _fail(path, f"{key}.unit", f"must be {METRICS[metric].unit!r} for {metric}, found {unit!r}")
    prov = entry.get("provenance")
    if not isinstance(prov, str) or prov not in provenance:
        raise _fail(path, f"{key}.provenance",
                    f"{prov!r} is not described under 'provenance' (a baseline without provenance is not accepted)")
    return Reference(value=value, tolerance=tolerance, unit=unit, provenance=prov, metric=metric)


def parse(data: Any, path: Path) -> Baselines:
    """Validate parsed YAML ``data`` from ``path``; every error names the file and the key."""
    top = _mapping(path, "<top level>", data)
    if top.get("schema") != SCHEMA:
        raise _fail(path, "schema", f"must be '{SCHEMA}', found {top.get('schema')!r}")
    system = top.get("system")
    if system not in SYSTEMS:
        raise _fail(path, "system", f"must be one of {', '.join(SYSTEMS)}, found {system!r}")
    toolchain = top.get("toolchain")
    if not isinstance(toolchain, str) or not toolchain:
        raise _fail(path, "toolchain", "must name the toolchain generation, e.g. \"2023b\"")
    provenance = _mapping(path, "provenance", top.get("provenance"))
    for name, record in provenance.items():
        record = _mapping(path, f"provenance.{name}", record)
        if not isinstance(record.get("description"), str) or not record["description"].strip():
            raise _fail(path, f"provenance.{name}.description", "must say where the values came from")
        runs = record.get("runs")
        if isinstance(runs, bool) or not isinstance(runs, int) or runs < 1:
            raise _fail(path, f"provenance.{name}.runs", f"must be a whole number >= 1, found {runs!r}")
        if "collected" not in record:
            raise _fail(path, f"provenance.{name}.collected", "is missing (the date the values were measured)")
    result = Baselines(path=path, system=system, toolchain=toolchain, provenance=provenance)
    partitions = _mapping(path, "references", top.get("references"))
    for partition, methods in partitions.items():
        for method, placements in _mapping(path, f"references.{partition}", methods).items():
            if method not in METHODS:
                raise _fail(path, f"references.{partition}.{method}",
                            f"unknown build method (known: {', '.join(METHODS)})")
            for placement, metrics in _mapping(path, f"references.{partition}.{method}", placements).items():
                if placement not in PLACEMENTS:
                    raise _fail(path, f"references.{partition}.{method}.{placement}",
                                f"unknown placement (known: {', '.join(PLACEMENTS)})")
                for metric, entry in _mapping(path, f"references.{partition}.{method}.{placement}", metrics).items():
                    key = f"references.{partition}.{method}.{placement}.{metric}"
                    if metric not in PT2PT:
                        raise _fail(path, key, f"unknown point-to-point metric (known: {', '.join(PT2PT)})")
                    result.references[pt2pt_key(system, partition, method, placement, metric)] = _reference(
                        path, key, metric, entry, provenance)
    series = top.get("series", [])
    if not isinstance(series, list):
        raise _fail(path, "series", f"must be a list of series, found {type(series).__name__}")
    for i, entry in enumerate(series):
        key = f"series[{i}]"
        entry = _mapping(path, key, entry)
        for name in ("partition", "method", "benchmark", "metric"):
            if not isinstance(entry.get(name), str) or not entry[name]:
                raise _fail(path, f"{key}.{name}", f"must be a non-empty name, found {entry.get(name)!r}")
        if entry["method"] not in METHODS:
            raise _fail(path, f"{key}.method", f"unknown build method (known: {', '.join(METHODS)})")
        if entry["metric"] not in METRICS:
            raise _fail(path, f"{key}.metric", f"unknown metric (known: {', '.join(METRICS)})")
        params = _mapping(path, f"{key}.parameters", entry.get("parameters", {}))
        for pname, pvalue in params.items():
            if isinstance(pvalue, (bool, float)) or not isinstance(pvalue, (int, str)):
                raise _fail(path, f"{key}.parameters.{pname}", f"must be a whole number or a name, found {pvalue!r}")
        ref_key = SeriesKey(system, entry["partition"], entry["method"], entry["benchmark"], freeze(params),
                            entry["metric"])
        if ref_key in result.references:
            raise _fail(path, key, "names a series that already has a reference in this file")
        result.references[ref_key] = _reference(path, key, entry["metric"], entry, provenance)
    return result


def load(path: Path) -> Baselines:
    """Load and validate the baselines file at ``path``."""
    path = Path(path)
    data = inputs.read_yaml(path, "baselines file", expect=None)
    return parse(data, path)


def for_system(system: str, directory: Path) -> Baselines:
    """The baselines of ``system`` from ``directory``/<system>.yaml, checked to be that system's."""
    baselines = load(Path(directory) / f"{system}.yaml")
    if baselines.system != system:
        raise _fail(baselines.path, "system", f"is {baselines.system!r} but the file is for {system!r}")
    return baselines
