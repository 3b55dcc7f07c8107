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
    return measured(name, with_cpu=False)[0]


def measured(name: str, with_cpu: bool = True) -> tuple[recurrence.Stalls, float]:
    """The stalls of ``tests/data/<name>-stalls.npz`` and FWQ's own time on that core (ns; 0 unless
    ``with_cpu``: files kept before the fold weighed it have none)."""
    data = np.load(DATA / f"{name}-stalls.npz")
    return (recurrence.Stalls(data["start"], data["end"], data["lost_us"], float(data["duration_ns"])),
            float(data["cpu_ns"]) if with_cpu else 0.0)
