"""Stalls measured on the local cluster, kept in ``tests/data/<name>-stalls.npz``.

Each file holds one core's stalls as the noise analysis found them in a run of
``benchmarks/noise_injected.py`` (written by ``recurrence.stalls_over`` on the kept FWQ file), and, for those
kept since the fold weighs FWQ's own time, that time on the core (``cpu_ns``).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from mpiregress.families.noise import recurrence

DATA = Path(__file__).resolve().parent.parent / "data"


def stalls(name: str) -> recurrence.Stalls:
    """The stalls of ``tests/data/<name>-stalls.npz``."""
    data = np.load(DATA / f"{name}-stalls.npz")
    return recurrence.Stalls(data["start"], data["end"], data["lost_us"], float(data["duration_ns"]))


def measured(name: str) -> tuple[recurrence.Stalls, float]:
    """The stalls of ``tests/data/<name>-stalls.npz`` and FWQ's own time on that core (ns)."""
    return stalls(name), float(np.load(DATA / f"{name}-stalls.npz")["cpu_ns"])
