"""Sentences an admin reads: one per node, one per core that lost time or shows a periodic event."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from mpiregress.families.noise import folding, recurrence
from mpiregress.families.noise.analysis import (
    MIN_EVENT_HZ,
    CoreNoise,
    NodeNoise,
    Period,
    RunNoise,
    is_slow,
    whole_multiple,
)
from mpiregress.families.noise.known import KEY as KNOWN_KEY
from mpiregress.families.noise.known import KnownSource

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
    """A frequency as an admin says it: 100, 250, 13.7, 2.5 (the spectrum's resolution is ~0.3 Hz: a 73 ms
    daemon is 13.7 Hz, not 14)."""
    return f"{frequency:.0f}" if frequency >= 100 else f"{frequency:.1f}"


def every(frequency: float) -> str:
    """The event's period as a timer or daemon is configured: 'every 73 ms'."""
    return f"every {1000 / frequency:.3g} ms"


def same_period(a: float, b: float) -> bool:
    """Two cores' lines of one event: within the spectrum's resolution (~0.3 Hz) or 2 %, or both slow.

    Below MIN_EVENT_HZ the run cannot place an event (analysis.one_slow_line): two cores' slow lines
    are one slow finding, whatever their places.
    """
    return abs(a - b) <= max(0.4, 0.02 * max(a, b)) or max(a, b) < MIN_EVENT_HZ


def same_event(p: Period, q: Period) -> bool:
    """Can ``q`` be the event ``p`` told again: the same period, and not a lone line for a comb?

    A comb of many orders (a 200 ms source: 128 harmonics) is no lone line that happens to stand
    within a spectral bin of its fundamental on another core (a throttling stall's line at 4.77 Hz
    beside 5 Hz). Slow lines are one slow finding, whatever their places (analysis.is_slow).
    """
    if is_slow(p) and is_slow(q):
        return True
    return same_period(p.frequency_hz, q.frequency_hz) and bool(q.harmonics or not p.harmonics)


def core_events(core: CoreNoise, skip: tuple[Period, ...] = ()) -> list[Period]:
    """The periods of ``core`` that are its own: those not among ``skip``, the host's events already said."""
    return [p for p in core.periods if not any(same_event(p, h) for h in skip)]


def known_as(p: Period, known: Sequence[KnownSource]) -> KnownSource | None:
    """The system's known source ``p`` is at (``same_period``; slow lines are no source), or None."""
    return None if is_slow(p) else next((k for k in known if same_period(p.frequency_hz, k.hz)), None)


def known_note(p: Period, known: Sequence[KnownSource]) -> str:
    """'; known on this system: the VM host's timer (systems/local.yaml known_noise_sources)', or ''."""
    k = known_as(p, known)
    return f"; known on this system: {k.what} ({k.source} {KNOWN_KEY})" if k else ""


def periodic(core: CoreNoise, skip: tuple[Period, ...] = (), known: Sequence[KnownSource] = ()) -> list[str]:
    """'a 100 Hz event on core 1 on n1 (every 10 ms; spectral line 350x its background, 4 harmonics)' for each.

    ``skip``: the events already said once for every core of the host; ``known``: the system's known sources
    (said beside the event they are).
    """
    return [core_event(core, p, known) for p in core_events(core, skip)]


def core_event(core: CoreNoise, p: Period, known: Sequence[KnownSource] = ()) -> str:
    """The clause of one core's event ``p`` (``periodic``)."""
    return (f"a {hz(p.frequency_hz)} Hz event on {core_label(core)} on {core.node} ({every(p.frequency_hz)}"
            f"{size(p, core.tick_detour_us)}; {evidence(p, p.prominence)}){known_note(p, known)}")


def size(p: Period, tick_us: float | None) -> str:
    """', 4.2 us each, 0.04% of the time at every cycle, within twice the kernel tick's own 25 us: shown, not
    flagged', or '' where not measured."""
    if not p.detour_us:
        return ""
    share = p.detour_us * 1e-6 * p.frequency_hz
    small = (f", within {tick_sized_times()} the kernel tick's own {length(tick_us)}: shown, not flagged"
             if tick_sized(p, tick_us) and tick_us is not None else "")
    return f", {length(p.detour_us)} each, {share:.2%} of the time at every cycle{small}"


def length(us: float) -> str:
    """'4.2 us', '300 us', '1 ms', '2.07 ms'."""
    return f"{us / 1e3:.3g} ms" if us >= 1e3 else f"{us:.0f} us" if us >= 10 else f"{us:.1f} us"


def tick_sized(p: Period, tick_us: float | None) -> bool:
    """Are the event's stalls of the kernel tick's own size on its core: within TICK_SIZED times its interrupt
    (``tick_us``)? Every node pays that at every tick: such an event is shown with its size, and a person is
    asked to look only at events that take the core from a job longer than the kernel itself does
    (``event_sentences``). A control's 96.6 Hz event of 4 us stalls beside a 25 us tick (noise-keep35-quiet) is
    one, and the VM host's timer patterns (21-27 us) are; a daemon's millisecond is not. Where the tick was not
    seen (``tick_us`` None) no event is."""
    return bool(p.detour_us) and tick_us is not None and p.detour_us <= TICK_SIZED * tick_us


def tick_sized_times() -> str:
    """TICK_SIZED said: 'twice'."""
    return "twice" if TICK_SIZED == 2 else f"{TICK_SIZED:g} times"


def evidence(p: Period, prominence: float) -> str:
    """What named the event: its spectral line, or (no line: a loaded core's other time slices fill the
    spectrum) its stalls folded at its period."""
    if p.folded:
        held, seen, *idle = p.folded
        after = (f", and FWQ did not run in the {folding.IDLE_WINDOW_NS / 1e6:g} ms after it in {idle[0]} of all "
                 f"{idle[1]} cycles (whatever runs then takes the core from FWQ and the load alike)" if idle else "")
        return (f"its stalls start at one phase in {held} of the {seen} cycles FWQ could see{after}, found by "
                f"folding them: no spectral line")
    return f"spectral line {prominence:.0f}x its background{f', {p.harmonics} harmonics' if p.harmonics else ''}"


# An event whose stalls are within this many times the tick's own interrupt is of the tick's size (tick_sized):
# one timer interrupt costs about what another does (on the local VM the tick's 23-25 us, the host's 10 ms timer
# 21-22 us and its 5 ms pattern 27 us, noise-keep35-quiet), and a daemon that preempts a job costs milliseconds.
TICK_SIZED = 2.0

# An event of one core is on another when at least this share of its lines are lines there too.
SHARED_LINES = 0.5


def shows(core: CoreNoise, p: Period) -> bool:
    """Does ``core`` show the event ``p`` of another core?

    It does when it reports it too, or when at least SHARED_LINES of ``p``'s lines (its
    fundamental and every line folded into it) are lines of ``core``'s spectrum, reported or
    not. A line confirms at HARMONIC_PROMINENCE (8x), as a harmonic does at its expected place:
    the 30x bar is for claiming an event, not for seeing it again. And the lines, not the
    fundamental each core picked: one comb can be told two ways (the host's 250 Hz tick and
    10 ms timers are a 100 Hz and a 250 Hz event on one core, a 50 Hz event on the other, over
    the same lines), and a host line can hide in a core's own comb (the 250 Hz tick among a 5 Hz
    event's lines). A source on one core has lines the others lack: its comb's orders are many,
    and a throttled or modulated source brings its sidebands (analysis.sideband).
    """
    if any(same_event(p, q) for q in core.periods):
        return True
    theirs = np.array(core.lines)
    if not len(theirs):
        return False
    own = (p.frequency_hz,) + p.lines
    # One line on two cores: within a spectral bin (lines are placed to a fraction of one), not the
    # 2 % of same_period, which at high orders would take a strong event's sidebands for the host's lines.
    bin_hz = resolution(core)
    if sum(bool(np.any(np.abs(theirs - f) <= bin_hz)) for f in own) < SHARED_LINES * len(own):
        return False
    # Lines alone are not the event: a daemon pinned to one core leaves a line at its rate on the other core's
    # spectrum (benchmarks/noise_injected.py, 250 ms at real time) whose stalls do not come back at it.
    if core.stalls is None:
        return True
    if not recurrence.recurs(core.stalls, p.frequency_hz, bin_hz, tick_hz=core.tick_hz):
        return False
    # Nor are stalls that come back at it because an event of this core's own comes back at a whole share of its
    # cycle: a 27 ms daemon on core 0 held every 243 ms (9 of its cycles), within the bin of a 250 ms daemon on
    # core 1 told at 4.02 Hz, which was then said as the host's, on no core (noise-keep35-quiet, 3 runs of 10).
    own_faster = any(whole_multiple(q.frequency_hz, p.frequency_hz, bin_hz) for q in core.periods)
    return not (own_faster and recurrence.faster_explains(core.stalls, p.frequency_hz, bin_hz, core.tick_hz))


def resolution(core: CoreNoise) -> float:
    """The spacing of a core's spectrum (Hz): 1 / its run's length."""
    freqs = core.spectrum[0]
    return float(freqs[1] - freqs[0]) if len(freqs) > 1 else 1.0 / max(core.duration_s, 1e-9)


def host_periods(cores: list[CoreNoise]) -> list[tuple[Period, float]]:
    """(event, strongest prominence) of each event every one of ``cores`` shows (two cores or more).

    An event on every core is the host's (a daemon, a timer, other users' time slices on a
    shared machine), not one core's: it is said once, not once per core.
    """
    if len(cores) < 2:
        return []
    out: list[tuple[Period, float]] = []
    for core in cores:
        for p in core.periods:
            if any(same_event(p, h) for h, _ in out):
                continue
            if all(other is core or shows(other, p) for other in cores):
                told = [q for c in cores for q in c.periods if same_event(p, q) or q is p]
                largest = max(told, key=lambda q: q.detour_us)
                out.append((replace(p, detour_us=largest.detour_us), max(q.prominence for q in told)))
    return out


def host_tick_us(cores: Sequence[CoreNoise]) -> float | None:
    """The shortest tick interrupt of ``cores`` (``CoreNoise.tick_detour_us``), None where one did not show it:
    a host's event is the tick's size only if it is on every core."""
    ticks = [c.tick_detour_us for c in cores]
    return None if not ticks or any(t is None for t in ticks) else min(t for t in ticks if t is not None)


def tick_sentence(node: NodeNoise) -> str | None:
    """'node1: the kernel tick at 250 Hz (every 4 ms, the kernel's own; its line on 2 of 2 core(s), with its
    lines at 500, 750 Hz): the tick, not an event.' when the node's tick is known, from the kernel or measured
    from the stalls; a faster pattern the stalls hold beside the kernel's tick is said to be no tick of it.
    The lines are said as measured (to the hertz): under a 1 kHz pattern the tick's own include 250 Hz
    (analysis.is_tick), no multiple of it."""
    if not node.tick_hz:
        return None
    seen = [c for c in node.cores if c.tick_lines]
    lines = sorted({float(round(f)) for c in seen for f in c.tick_lines} - {float(round(node.tick_hz))})
    how = "the kernel's own" if node.tick_from_kernel else "measured from the stalls"
    spectra = f"; its line on {len(seen)} of {len(node.cores)} core(s)" if seen else ""
    more = f", with its lines at {', '.join(hz(h) for h in lines)} Hz" if lines else ""
    faster = (f"; its cores' stalls also recur at {hz(node.faster_pattern_hz)} Hz, which is not this kernel's "
              f"tick: a hypervisor's or the firmware's" if node.faster_pattern_hz else "")
    return (f"{node.node}: the kernel tick at {hz(node.tick_hz)} Hz ({every(node.tick_hz)}, {how}{spectra}{more}"
            f"{faster}): the tick, not an event.")


# Stalls listed by time in a "stalls, no period" sentence (the longest; the count says how many more).
LISTED_STALLS = 6


def turns_sentence(core: CoreNoise) -> str | None:
    """'node1 core 0: shared in turns: other processes held it 8.0 ms of every 12 ms (83.3 Hz, 3 ticks of the
    scheduler), not an event.' for a core whose long stalls are the scheduler's round (analysis.CoreNoise.turns)."""
    if not core.turns or not core.tick_hz:
        return None
    said = "; ".join(f"other processes held it {share * 1e3 / rate:.1f} ms of every {1e3 / rate:.3g} ms "
                     f"({hz(rate)} Hz, {round(core.tick_hz / rate)} ticks of the scheduler)"
                     for rate, share in core.turns)
    return f"{core.node} {core_label(core)}: shared in turns: {said}, not an event."


def stalls_sentence(core: CoreNoise) -> str | None:
    """'node1 core 0: stalls, no period: 3 of 1 ms or more, at 932 ms (54.1 ms), ...' for a core whose
    spectrum had lines its stalls do not recur at, or whose long stalls make no period (and are not the
    scheduler's turns, ``turns_sentence``); 'node1 core 0: besides its 11.1 Hz event, stalls with no period: ...'
    where the core names an event too."""
    if not core.long_stalls or core.turns or (core.periods and not core.unconfirmed):
        return None
    longest = sorted(sorted(core.long_stalls, key=lambda s: -s.lost_us)[:LISTED_STALLS], key=lambda s: s.at_ms)
    listed = ", ".join(f"{s.at_ms:.0f} ms ({s.lost_us / 1e3:.1f} ms)" for s in longest)
    rest = len(core.long_stalls) - len(longest)
    lines = (f"; the spectrum's lines at {', '.join(hz(f) for f in core.unconfirmed)} Hz do not recur in the "
             f"time domain" if core.unconfirmed else "")
    # Beside an event the core names, the same words alone read as if the run doubted it.
    beside = (f"besides its {', '.join(hz(p.frequency_hz) for p in core.periods)} Hz event"
              f"{'s' if len(core.periods) > 1 else ''}, stalls with no period" if core.periods else
              "stalls, no period")
    return (f"{core.node} {core_label(core)}: {beside}: {len(core.long_stalls)} of 1 ms or more, "
            f"{'the longest ' if rest else ''}at {listed}{f' and {rest} more' if rest else ''}{lines}.")


def node_sentence(node: NodeNoise) -> str:
    worst = max(node.cores, key=lambda c: c.lost_fraction)
    return (f"{node.node}: efficiency {node.efficiency:.3f} over {len(node.cores)} core(s) and {node.iterations} "
            f"iterations; most time lost on {core_label(worst)} ({worst.lost_fraction:.1%}), largest detour "
            f"{node.max_detour_us:.0f} us.")


def host_events(run: RunNoise) -> list[tuple[str | None, Period, float]]:
    """(node, event, strongest prominence) of each event that is a host's, not one core's, each once.

    ``node`` is None for an event on every core of the run, else the one node on every core of
    which it is (and that is not already an event of the whole run).
    """
    all_cores = [c for node in run.nodes for c in node.cores]
    events: list[tuple[str | None, Period, float]] = [(None, p, prom) for p, prom in host_periods(all_cores)]
    for node in run.nodes:
        events.extend((node.node, p, prom) for p, prom in host_periods(list(node.cores))
                      if not any(same_event(p, h) for where, h, _ in events if where is None))
    return events


def host_lines(run: RunNoise) -> list[tuple[str | None, float, float]]:
    """(node, frequency, strongest prominence) of each of ``host_events``."""
    return [(where, p.frequency_hz, prom) for where, p, prom in host_events(run)]


def host_skip(events: list[tuple[str | None, Period, float]], node: str) -> tuple[Period, ...]:
    """The ``events`` already said for every core of ``node``."""
    return tuple(p for where, p, _ in events if where in (None, node))


def one_core_events(run: RunNoise) -> list[tuple[CoreNoise, Period]]:
    """Every event the findings name as one core's (the host's lines left out), node by node."""
    events = host_events(run)
    return [(core, p) for node in run.nodes for core in node.cores
            for p in core_events(core, host_skip(events, node.node))]


def host_event(p: Period, prominence: float, where: str, known: Sequence[KnownSource] = (),
               tick_us: float | None = None) -> str:
    """The sentence of a host's event; slow lines say they are no period the run can place; a system's known
    source says what it is (``known``); ``tick_us``: the cores' tick interrupt (``host_tick_us``)."""
    if is_slow(p):
        what = (f"Slow lines (strongest at {hz(p.frequency_hz)} Hz, no period a run can place: a few long "
                f"stalls, such as the kernel throttling a real-time FWQ for 50 ms a second)")
        line = f"spectral line up to {prominence:.0f}x its background"
    else:
        what = f"A {hz(p.frequency_hz)} Hz event"
        line = f"{every(p.frequency_hz)}{size(p, tick_us)}; " + (
            evidence(p, prominence) if p.folded else f"spectral line up to {prominence:.0f}x its background")
    return f"{what} on every core of {where} ({line}): the host's own, not one core's{known_note(p, known)}."


def event_sentences(run: RunNoise, known: Sequence[KnownSource] = ()) -> list[str]:
    """The sentences of the periodic events a run names (the host's, then each core's), the system's ``known``
    sources and events of the tick's own size (``tick_sized``) left out: what the verdict asks a person to look
    at. Efficiency, stalls, the tick, the known sources and the tick-sized events are said in ``sentences``
    only."""
    said = host_events(run)
    ticks = where_ticks(run)
    events = [(where, p, prom) for where, p, prom in said
              if not known_as(p, known) and not tick_sized(p, ticks.get(where))]
    names = ", ".join(node.node for node in run.nodes)
    out = [host_event(p, prom, names if where is None else where, (), ticks.get(where)) for where, p, prom in events
           if where is None or where in {n.node for n in run.nodes}]
    for node in run.nodes:
        skip = host_skip(said, node.node)
        for core in node.cores:
            out.extend(capital(core_event(core, p)) for p in core_events(core, skip)
                       if not known_as(p, known) and not tick_sized(p, core.tick_detour_us))
    return out


def where_ticks(run: RunNoise) -> dict[str | None, float | None]:
    """The tick interrupt (``host_tick_us``) of every core of the run (None) and of each node's cores."""
    return {None: host_tick_us([c for n in run.nodes for c in n.cores]),
            **{n.node: host_tick_us(n.cores) for n in run.nodes}}


def capital(clause: str) -> str:
    """A clause as a sentence."""
    return clause[0].upper() + clause[1:] + "."


def sentences(run: RunNoise, known: Sequence[KnownSource] = ()) -> list[str]:
    """All findings of a run, node by node (the system's ``known`` sources said as such); the truncation first
    when data was lost."""
    out = [f"file cut short: {run.truncated}."] if run.truncated else []
    events = host_events(run)
    ticks = where_ticks(run)
    names = ", ".join(node.node for node in run.nodes)
    out.extend(host_event(p, prom, names, known, ticks[None]) for where, p, prom in events if where is None)
    for node in run.nodes:
        out.extend(host_event(p, prom, node.node, known, ticks[node.node]) for where, p, prom in events
                   if where == node.node)
        skip = host_skip(events, node.node)
        out.append(node_sentence(node))
        tick = tick_sentence(node)
        if tick:
            out.append(tick)
        if len(node.cores) == 1:
            out.append(f"{node.node}: one rank only, so its efficiency is 1 by definition; run one rank per core.")
        for core in node.cores:
            if core.lost_fraction >= WORTH_NAMING:
                out.append(f"{node.node} {core_label(core)}: {core.lost_fraction:.1%} of the time lost, "
                           f"{core.detours_per_s:.0f} detours/s above {core.threshold_us:.1f} us, largest "
                           f"{core.max_detour_us:.0f} us.")
            out.extend(capital(s) for s in periodic(core, skip, known))
            out.extend(said for said in (turns_sentence(core), stalls_sentence(core)) if said)
    return out
