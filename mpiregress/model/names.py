"""The project's vocabulary: placements, build methods, systems and metrics.

Every module, check, baseline file and report uses these names (docs/architecture.md),
so a typo in a YAML file is caught against this list instead of silently
creating a new series.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

from mpiregress.paths import system_names

PLACEMENTS: tuple[str, ...] = ("same_numa", "cross_numa", "cross_socket", "cross_node")
METHODS: tuple[str, ...] = ("source", "spack", "easybuild", "eessi")
# One per systems/<name>.yaml: adding a cluster is adding its data file.
# Families of checks, selected by tag: pt2pt; pt2pt-sweep (osu_latency and osu_bw over 1 B - 4 MiB,
# weekly: checks/osu_pt2pt_sweep.py); coll (the merge-request subset of the collectives);
# coll-sweep (the weekly full sweep of every coll/tuned algorithm); noise (FWQ placement
# experiments, weekly: checks/fwq.py); links (the all-pairs link matrix, checks/linktest.py: never a
# default, a whole partition is asked for with --families links); ab (a toolchain MR's point-to-point
# series, the target branch's build A and the MR's build B interleaved in one job: `run --ab-against`).
FAMILIES: tuple[str, ...] = ("pt2pt", "pt2pt-sweep", "coll", "coll-sweep", "noise", "links", "ab")
SYSTEMS: tuple[str, ...] = system_names()


@dataclass(frozen=True)
class Metric:
    """What a measured number means: its unit and which direction hurts."""

    name: str
    unit: str
    higher_is_better: bool
    zero_possible: bool = False          # a time that can be 0 (no detour); latencies and rates cannot
    at_most: Optional[float] = None      # an upper bound of the quantity itself (an efficiency: 1)
    at_most_is: str = ""                 # what that bound is, in words (for the sentence that refuses)

    def impossible(self, value: float) -> Optional[str]:
        """Why ``value`` cannot be a measurement of this metric (non-finite, not positive, above its bound),
        or None. Every reader refuses such a value: it would be judged as a regression or an improvement."""
        unit = f" {self.unit}" if self.unit else ""
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            return f"{self.name} {value!r} is not a finite number"
        if value < 0 or (value == 0 and not self.zero_possible):
            return (f"{self.name} {value:g}{unit} is impossible: it must be "
                    f"{'zero or more' if self.zero_possible else 'above zero'}")
        if self.at_most is not None and value > self.at_most:
            what = f" ({self.at_most_is})" if self.at_most_is else ""
            return f"{self.name} {value:g}{unit} is impossible: it must be at most {self.at_most:g}{unit}{what}"
        return None

    def worse(self, value: float, reference: float) -> bool:
        """True when ``value`` is on the hurting side of ``reference``."""
        return value < reference if self.higher_is_better else value > reference

    def slowdown(self, value: Optional[float], reference: Optional[float]) -> Optional[float]:
        """How many times slower ``value`` is than ``reference`` (2.0: twice the time, or half the rate);
        None when either is missing or zero."""
        if not value or not reference:
            return None
        return reference / value if self.higher_is_better else value / reference

    def admits(self) -> str:
        """How a one-sided limit bounds what it admits: 'up to' (lower is better, the limit is a ceiling)
        or 'down to' (higher is better, a floor). Every sentence stating a limit says it this way."""
        return "down to" if self.higher_is_better else "up to"

    def beyond(self) -> str:
        """Which side of a limit hurts: 'above' (lower is better) or 'below' (higher is better)."""
        return "below" if self.higher_is_better else "above"

    def limit(self, reference: float, tolerance: Optional[float]) -> float:
        """The worst value still inside a one-sided band of ``tolerance`` around ``reference``."""
        sign = -1 if self.higher_is_better else 1
        return reference * (1 + sign * (tolerance or 0.0))


# Every metric any family measures. A family adds its metrics here, never a private copy.
# ``at_most``: beyond physical sense, refused by every reader (a results file, ReFrame's report, the
# history, A/B samples) in one sentence: no measured message takes an hour (3.6e9 us; a job's time limit
# ends it long before), and no link or memory path carries 10 TB/s (1e7 MB/s; NVLink 5 is 1.8 TB/s, an
# HBM3e stack about 1.2 TB/s).
METRICS: dict[str, Metric] = {
    "latency": Metric("latency", "us", higher_is_better=False, at_most=3.6e9, at_most_is="an hour"),
    "bandwidth": Metric("bandwidth", "MB/s", higher_is_better=True, at_most=1e7,
                        at_most_is="10 TB/s, beyond any link or memory"),
    # Σ per-iteration minima ÷ Σ maxima: in (0, 1].
    "efficiency": Metric("efficiency", "", higher_is_better=True, at_most=1.0),
    "max_detour": Metric("max_detour", "us", higher_is_better=False, zero_possible=True, at_most=3.6e9,
                         at_most_is="an hour"),
}


@dataclass(frozen=True)
class Pt2PtMetric:
    """A point-to-point metric: which OSU benchmark measures it, at which message size."""

    metric: str
    benchmark: str
    size: int


# The seed study's two point-to-point measurements (seed report 000): 8 KiB latency, 1 MiB bandwidth.
PT2PT: dict[str, Pt2PtMetric] = {
    "latency": Pt2PtMetric("latency", "osu_latency", 8192),
    "bandwidth": Pt2PtMetric("bandwidth", "osu_bw", 1048576),
}

# 100 warm-up and 1000 measured iterations, as in the seed study (docs/architecture.md).
WARMUP_ITERATIONS = 100
MEASURED_ITERATIONS = 1000


def format_value(value: float) -> str:
    """A measured value as people read it: 14831 (MB/s), 2.28 or 0.573 (us), never 1.483e+04."""
    return f"{value:.0f}" if abs(value) >= 1000 else f"{value:.4g}"
