"""Sentences an admin reads: one per node, one per core that lost time or shows a periodic event."""
from __future__ import annotations

from .analysis import CoreNoise, NodeNoise, Period, RunNoise

# Below this share of lost time a core is not worth a sentence of its own.
WORTH_NAMING = 0.01


def core_label(core: CoreNoise) -> str:
    """'core 1' or, when the rank was not pinned, what it was instead."""
    label = f"core {core.cpu}"
    if core.migrated:
        label += " (rank migrated between cores: bind one rank per core)"
    elif not core.bound:
        label += " (rank not bound to one core)"
    return label


def hz(frequency: float) -> str:
    """A frequency as an admin says it: 100, 250, 2.5 (the spectrum's resolution is ~0.3 Hz)."""
    return f"{frequency:.0f}" if frequency >= 10 else f"{frequency:.1f}"


def same_period(a: float, b: float) -> bool:
    """Two cores' lines of one event: within the spectrum's resolution (~0.3 Hz) or 2 %."""
    return abs(a - b) <= max(0.4, 0.02 * max(a, b))


def periodic(core: CoreNoise, skip: tuple[float, ...] = ()) -> list[str]:
    """'a 100 Hz event on core 1 (line 350x its background, 4 harmonics)' for each period found.

    ``skip``: frequencies already said once for every core of the host.
    """
    return [f"a {hz(p.frequency_hz)} Hz event on {core_label(core)} on {core.node} (spectral line {p.prominence:.0f}x "
            f"its background{f', {p.harmonics} harmonics' if p.harmonics else ''})" for p in core.periods
            if not any(same_period(p.frequency_hz, f) for f in skip)]


def host_periods(cores: list[CoreNoise]) -> list[tuple[float, float]]:
    """(frequency, strongest prominence) of each event every one of ``cores`` shows (two cores or more).

    An event on every core is the host's (a daemon, a timer, other users' time slices on a
    shared machine), not one core's: it is said once, not once per core.
    """
    if len(cores) < 2:
        return []
    out = []
    for p in cores[0].periods:
        matches: list[Period] = [p]
        for core in cores[1:]:
            match = next((q for q in core.periods if same_period(p.frequency_hz, q.frequency_hz)), None)
            if match is None:
                break
            matches.append(match)
        else:
            out.append((p.frequency_hz, max(m.prominence for m in matches)))
    return out


def node_sentence(node: NodeNoise) -> str:
    worst = max(node.cores, key=lambda c: c.lost_fraction)
    return (f"{node.node}: efficiency {node.efficiency:.3f} over {len(node.cores)} core(s) and {node.iterations} "
            f"iterations; most time lost on {core_label(worst)} ({worst.lost_fraction:.1%}), largest detour "
            f"{node.max_detour_us:.0f} us.")


def sentences(run: RunNoise) -> list[str]:
    """All findings of a run, node by node; the truncation first when data was lost."""
    out = [f"file cut short: {run.truncated}."] if run.truncated else []
    every = [c for node in run.nodes for c in node.cores]
    host = host_periods(every)
    if host:
        names = ", ".join(node.node for node in run.nodes)
        out.extend(f"A {hz(f)} Hz event on every core of {names} (spectral line up to {prom:.0f}x its background): "
                   f"the host's own, not one core's." for f, prom in host)
    for node in run.nodes:
        own = [(f, prom) for f, prom in host_periods(list(node.cores))
               if not any(same_period(f, g) for g, _ in host)]
        out.extend(f"A {hz(f)} Hz event on every core of {node.node} (spectral line up to {prom:.0f}x its "
                   f"background): the host's own, not one core's." for f, prom in own)
        skip = tuple(f for f, _ in host + own)
        out.append(node_sentence(node))
        if len(node.cores) == 1:
            out.append(f"{node.node}: one rank only, so its efficiency is 1 by definition; run one rank per core.")
        for core in node.cores:
            if core.lost_fraction >= WORTH_NAMING:
                out.append(f"{node.node} {core_label(core)}: {core.lost_fraction:.1%} of the time lost, "
                           f"{core.detours_per_s:.0f} detours/s above {core.threshold_us:.1f} us, largest "
                           f"{core.max_detour_us:.0f} us.")
            out.extend(s[0].upper() + s[1:] + "." for s in periodic(core, skip))
    return out
