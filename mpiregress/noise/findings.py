"""Sentences an admin reads: one per node, one per core that lost time or shows a periodic event."""
from __future__ import annotations

from .analysis import CoreNoise, NodeNoise, RunNoise

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


def periodic(core: CoreNoise) -> list[str]:
    """'a 100 Hz event on core 1 (line 350x its background, 4 harmonics)' for each period found."""
    return [f"a {hz(p.frequency_hz)} Hz event on {core_label(core)} on {core.node} (spectral line {p.prominence:.0f}x "
            f"its background{f', {p.harmonics} harmonics' if p.harmonics else ''})" for p in core.periods]


def node_sentence(node: NodeNoise) -> str:
    worst = max(node.cores, key=lambda c: c.lost_fraction)
    return (f"{node.node}: efficiency {node.efficiency:.3f} over {len(node.cores)} core(s) and {node.iterations} "
            f"iterations; most time lost on {core_label(worst)} ({worst.lost_fraction:.1%}), largest detour "
            f"{node.max_detour_us:.0f} us.")


def sentences(run: RunNoise) -> list[str]:
    """All findings of a run, node by node; the truncation first when data was lost."""
    out = [f"file cut short: {run.truncated}."] if run.truncated else []
    for node in run.nodes:
        out.append(node_sentence(node))
        if len(node.cores) == 1:
            out.append(f"{node.node}: one rank only, so its efficiency is 1 by definition; run one rank per core.")
        for core in node.cores:
            if core.lost_fraction >= WORTH_NAMING:
                out.append(f"{node.node} {core_label(core)}: {core.lost_fraction:.1%} of the time lost, "
                           f"{core.detours_per_s:.0f} detours/s above {core.threshold_us:.1f} us, largest "
                           f"{core.max_detour_us:.0f} us.")
            out.extend(s[0].upper() + s[1:] + "." for s in periodic(core))
    return out
