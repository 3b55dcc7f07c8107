"""The run's verdict against the baselines: the one place a result is judged against a band.

ReFrame reports what it measured (its references only decorate ReFrame's own
output), :func:`results.aggregate` folds repeats into a median, and this module
applies ``baselines/<system>.yaml`` to each series once, in one direction (the
side that hurts). History-based judging (the MR gate) is :mod:`mpiregress.gate`.
"""
from __future__ import annotations

from typing import Optional

from .baselines import Baselines
from .gate import format_value
from .names import METRICS
from .results import Result


def apply_baselines(results: list[Result], refs: Optional[Baselines], allow_missing: bool = False) -> None:
    """Judge every measured result against its baseline, in place.

    A value beyond the band on the hurting side becomes ``fail`` with the limit in its
    reason; a measured value with no baseline becomes an error (nothing was judged)
    unless ``allow_missing``.
    """
    for r in results:
        if r.status not in ("pass", "fail") or r.value is None:
            continue
        ref = refs.lookup(r.key()) if refs else None
        if ref is None:
            # Recorded, not judged: later judges (the history gate) see why there is no band.
            r.conditions["baseline"] = "none"
            if not allow_missing:
                r.status = "error"
                where = refs.path if refs else "baselines"
                r.reason = (f"no baseline for {r.key().name()} in {where}: measured but not judged "
                            "(add one, e.g. with 'mpiregress baseline propose')")
            continue
        r.reference, r.tolerance = ref.value, ref.tolerance
        metric = METRICS[r.metric]
        limit = ref.limit()
        what = f"median {format_value(r.value)}" if len(r.samples) > 1 else format_value(r.value)
        if metric.worse(r.value, limit):
            r.status = "fail"
            r.reason = (f"{what} {r.unit} is beyond the limit {format_value(limit)} {r.unit} "
                        f"(baseline {format_value(ref.value)}, tolerance {ref.tolerance:.0%}, provenance "
                        f"{ref.provenance!r})")
        else:
            r.status, r.reason = "pass", ""
