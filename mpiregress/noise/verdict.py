"""Noise in the verdict: a regression on a node noisier than usual is "noisy", and how many repeats noise calls for.

The usual band of a node is built from its own history of probe efficiencies,
like any series (median and MAD, one-sided: only a drop is noise). A node with no
usual band yet is judged against ``NO_HISTORY_FLOOR``.
"""
from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

MIN_RUNS = 5             # probes of a node before its own band is trusted
Z = 3.5                  # one-sided, as the gate's (many nodes are probed at once)
MIN_BAND = 0.02          # an efficiency drop under 2 points is nobody's business
NO_HISTORY_FLOOR = 0.90  # seed 004's noisy configuration sat well below it, quiet ones above
PROBE_MARGIN = 2.0       # the probe's noise may differ from the benchmark's: allow twice its excess


@dataclass(frozen=True)
class UsualBand:
    """What a node's probe efficiency usually is, and the lowest value still usual."""

    node: str
    centre: float
    low: float
    runs: int


def usual_band(node: str, history: Sequence[float]) -> UsualBand | None:
    """The band from a node's past probe efficiencies; None with fewer than MIN_RUNS."""
    if len(history) < MIN_RUNS:
        return None
    centre = statistics.median(history)
    spread = 1.4826 * statistics.median(abs(v - centre) for v in history)
    return UsualBand(node, centre, centre - max(Z * spread, MIN_BAND), len(history))


def noisy_nodes(probe: Sequence[Mapping[str, float | str]],
                history: Mapping[str, Sequence[float]]) -> list[str]:
    """'noisy: node X efficiency 0.82, usual 0.97' for each probed node outside its usual band."""
    return [sentence for _, sentence in _outside_band(probe, history)]


def _outside_band(probe: Sequence[Mapping[str, float | str]],
                  history: Mapping[str, Sequence[float]]) -> list[tuple[float, str]]:
    """(efficiency, sentence) of each probed node outside its usual band (or the floor without history)."""
    out = []
    for entry in probe:
        node, value = str(entry["node"]), float(entry["efficiency"])
        band = usual_band(node, history.get(node, ()))
        if band is not None:
            if value < band.low:
                out.append((value, f"noisy: node {node} efficiency {value:.2f}, usual {band.centre:.2f}"))
        elif value < NO_HISTORY_FLOOR:
            out.append((value, f"noisy: node {node} efficiency {value:.2f}, below {NO_HISTORY_FLOOR:.2f} "
                               f"(fewer than {MIN_RUNS} earlier probes of this node)"))
    return out


def explainable_slowdown(efficiencies: Sequence[float]) -> float:
    """The largest slowdown noise alone can cause on nodes of these probe efficiencies.

    A node of FWQ efficiency e loses about 1 - e of its time to noise, so work on it
    stretches by 1/e; an exchange waits for both ends, so with the worst node at both
    ends a measurement stretches by 1/e_worst^2. The probe runs beside the benchmark,
    not during it, so twice that excess is allowed (``PROBE_MARGIN``).
    """
    worst = min(efficiencies)
    return 1.0 + PROBE_MARGIN * (1.0 / worst ** 2 - 1.0) if worst > 0 else math.inf


def reclassify(verdict: str, reason: str, nodelist: Sequence[str],
               probe: Sequence[Mapping[str, float | str]],
               history: Mapping[str, Sequence[float]], slowdown: float | None = None) -> tuple[str, str]:
    """Turn a ``regression`` measured on a node noisier than usual into ``noisy``; leave the rest alone.

    Only the nodes the series ran on count: a noisy node elsewhere in the
    allocation did not touch this measurement. A ``slowdown`` (times slower than
    the reference) beyond what that noise can explain stays a regression, with
    the noise named beside it: a broken path on a noisy node is still broken.
    """
    if verdict != "regression":
        return verdict, reason
    on_nodes = [e for e in probe if str(e["node"]) in set(nodelist)]
    noisy = _outside_band(on_nodes, history)
    if not noisy:
        return verdict, reason
    sentences = [sentence for _, sentence in noisy]
    explained = explainable_slowdown([efficiency for efficiency, _ in noisy])
    if slowdown is not None and slowdown > explained:
        return verdict, (f"{reason}; {'; '.join(sentences)}, but noise of that level explains at most "
                         f"{explained:.2f}x, not {slowdown:.2f}x")
    return "noisy", "; ".join(sentences) + f" (would otherwise be: {reason}); rerun on quiet nodes to judge"


def repeats_for(efficiencies: Sequence[float], tolerance: float, *, z: float = 2.0,
                minimum: int = 3, maximum: int = 20) -> int:
    """``--repeat auto``: repetitions so that noise cannot fake an effect of ``tolerance``.

    On a node of efficiency e a synchronising code's run can stretch by up to
    1/e - 1; taking that as the spread s of one repetition, the mean of k has
    spread s/sqrt(k), which must stay under tolerance/z: k = ceil((z s / tolerance)^2),
    clamped to [minimum, maximum]. The worst probed node decides.
    """
    if not efficiencies:
        raise ValueError("--repeat auto needs at least one probed node")
    if tolerance <= 0:
        raise ValueError("--repeat auto needs a positive tolerance")
    worst = min(efficiencies)
    if not 0 < worst <= 1:
        raise ValueError(f"an efficiency must be in (0, 1], got {worst}")
    spread = 1.0 / worst - 1.0
    return max(minimum, min(maximum, math.ceil((z * spread / tolerance) ** 2)))
