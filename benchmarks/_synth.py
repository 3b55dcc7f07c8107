"""Synthetic OSU measurements with realistic noise, shared by the benchmark scripts.

Noise model (configuration as data, NOISE below): a measurement is
``base x run effect x sample jitter``.

* The *run effect* is lognormal and shared by all k samples of one run: the node
  pair, its NUMA/memory state and the network load of that day. It is what makes
  run-to-run noise larger than sample-to-sample noise.
* The *sample jitter* is one-sided and heavy-tailed (|Student t, 3 dof|): latency
  only ever gets slower (interrupts, daemons), bandwidth only ever lower.

Levels are typical of osu_latency/osu_bw on InfiniBand/Omni-Path clusters: ~1-2 %
run-to-run inside a node, 2-4 % across nodes, bandwidth a bit noisier than latency.
"""
from __future__ import annotations

import numpy as np

from mpiregress.names import METRICS

# (run-level lognormal sigma, sample jitter scale) per metric and locality.
NOISE: dict[tuple[str, str], tuple[float, float]] = {
    ("latency", "intra-node"): (0.015, 0.005),
    ("latency", "inter-node"): (0.025, 0.010),
    ("bandwidth", "intra-node"): (0.020, 0.005),
    ("bandwidth", "inter-node"): (0.035, 0.010),
}

# Typical values (us, MB/s) per placement, from the May 2025 study's orders of magnitude.
BASE: dict[tuple[str, str], float] = {
    ("latency", "same_numa"): 0.58, ("latency", "cross_numa"): 2.28,
    ("latency", "cross_socket"): 2.28, ("latency", "cross_node"): 4.1,
    ("bandwidth", "same_numa"): 14500.0, ("bandwidth", "cross_numa"): 13000.0,
    ("bandwidth", "cross_socket"): 13500.0, ("bandwidth", "cross_node"): 12320.0,
}


def locality(placement: str) -> str:
    return "inter-node" if placement == "cross_node" else "intra-node"


def run_samples(rng: np.random.Generator, metric: str, base: float, run_sigma: float, jitter: float,
                k: int, step: float = 0.0) -> np.ndarray:
    """k samples of one run; ``step`` > 0 makes the run that much worse (the hurting side)."""
    worse = METRICS[metric].higher_is_better
    centre = base * (1 - step if worse else 1 + step) * np.exp(rng.normal(0.0, run_sigma))
    tail = np.abs(rng.standard_t(3, size=k)) * jitter
    return centre * (np.exp(-tail) if worse else np.exp(tail))


def history(rng: np.random.Generator, metric: str, base: float, noise: tuple[float, float], runs: int,
            k: int) -> list[np.ndarray]:
    """``runs`` accepted runs of k samples each, with no change."""
    return [run_samples(rng, metric, base, *noise, k) for _ in range(runs)]
