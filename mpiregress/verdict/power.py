"""What a judge could have seen: the power of a pass, carried per series in the verdict.

A pass says "no effect beyond the bar"; it says nothing unless the bar is known. Every judge that
passes a series therefore also states, from this run's own measured spread, the smallest effect it
would have caught at its own error rate (:class:`Power`): "could have seen >= 6 % here". The
field is generic: the paired A/B judge, the baseline band and the history gate fill it here, the
link matrix and the cross-method judge fill the same field (on a :class:`~mpiregress.model.results.Result`
through ``conditions["power"]``, :func:`from_conditions`).

``detectable`` is on the judge's own scale: ``relative`` (0.06 = a 6 % change on the hurting side)
or ``factor`` (3.1 = a link 3.1x slower). It is the effect the judge catches with probability
:data:`PROBABILITY` (80 %) at its error rate; each judge's docstring says how it is computed.

Targets are data (``power:`` in ``systems/<name>.yaml``, judge name -> the effect that must be seen):
a gating judge whose pass could not have seen its target is not a pass but "needs a look"
(:mod:`.compose`), with a sentence such as "could not see a 5 % change at this noise (could see >= 14 %)".
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Collection, Mapping, Optional, Sequence, Union

from mpiregress.errors import InputError
from mpiregress.model import systems
from mpiregress.model.names import METRICS, PLACEMENTS

PROBABILITY = 0.8            # "could have seen": caught 4 times in 5 at the judge's error rate
Z_POWER = 0.8416             # the standard normal's 80 % quantile
SCALES = ("relative", "factor")
# A power's judge (as findings name it) -> its key in a system file's ``power:`` block.
JUDGE_KEYS = {"paired A/B": "paired_ab", "history gate": "history_gate", "baseline band": "baseline_band",
              "link matrix (node)": "links_node", "link matrix (link)": "links_link", "cross-method": "cross_method",
              "noise": "noise"}
# Judges a system file may set a target for (``power:``); the link matrix's are its own (links).
TARGET_JUDGES = frozenset({"paired_ab", "history_gate", "baseline_band", "links_node", "links_link",
                           "cross_method", "noise"})


@dataclass(frozen=True)
class Power:
    """The smallest effect one judge could have detected on one series in this run."""

    judge: str                        # paired A/B | history gate | baseline band | link matrix | ...
    detectable: float                 # on ``scale``: relative change (0.06) or slowdown factor (3.1)
    scale: str = "relative"
    target: Optional[float] = None    # the effect this system says must be seen (None: none declared)
    how: str = ""                     # what it was computed from, one phrase

    def __post_init__(self) -> None:
        if self.scale not in SCALES:
            raise ValueError(f"power scale {self.scale!r} is not one of {SCALES}")

    @property
    def short(self) -> bool:
        """Could not see its target (False without a target)."""
        return self.target is not None and self.detectable > self.target

    @property
    def blind(self) -> bool:
        """No effect, however large, could have been shown (too few pairs for the judge's error rate)."""
        return not math.isfinite(self.detectable)

    def amount(self, value: Optional[float] = None) -> str:
        """An effect on this power's scale as people read it: '6 %' or '3.1x' ('no effect' when blind)."""
        x = self.detectable if value is None else value
        if not math.isfinite(x):
            return "no effect"
        return f"{x:.2f}x" if self.scale == "factor" else f"{x:.0%}" if x >= 0.095 else f"{x:.1%}"

    def sentence(self) -> str:
        """'could have seen >= 6 % here (target 5 %)'; 'could have seen no effect here' when blind."""
        text = "could have seen no effect here" if self.blind else f"could have seen >= {self.amount()} here"
        if self.target is not None:
            text += f" (target {self.amount(self.target)})"
        return text + (f"; {self.how}" if self.how else "")

    def short_sentence(self) -> str:
        """'could not see a 5 % change at this noise (could see >= 14 %)'."""
        assert self.target is not None
        what = f"a {self.amount(self.target)} " + ("slowdown" if self.scale == "factor" else "change")
        why = "here (no effect could have been shown)" if self.blind else \
            f"at this noise (could see >= {self.amount()})"
        return f"could not see {what} {why}" + (f"; {self.how}" if self.how else "")

    def with_target(self, target: Optional[float]) -> "Power":
        return replace(self, target=target)

    def to_dict(self) -> dict[str, Any]:
        """Its fields as JSON can hold them: a blind power's detectable is null (JSON has no infinity)."""
        return {**asdict(self), "detectable": None if self.blind else self.detectable, "short": self.short,
                "sentence": self.sentence()}


def beyond_band(judge: str, band: float, spread: float, how: str, target: Optional[float] = None) -> Power:
    """The power of a judge that fails a value beyond a fixed ``band`` (relative): a true change ``theta``
    is measured as ``theta`` plus an error of standard deviation ``spread`` (relative), so it is caught
    4 times in 5 from ``band + 0.84 spread`` on."""
    return Power(judge, band + Z_POWER * max(spread, 0.0), target=target, how=how)


def from_conditions(conditions: Mapping[str, Any]) -> Optional[Power]:
    """The power a judge left in a result's ``conditions["power"]`` (a mapping of :class:`Power`'s fields)."""
    data = conditions.get("power")
    if not isinstance(data, Mapping):
        return None
    known = {"judge", "detectable", "scale", "target", "how"}
    try:
        return Power(**{k: v for k, v in data.items() if k in known})
    except (TypeError, ValueError):
        return None


# A judge's target: one effect for every metric, or one per metric (``*``: the others), or per metric on one
# placement (``bandwidth@cross_node``: on the local host, TCP between namespaces on 2 shared cores).
Target = Union[float, Mapping[str, float]]
AT = "@"


def target_for(target: Optional[Target], metric: str, placement: str = "") -> Optional[float]:
    """The effect a series of ``metric`` on ``placement`` must be able to show under ``target`` (None: none
    declared): its ``metric@placement`` entry, else its metric's, else ``*``'s."""
    if target is None or isinstance(target, (int, float)):
        return None if target is None else float(target)
    found = target.get(f"{metric}{AT}{placement}") if placement else None
    found = found if found is not None else target.get(metric, target.get("*"))
    return None if found is None else float(found)


def tightest(targets: Sequence[Optional[Target]]) -> Optional[Target]:
    """One target from several systems' (an A/B run of several): the most demanding per entry."""
    out: dict[str, float] = {}
    for target in targets:
        if target is None:
            continue
        for entry, value in (target.items() if isinstance(target, Mapping) else [("*", target)]):
            out[entry] = min(float(value), out.get(entry, float(value)))
    return out or None


def targets_from_mapping(block: Any, where: str, metrics: Optional[Collection[str]] = None) -> dict[str, Target]:
    """A system file's ``power:`` block (judge -> the effect it must see, or metric -> effect), or one sentence.

    ``metrics``: the known metric names (names.METRICS, which imports the systems data: the caller passes them).
    """
    if block is None:
        return {}
    if not isinstance(block, Mapping):
        raise InputError(f"{where}: power must map judges to the effect they must see, e.g. 'paired_ab: 0.05'")
    out: dict[str, Target] = {}
    for judge, value in block.items():
        if judge not in TARGET_JUDGES:
            raise InputError(f"{where}: power.{judge} is not a judge (known: {', '.join(sorted(TARGET_JUDGES))})")
        values = value if isinstance(value, Mapping) else {"*": value}
        for entry, number in values.items():
            metric, _, placement = str(entry).partition(AT)
            if entry != "*" and metrics is not None and metric not in metrics:
                raise InputError(f"{where}: power.{judge}.{entry} is not a metric (known: {', '.join(metrics)}; "
                                 f"one placement: metric{AT}placement)")
            if placement and placement not in PLACEMENTS:
                raise InputError(f"{where}: power.{judge}.{entry} names no placement (known: {', '.join(PLACEMENTS)})")
            if isinstance(number, bool) or not isinstance(number, (int, float)) or not number > 0:
                raise InputError(f"{where}: power.{judge} is {value!r}, expected a positive number (0.05 = 5 %) "
                                 f"or one per metric")
        out[str(judge)] = float(value) if not isinstance(value, Mapping) else {
            str(m): float(n) for m, n in value.items()}
    return out


def targets_of(system: systems.System) -> dict[str, Target]:
    """Per judge, the effect a run on ``system`` must be able to see (its ``power:`` block): short of it, a
    pass is "needs a look". {} when the file declares none."""
    return targets_from_mapping(system.data.get("power"), f"system file {system.path}", tuple(METRICS))


@systems.section_check("power")
def _check(block: Any, path: Path, key: str) -> None:
    targets_from_mapping(block, f"system file {path}", tuple(METRICS))
