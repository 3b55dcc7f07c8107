"""Which series of a size sweep moved this week, for the sweep figures' rings.

A size moved when the history gate judged this run's value a regression or an improvement,
or when the change-point scan places a new level among the series' last ``RECENT`` runs (a
level needs 3 runs to be seen, and the pooled scan sees a threshold shift across the methods
of a partition). Nothing here decides a verdict: it reads the report's verdicts and change points.
"""
from __future__ import annotations

from typing import Mapping, Sequence

from mpiregress.history.store import RunPoint
from mpiregress.model.series import SeriesKey
from mpiregress.verdict.changepoint import ChangePoint
from mpiregress.verdict.history_gate import Verdict

RECENT = 4     # a new level among this many of the newest runs counts as moved (3 runs show a level)


def moved(verdicts: Sequence[Verdict], changes: Mapping[SeriesKey, Sequence[ChangePoint]],
          trends: Mapping[SeriesKey, Sequence[RunPoint]], recent: int = RECENT) -> dict[SeriesKey, str]:
    """{series: "worse" | "better"} of every series that moved in this run or its last ``recent`` runs."""
    out: dict[SeriesKey, str] = {}
    for key, points in changes.items():
        latest = {r.run_id for r in (trends.get(key) or ())[-recent:]}
        for cp in points:
            if cp.run_after.run_id in latest:
                out[key] = "worse" if cp.worse else "better"
    for v in verdicts:
        if v.verdict == "regression":
            out[v.key] = "worse"
        elif v.verdict == "improvement":
            out[v.key] = "better"
    return out
