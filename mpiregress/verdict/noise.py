"""Noise in the verdict: a regression on a noisy node is "noisy", and how many repeats noise calls for.

Two yardsticks for the probe a run recorded beside each benchmark, both applied by
:func:`reclassify`, the one function the baseline band (verdict/band.py) and the history
gate (verdict/history_gate.py) call:

* the node's **usual band**, built from its own history of probe efficiencies like any
  series (median and MAD, one-sided: only a drop is noise), once it has ``MIN_RUNS`` probes;
* the system's **noise floor** (``noise_floor`` in ``systems/<name>.yaml``, :class:`NoiseFloor`):
  what a quiet node's probe looks like there (lowest efficiency, largest single detour). A
  probe beyond it is noisy in this very run, with or without any history.
"""
from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from mpiregress.model import systems

MIN_RUNS = 5             # probes of a node before its own band is trusted
Z = 3.5                  # one-sided, as the gate's (many nodes are probed at once)
MIN_BAND = 0.02          # an efficiency drop under 2 points is nobody's business
NO_HISTORY_FLOOR = 0.90  # the efficiency floor of a system file without ``noise_floor`` (see NoiseFloor)
PROBE_MARGIN = 2.0       # the probe's noise may differ from the benchmark's: allow twice its excess


@dataclass(frozen=True)
class NoiseFloor:
    """What a quiet node's probe looks like on a system: below ``efficiency`` or with a single detour
    longer than ``max_detour_us`` a node is noisy in this run, whatever its history says.

    Data, per system: ``noise_floor: {efficiency: 0.90, max_detour_us: 500}`` in ``systems/<name>.yaml``
    (why those values: the comment there). A system file without it gets the efficiency floor only.
    """

    efficiency: float = NO_HISTORY_FLOOR
    max_detour_us: Optional[float] = None
    source: str = "default"          # where it was read, for the sentence (systems/<name>.yaml)


DEFAULT_FLOOR = NoiseFloor()


def floor_from(data: Any, source: str) -> NoiseFloor:
    """A :class:`NoiseFloor` from a system file's ``noise_floor`` mapping; ValueError names what is wrong."""
    if data is None:
        return NoiseFloor(source=source)
    if not isinstance(data, dict) or not set(data) <= {"efficiency", "max_detour_us"}:
        raise ValueError("must be a mapping with 'efficiency' and/or 'max_detour_us'")
    efficiency = data.get("efficiency", NO_HISTORY_FLOOR)
    detour = data.get("max_detour_us")
    if isinstance(efficiency, bool) or not isinstance(efficiency, (int, float)) or not 0 < efficiency <= 1:
        raise ValueError(f"efficiency must be a number in (0, 1], found {efficiency!r}")
    if detour is not None and (isinstance(detour, bool) or not isinstance(detour, (int, float)) or detour <= 0):
        raise ValueError(f"max_detour_us must be a positive number of microseconds, found {detour!r}")
    return NoiseFloor(float(efficiency), None if detour is None else float(detour), source)


@systems.section_check("noise_floor")
def _check_floor(value: Any, path: Path, key: str) -> None:
    floor_from(value, str(path))


def floor_of(system: str) -> NoiseFloor:
    """The noise floor of ``system`` (its systems/<name>.yaml); the default for a name with no system file
    (results imported from elsewhere). A malformed system file raises its one-sentence InputError."""
    found = systems.section(system, "noise_floor")
    return DEFAULT_FLOOR if found is None else floor_from(*found)


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


@dataclass(frozen=True)
class Noisy:
    """One probed node found noisy: the sentence, and the slowdown its noise can explain."""

    node: str
    sentence: str
    explains: float


def noisy_nodes(probe: Sequence[Mapping[str, Any]], history: Mapping[str, Sequence[float]],
                floor: NoiseFloor = DEFAULT_FLOOR) -> list[str]:
    """'noisy: node X efficiency 0.82, usual 0.97' for each probed node outside its usual band or the floor."""
    return [n.sentence for n in outside(probe, history, floor)]


def outside(probe: Sequence[Mapping[str, Any]], history: Mapping[str, Sequence[float]],
            floor: NoiseFloor = DEFAULT_FLOOR) -> list[Noisy]:
    """Each probed node outside its own usual band, or beyond the system's noise floor (with or without history).

    The node's own band speaks first (it knows the node); the floor catches what a node's history
    cannot: a node with no history yet, or a usually noisy node far from a quiet one in this run.
    """
    out = []
    for entry in probe:
        node, value = str(entry["node"]), float(entry["efficiency"])
        detour = entry.get("max_detour_us")
        band = usual_band(node, history.get(node, ()))
        by_efficiency = explainable_slowdown([value])
        if band is not None and value < band.low:
            out.append(Noisy(node, f"noisy: node {node} efficiency {value:.2f}, usual {band.centre:.2f}",
                             by_efficiency))
        elif value < floor.efficiency:
            known = "" if band is not None else f" ({_probes(history.get(node, ()))} of this node)"
            out.append(Noisy(node, f"noisy: node {node} efficiency {value:.2f}, below a quiet node's "
                                   f"{floor.efficiency:.2f} ({floor.source} noise_floor){known}", by_efficiency))
        elif floor.max_detour_us is not None and isinstance(detour, (int, float)) and detour > floor.max_detour_us:
            ratio = float(detour) / floor.max_detour_us
            out.append(Noisy(node, f"noisy: node {node} stalled its probe for {detour:.0f} us at once, "
                                   f"{ratio:.1f}x a quiet node's largest detour ({floor.max_detour_us:.0f} us, "
                                   f"{floor.source} noise_floor)",
                             max(by_efficiency, detour_slowdown(ratio))))
    return out


def _probes(history: Sequence[float]) -> str:
    return "no earlier probe" if not history else f"only {len(history)} earlier probe(s), fewer than {MIN_RUNS}"


def explainable_slowdown(efficiencies: Sequence[float]) -> float:
    """The largest slowdown noise alone can cause on nodes of these probe efficiencies.

    A node of FWQ efficiency e loses about 1 - e of its time to noise, so work on it
    stretches by 1/e; an exchange waits for both ends, so with the worst node at both
    ends a measurement stretches by 1/e_worst^2. The probe runs beside the benchmark,
    not during it, so twice that excess is allowed (``PROBE_MARGIN``).
    """
    worst = min(efficiencies)
    return 1.0 + PROBE_MARGIN * (1.0 / worst ** 2 - 1.0) if worst > 0 else math.inf


def detour_slowdown(ratio: float) -> float:
    """The slowdown a node whose probe stalled ``ratio`` times longer than a quiet node's largest detour
    is allowed to explain: 1 + PROBE_MARGIN x ratio.

    A heuristic, stated as such: the probe runs at real-time priority where it can (the benchmark does
    not), so on a busy node its efficiency barely drops while the benchmark shares its cores with the
    load; a long stall is what shows that load. Its length against a quiet node's gives the order of the
    contention, and ``PROBE_MARGIN`` the same slack as for efficiency: a path ten times slower on a
    node stalled 2x longer than quiet is still a regression.
    """
    return 1.0 + PROBE_MARGIN * ratio


def reclassify(verdict: str, reason: str, nodelist: Sequence[str], probe: Sequence[Mapping[str, Any]],
               history: Mapping[str, Sequence[float]], slowdown: float | None = None,
               floor: NoiseFloor = DEFAULT_FLOOR) -> tuple[str, str]:
    """Turn a ``regression`` measured on a noisy node into ``noisy``; leave the rest alone.

    The one rule of both judges (the baseline band and the history gate). A node is noisy
    when its probe in this run is outside its own usual band (``history``: node -> earlier
    efficiencies) or beyond the system's ``floor`` (:func:`outside`), so a run with no
    history at all still knows a loaded node. Only the nodes the series ran on count: a
    noisy node elsewhere in the allocation did not touch this measurement. A ``slowdown``
    (times slower than the reference) beyond what that noise can explain stays a
    regression, with the noise named beside it: a broken path on a noisy node is still broken.
    """
    if verdict != "regression":
        return verdict, reason
    on_nodes = [e for e in probe if str(e["node"]) in set(nodelist)]
    noisy = outside(on_nodes, history, floor)
    if not noisy:
        return verdict, reason
    sentences = [n.sentence for n in noisy]
    explained = max(n.explains for n in noisy)
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
