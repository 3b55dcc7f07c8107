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

from mpiregress.model.names import METRICS, PT2PT

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


def run_medians(rng: np.random.Generator, metric: str, base: float, run_sigma: float, jitter: float,
                k: int, steps: np.ndarray) -> np.ndarray:
    """The median of each of ``len(steps)`` runs of k samples, run i made ``steps[i]`` worse.

    The same model as :func:`run_samples` (one run effect per run, one-sided jitter per
    sample), drawn for all runs at once.
    """
    worse = METRICS[metric].higher_is_better
    steps = np.asarray(steps, dtype=float)
    centre = base * (1 - steps if worse else 1 + steps) * np.exp(rng.normal(0.0, run_sigma, size=len(steps)))
    tail = np.abs(rng.standard_t(3, size=(len(steps), k))) * jitter
    samples = centre[:, None] * (np.exp(-tail) if worse else np.exp(tail))
    return np.median(samples, axis=1)


def history(rng: np.random.Generator, metric: str, base: float, noise: tuple[float, float], runs: int,
            k: int) -> list[np.ndarray]:
    """``runs`` accepted runs of k samples each, with no change."""
    return [run_samples(rng, metric, base, *noise, k) for _ in range(runs)]


# The full matrix: Iris has one NUMA node per socket, so no cross_numa there (seed 000).
PARTITIONS: dict[str, tuple[str, ...]] = {"iris": ("broadwell", "skylake"), "aion": ("batch",)}
SYSTEM_PLACEMENTS: dict[str, tuple[str, ...]] = {
    "iris": ("same_numa", "cross_socket", "cross_node"),
    "aion": ("same_numa", "cross_numa", "cross_socket", "cross_node"),
}
METHODS = ("source", "spack", "easybuild", "eessi")


def matrix_results(rng: np.random.Generator, system: str, when: str, commit: str, pipeline: str, k: int,
                   toolchain: str = "2023b", effects: dict | None = None) -> list:
    """One run of the full matrix of ``system`` as Result records (k samples each).

    ``effects`` maps (partition, method, placement, metric) -> relative step on the
    hurting side (negative: an improvement), to inject events.
    """
    from mpiregress.model.results import pt2pt

    effects = effects or {}
    results = []
    for partition in PARTITIONS[system]:
        for method in METHODS:
            for placement in SYSTEM_PLACEMENTS[system]:
                for metric in PT2PT:
                    noise = NOISE[(metric, locality(placement))]
                    step = effects.get((partition, method, placement, metric), 0.0)
                    samples = run_samples(rng, metric, BASE[(metric, placement)], *noise, k, step=step)
                    results.append(pt2pt(
                        system, partition, method, placement, metric,
                        float(np.median(samples)), status="pass", samples=[float(v) for v in samples],
                        toolchain=toolchain, time=when, commit=commit, pipeline=pipeline,
                        nodelist=[f"{system}-{rng.integers(1, 100):03d}"], target="zen2" if system == "aion"
                        else partition, check=f"osu_{metric}_{placement}_{method}"))
    return results


def ab_samples(rng: np.random.Generator, metric: str, base: float, run_sigma: float, jitter: float,
               pairs: int, step: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """``pairs`` A and B executions of one series in ONE allocation: the run effect is shared.

    A is the target branch's build, B the MR's, ``step`` > 0 makes B that much worse
    (the hurting side). Each execution gets its own one-sided jitter, as a sample
    of :func:`run_samples` does.
    """
    worse = METRICS[metric].higher_is_better
    centre = base * np.exp(rng.normal(0.0, run_sigma))
    tails = np.abs(rng.standard_t(3, size=(2, pairs))) * jitter
    a, b = centre * (np.exp(-tails) if worse else np.exp(tails))
    return a, b * (1 - step if worse else 1 + step)


def matrix_series() -> list[tuple[str, str, str, str, str]]:
    """The (system, partition, method, placement, metric) series of a full-matrix MR (80)."""
    return [(system, partition, method, placement, metric)
            for system in ("iris", "aion") for partition in PARTITIONS[system] for method in METHODS
            for placement in SYSTEM_PLACEMENTS[system] for metric in ("latency", "bandwidth")]
