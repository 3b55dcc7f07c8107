"""What a noise run could have seen (families/noise/power.py): the smallest periodic event its own samples
would have named, measured with the analysis's own detector. Constructed cores only (seeded): no measured
value decides a test here."""
from __future__ import annotations

from dataclasses import replace

import math

import numpy as np
import pytest

from mpiregress.families.noise import analysis, findings, power, recurrence
from mpiregress.families.noise.fwqfile import NodeData, RankData
from mpiregress.model.results import Result
from mpiregress.verdict import compose

QUANTUM = 10_000
ITERATIONS = 200_000          # 2 s of 10 us quanta: 22 cycles of the slow reference period


def quiet(seed: int, jitter: int = 200) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (QUANTUM + rng.integers(0, jitter, ITERATIONS)).astype(np.uint32)


def contended(times: np.ndarray, seed: int, hits: int) -> np.ndarray:
    """Random detours of 20 us to 1 ms at random iterations (other jobs' time slices)."""
    rng = np.random.default_rng(seed)
    out = times.astype(np.int64)
    chosen = rng.choice(len(out), hits, replace=False)
    out[chosen] += rng.integers(20_000, 1_000_000, hits)
    return out.astype(np.uint32)


def rank(times: np.ndarray, cpu: int = 0) -> RankData:
    return RankData(rank=cpu, cpu=cpu, migrated=False, bound=True, quantum_ns=QUANTUM, start_ns=0, times_ns=times)


def grown(data: RankData, injected: RankData) -> tuple[np.ndarray, np.ndarray]:
    """(where the iterations that an injection made longer started, by how much), read against the samples
    before it: each kept iteration must start where it did (asserted here)."""
    before = data.start_times_ns()
    after = injected.start_times_ns()
    index = np.searchsorted(before, after)
    assert np.array_equal(before[index], after)
    more = injected.times_ns.astype(np.int64) - data.times_ns.astype(np.int64)[index]
    return after[more > 0], more[more > 0]


def test_an_injected_event_fires_every_period_of_wall_time_and_leaves_the_rest_where_it_was() -> None:
    data = rank(quiet(1))
    period, stall = 13e6, 50_000
    injected = power.inject(data, period, stall)
    starts, more = grown(data, injected)
    # One event per period of wall time, each in the iteration running when it fired, that much longer (and up to
    # the iteration FWQ could not finish meanwhile); the run keeps its length: the iterations FWQ lost are gone.
    fires = np.arange(power.PHASE * period, int(data.times_ns.sum()), period)
    assert len(starts) == len(fires)
    assert np.all((starts <= fires) & (fires - starts <= QUANTUM + 200))
    assert np.all((more >= stall) & (more <= stall + QUANTUM + 200))
    assert int(injected.times_ns.sum()) == int(data.times_ns.sum())
    assert len(data.times_ns) - len(injected.times_ns) >= len(fires) * (stall // (QUANTUM + 200))


def test_an_event_firing_while_fwq_is_off_its_core_lengthens_that_stall() -> None:
    times = quiet(2)
    times[5_000] = 30_000_000          # another process held the core for 30 ms
    data = rank(times)
    fire = int(data.start_times_ns()[5_000]) + 1_000_000
    injected = power.inject(data, 20e6, 4_000_000, phase=fire / 20e6)
    starts, more = grown(data, injected)
    # Events fired 1 and 21 ms into the 30 ms stall: FWQ got its core back 8 ms later than it did, and the next
    # one, into the iterations it ran then, is a stall of its own.
    assert starts[0] == data.start_times_ns()[5_000] and 8_000_000 <= more[0] <= 8_000_000 + QUANTUM + 200
    assert starts[1] - starts[0] >= 30_000_000 and 4_000_000 <= more[1] <= 4_000_000 + QUANTUM + 200


@pytest.mark.parametrize("seed", [1, 2])
def test_the_smallest_stall_named_is_where_the_analysis_starts_naming_the_event(seed: int) -> None:
    # The reduced detector (a line at 1/P that the stalls confirm) against the analysis itself: the
    # stall the power states is named by core_noise, the grid step below it is not.
    data = rank(contended(quiet(seed), seed, 60))
    period_ms = 13.0
    smallest = power.smallest_stall_us(data, period_ms, None)
    assert np.isfinite(smallest) and smallest > power.STALL_GRID_US[0]
    below = power.STALL_GRID_US[power.STALL_GRID_US.index(smallest) - 1]

    def named(stall_us: float) -> bool:
        core = analysis.core_noise("n1", power.inject(data, period_ms * 1e6, stall_us * 1e3))
        return any(abs(p.frequency_hz - 1e3 / period_ms) <= 0.02 * 1e3 / period_ms and findings.shows(core, p)
                   for p in core.periods)
    assert named(smallest)
    assert not named(below)


def test_a_noisier_core_could_see_less() -> None:
    # 2000 detours in its 2 s: with 400 the fold's wake-ups (folding.WAKE_US) still name a 10 us event every 90 ms,
    # the grid's smallest, as on the calm core.
    calm = rank(quiet(3))
    busy = rank(contended(quiet(3), 3, 2000))
    for period_ms in power.REFERENCE_PERIODS_MS:
        assert power.smallest_stall_us(busy, period_ms, None) > power.smallest_stall_us(calm, period_ms, None)


def test_a_node_states_its_noisiest_cores_power_as_the_verdicts_power() -> None:
    node = NodeData("node1", (rank(quiet(4), 0), rank(contended(quiet(5), 5, 400), 1)))
    analysed = analysis.node_noise(node)
    found = power.node_power(node, analysed)
    assert found.cpu == 1            # the core that lost the most time
    said = found.to_conditions()
    stalls = [found.stalls_us[p] for p in power.REFERENCE_PERIODS_MS]
    assert said["detectable"] == round(max(s / (p * 1e3) for s, p in zip(stalls, power.REFERENCE_PERIODS_MS)), 5)
    assert said["how"].startswith(f"a periodic event stealing that share of core 1 (its noisiest) every 13 ms "
                                  f"(stalls >= {stalls[0]:.0f} us), 90 ms (>= ")
    assert ") or 250 ms (" in said["how"]
    # The verdict carries it for the node's efficiency series and every surface shows its sentence.
    result = Result(system="local", partition="batch", method="source", benchmark="fwq",
                    parameters={"node": "node1", "layout": "all_cores"}, metric="efficiency", unit="",
                    value=analysed.efficiency, status="pass", conditions={"power": said})
    verdict = compose.of_run([result], [])
    (stated,) = verdict.power.values()
    assert stated.judge == "noise" and stated.sentence().startswith(f"could have seen >= {stated.amount()} here; "
                                                                     f"a periodic event stealing that share")


def test_a_node_could_flag_only_events_longer_than_its_ticks_own_interrupt() -> None:
    """An event of the tick's size is shown, not flagged (findings.tick_sized): the power counts from the grid's
    first step past twice the tick's interrupt, and says so."""
    node = NodeData("node1", (rank(quiet(4), 0), rank(contended(quiet(5), 5, 400), 1)))
    analysed = analysis.node_noise(node)
    named = power.node_power(node, analysed, periods_ms=(13.0,))
    ticked = replace(analysed, cores=tuple(replace(c, tick_detour_us=300.0) for c in analysed.cores))
    flagged = power.node_power(node, ticked, periods_ms=(13.0,))
    assert named.stalls_us[13.0] < 600.0 <= flagged.stalls_us[13.0]       # the same samples: only the floor moved
    assert flagged.stalls_us[13.0] == min(s for s in power.STALL_GRID_US if s > 600.0)
    assert ("waiting for the tick, and flagged (its stalls longer than twice the tick's own 300 us there), "
            "measured by") in flagged.how(), flagged.how()
    assert "flagged" not in named.how()


def test_an_event_never_named_up_to_the_grids_end_says_so() -> None:
    found = power.NodePower("node1", 0, {13.0: float("inf"), 90.0: 256.3})
    assert found.share == pytest.approx(power.STALL_GRID_US[-1] / 13e3)
    assert found.how().startswith("a periodic event stealing that share of core 0 (its noisiest) every 13 ms (not "
                                  "even with 9.9 ms stalls) or 90 ms (>= 256 us) would have been named")


def test_a_node_short_of_a_noise_target_needs_a_look_never_passes() -> None:
    # power: {noise: 0.001} in a system file: this node could only see events stealing 0.3 % of a core.
    said = power.NodePower("node1", 1, {13.0: 22.5, 90.0: 256.3}).to_conditions()
    result = Result(system="local", partition="batch", method="source", benchmark="fwq",
                    parameters={"node": "node1", "layout": "all_cores"}, metric="efficiency", unit="",
                    value=0.97, status="pass", conditions={"power": said})
    short = compose.compose("run", compose.Evidence(results=[result], targets={"local": {"noise": 0.001}}))
    assert short.state == "needs a look"
    (looked,) = short.of("needs a look")
    assert "could not see a 0.1% change at this noise (could see >= 0.3%)" in looked.sentence
    met = compose.compose("run", compose.Evidence(results=[result], targets={"local": {"noise": 0.01}}))
    assert met.state == "pass"


def test_the_chance_of_a_recurrence_holds_for_runs_of_any_length() -> None:
    # A 6 s FWQ run holds 1500 cycles of the 250 Hz tick: the binomial tail must not overflow (it did, as a sum
    # of math.comb terms), and it is the exact tail where the terms are small enough to sum.
    exact = sum(math.comb(40, k) * 0.3 ** k * 0.7 ** (40 - k) for k in range(30, 41))
    assert recurrence.chance_of(0.75, 40, 0.3) == pytest.approx(exact, rel=1e-9)
    assert 0.0 <= recurrence.chance_of(0.8, 1500, 0.3) < 1e-100
    assert recurrence.chance_of(0.5, 1500, 0.5) == pytest.approx(0.5, abs=0.02)


TICK_NS = 4_000_000     # CONFIG_HZ=250


def sliced_on_the_tick(seed: int, phase_ns: int = 1_100_000) -> np.ndarray:
    """A loaded core at normal priority: at half the ticks the scheduler hands it to another process for
    0.3-2 ms (a stall starting on the tick), besides the tick's own few microseconds."""
    rng = np.random.default_rng(seed)
    times = quiet(seed).astype(np.int64)
    starts = np.concatenate(([0], np.cumsum(times)[:-1]))
    ticks = np.arange(phase_ns, int(times.sum()), TICK_NS)
    lost = 3_000 + np.where(rng.random(len(ticks)) < 0.5, rng.integers(300_000, 2_000_000, len(ticks)), 0)
    # The ticks keep wall time: on the unstretched timeline each lands as much earlier as the run lost before it.
    at = ticks - np.concatenate(([0], np.cumsum(lost)[:-1]))
    keep = at < starts[-1]
    np.add.at(times, np.searchsorted(starts, at[keep], side="right") - 1, lost[keep])
    return times.astype(np.uint32)


def test_an_event_waiting_for_the_tick_starts_on_the_loads_busiest_tick_phase() -> None:
    data = rank(quiet(6))
    tick = (float(TICK_NS), 1_100_000.0)
    starts, _ = grown(data, power.inject(data, 90e6, 50_000, on_tick=tick))
    # Each event lands in the iteration running at the first tick after its timer.
    offset = (starts - tick[1]) % TICK_NS
    assert len(starts) >= 20 and np.all((offset <= QUANTUM + 200) | (offset >= TICK_NS - QUANTUM - 200)), offset


def test_the_power_is_what_the_analysis_names_on_the_timer_and_on_the_tick_alike() -> None:
    # Where the load's slices start on the tick, an event there stands out from far fewer quiet cycles than one
    # on its own timer: the power states only what both would have named, and the step below it one would not.
    data = rank(sliced_on_the_tick(7))
    period_ms, tick_hz = 90.0, 1e9 / TICK_NS
    ticked = power.folding.busiest_tick_phase(recurrence.stalls_over(data, analysis.DEFAULT_THRESHOLD_FRACTION)
                                              .at_least(power.folding.SIZES_US[0]).start, tick_hz,
                                              len(data.times_ns) * float(np.median(data.times_ns)))
    assert ticked is not None and abs((ticked[1] - 1_100_000 + TICK_NS / 2) % TICK_NS - TICK_NS / 2) <= 600_000

    def named(stall_us: float, where: tuple[float, float] | None) -> bool:
        return power.named_at(power.inject(data, period_ms * 1e6, stall_us * 1e3, on_tick=where),
                              1e3 / period_ms, tick_hz)

    smallest = power.smallest_stall_us(data, period_ms, tick_hz)
    timer_only = next((s for s in power.STALL_GRID_US if named(s, None)), math.inf)
    assert np.isfinite(smallest) and smallest > timer_only
    below = power.STALL_GRID_US[power.STALL_GRID_US.index(smallest) - 1]
    assert named(smallest, None) and named(smallest, ticked)
    assert not named(below, ticked)


def test_a_fast_period_is_measured_on_its_timer_alone() -> None:
    # Below the fold's periods a daemon moved to the tick would be named at its beat with the tick, never at
    # 1/P: the power there is the timer's, on the same core where the 90 ms power counts the tick.
    data = rank(sliced_on_the_tick(7))
    tick_hz = 1e9 / TICK_NS
    timer_only = next((s for s in power.STALL_GRID_US
                       if power.named_at(power.inject(data, 13e6, s * 1e3), 1e3 / 13, tick_hz)), math.inf)
    assert np.isfinite(timer_only) and power.smallest_stall_us(data, 13.0, tick_hz) == timer_only


def test_a_node_says_what_it_could_see_of_a_daemon_on_its_own_timer_where_waiting_for_the_tick_hides_more() -> None:
    node = NodeData("node1", (rank(sliced_on_the_tick(7), 0),))
    found = power.node_power(node, analysis.node_noise(node), periods_ms=(90.0,))
    timer, anywhere = found.on_timer_us[90.0], found.stalls_us[90.0]
    assert timer == power.smallest_named_us(node.ranks[0], 90.0, 1e9 / TICK_NS) and timer < anywhere
    assert found.share == pytest.approx(min(anywhere, power.STALL_GRID_US[-1]) / 90e3)
    assert (f"every 90 ms (stalls >= {anywhere / 1e3:.1f} ms; on its own timer >= {timer:.0f} us) would have been "
            f"named on its own timer and (from 20 ms) waiting for the tick") in found.how(), found.how()


def test_the_stalls_tried_stop_at_what_fwq_held_of_the_period() -> None:
    # On a core FWQ holds about half of (a 0.3-2 ms slice at half the 4 ms ticks), an event cannot take more of
    # FWQ's time than that: the grid stops there, where a quiet core is tried up to the grid's end.
    data = rank(sliced_on_the_tick(7))
    times = data.times_ns.astype(np.float64)
    held = len(times) * float(np.median(times)) / float(times.sum())
    grid = power.stall_grid_us(data, 13.0)
    assert 0.3 < held < 0.9 and grid == tuple(s for s in power.STALL_GRID_US if s <= held * 13e3)
    assert power.stall_grid_us(rank(quiet(6)), 13.0) == power.STALL_GRID_US
    found = power.NodePower("node1", 0, {13.0: float("inf"), 90.0: 256.3}, largest_us={13.0: grid[-1]})
    assert found.how().startswith(f"a periodic event stealing that share of core 0 (its noisiest) every 13 ms (not "
                                  f"even with {grid[-1] / 1e3:.1f} ms stalls) or 90 ms (>= 256 us)")


def test_an_event_the_spectrum_reads_at_its_beat_with_the_tick_is_named_as_core_noise_names_it() -> None:
    # A 13 ms event keeping wall time beside the 4 ms tick repeats every 52 ms: here the spectrum's only line is
    # that comb's 19.23 Hz, which the analysis raises to 76.92 Hz by the stalls (analysis.confirmed). The power
    # asks the same, or it would call an event the analysis names unseen.
    data = power.inject(rank(sliced_on_the_tick(8)), 13e6, 1_946_200)
    freqs, spectrum, lines = analysis.rank_spectrum(data)
    found = [round(p.frequency_hz, 2) for p in analysis.dominant_periods(freqs, spectrum, lines=lines)]
    assert found == [19.23], found
    assert power.named_at(data, 1e3 / 13, 1e9 / TICK_NS)
    core = analysis.core_noise("n1", data, tick=1e9 / TICK_NS)
    assert [round(p.frequency_hz, 2) for p in core.periods] == [76.92]
