"""The collective sweep as data (``checks/config/coll_sweep.yaml``), expanded into job steps for a partition.

One step is one OSU invocation: (collective, algorithm, nprocs, nodes, distribution,
message-size range, iterations, warm-up). The check runs the steps; the cost benchmark
counts and times them. The algorithms come from the toolchain OpenMPI's coll/tuned data,
process counts from the partition's cores per node.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Optional, Sequence

import yaml

from mpiregress import paths
from mpiregress.errors import InputError
from mpiregress.families.coll.algorithms import COLLECTIVES, DEFAULT, TunedAlgorithms, forced_env, parse_segsize
from mpiregress.families.osu_output import OsuOutputError, parse_size_range
from mpiregress.model.launch import DISTRIBUTIONS

NPROCS_KEYWORDS = ("powers_of_two", "full_node", "two_nodes")
# OSU 7.2's own defaults: 1000 iterations / 200 warm-up up to 8 KiB, 100 / 10 above.
OSU_LARGE_MESSAGE = 8192
OSU_DEFAULTS = ((1, OSU_LARGE_MESSAGE, 1000, 200), (OSU_LARGE_MESSAGE + 1, 1 << 30, 100, 10))


def sweep_file() -> Path:
    """The sweep definition: ``$MPIREGRESS_COLL_SWEEP`` (a site's or a test's own), else
    checks/config/coll_sweep.yaml."""
    explicit = os.environ.get("MPIREGRESS_COLL_SWEEP")
    return Path(explicit) if explicit else paths.checks_dir() / "config" / "coll_sweep.yaml"


@dataclass(frozen=True)
class SizeRange:
    """One OSU invocation's sizes (``-m low:high``) and, if set, its ``-i``/``-x``."""

    low: int
    high: int
    iterations: Optional[int] = None
    warmup: Optional[int] = None

    def osu_args(self) -> list[str]:
        args = ["-m", f"{self.low}:{self.high}"]
        if self.iterations is not None:
            args += ["-i", str(self.iterations)]
        if self.warmup is not None:
            args += ["-x", str(self.warmup)]
        return args

    def sizes(self) -> list[int]:
        out, size = [], self.low
        while size <= self.high:
            out.append(size)
            size = size * 2 if size else 1
        return out

    def iterations_at(self, size: int) -> tuple[int, int]:
        """(iterations, warm-up) OSU uses at ``size`` with this range's options."""
        for low, high, iters, warm in OSU_DEFAULTS:
            if low <= size <= high:
                return (self.iterations or iters, self.warmup if self.warmup is not None else warm)
        return (self.iterations or 100, self.warmup if self.warmup is not None else 10)


@dataclass(frozen=True)
class Subset:
    name: str
    collectives: tuple[str, ...]
    algorithms: Any                  # "all" or a list of names
    nprocs: tuple[str | int, ...]
    distributions: tuple[str, ...]
    ranges: tuple[SizeRange, ...]
    repeats: int
    segsize: Optional[int]
    max_size: tuple[tuple[str, int], ...] = ()   # per-collective cap on the message size

    def cap(self, collective: str) -> Optional[int]:
        return dict(self.max_size).get(collective)

    def ranges_for(self, collective: str) -> dict[int, SizeRange]:
        """The size ranges ``collective`` is measured over, by their index in ``ranges``: each cut at the
        collective's cap, and a range that starts above the cap left out (it would measure nothing)."""
        cap = self.cap(collective)
        if cap is None:
            return dict(enumerate(self.ranges))
        return {i: replace(r, high=min(r.high, cap)) for i, r in enumerate(self.ranges) if r.low <= cap}


@dataclass(frozen=True)
class Step:
    collective: str
    algorithm: str
    nprocs: int
    nodes: int
    distribution: str
    sizes: SizeRange
    repeats: int
    segsize: Optional[int] = None    # the subset's segment size (None: the algorithm data's default)

    def osu_args(self) -> list[str]:
        """The OSU options of this step: full statistics and its size range, iterations and warm-up."""
        return ["-f", *self.sizes.osu_args()]

    def env(self, tuned: TunedAlgorithms) -> dict[str, str]:
        """The MCA environment that forces this step's algorithm (empty for the default)."""
        return forced_env(tuned, self.collective, self.algorithm,
                          self.segsize if tuned.algorithm(self.collective, self.algorithm).segments else None,
                          self.nprocs) if self.algorithm != DEFAULT else {}

    def parameters(self, size: int) -> dict[str, object]:
        """The series parameters of one measured size, most significant first."""
        return {"nprocs": self.nprocs, "nodes": self.nodes, "distribution": self.distribution,
                "algorithm": self.algorithm, "size": size}


def _fail(path: Path, what: str) -> InputError:
    return InputError(f"collective sweep {path}: {what}")


def _iteration_entries(iterations: Any, path: Path, name: str) -> list[tuple[int, int, int]]:
    entries = []
    for entry in iterations or ():
        if not isinstance(entry, dict) or not {"up_to", "iterations", "warmup"} <= set(entry):
            raise _fail(path, f"{name}: each iterations entry needs up_to, iterations and warmup")
        if not all(isinstance(entry[k], int) and not isinstance(entry[k], bool)
                   and entry[k] >= (1 if k != "warmup" else 0) for k in ("up_to", "iterations", "warmup")):
            raise _fail(path, f"{name}: iterations entries must be whole numbers (iterations >= 1)")
        entries.append((entry["up_to"], entry["iterations"], entry["warmup"]))
    return sorted(entries)


def _ranges(value: Any, iterations: Any, path: Path, name: str) -> tuple[SizeRange, ...]:
    entries = _iteration_entries(iterations, path, name)
    if isinstance(value, list):
        if not value or not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in value):
            raise _fail(path, f"{name}: message_sizes must be a non-empty list of sizes in bytes or 'MIN:MAX'")
        out = []
        for v in sorted(set(value)):
            match = next(((i, w) for up_to, i, w in entries if v <= up_to), (None, None))
            out.append(SizeRange(v, v, *match))
        return tuple(out)
    try:
        low, high = parse_size_range(str(value))
    except OsuOutputError as err:
        raise _fail(path, f"{name}: {err}") from None
    ranges, start = [], low
    for up_to, iters, warm in entries:
        end = min(up_to, high)
        if end >= start:
            ranges.append(SizeRange(start, end, iters, warm))
            start = end * 2 if end else 1
    if start <= high:
        ranges.append(SizeRange(start, high))
    return tuple(ranges)


def load(path: Optional[Path] = None) -> dict[str, Subset]:
    """The subsets of the sweep file; an InputError sentence for anything unusable, an empty sweep included."""
    path = path or sweep_file()
    try:
        data = yaml.safe_load(Path(path).read_text())
    except OSError as err:
        raise InputError(f"collective sweep {path} cannot be read ({err.strerror})") from None
    except yaml.YAMLError as err:
        raise _fail(path, f"is not valid YAML ({str(err).splitlines()[0]})") from None
    if not isinstance(data, dict) or not data.get("subsets"):
        raise _fail(path, "defines no subsets: the sweep is empty")
    collectives = tuple(data.get("collectives") or ())
    if not collectives:
        raise _fail(path, "lists no collectives: the sweep is empty")
    unknown = [c for c in collectives if c not in COLLECTIVES]
    if unknown:
        raise _fail(path, f"unknown collective(s) {', '.join(map(str, unknown))} (known: {', '.join(COLLECTIVES)})")
    subsets = {}
    for name, spec in data["subsets"].items():
        if not isinstance(spec, dict):
            raise _fail(path, f"subset {name!r} must be a mapping")
        algorithms = spec.get("algorithms")
        if algorithms != "all" and not (isinstance(algorithms, list) and algorithms):
            raise _fail(path, f"{name}: algorithms must be 'all' or a non-empty list")
        nprocs = tuple(spec.get("nprocs") or ())
        if not nprocs:
            raise _fail(path, f"{name}: nprocs is empty")
        for n in nprocs:
            if not (n in NPROCS_KEYWORDS or (isinstance(n, int) and not isinstance(n, bool) and n >= 2)):
                raise _fail(path, f"{name}: nprocs entry {n!r} is neither a count >= 2 nor one of "
                                  f"{', '.join(NPROCS_KEYWORDS)}")
        dists = tuple(spec.get("distributions") or ())
        if not dists or any(d not in DISTRIBUTIONS for d in dists):
            raise _fail(path, f"{name}: distributions must be a non-empty list of {', '.join(DISTRIBUTIONS)}")
        repeats = spec.get("repeats", 1)
        if not isinstance(repeats, int) or isinstance(repeats, bool) or repeats < 1:
            raise _fail(path, f"{name}: repeats must be a whole number >= 1")
        segsize = None if spec.get("segsize") is None else parse_segsize(spec["segsize"], f"{path}: {name}: segsize")
        caps = spec.get("max_message_size") or {}
        if not isinstance(caps, dict) or any(c not in collectives or not isinstance(v, int) or v < 1
                                             for c, v in caps.items()):
            raise _fail(path, f"{name}: max_message_size must map collectives of the sweep to sizes in bytes")
        if "message_sizes" not in spec:
            raise _fail(path, f"{name}: message_sizes is missing")
        subsets[name] = Subset(name, collectives, algorithms, nprocs, dists,
                               _ranges(spec["message_sizes"], spec.get("iterations"), path, name), repeats, segsize,
                               tuple(sorted(caps.items())))
    return subsets


def process_counts(keywords: Sequence[str | int], cores_per_node: int, max_nodes: int = 2) -> list[tuple[int, int]]:
    """(nprocs, nodes) for the subset's nprocs entries on nodes of ``cores_per_node`` cores."""
    counts: list[tuple[int, int]] = []
    for key in keywords:
        if key == "powers_of_two":
            n = 2
            while n <= cores_per_node:
                counts.append((n, 1))
                n *= 2
        elif key == "full_node":
            counts.append((cores_per_node, 1))
        elif key == "two_nodes":
            if max_nodes < 2:
                raise InputError(f"the sweep asks for two full nodes but the partition offers {max_nodes} node(s)")
            counts.append((2 * cores_per_node, 2))
        else:
            n = int(key)
            if n > cores_per_node * max_nodes:
                raise InputError(f"the sweep asks for {n} ranks but the partition offers "
                                 f"{max_nodes} x {cores_per_node} cores")
            counts.append((n, 1 if n <= cores_per_node else -(-n // cores_per_node)))
    return sorted(set(counts))


def steps(subset: Subset, tuned: TunedAlgorithms, cores_per_node: int, max_nodes: int = 2) -> list[Step]:
    """Every OSU invocation of ``subset`` on a partition; algorithms that refuse a size are left out."""
    out = []
    for coll in subset.collectives:
        names = tuned.names(coll) if subset.algorithms == "all" else list(subset.algorithms)
        for name in names:
            if name != DEFAULT:
                tuned.algorithm(coll, name)   # an unknown name is an InputError sentence
        for nprocs, nodes in process_counts(subset.nprocs, cores_per_node, max_nodes):
            for name in names:
                alg = None if name == DEFAULT else tuned.algorithm(coll, name)
                if alg is not None and alg.only_nprocs is not None and alg.only_nprocs != nprocs:
                    continue
                for dist in subset.distributions:
                    for size_range in subset.ranges_for(coll).values():
                        out.append(Step(coll, name, nprocs, nodes, dist, size_range, subset.repeats, subset.segsize))
    if not out:
        raise InputError(f"the {subset.name} collective sweep expands to no step")
    return out
