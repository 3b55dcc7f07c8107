"""What a collective sweep tells an admin: best algorithm per point, default vs best, findings, verification.

Input is a table of measurements: (collective, nprocs, nodes, distribution, algorithm,
size) -> latency samples in us (one sample per repeated OSU run; OSU's own average over
ranks and iterations). Everything here is a pure function of that table.

Noise, and when a difference counts
-----------------------------------
The spread of a point is (max - min) / median of its repeated samples (0 with one
sample: unknown, not zero noise). A difference between two algorithms at a point counts
only when the slower median exceeds the faster by more than the larger of
``min_effect`` (default 10 %) and the sum of both spreads. The 10 % floor is documented
rather than measured because a single allocation's samples do not see run-to-run
effects between allocations, which the seed studies put at several percent on Iris
and Aion (seed 000's critique of hand-set 5 % bands).
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Optional, Sequence

from mpiregress.families.coll.algorithms import COLLECTIVES, DEFAULT

MIN_EFFECT = 0.10
RULES_FILE = "rules_file"   # the algorithm label of runs made under a generated rules file


@dataclass(frozen=True, order=True)
class Point:
    """Where a collective was measured (everything but the algorithm)."""

    collective: str
    distribution: str
    nodes: int
    nprocs: int
    size: int


@dataclass(frozen=True)
class Measurement:
    """The latency samples (us) of one algorithm at one point."""

    point: Point
    algorithm: str
    samples: tuple[float, ...]

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    @property
    def spread(self) -> float:
        """(max - min) / median of the samples; 0 with fewer than two samples."""
        if len(self.samples) < 2 or self.median <= 0:
            return 0.0
        return (max(self.samples) - min(self.samples)) / self.median


Table = Mapping[tuple[Point, str], Measurement]


def make_table(rows: Iterable[Mapping[str, object]]) -> dict[tuple[Point, str], Measurement]:
    """Group rows ({collective, nprocs, nodes, distribution, algorithm, size, latency}) into a table.

    Several rows of the same point and algorithm are repeated samples.
    """
    grouped: dict[tuple[Point, str], list[float]] = {}
    for row in rows:
        point = Point(str(row["collective"]), str(row["distribution"]), int(row["nodes"]),  # type: ignore[call-overload]
                      int(row["nprocs"]), int(row["size"]))  # type: ignore[call-overload]
        grouped.setdefault((point, str(row["algorithm"])), []).append(float(row["latency"]))  # type: ignore[arg-type]
    return {key: Measurement(key[0], key[1], tuple(values)) for key, values in grouped.items()}


def threshold(a: Measurement, b: Measurement, min_effect: float = MIN_EFFECT) -> float:
    """The relative difference above which ``a`` and ``b`` differ beyond the noise."""
    return max(min_effect, a.spread + b.spread)


def slower_by(slow: Measurement, fast: Measurement) -> float:
    """How much slower ``slow`` is than ``fast``, as a fraction (0.38 = 38 % slower)."""
    return slow.median / fast.median - 1.0 if fast.median > 0 else float("inf")


@dataclass(frozen=True)
class Cell:
    """One point of the best-algorithm map."""

    point: Point
    best: Measurement                # the fastest forced algorithm
    default: Optional[Measurement]   # None when the default was not measured there
    default_slower: Optional[float]  # default median / best median - 1
    beyond_noise: bool               # default slower than best by more than the noise
    threshold: float

    @property
    def choice(self) -> str:
        """What a rules file should do here: the best algorithm when it beats the default beyond the noise."""
        if self.default is None or self.beyond_noise:
            return self.best.algorithm
        return DEFAULT


def points(table: Table) -> list[Point]:
    return sorted({point for point, _ in table})


def best_map(table: Table, min_effect: float = MIN_EFFECT) -> list[Cell]:
    """The best forced algorithm at every point, with how far the default is from it.

    A point measured with the default only gets no cell (there is nothing to compare).
    Ties go to the lower median, then to the algorithm name, so the map is reproducible.
    """
    cells = []
    for point in points(table):
        forced = [m for (p, alg), m in table.items() if p == point and alg not in (DEFAULT, RULES_FILE)]
        if not forced:
            continue
        best = min(forced, key=lambda m: (m.median, m.algorithm))
        default = table.get((point, DEFAULT))
        if default is None:
            cells.append(Cell(point, best, None, None, False, min_effect))
            continue
        limit = threshold(default, best, min_effect)
        slower = slower_by(default, best)
        cells.append(Cell(point, best, default, slower, slower > limit, limit))
    return cells


def format_size(size: int) -> str:
    """1 B, 512 B, 1 KiB, 64 KiB, 1 MiB (exact powers of two only get a unit)."""
    for unit, factor in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= factor and size % factor == 0:
            return f"{size // factor} {unit}"
    return f"{size} B"


def finding(cell: Cell) -> str:
    """The sentence for a point where the default is beyond the noise slower than the best."""
    p = cell.point
    assert cell.default is not None and cell.default_slower is not None
    return (f"{p.collective}, {p.nprocs} ranks ({p.nodes} node{'s' if p.nodes > 1 else ''}, {p.distribution}), "
            f"{format_size(p.size)}: default {cell.default_slower * 100:.0f} % slower than {cell.best.algorithm} "
            f"({cell.default.median:.2f} us vs {cell.best.median:.2f} us, noise limit {cell.threshold * 100:.0f} %)")


def findings(cells: Sequence[Cell]) -> list[str]:
    """Sentences for every point where the default loses beyond the noise, worst first."""
    losing = [c for c in cells if c.beyond_noise]
    losing.sort(key=lambda c: -(c.default_slower or 0.0))
    return [finding(c) for c in losing]


def default_vs_best_table(cells: Sequence[Cell]) -> list[dict[str, object]]:
    """Rows for a report table: point, default, best, how much slower, beyond the noise or not."""
    rows = []
    for c in cells:
        rows.append({
            "collective": c.point.collective, "distribution": c.point.distribution, "nodes": c.point.nodes,
            "nprocs": c.point.nprocs, "size": c.point.size,
            "default_us": None if c.default is None else round(c.default.median, 3),
            "best": c.best.algorithm, "best_us": round(c.best.median, 3),
            "default_slower_pct": None if c.default_slower is None else round(c.default_slower * 100, 1),
            "beyond_noise": c.beyond_noise,
        })
    return rows


@dataclass(frozen=True)
class Comparison:
    """A point measured with the rules file and with OpenMPI's default, side by side."""

    point: Point
    default: Measurement
    rules: Measurement
    rules_slower: float              # rules median / default median - 1 (negative: faster)
    threshold: float
    flagged: bool                    # the rules file is slower beyond the noise here

    def sentence(self) -> str:
        p = self.point
        verdict = "SLOWER beyond the noise" if self.flagged else "no slower beyond the noise"
        return (f"{p.collective}, {p.nprocs} ranks ({p.distribution}), {format_size(p.size)}: rules file "
                f"{self.rules.median:.2f} us vs default {self.default.median:.2f} us "
                f"({self.rules_slower * 100:+.0f} %, limit {self.threshold * 100:.0f} %): {verdict}")


def verify_rules(table: Table, min_effect: float = MIN_EFFECT) -> list[Comparison]:
    """Compare runs under a rules file (algorithm ``rules_file``) with default runs, point by point.

    Both should come from one allocation, interleaved, so run-to-run effects cancel.
    Points measured in only one of the two are left out (the caller names them); a
    flagged comparison means the rules file made that point slower beyond the noise.
    """
    out = []
    for (point, alg), rules in sorted(table.items()):
        if alg != RULES_FILE:
            continue
        default = table.get((point, DEFAULT))
        if default is None:
            continue
        limit = threshold(rules, default, min_effect)
        slower = slower_by(rules, default)
        out.append(Comparison(point, default, rules, slower, limit, slower > limit))
    return out


def records(table: Table, base: Mapping[str, object],
            conditions: Optional[Mapping[str, object]] = None) -> list[dict[str, object]]:
    """The table as result records of the open series model (one record per point and algorithm).

    ``base`` carries the fields every record shares (system, partition, method, toolchain,
    commit, pipeline, jobid, time, nodelist, target); parameters are ordered most
    significant first: nprocs, nodes, distribution, algorithm, size.
    """
    out = []
    for (point, alg), m in sorted(table.items()):
        record = dict(base)
        record.update({
            "benchmark": f"osu_{point.collective}",
            "parameters": {"nprocs": point.nprocs, "nodes": point.nodes, "distribution": point.distribution,
                           "algorithm": alg, "size": point.size},
            "metric": "latency", "unit": "us", "value": m.median, "samples": list(m.samples),
            "status": "pass", "reason": "",
            "conditions": dict(conditions or {}),
        })
        out.append(record)
    return out


_COLL_PARAMS = ("nprocs", "nodes", "distribution", "algorithm", "size")


def table_from_records(records: Iterable[Mapping[str, Any]]) -> tuple[dict[tuple[Point, str], Measurement], list[str]]:
    """The table of the collective latency records among ``records`` (result dicts), and what was left out.

    Records of other benchmarks are ignored silently; a collective record that is not
    a usable measurement (status other than pass, no value) is left out with a sentence,
    so the caller can show it beside the analysis.
    """
    rows, left_out = [], []
    for rec in records:
        bench = str(rec.get("benchmark", ""))
        if not bench.startswith("osu_") or bench[4:] not in COLLECTIVES or rec.get("metric") != "latency":
            continue
        params = rec.get("parameters") or {}
        missing = [p for p in _COLL_PARAMS if p not in params]
        if missing:
            left_out.append(f"{bench} record without {', '.join(missing)} in its parameters")
            continue
        if rec.get("status") != "pass" or rec.get("value") is None:
            left_out.append(f"{bench} {params.get('algorithm')} {params.get('nprocs')} ranks "
                            f"size {params.get('size')}: "
                            f"{rec.get('status')} ({rec.get('reason') or 'no value'})")
            continue
        samples = rec.get("samples") or [rec["value"]]
        for value in samples:
            rows.append({"collective": bench[4:], **{p: params[p] for p in _COLL_PARAMS}, "latency": value})
    return make_table(rows), left_out
