"""The run's verdict against the baselines: the one place a result is judged against a band.

ReFrame reports what it measured (its references only decorate ReFrame's own
output), :func:`results.aggregate` folds repeats into a median, and this module
applies ``baselines/<system>.yaml`` to each series once, in one direction (the
side that hurts). History-based judging (the MR gate) is :mod:`mpiregress.verdict.history_gate`.
"""
from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from typing import Optional

from mpiregress.families.noise import probe
from mpiregress.model.baselines import Baselines
from mpiregress.model.names import METRICS, format_value
from mpiregress.model.results import Result
from mpiregress.verdict import noise as noise_verdict
from mpiregress.verdict.power import Power, beyond_band


def apply_baselines(results: list[Result], refs: Optional[Baselines], allow_missing: bool = False,
                    node_noise: Optional[Mapping[tuple[str, str], Mapping[str, Sequence[float]]]] = None) -> None:
    """Judge every measured result against its baseline, in place.

    A value beyond the band on the hurting side becomes ``fail`` with the limit in its
    reason; a measured value with no baseline becomes an error (nothing was judged)
    unless ``allow_missing``. ``node_noise`` ((system, partition) -> node -> past probe
    efficiencies, noise.nodehistory; None or missing: no history): a ``fail`` whose noise probe
    shows one of its nodes outside that node's usual band, or beyond the system's noise floor
    (``noise_floor`` in systems/<name>.yaml), is **noisy** instead: not gating (status pass), its
    reason says so and ``conditions["verdict"]`` is ``"noisy"``.
    """
    for r in results:
        if r.status not in ("pass", "fail") or r.value is None:
            continue
        ref = refs.lookup(r.key()) if refs else None
        # A check that judged its series within its own run (the link matrix: each node and link
        # against the typical pair of the same run) needs no baseline, and a band never clears its fail.
        self_judged = bool(r.conditions.get("judged_by"))
        if ref is None:
            # Recorded, not judged: later judges (the history gate) see why there is no band.
            r.conditions["baseline"] = "none"
            if not allow_missing and not self_judged:
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
            r.reason = (f"{what} {r.unit} is {metric.beyond()} the limit {format_value(limit)} {r.unit} "
                        f"(baseline {format_value(ref.value)}, tolerance {ref.tolerance:.0%}, provenance "
                        f"{ref.provenance!r})")
            _noise_aware(r, node_noise)
        elif not (self_judged and r.status == "fail"):
            r.status, r.reason = "pass", ""


def band_power(r: Result) -> Optional[Power]:
    """What the band could have caught on ``r``: its tolerance plus 0.84 times the error of the run's median,
    from this run's own samples (1.4826 MAD, times sqrt(pi/2k) for a median of k). One sample: its spread is
    not known, so the tolerance alone is said, and says so. None when ``r`` was not judged against a band."""
    if r.tolerance is None or r.value is None or r.status not in ("pass", "fail"):
        return None
    samples = [float(x) for x in r.samples] or [float(r.value)]
    if len(samples) < 2:
        return beyond_band("baseline band", r.tolerance, 0.0,
                           f"tolerance {r.tolerance:.0%}; one sample, so this run's spread is not known")
    centre = statistics.median(samples)
    spread = 1.4826 * statistics.median(abs(x - centre) for x in samples) / centre if centre else 0.0
    error = spread * math.sqrt(math.pi / (2 * len(samples)))
    return beyond_band("baseline band", r.tolerance, error,
                       f"tolerance {r.tolerance:.0%} and this run's {len(samples)} samples (±{spread:.1%}); the "
                       f"run-to-run offset is not known to the band")


def _noise_aware(r: Result, node_noise: Optional[Mapping[tuple[str, str], Mapping[str, Sequence[float]]]]) -> None:
    """A fail measured on a noisy node is ``noisy``: outside the node's usual band, or beyond the system's
    noise floor with or without history (noise.verdict.reclassify, the rule the history gate applies too)."""

    probed = probe.probed(r.conditions)
    if not probed:
        return
    usual = (node_noise or {}).get((r.system, r.partition), {})
    name, reason = noise_verdict.reclassify("regression", r.reason, r.nodelist or [e["node"] for e in probed],
                                            probed, usual, METRICS[r.metric].slowdown(r.value, r.reference),
                                            floor=noise_verdict.floor_of(r.system))
    r.reason = reason           # the noise is named either way: excused, or too small to excuse
    if name == "noisy":
        r.status = "pass"
        r.conditions["verdict"] = "noisy"


def rejudge(results: Sequence[Result], books: Mapping[str, Optional[Baselines]], strict: bool = False,
            node_noise: Optional[Mapping[tuple[str, str], Mapping[str, Sequence[float]]]] = None) -> int:
    """Judge every measured value again against its band, whatever ``status`` its record carries; return
    how many records changed status.

    A results file read back (the verdict, compare and report commands) says ``pass`` or ``fail`` as a
    label; a label is not evidence: a latency of 1 s labelled ``pass`` is a regression. So every record
    with a value is judged again here (``skip`` with a value included), except ``error`` (the check
    failed: its value is not a measurement to trust) and a fail its own check judged within its run (the
    link matrix). ``strict``: a value with no baseline is an error (the band gates); else it is left for
    the history gate. A record whose system has no baselines file of the results' toolchain keeps its
    label (nothing here could judge it; the history gate judges its values).
    """
    changed = 0
    for system in sorted({r.system for r in results}):
        refs = books.get(system)
        mine = [r for r in results if r.system == system and r.value is not None and r.status != "error"
                and not (r.status == "fail" and r.conditions.get("judged_by"))]
        if refs is not None:
            mine = [r for r in mine if r.toolchain == refs.toolchain or not r.toolchain]
        elif not strict:
            continue
        before = [(r.status, r.reason) for r in mine]
        for r in mine:
            r.status, r.reason = "pass", ""
            r.conditions.pop("verdict", None)
        apply_baselines(mine, refs, allow_missing=not strict, node_noise=node_noise)
        changed += sum(1 for r, (status, _) in zip(mine, before) if r.status != status)
    return changed
