"""Stalls measured on the local cluster, kept in ``tests/data/<name>-stalls.npz``.

Each file holds one core's stalls as the noise analysis found them in a run of
``benchmarks/noise_injected.py`` (written by ``recurrence.stalls_over`` on the kept FWQ file), and, for those
kept since the fold weighs FWQ's own time, that time on the core (``cpu_ns``).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from mpiregress.families.noise import recurrence

DATA = Path(__file__).resolve().parent.parent / "data"


def _kept(name: str) -> Any:
    return np.load(DATA / f"{name}-stalls.npz")


def _stalls_of(data: Any) -> recurrence.Stalls:
    return recurrence.Stalls(data["start"], data["end"], data["lost_us"], float(data["duration_ns"]))


def stalls(name: str) -> recurrence.Stalls:
    """The stalls of ``tests/data/<name>-stalls.npz``."""
    return _stalls_of(_kept(name))


def measured(name: str) -> tuple[recurrence.Stalls, float]:
    """The stalls of ``tests/data/<name>-stalls.npz`` and FWQ's own time on that core (ns; files kept before the
    fold weighed it have none)."""
    data = _kept(name)
    return _stalls_of(data), float(data["cpu_ns"])
