"""The noise analysis as pure functions: efficiency, lost-time spectrum, file reader, records, verdict, layouts."""
from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from helpers import kept_stalls

from mpiregress.errors import InputError, NotAvailableError
from mpiregress.families.noise import analysis, findings, folding, fwqfile, placement, records, recurrence, rtla
from mpiregress.verdict import noise as verdict

ROOT = Path(__file__).resolve().parent.parent


def pulse_train(iterations: int, quantum: int, every_ns: int, detour_ns: int, seed: int = 1) -> np.ndarray:
    """Iteration times of a core hit by a ``detour_ns`` event every ``every_ns`` of wall time, plus jitter."""
    rng = np.random.default_rng(seed)
    times = (quantum + rng.integers(0, 200, iterations)).astype(np.int64)
    now, next_event = 0, every_ns
    for i in range(iterations):
        if now + times[i] >= next_event:      # the event falls into this iteration
            times[i] += detour_ns
            next_event += every_ns
        now += times[i]
    return times.astype(np.uint32)


def write_fwq(path: Path, nodes: list[tuple[str, list[np.ndarray]]], quantum: int = 10_000, version: int = 2,
              jiffy_ns: int = fwqfile.UNKNOWN) -> bytes:
    """An FWQ file written with the reader's own dtypes (the C writer is tested in test_noise_fwq.py); each
    rank's kernel jiffy ``jiffy_ns`` in version 2, none in version 1."""
    iterations = len(nodes[0][1][0])
    head = np.zeros(1, fwqfile.FILE_HEADER)
    head["magic"], head["version"], head["nodes"] = fwqfile.MAGIC, version, len(nodes)
    head["ranks"] = sum(len(r) for _, r in nodes)
    head["iterations"], head["quantum_target_ns"] = iterations, quantum
    chunks = [head.tobytes()]
    rank = 0
    for name, ranks in nodes:
        nh = np.zeros(1, fwqfile.NODE_HEADER)
        nh["tag"], nh["ranks"], nh["name"] = b"NODE", len(ranks), name.encode()
        chunks.append(nh.tobytes())
        for cpu, times in enumerate(ranks):
            rh = np.zeros(1, fwqfile.RANK_HEADERS[version])
            rh["rank"], rh["cpu_start"], rh["cpu_end"], rh["affinity_cpus"] = rank, cpu, cpu, 1
            rh["quantum_ns"] = quantum
            if version == 2:
                rh["jiffy_ns"] = jiffy_ns
            chunks += [rh.tobytes(), np.asarray(times, "<u4").tobytes()]
            rank += 1
        nt = np.zeros(1, fwqfile.NODE_TRAILER)
        nt["tag"], nt["ranks"] = b"DONE", len(ranks)
        chunks.append(nt.tobytes())
    data = b"".join(chunks)
    path.write_bytes(data)
    return data


def test_efficiency_is_sum_of_minima_over_sum_of_maxima() -> None:
    times = np.array([[10, 10, 30], [10, 20, 10]])
    assert analysis.efficiency(times) == pytest.approx((10 + 10 + 10) / (10 + 20 + 30))
    assert analysis.efficiency(np.full((4, 100), 7)) == 1.0


def test_lost_time_signal_conserves_the_lost_time() -> None:
    times = pulse_train(100_000, 10_000, 10_000_000, 1_000_000)
    nominal = float(np.median(times))
    signal = analysis.lost_time_signal(times, nominal)
    excess = np.clip(times - nominal, 0, None).sum()
    assert signal.sum() == pytest.approx(excess, rel=0.01)


def test_periodic_event_is_found_at_its_frequency_with_harmonics() -> None:
    data = fwqfile.RankData(rank=1, cpu=1, migrated=False, bound=True, quantum_ns=10_000, start_ns=0,
                            times_ns=pulse_train(300_000, 10_000, 10_000_000, 1_000_000))
    core = analysis.core_noise("n1", data)
    assert core.periods, "no period found in a clean 100 Hz pulse train"
    assert core.periods[0].frequency_hz == pytest.approx(100.0, abs=1.0)
    assert core.periods[0].harmonics >= 2
    assert 0.08 < core.lost_fraction < 0.12
    assert core.max_detour_us == pytest.approx(1000, rel=0.05)
    assert core.detours_per_s == pytest.approx(100, rel=0.05)
    assert core.periods[0].detour_us == pytest.approx(1000, rel=0.05)
    assert ("a 100 Hz event on core 1 on n1 (every 10 ms, 1 ms each, 10.00% of the time at every cycle; spectral "
            "line") in findings.periodic(core)[0]


def test_an_event_no_longer_than_the_ticks_own_interrupt_is_shown_not_flagged() -> None:
    """What a person is asked to look at (``event_sentences``, the verdict's "needs a look") is an event that
    takes the core longer than the kernel's tick does at each interrupt; a smaller one is said with its size."""
    data = fwqfile.RankData(rank=1, cpu=1, migrated=False, bound=True, quantum_ns=10_000, start_ns=0,
                            times_ns=pulse_train(300_000, 10_000, 10_000_000, 1_000_000))
    core = analysis.core_noise("n1", data)
    assert core.tick_detour_us is None          # a synthetic train has no tick: every event is flagged

    def run(c: analysis.CoreNoise) -> analysis.RunNoise:
        node = analysis.NodeNoise(node="n1", efficiency=0.9, iterations=300_000, cores=(c,))
        return analysis.RunNoise(nodes=(node,), quantum_target_ns=10_000, iterations=300_000, truncated=None)

    flagged = findings.event_sentences(run(core))
    assert len(flagged) == 1 and "1 ms each" in flagged[0] and "not flagged" not in flagged[0]
    small = replace(core, tick_detour_us=1500.0)     # a tick as long as the event's stalls
    assert findings.event_sentences(run(small)) == []
    assert any("1 ms each, 10.00% of the time at every cycle, within twice the kernel tick's own 1.5 ms: "
               "shown, not flagged" in s for s in findings.sentences(run(small)))


def test_a_controls_small_event_is_the_ticks_size_and_a_daemons_is_not() -> None:
    """Measured on a quiet core (noise-keep35-quiet): a control with no injector named a 96.6 Hz event, its
    stalls of about 4 us starting at one phase in 211 of 290 cycles, while the tick's interrupt took 25 us
    there; a real-time 13 ms daemon's stalls on the same host were 1 ms."""
    control, _ = kept_stalls.measured("noise-keep35-quiet-control-fifo10-run3-core0")
    daemon, _ = kept_stalls.measured("noise-keep35-quiet-fifo13ms-run0-core0")
    small = analysis.sized(control, analysis.Period(96.61, 34.0, 8), 1e9 / control.duration_ns, 250.0)
    tick = recurrence.tick_detour_us(control, 250.0)
    assert tick is not None and 15 < tick < 40 and 2 < small.detour_us < 10
    assert findings.tick_sized(small, tick)
    big = analysis.sized(daemon, analysis.Period(76.92, 500.0, 8), 1e9 / daemon.duration_ns, 250.0)
    assert big.detour_us > 500 and not findings.tick_sized(big, recurrence.tick_detour_us(daemon, 250.0))


def test_an_event_is_said_to_the_spectrums_resolution_and_as_the_period_a_timer_is_set_to() -> None:
    """A 73 ms daemon is 13.7 Hz (the spectrum resolves 0.3 Hz), not 14; its period is what an admin greps for."""
    assert [findings.hz(f) for f in (1000 / 73, 1000 / 27, 5.0, 100.0, 250.0)] == ["13.7", "37.0", "5.0", "100", "250"]
    assert [findings.every(f) for f in (1000 / 73, 5.0, 250.0, 750.0)] == \
        ["every 73 ms", "every 200 ms", "every 4 ms", "every 1.33 ms"]


def contended(times: np.ndarray, seed: int, hits: int = 100) -> np.ndarray:
    """``times`` with random detours of 20 us to 1 ms at random iterations (other jobs' time slices)."""
    rng = np.random.default_rng(seed)
    out = times.astype(np.int64).copy()
    hit = rng.choice(len(out), hits, replace=False)
    out[hit] += rng.integers(20_000, 1_000_000, hits)
    return out.astype(np.uint32)


def inject(times: np.ndarray, every_ns: int, detour_ns: int) -> np.ndarray:
    """``times`` with a ``detour_ns`` stall every ``every_ns`` of their own wall time (an injector)."""
    out = times.astype(np.int64).copy()
    now, next_event = 0, every_ns
    for i in range(len(out)):
        if now + out[i] >= next_event:
            out[i] += detour_ns
            next_event += every_ns
        now += out[i]
    return out.astype(np.uint32)


def with_host_line(times: np.ndarray, hz: float = 10 / 3, extra_ns: int = 500) -> np.ndarray:
    """``times`` slowed by up to ``extra_ns`` per iteration, swelling and ebbing at ``hz``: the slow,
    harmonic-free line seen on every core of this shared host (2.9-4 Hz; other users' load)."""
    start = np.concatenate(([0], np.cumsum(times.astype(np.int64))[:-1]))
    swell = extra_ns * (1 + np.sin(2 * np.pi * hz * start * 1e-9)) / 2
    return (times.astype(np.int64) + swell.astype(np.int64)).astype(np.uint32)


@pytest.mark.parametrize("period_ms", [7, 27, 100, 180])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_an_event_is_reported_once_at_its_fundamental(period_ms: int, seed: int) -> None:
    """Any period from 5 to 200 ms, under random contention: one event at 1000/period Hz, every
    harmonic (any order) folded into it, nothing else; the host's slow line beside it is its own."""
    detour = min(1_000_000, period_ms * 100_000)    # the spin of tests/noise_source: a tenth, at most 1 ms
    quiet = with_host_line(contended(pulse_train(300_000, 10_000, 10**15, 0, seed), seed + 10))
    times = inject(quiet, period_ms * 1_000_000, detour)
    core = analysis.core_noise("n1", fwqfile.RankData(1, 1, False, True, 10_000, 0, times))
    expected = 1000.0 / period_ms
    event = [p for p in core.periods if abs(p.frequency_hz - expected) <= 0.3]
    assert len(event) == 1, core.periods
    assert event[0].harmonics >= min(3, int(analysis.MAX_FREQUENCY_HZ / expected) - 1)
    others = [p for p in core.periods if p is not event[0]]
    # Nothing else but the host's slow line: no harmonic of the event stands as an event of its own.
    assert all(2.5 <= p.frequency_hz <= 3.5 for p in others), core.periods


@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5])
def test_undisturbed_trace_gives_no_period(seed: int) -> None:
    times = contended(pulse_train(300_000, 10_000, 10**15, 0, seed), seed + 30, hits=300)
    assert analysis.core_noise("n1", fwqfile.RankData(0, 0, False, True, 10_000, 0, times)).periods == ()


def test_an_event_on_every_core_is_the_hosts_and_said_once() -> None:
    quiet = [contended(pulse_train(300_000, 10_000, 10**12, 0, seed), seed + 20) for seed in (1, 2)]
    node = fwqfile.NodeData(name="n1", ranks=tuple(
        fwqfile.RankData(r, r, False, True, 10_000, 0, inject(t, 20_000_000, 300_000)) for r, t in enumerate(quiet)))
    run = analysis.RunNoise(nodes=(analysis.node_noise(node),), quantum_target_ns=10_000, iterations=300_000,
                            truncated=None)
    said = findings.sentences(run)
    host = [s for s in said if "on every core" in s]
    assert len(host) == 1 and "A 50.0 Hz event on every core of n1" in host[0] and "the host's own" in host[0], said


def test_a_slow_swell_without_stalls_is_no_period() -> None:
    """Iterations slowed by a few us, swelling and ebbing at 3.3 Hz on every core: a line in the spectrum,
    but no stall comes back at it, so no event is named."""
    quiet = [contended(pulse_train(300_000, 10_000, 10**12, 0, seed), seed + 20) for seed in (1, 2)]
    node = fwqfile.NodeData(name="n1", ranks=tuple(
        fwqfile.RankData(r, r, False, True, 10_000, 0, with_host_line(t, extra_ns=2_000)) for r, t in enumerate(quiet)))
    run = analysis.RunNoise(nodes=(analysis.node_noise(node),), quantum_target_ns=10_000, iterations=300_000,
                            truncated=None)
    assert all(c.periods == () for c in run.nodes[0].cores)
    assert not [s for s in findings.sentences(run) if "Hz event" in s]


def test_random_detours_give_no_period() -> None:
    rng = np.random.default_rng(7)
    times = (10_000 + rng.integers(0, 200, 300_000)).astype(np.uint32)
    hit = rng.choice(len(times), 300, replace=False)
    times[hit] += rng.integers(100_000, 3_000_000, len(hit)).astype(np.uint32)
    data = fwqfile.RankData(0, 0, False, True, 10_000, 0, times)
    assert analysis.core_noise("n1", data).periods == ()


def test_reader_keeps_complete_nodes_of_a_cut_file(tmp_path: Path) -> None:
    quiet = pulse_train(1000, 10_000, 10**12, 0)
    data = write_fwq(tmp_path / "a.fwq", [("n1", [quiet, quiet]), ("n2", [quiet, quiet])])
    assert [n.name for n in fwqfile.read(tmp_path / "a.fwq").nodes] == ["n1", "n2"]
    for cut in (len(data) - 1, len(data) - 8, len(data) - 4000):
        (tmp_path / "b.fwq").write_bytes(data[:cut])
        run = fwqfile.read(tmp_path / "b.fwq")
        assert [n.name for n in run.nodes] == ["n1"] and "n2" in (run.truncated or "")
    (tmp_path / "c.fwq").write_bytes(data[:100])
    with pytest.raises(InputError, match="holds no complete node"):
        fwqfile.read(tmp_path / "c.fwq")


@pytest.mark.parametrize("content, message", [
    (b"", "is empty"), (b"hello world, not fwq" * 5, "not an FWQ result file"),
])
def test_reader_refuses_what_is_not_fwq(tmp_path: Path, content: bytes, message: str) -> None:
    (tmp_path / "x").write_bytes(content)
    with pytest.raises(InputError, match=message):
        fwqfile.read(tmp_path / "x")


def test_reader_reads_both_versions_and_the_kernels_tick(tmp_path: Path) -> None:
    """Version 1 (an older run's artifacts) reads with no tick; version 2 with the kernel's jiffy or, where the
    kernel did not say, none; the same durations either way."""
    quiet = pulse_train(1000, 10_000, 10**12, 0)
    read = {}
    for name, version, jiffy in (("v1", 1, fwqfile.UNKNOWN), ("v2", 2, 4_000_000), ("v2-unknown", 2, fwqfile.UNKNOWN)):
        write_fwq(tmp_path / f"{name}.fwq", [("n1", [quiet])], version=version, jiffy_ns=jiffy)
        read[name] = fwqfile.read(tmp_path / f"{name}.fwq").nodes[0].ranks[0]
    assert read["v1"].jiffy_ns is None and read["v1"].kernel_hz is None
    assert read["v2"].jiffy_ns == 4_000_000 and read["v2"].kernel_hz == 250.0
    assert read["v2-unknown"].kernel_hz is None
    assert all(np.array_equal(r.times_ns, quiet) for r in read.values())


def test_reader_refuses_unknown_version(tmp_path: Path) -> None:
    data = bytearray(write_fwq(tmp_path / "a.fwq", [("n1", [pulse_train(10, 10_000, 10**12, 0)])]))
    data[8] = 9
    (tmp_path / "a.fwq").write_bytes(bytes(data))
    with pytest.raises(InputError, match="version 9"):
        fwqfile.read(tmp_path / "a.fwq")


def test_records_follow_the_series_model(tmp_path: Path) -> None:
    quiet = pulse_train(20_000, 10_000, 10**12, 0)
    noisy = pulse_train(20_000, 10_000, 10_000_000, 1_000_000)
    write_fwq(tmp_path / "a.fwq", [("n1", [quiet, noisy])])
    run = analysis.analyse(fwqfile.read(tmp_path / "a.fwq"))
    recs = records.to_records(run, system="local", partition="batch", method="source", layout="all_cores",
                              context={"commit": "abc"})
    assert {r["metric"] for r in recs} == {"efficiency", "max_detour"}
    eff = next(r for r in recs if r["metric"] == "efficiency")
    assert list(eff["parameters"].items()) == [("node", "n1"), ("layout", "all_cores")]
    assert eff["benchmark"] == "fwq" and eff["commit"] == "abc"
    assert eff["conditions"]["cores"][1]["periods_hz"] and eff["conditions"]["lost_fraction"] > 0
    assert 0.85 < eff["value"] < 0.95
    assert list(records.probe_conditions(run)["noise"]) == ["n1"]
    with pytest.raises(ValueError):
        records.to_records(run, system="local", partition="batch", method="source", layout="bogus")


def test_noisy_node_turns_a_regression_into_noisy() -> None:
    history = {"n1": [0.97, 0.96, 0.97, 0.98, 0.97, 0.97], "n2": [0.97] * 6}
    probe = [{"node": "n1", "efficiency": 0.82}, {"node": "n2", "efficiency": 0.97}]
    name, reason = verdict.reclassify("regression", "latency +12%", ["n1"], probe, history)
    assert name == "noisy" and reason.startswith("noisy: node n1 efficiency 0.82, usual 0.97")
    assert verdict.reclassify("regression", "latency +12%", ["n2"], probe, history) == ("regression", "latency +12%")
    assert verdict.reclassify("pass", "", ["n1"], probe, history) == ("pass", "")
    # No history yet: the absolute floor decides.
    assert verdict.noisy_nodes([{"node": "n9", "efficiency": 0.7}], {})[0].startswith("noisy: node n9 efficiency 0.70")
    assert verdict.noisy_nodes([{"node": "n9", "efficiency": 0.95}], {}) == []


def test_noise_explains_only_a_slowdown_of_its_size() -> None:
    history = {"n1": [0.97, 0.96, 0.97, 0.98, 0.97, 0.97]}
    probe = [{"node": "n1", "efficiency": 0.82}]
    # 0.82 at both ends of an exchange stretches it 1/0.82^2 = 1.49x; the probe's margin doubles the excess.
    assert verdict.explainable_slowdown([0.82, 0.9]) == pytest.approx(1 + 2 * (1 / 0.82 ** 2 - 1))
    name, _ = verdict.reclassify("regression", "latency +40%", ["n1"], probe, history, slowdown=1.90)
    assert name == "noisy"
    # A broken path (300x) on a noisy node is still broken; the noise is named beside it.
    name, reason = verdict.reclassify("regression", "3.1 us is beyond the limit 0.03 us", ["n1"], probe, history,
                                      slowdown=310.0)
    assert name == "regression"
    assert reason == ("3.1 us is beyond the limit 0.03 us; noisy: node n1 efficiency 0.82, usual 0.97, but noise "
                      "of that level explains at most 1.97x, not 310.00x")


def test_repeat_auto_grows_with_noise() -> None:
    assert verdict.repeats_for([0.99, 0.98], tolerance=0.05) == 3
    assert verdict.repeats_for([0.97, 0.90], tolerance=0.05) == 20
    assert verdict.repeats_for([0.95], tolerance=0.05) == 5
    with pytest.raises(ValueError):
        verdict.repeats_for([], tolerance=0.05)


@pytest.mark.parametrize("system, per_socket", [("iris-broadwell", 14), ("iris-skylake", 14), ("aion-batch", 64)])
def test_layouts_leave_one_core_per_socket(system: str, per_socket: int) -> None:
    info = json.loads((ROOT / "checks" / "topology" / system / "processor.json").read_text())
    full = placement.layout("all_cores", info)
    free = placement.layout("one_free_per_socket", info)
    assert isinstance(full, placement.Layout) and isinstance(free, placement.Layout)
    assert full.tasks_per_node == 2 * per_socket and free.tasks_per_node == 2 * (per_socket - 1)
    assert f"--ntasks-per-socket={per_socket - 1}" in free.srun_options
    assert per_socket - 1 not in free.cpus and 2 * per_socket - 1 not in free.cpus
    smt = placement.layout("smt", info)
    assert isinstance(smt, placement.LayoutUnavailable) and "SMT off" in smt.reason


def test_layout_smt_where_nodes_have_two_threads() -> None:
    info = {"topology": {"cores": ["0x5", "0xa"], "sockets": ["0xf"], "numa_nodes": ["0xf"]}}
    smt = placement.layout("smt", info)
    assert isinstance(smt, placement.Layout) and smt.cpus == (0, 1)
    assert "--threads-per-core=1" in smt.srun_options


def test_rtla_parser_and_availability() -> None:
    text = ("                                          Operating System Noise\n"
            "duration:   0 00:00:05 | time is in us\n"
            "CPU Period       Runtime        Noise  % CPU Aval   Max Noise   Max Single          HW          NMI"
            "          IRQ      Softirq       Thread\n"
            "  1 #4              4000000        12000    99.70000        1000         1000            0            0"
            "         1000            0            4\n")
    rows = rtla.parse_top(text)
    assert len(rows) == 1 and rows[0].cpu == 1 and rows[0].lost_fraction == pytest.approx(0.003)
    reason = rtla.available()
    if reason is not None:
        with pytest.raises(NotAvailableError, match="kernel cross-check skipped"):
            rtla.run_top([0], 1)


def test_cli_bad_input_is_one_sentence(tmp_path: Path) -> None:
    (tmp_path / "bad.fwq").write_bytes(b"garbage" * 20)
    for target in (tmp_path / "bad.fwq", tmp_path / "missing.fwq"):
        done = subprocess.run([sys.executable, "-m", "mpiregress", "noise", "analyze", str(target), "--out",
                               str(tmp_path / "out")], check=False, capture_output=True, text=True, timeout=300)
        assert done.returncode == 2 and done.stderr.count("\n") == 1 and "Traceback" not in done.stderr


def test_cli_analyze_writes_summary_table_figure_records(tmp_path: Path) -> None:
    quiet = pulse_train(100_000, 10_000, 10**12, 0)
    noisy = pulse_train(100_000, 10_000, 10_000_000, 1_000_000)
    write_fwq(tmp_path / "a.fwq", [("n1", [quiet, noisy])])
    out = tmp_path / "out"
    done = subprocess.run([sys.executable, "-m", "mpiregress", "noise", "analyze", str(tmp_path / "a.fwq"),
                           "--out", str(out)], check=False, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    summary = (out / "summary.txt").read_text()
    assert "A 100 Hz event on core 1 on n1" in summary and "kernel cross-check" in summary
    assert (out / "spectrum.png").read_bytes()[:4] == b"\x89PNG"
    assert len((out / "cores.tsv").read_text().splitlines()) == 3
    assert json.loads((out / "records.json").read_text())[0]["benchmark"] == "fwq"


# --- What real runs on the local cluster showed (benchmarks/noise_periods.py), reproduced synthetically.

def throttled(times: np.ndarray, phase_ns: int, stall_ns: int = 50_000_000) -> np.ndarray:
    """``times`` with the kernel's real-time throttling of a SCHED_FIFO FWQ: a ``stall_ns`` stall every
    second of wall time, from ``phase_ns`` on (each core is throttled at its own phase)."""
    out = times.astype(np.int64).copy()
    now, next_stall = 0, phase_ns
    for i in range(len(out)):
        if now + out[i] >= next_stall:
            out[i] += stall_ns
            next_stall += 1_000_000_000
        now += out[i]
    return out.astype(np.uint32)


def gated(times: np.ndarray, every_ns: int, detour_ns: int, phase_ns: int, hole_ns: int = 50_000_000) -> np.ndarray:
    """A source hitting every ``every_ns`` except in the ``hole_ns`` after each throttling stall: the
    source is real-time too, so the kernel stops it with FWQ (its harmonics get sidebands)."""
    out = times.astype(np.int64).copy()
    now, next_event, next_stall = 0, every_ns, phase_ns
    for i in range(len(out)):
        if now + out[i] >= next_stall:
            out[i] += hole_ns
            next_stall += 1_000_000_000
            next_event = now + out[i] + every_ns
        elif now + out[i] >= next_event:
            out[i] += detour_ns
            next_event += every_ns
        now += out[i]
    return out.astype(np.uint32)


def run_of(*cores: np.ndarray) -> analysis.RunNoise:
    node = fwqfile.NodeData(name="n1", ranks=tuple(fwqfile.RankData(r, r, False, True, 10_000, 0, t)
                                                    for r, t in enumerate(cores)))
    return analysis.RunNoise(nodes=(analysis.node_noise(node),), quantum_target_ns=10_000,
                             iterations=len(cores[0]), truncated=None)


def quiet_core(seed: int) -> np.ndarray:
    """A core FWQ owns at SCHED_FIFO: jitter and a few other wake-ups (the real runs' background)."""
    return contended(pulse_train(300_000, 10_000, 10**15, 0, seed), seed + 40, hits=20)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_throttling_stalls_are_stalls_no_period(seed: int) -> None:
    """50 ms every second on each core at its own phase: lines at 2-4.5 Hz in the spectrum, but three stalls
    are no period. Each core says "stalls, no period" with their times and lengths; no event is named."""
    run = run_of(throttled(quiet_core(seed), 300_000_000), throttled(quiet_core(seed + 1), 700_000_000))
    assert all(core.periods == () for core in run.nodes[0].cores), [c.periods for c in run.nodes[0].cores]
    said = findings.sentences(run)
    assert not [s for s in said if "Hz event" in s], said
    stalls = [s for s in said if "stalls, no period" in s]
    assert len(stalls) == 2, said
    assert "n1 core 0: stalls, no period: 3 of 1 ms or more, at 300 ms (50.0 ms), 1300 ms (50.0 ms), 2300 ms " \
           "(50.0 ms)" in stalls[0]


def test_stalls_a_second_apart_on_a_lone_core_are_no_3_hz_event() -> None:
    """The one-core layout's file of issue 31: ~54 ms stalls at 932, 1934 and 2938 ms read as "a 3.0 Hz
    event (every 334 ms)"; the time domain sees three stalls, no period."""
    times = quiet_core(4).astype(np.int64)
    for at in (932e6, 1934e6, 2938e6):
        start = np.concatenate(([0], np.cumsum(times)[:-1]))   # each stall moves the later iterations
        times[int(np.searchsorted(start, at))] += 54_000_000
    run = run_of(times.astype(np.uint32))
    (core,) = run.nodes[0].cores
    assert core.periods == () and core.unconfirmed, (core.periods, core.unconfirmed)
    said = findings.sentences(run)
    assert not [s for s in said if "Hz event" in s], said
    assert [s for s in said if s.startswith("n1 core 0: stalls, no period: 3 of 1 ms or more, at 932 ms (54.0 ms), "
                                              "1934 ms (54.0 ms), 2938 ms (54.0 ms); the spectrum's lines at")], said


def test_the_kernel_tick_and_its_harmonics_are_the_tick_not_events() -> None:
    """A 250 Hz tick of 3 us interrupts on every core (its spectrum: 250, 500, 750, 1000 Hz): measured as the
    tick from the stalls and said as the tick, never as a 750 or 1000 Hz event; a 13 ms source beside it is
    still named on its core."""
    cores = [inject(quiet_core(seed), 4_000_000, 3_000) for seed in (5, 6)]
    cores[1] = inject(cores[1], 13_000_000, 1_000_000)
    run = run_of(*cores)
    node = run.nodes[0]
    assert node.tick_hz == 250.0
    said = findings.sentences(run)
    assert any(s.startswith("n1: the kernel tick at 250 Hz (every 4 ms, measured from the stalls") for s in said), said
    assert not [s for s in said if any(f"{f} Hz event" in s for f in (250, 500, 750, 1000))], said
    assert [(c.cpu, round(p.frequency_hz, 1)) for c, p in findings.one_core_events(run)] == [(1, 76.9)], said


@pytest.mark.parametrize("seed", [1, 2])
def test_a_throttled_5_ms_source_is_one_event_without_sideband_events(seed: int) -> None:
    """A 5 ms source stopped with FWQ by the throttling: its harmonics get sidebands 1 Hz apart,
    which must not make events of their own (5.1, 7 or 10 Hz combs were seen)."""
    source = gated(quiet_core(seed), 5_000_000, 500_000, 600_000_000)
    run = run_of(throttled(quiet_core(seed + 1), 200_000_000), source)
    events = findings.one_core_events(run)
    assert [(c.cpu, round(p.frequency_hz)) for c, p in events] == [(1, 200)], \
        [c.periods for c in run.nodes[0].cores]


def host_timers(times: np.ndarray) -> np.ndarray:
    """The host's own: a 250 Hz tick (4 ms, 15 us) and a 100 Hz timer (10 ms, 40 us)."""
    return inject(inject(times, 4_000_000, 15_000), 10_000_000, 40_000)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_hosts_timers_are_the_hosts_however_each_core_tells_them(seed: int) -> None:
    """The same lines (multiples of 100 and 250 Hz) may be told as one 50 Hz comb on a core and as a
    100 Hz and a 250 Hz event on the other: the host's either way, no core's own."""
    run = run_of(host_timers(quiet_core(seed)), host_timers(quiet_core(seed + 1)))
    cores = run.nodes[0].cores
    assert all(c.periods for c in cores), "the timers were not found at all"
    assert findings.one_core_events(run) == [], [c.periods for c in cores]
    assert findings.host_lines(run), findings.sentences(run)


def test_lines_not_fundamentals_decide_what_the_cores_share() -> None:
    """A 50 Hz comb over the 100 and 250 Hz events' lines is shown by the core that reports those two."""
    def core(periods: tuple[analysis.Period, ...], lines: tuple[float, ...]) -> analysis.CoreNoise:
        freqs = np.arange(0, 1500, 0.3)
        return analysis.CoreNoise("n1", 0, 0, True, False, 10.0, 0.01, 50.0, 1.0, 2.0, 3.0, periods,
                                  (freqs, np.ones_like(freqs)), lines)
    hundred = analysis.Period(100.0, 900.0, 8, tuple(100.0 * k for k in range(2, 11)))
    tick = analysis.Period(250.0, 500.0, 1, (250.0, 750.0))
    lines = tuple(sorted(set(hundred.lines + tick.lines + (100.0, 500.0, 1000.0))))
    fifty = analysis.Period(50.0, 300.0, 9, (250.0, 300.0, 400.0, 500.0, 600.0, 700.0, 750.0, 800.0, 900.0))
    zero, one = core((hundred, tick), lines), core((fifty,), fifty.lines)
    assert findings.shows(zero, fifty) and findings.shows(one, hundred) and findings.shows(one, tick)
    five = analysis.Period(5.0, 600.0, 130, tuple(5.0 * k for k in range(2, 131)))
    assert not findings.shows(zero, five)


def test_a_comb_does_not_take_a_strangers_line_for_its_anchor() -> None:
    """An odd order of half the event's frequency that is only a host line (500 Hz beside a 73 ms
    event's comb): the event is reported at 13.7 Hz, not at 6.85 Hz."""
    members = [(0, 73)] + [(i, 2 * k) for i, k in enumerate(range(1, 40), start=1)]
    assert analysis.stranger_anchor(members, 73)
    genuine = [(0, 73)] + [(i, k) for i, k in enumerate(range(1, 80), start=1) if k != 73]
    assert not analysis.stranger_anchor(genuine, 73)


def test_sidebands_are_beside_a_harmonic_not_on_another_event() -> None:
    assert analysis.sideband(399.0, 200.0) and analysis.sideband(605.0, 200.0)
    assert not analysis.sideband(300.0, 200.0)
    assert not analysis.sideband(7.0, 3.0)     # slow lines have no harmonics to flank


def test_a_slow_event_of_weak_lines_is_not_halved_by_a_strong_line_at_an_even_order() -> None:
    """A 1 ms spin every 200 ms under contention: 5 Hz lines of 8-26x at odd and even orders alike, and
    the host's 1000 Hz line (400x) at order 200. That line anchors the comb, and its 10 Hz reading
    (the even orders only) scores within SUB_HARMONIC_GAIN of 5 Hz: the whole train is 5 Hz (a kept
    real run, benchmarks/noise_periods.py, reported it at 10 Hz). A strong 20 Hz event's comb with
    weak odd 10 Hz lines beside it stays at 20 Hz, and so does a comb whose sub-harmonic adds only a
    few coincidences."""
    rng = np.random.default_rng(3)
    orders = [k for k in range(13, 151) if rng.random() < 0.7] + [200]
    prominence = np.array([400.0 if k == 200 else float(rng.uniform(8, 26)) for k in orders])
    five = [(j, k) for j, k in enumerate(orders)]
    ten = [(j, k // 2) for j, k in enumerate(orders) if k % 2 == 0]
    candidates = [(100, ten, 300.0), (200, five, 360.0)]
    assert analysis.whole_train(candidates, 100, ten, prominence) == (200, five)

    strong = np.array([1000.0] * 50 + [20.0] * 50)
    twenty = [(j, j + 1) for j in range(50)]
    ten_beside = [(j, 2 * (j + 1)) for j in range(50)] + [(50 + j, 2 * j + 1) for j in range(50)]
    assert analysis.whole_train([(1, twenty, 300.0), (2, ten_beside, 320.0)], 1, twenty, strong) == (1, twenty)

    few = [(j, 2 * (j + 1)) for j in range(50)] + [(50 + j, 2 * j + 1) for j in range(3)]
    assert analysis.whole_train([(1, twenty, 300.0), (2, few, 320.0)], 1, twenty, strong[:53]) == (1, twenty)


def test_a_strong_event_and_a_weak_stranger_at_its_half_orders_are_not_one_comb() -> None:
    """A 200 Hz source (lines of 20000-52000x) and the host's 100 Hz timer (12-995x) scored as one 100 Hz
    comb (a kept real run of benchmarks/noise_periods.py): the event is 200 Hz; a 100 Hz comb whose
    odd and even orders are alike stays 100 Hz."""
    prominence = np.array([12.0, 19800.0, 58.0, 52185.0, 995.0, 34615.0, 61.0, 48277.0, 116.0, 30000.0])
    hundred = [(j, j + 1) for j in range(10)]
    two_hundred = [(j, (j + 1) // 2) for j in range(1, 10, 2)]
    candidates = [(2, two_hundred, 280.0), (4, hundred, 300.0)]
    assert analysis.whole_train(candidates, 4, hundred, prominence) == (2, two_hundred)
    alike = np.array([300.0, 250.0, 400.0, 350.0, 200.0, 300.0, 280.0, 320.0, 260.0, 310.0])
    assert analysis.whole_train(candidates, 4, hundred, alike) == (4, hundred)


def test_a_comb_of_another_events_lines_and_one_stranger_is_that_events() -> None:
    """A host's 750 Hz line anchored a comb first, as order 89 of 8.43 Hz, drawing in a weaker 13.7 Hz
    event's every 8th order (kept real runs of benchmarks/noise_periods.py at 73 ms): those lines are
    the 13.7 Hz event's, the 750 Hz line stands alone (the host's, findings.shows), no 8.43 Hz event.
    As order 80 of 9.37 Hz it drew in four of the event's lines and four of the host's (lines every
    other core has): none of its own, the event's too. A comb at a multiple of the other's
    fundamental, or with only a few lines on it, is left alone."""
    thirteen = 1000 / 73
    borrowed = [8 * k * thirteen for k in range(1, 8)]
    freq = np.array(sorted(borrowed + [700.0, 750.0]))
    prominence = np.where(freq == 750.0, 323.0, 20.0)
    stranger = [750 / 89, 91, 323.0, 8, borrowed + [700.0, 750.0]]
    event = [thirteen, 73, 200.0, 50, [k * thirteen for k in range(1, 74) if k % 8]]
    out = analysis.borrowed_combs([stranger, event], freq, prominence, 0.3, 90.0)
    assert sorted(round(a[0], 2) for a in out) == [13.7, 750.0], out
    [kept] = [a for a in out if round(a[0], 2) == 13.7]
    assert kept[3] == 57 and set(borrowed) <= set(kept[4])

    # As order 80 of 9.37 Hz: four of the event's lines (every 19th order) and four of the host's.
    drawn = [13 * k * thirteen for k in range(1, 5)]
    freq = np.array(sorted(drawn + [300.0, 600.0, 750.0, 900.0]))
    prominence = np.where(freq == 750.0, 237.0, 20.0)
    stranger = [9.375, 96, 237.0, 7, drawn + [300.0, 600.0, 750.0, 900.0]]
    out = analysis.borrowed_combs([stranger, list(event)], freq, prominence, 0.3, 90.0,
                                  host=np.array([300.0, 600.0, 750.0, 900.0]))
    assert sorted(round(a[0], 2) for a in out) == [13.7, 750.0], out
    out = analysis.borrowed_combs([stranger, list(event)], freq, prominence, 0.3, 90.0)
    assert sorted(round(a[0], 2) for a in out) == [9.38, 13.7], "without the host's lines they are its own"

    harmonic = [2 * thirteen, 36, 150.0, 6, [2 * k * thirteen for k in range(1, 8)]]
    few = [750 / 89, 91, 323.0, 3, borrowed[:3] + [700.0, 750.0]]
    for comb in (harmonic, few):
        out = analysis.borrowed_combs([comb, [thirteen, 73, 200.0, 50, list(event[4])]], freq, prominence, 0.3, 90.0)
        assert len(out) == 2 and round(out[0][0], 2) == round(comb[0], 2), out


def test_a_lone_line_beside_a_combs_fundamental_is_not_that_event_on_another_core() -> None:
    """A 200 ms source on core 1 (5 Hz, 128 harmonics) and a throttling stall's lone line at 4.77 Hz on
    core 0 (a kept real run of benchmarks/noise_periods.py): within a spectral bin, but a lone line
    does not show a comb of many orders, so the source is core 1's, not the host's. A lone line is
    one line of a comb told again, and slow lines are one finding, whatever their places."""
    comb, lone = analysis.Period(5.0, 151.0, 128), analysis.Period(4.77, 3988.0, 0)
    assert not findings.same_event(comb, lone) and findings.same_event(lone, comb)
    assert findings.same_event(analysis.Period(3.0, 900.0, 1), analysis.Period(4.2, 700.0, 0))
    assert findings.core_events(cored((comb,)), skip=(lone,)) == [comb]
    assert findings.core_events(cored((lone,)), skip=(comb,)) == []


def cored(periods: tuple[analysis.Period, ...]) -> analysis.CoreNoise:
    freqs = np.arange(0, 1500, 0.3)
    return analysis.CoreNoise("n1", 1, 1, True, False, 10.0, 0.01, 50.0, 1.0, 2.0, 3.0, periods,
                              (freqs, np.ones_like(freqs)), ())


def test_a_lone_line_just_above_the_cut_is_a_slow_line_a_comb_there_an_event() -> None:
    """A stall's lone line at 4.59 Hz (kept real run: core 0's strongest throttling line) is slow, one
    finding with the core's other slow lines, said as the host's; a 200 ms source's 5 Hz comb is an
    event."""
    assert analysis.is_slow(analysis.Period(4.59, 7075.0, 0)) and analysis.is_slow(analysis.Period(2.9, 900.0, 1))
    assert not analysis.is_slow(analysis.Period(5.0, 151.0, 128))
    assert not analysis.is_slow(analysis.Period(13.7, 300.0, 0))
    merged = analysis.one_slow_line([analysis.Period(4.59, 7075.0, 0), analysis.Period(5.0, 151.0, 128),
                                     analysis.Period(2.8, 900.0, 1)])
    assert [p.frequency_hz for p in merged] == [4.59, 5.0]
    assert findings.same_event(merged[0], analysis.Period(2.86, 3573.0, 1))
    host = findings.host_event(merged[0], 7075.0, "node1")
    assert host.startswith("Slow lines (strongest at 4.6 Hz, no period a run can place"), host


def test_time_slices_handed_out_on_the_tick_make_no_period_at_a_tick_multiple() -> None:
    """At normal priority the scheduler hands the core to other processes on the tick: stalls start on tick
    boundaries at random. Every multiple of the tick's period then holds stalls at one phase (the 125 Hz
    line of a control run); only a phase standing out from the tick's other phases is an event's."""

    rng = np.random.default_rng(11)
    times = quiet_core(9).astype(np.int64)
    now, tick = 0, 4_000_000
    for i in range(len(times)):
        if now + times[i] >= tick:
            times[i] += 3_000                                              # the tick's interrupt
            if rng.random() < 0.3:
                times[i] += int(rng.integers(1_000_000, 3_000_000))       # another process's time slice
            tick += 4_000_000 * (1 + (now + int(times[i]) - tick) // 4_000_000)
        now += int(times[i])
    data = fwqfile.RankData(0, 0, False, True, 10_000, 0, times.astype(np.uint32))
    stalls = recurrence.core_stalls(data, 2_000)
    assert recurrence.tick_hz(stalls) == 250.0
    assert recurrence.recurs(stalls, 125.0, 0.3, tick_hz=250.0) is False
    assert recurrence.recurs(stalls, 125.0, 0.3) is True         # what the tick's phases alone would say


def test_two_sources_together_are_no_period_at_their_common_multiple() -> None:
    """The host's 100 Hz timer and the 250 Hz tick repeat together every 20 ms: the stalls recur at 50 Hz
    too, but that period is theirs (the report's "50.0 Hz event on every core"), not a third source."""

    times = inject(inject(quiet_core(12), 10_000_000, 300_000), 4_000_000, 3_000)
    data = fwqfile.RankData(0, 0, False, True, 10_000, 0, times)
    stalls = recurrence.core_stalls(data, 2_000)
    assert recurrence.recurs(stalls, 50.0, 0.3, tick_hz=250.0)            # the time domain alone allows it
    found = (analysis.Period(100.0, 500.0, 8), analysis.Period(50.0, 160.0, 11))
    periods, _, refused, _ = analysis.confirmed(found, stalls, 0.3, 250.0)
    # The 50 Hz line's stalls recur at twice its rate as often (recurrence.faster): it is the 100 Hz event's.
    assert [p.frequency_hz for p in periods] == [100.0] and refused == ()
    assert recurrence.fundamental(stalls, 50.0, 0.3, 250.0)[0] == 100.0
    # Without the 100 Hz event's line, the least-common-multiple rule still keeps 50 Hz from being a source.
    alone, _, refused, _ = analysis.confirmed((analysis.Period(50.0, 160.0, 11),), stalls, 0.3, 250.0)
    assert [p.frequency_hz for p in alone] == [100.0] and refused == ()


def test_a_daemon_on_the_ticks_time_slices_is_named_at_its_own_rate_not_at_the_beat() -> None:
    """Woken every 13 ms but run on the 4 ms tick's slices, a daemon's stalls repeat exactly every 52 ms (the
    least common multiple), a comb 19.2 Hz apart; its stalls recur every 13 ms in nearly every cycle."""

    times = inject(inject(quiet_core(15), 13_000_000, 1_000_000), 4_000_000, 3_000)
    data = fwqfile.RankData(0, 0, False, True, 10_000, 0, times)
    stalls = recurrence.core_stalls(data, 2_000)
    assert recurrence.tick_hz(stalls) == 250.0
    frequency, share = recurrence.fundamental(stalls, 1000.0 / 52, 0.3, 250.0)
    assert abs(frequency - 1000.0 / 13) < 0.3 and share >= recurrence.MIN_HIT_SHARE
    # A rate the tick is no whole multiple of is left alone: its multiples may be held by other events' stalls.
    assert recurrence.faster(stalls, 1000.0 / 90, 1.0, 0.3, 250.0) == (1000.0 / 90, 1.0)


def with_events(times: np.ndarray, events: list[tuple[int, int]]) -> np.ndarray:
    """``times`` with a detour at each (wall time ns, detour ns) of ``events``, in the iteration running then."""
    out = times.astype(np.int64).copy()
    events, now, due = sorted(events), 0, 0
    for i in range(len(out)):
        while due < len(events) and now + out[i] >= events[due][0]:
            out[i] += events[due][1]
            due += 1
        now += int(out[i])
    return out.astype(np.uint32)


def trains(times: np.ndarray, trains: tuple[tuple[int, int], ...]) -> np.ndarray:
    """``times`` with several injectors' stalls at once, each every ``every_ns`` of the same wall time (the
    host's and the guest's ticks keep one clock; injected one after the other, the later would drift)."""
    horizon = 2 * int(times.sum())              # the detours lengthen the run; events past its end never fire
    return with_events(times, [(k * every, detour) for every, detour in trains
                               for k in range(1, horizon // every + 1)])


def core_with(events: list[tuple[int, int]], seed: int) -> recurrence.Stalls:
    """10 s of a core's stalls with a detour at each (wall time ns, detour ns) of ``events``."""
    times = with_events(pulse_train(1_000_000, 10_000, 10**15, 0, seed), events)
    return recurrence.core_stalls(fwqfile.RankData(0, 0, False, True, 10_000, 0, times), 2_000)


MS = 1_000_000
TICKS = [(n * 4 * MS, 3_000) for n in range(1, 2_600)]


@pytest.fixture(scope="module")
def thirteen_ms_on_the_tick() -> recurrence.Stalls:
    """A daemon woken every 13 ms by an absolute timer, running 0.15-0.4 ms up to 0.25 ms late (normal
    priority's short turns), and the 4 ms tick: stalls that repeat together every 52 ms, a comb 19.23 Hz apart."""
    rng = np.random.default_rng(11)
    daemon = [(n * 13 * MS + int(rng.integers(0, 250_000)), int(rng.integers(150_000, 400_000))) for n in range(1, 800)]
    return core_with(daemon + TICKS, 7)


@pytest.mark.parametrize("off", [-0.28, 0.12])
def test_a_beats_multiple_is_held_at_the_beats_exact_rate(thirteen_ms_on_the_tick: recurrence.Stalls,
                                                          off: float) -> None:
    """The spectrum reads the comb within half a bin; at its 4th multiple the search's steps are a fifth of a
    bin apart, and over the run a step's error moves the phase past the stalls: every 26 ms held in 94 % of
    the cycles and every 13 ms in 78 %, and the daemon was named at 26 ms (as in noise-keep20). Where the
    search finds the 13 ms, it is tried at the tick's exact beat too, and holds in all."""
    stalls = thirteen_ms_on_the_tick
    bin_hz = 1e9 / stalls.duration_ns
    comb = 1000.0 / 52 + off * bin_hz                      # where the spectrum put the line
    frequency, share = recurrence.beat_multiple(stalls, comb, bin_hz, 250.0, [comb * 2, comb * 4])
    assert frequency == pytest.approx(1000.0 / 13, abs=1e-6) and share >= 0.95


@pytest.fixture(scope="module")
def host_timer_and_a_second_stall() -> recurrence.Stalls:
    """A host timer every 10 ms, a second stall 5 ms after it in two cycles of three, and the 4 ms tick: 100 Hz
    holds a stall in every cycle, 200 Hz in 5 of 6, 20 Hz (every fifth) in all."""
    timer = [(n * 10 * MS, 30_000) for n in range(1, 1_000)]
    second = [(n * 10 * MS + 5 * MS, 30_000) for n in range(1, 1_000) if n % 3]
    return core_with(timer + second + TICKS, 5)


def test_a_beats_faster_multiple_held_less_often_than_a_slower_one_is_not_the_event(
        host_timer_and_a_second_stall: recurrence.Stalls) -> None:
    """A comb 50 Hz apart (the 4 ms tick's beat) whose 4th line is there and 2nd is not: the 4th line recurs,
    and it is a harmonic of the 2nd, which recurs in every cycle; the event is 100 Hz, not 200 Hz (a control
    on this VM was named at 200 Hz so, its multiples tried at the beat's exact rate)."""
    stalls = host_timer_and_a_second_stall
    frequency, _ = recurrence.beat_multiple(stalls, 50.0, 1e9 / stalls.duration_ns, 250.0, [150.0, 200.0])
    assert frequency == pytest.approx(100.0)


def test_a_combs_multiples_a_host_timer_holds_are_named_at_the_timers_own_rate(
        host_timer_and_a_second_stall: recurrence.Stalls) -> None:
    """A 10 Hz comb's 8th and 9th lines (80, 90 Hz) do not recur, and 20 Hz (every fifth cycle of the host's
    100 Hz) holds a stall in every cycle: the fastest multiple held at the beat's exact rate is the timer's own
    100 Hz, not 20 Hz (20 Hz and 37.5 Hz were named beside a real-time 27 ms source, noise-keep20, and 20 to
    66.67 Hz in 8 controls when the exact rates were asked only up to the 16th multiple)."""
    stalls = host_timer_and_a_second_stall
    bin_hz = 1e9 / stalls.duration_ns
    assert recurrence.hit_share(stalls, 20.0, bin_hz, tick_hz=250.0) >= 0.95          # what a fraction holds
    frequency, share = recurrence.beat_multiple(stalls, 10.0, bin_hz, 250.0, [80.0, 90.0])
    assert frequency == pytest.approx(100.0) and share >= 0.95


def test_a_combs_multiple_a_faster_event_explains_gives_way_to_the_next_held() -> None:
    """Measured: core 0 of a control of noise-keep26 (two busy loops pinned on each core, load 7-12), shared in
    turns the host's 10 ms timer paces (the analysis's stalls, kept in tests/data). Its comb 8.33 Hz apart holds
    every 30 ms in all cycles at the exact beat and every 10 ms in 76 %; but its longest stalls start 10 and
    20 ms after the 30 ms phase nearly as often: the 30 ms is every third of the timer's cycles, and the event
    is the timer's 100 Hz (a known source of the local system), not the 33.33 Hz it was named at."""
    stalls = kept_stalls.stalls("noise-keep26-control2-core0")
    thirty = 1000.0 / 30
    assert recurrence.hit_share(stalls, thirty, 0.0, steps=1, tick_hz=250.0,
                                most_chance=recurrence.BEAT_MAX_CHANCE) == 1.0          # what the exact beat holds
    assert recurrence.faster_explains(stalls, thirty, 0.0, 250.0, steps=1)
    frequency, share = recurrence.beat_multiple(stalls, 8.33, 0.0459, 250.0, [33.3549, 66.652, 108.7209])
    assert frequency == pytest.approx(100.0) and share == pytest.approx(0.76, abs=0.01)


def test_a_tick_under_a_faster_hosts_pattern_is_still_the_tick() -> None:
    """The local VM's kernel ticks at 250 Hz under its host's 1 kHz pattern: the node's tick is measured at 1 kHz
    (the highest rate its stalls hold), and the 250 Hz tick's lines and those of slices of two ticks (125, 375 Hz)
    are the tick's, never events; a 13 ms source beside them is still named on its core."""
    # Host 1 ms (3 us), the guest's tick 4 ms (20 us) and every other tick a longer slice switch (60 us): before
    # the rates below the measured one were the tick's too, this named "A 250 Hz event on every core".
    host_and_guest = ((1_000_000, 3_000), (4_000_000, 20_000), (8_000_000, 60_000))
    cores = [trains(quiet_core(seed), host_and_guest) for seed in (21, 22)]
    # 13.7 ms: a period of whole milliseconds puts a harmonic on the 1 kHz line, which draws its comb elsewhere.
    cores[1] = trains(quiet_core(22), host_and_guest + ((13_700_000, 1_000_000),))
    run = run_of(*cores)
    assert run.nodes[0].tick_hz == 1000.0
    said = findings.sentences(run)
    assert not [s for s in said if any(f"{f} Hz event" in s for f in (125, 250, 375, 500, 750))], said
    [tick] = [s for s in said if s.startswith("n1: the kernel tick at 1000 Hz")]
    assert "0.0 Hz" not in tick, tick        # its lines said as measured, not rounded to multiples of 1 kHz
    assert [(c.cpu, round(p.frequency_hz)) for c, p in findings.one_core_events(run)] == [(1, 73)], said
    assert [analysis.is_tick(f, 1000.0, 0.3) for f in (125.0, 250.0, 375.0, 750.0, 76.9, 37.04, 11.11, 4.0)] == \
        [True] * 4 + [False] * 4


def test_the_kernels_tick_lets_a_10_ms_source_be_named_under_a_1_khz_pattern() -> None:
    """The local VM: the host's 1 kHz pattern, the kernel's 250 Hz tick, a 10 ms source on core 1 (the
    source of test_noise_fwq.py). Measured from the stalls alone the tick is 1 kHz and 100 Hz one of its
    rates, so the source is the tick (the documented price of is_tick); with the kernel's 4 ms jiffy the tick
    is 250 Hz, the 1 kHz pattern is said to be no tick of this kernel, and the source is named at 100 Hz on
    core 1 alone."""
    host_and_guest = ((1_000_000, 3_000), (4_000_000, 20_000))
    cores = [trains(quiet_core(31), host_and_guest),
             trains(quiet_core(32), host_and_guest + ((10_000_000, 1_000_000),))]

    def node(jiffy_ns: int | None) -> analysis.NodeNoise:
        ranks = tuple(fwqfile.RankData(r, r, False, True, 10_000, 0, t, jiffy_ns=jiffy_ns) for r, t in enumerate(cores))
        return analysis.node_noise(fwqfile.NodeData(name="n1", ranks=ranks))

    measured, said = node(None), node(4_000_000)
    assert (measured.tick_hz, measured.tick_from_kernel) == (1000.0, False)
    assert not [p for c in measured.cores for p in c.periods if abs(p.frequency_hz - 100) < 1]
    assert (said.tick_hz, said.tick_from_kernel, said.faster_pattern_hz) == (250.0, True, 1000.0)
    assert [(c.cpu, round(p.frequency_hz)) for c in said.cores for p in c.periods] == [(1, 100)]
    run = analysis.RunNoise(nodes=(said,), quantum_target_ns=10_000, iterations=len(cores[0]), truncated=None)
    [tick] = [s for s in findings.sentences(run) if s.startswith("n1: the kernel tick at 250 Hz")]
    assert "the kernel's own" in tick and "also recur at 1000 Hz, which is not this kernel's tick" in tick, tick


def test_the_nodes_tick_is_the_highest_rate_a_core_shows() -> None:
    """Under load one core's tick can hide while the host's 100 Hz timer shows; another core's 250 Hz is the
    tick, and the 250 Hz line is then the tick's, not the host's event."""
    run = run_of(inject(quiet_core(13), 10_000_000, 3_000), inject(quiet_core(14), 4_000_000, 3_000))
    assert run.nodes[0].tick_hz == 250.0


def test_a_period_at_a_whole_share_of_anothers_rate_is_that_event_unless_it_holds_more_often() -> None:
    """Every 26 ms cycle of a 13 ms source holds a stall as its own cycles do: 38.46 Hz beside 76.92 Hz is the
    13 ms event's (a real-time source was named at both, benchmarks/noise_injected.py). Beside a 26 ms source,
    whose 13 ms cycles hold a stall only every other time, 38.46 Hz is the event and 76.92 Hz its harmonic:
    the fold's rule (folding.one_event), one for both paths."""
    both = (analysis.Period(76.92, 800.0, 20), analysis.Period(38.46, 250.0, 30))
    for every_ns, kept in ((13_000_000, [76.92]), (26_000_000, [38.46])):
        times = trains(quiet_core(51), ((4_000_000, 20_000), (every_ns, 1_000_000)))
        stalls = recurrence.stalls_over(fwqfile.RankData(0, 0, False, True, 10_000, 0, times),
                                        analysis.DEFAULT_THRESHOLD_FRACTION)
        periods, dropped = analysis.without_harmonics(stalls, 0.3, 250.0, both)
        assert [p.frequency_hz for p in periods] == kept
        assert list(dropped) == [p.frequency_hz for p in both if p.frequency_hz not in kept]


@pytest.mark.parametrize("burst_ns", [8_000_000, 1_000_000])
def test_the_schedulers_turns_among_processes_sharing_a_core_are_no_event(burst_ns: int) -> None:
    """With two other processes on its core FWQ ran 4 ms of every 12 ms (three 4 ms ticks): a line at 83.33 Hz
    whose 8 ms stalls recur at one phase, named as an event in 3 of 10 controls (noise-keep24). Stalls that take
    most of a period of whole ticks are the scheduler's turns, said as such; a daemon's 1 ms every 12 ms is an
    event."""
    core = trains(quiet_core(61), ((4_000_000, 3_000), (12_000_000, burst_ns)))
    run = run_of(core, trains(quiet_core(62), ((4_000_000, 3_000),)))
    said = findings.sentences(run)
    events = [(c.cpu, round(p.frequency_hz)) for c, p in findings.one_core_events(run)]
    turns = [s for s in said if "shared in turns" in s]
    if burst_ns == 8_000_000:
        assert events == [] and not [s for s in said if "stalls, no period" in s], said
        assert turns == ["n1 core 0: shared in turns: other processes held it 8.0 ms of every 12 ms (83.3 Hz, "
                         "3 ticks of the scheduler), not an event."]
    else:
        assert events == [(0, 83)] and turns == [], said


def test_a_core_naming_an_event_says_its_other_stalls_are_besides_it() -> None:
    """A core with an event and spectral lines its stalls do not recur at lists those stalls as besides the event,
    not as "stalls, no period" (which reads as if the run doubted the event)."""
    times = quiet_core(4).astype(np.int64)
    for at in (932e6, 1934e6, 2938e6):
        start = np.concatenate(([0], np.cumsum(times)[:-1]))
        times[int(np.searchsorted(start, at))] += 54_000_000
    (core,) = run_of(times.astype(np.uint32)).nodes[0].cores
    assert core.unconfirmed
    event = analysis.Period(frequency_hz=1000 / 90, prominence=10.0, harmonics=1)
    said = findings.stalls_sentence(replace(core, periods=(event,)))
    assert said is not None and said.startswith("n1 core 0: besides its 11.1 Hz event, stalls with no period: 3 of "
                                                "1 ms or more, at 932 ms (54.0 ms)"), said
    assert findings.stalls_sentence(core).startswith("n1 core 0: stalls, no period: 3 of 1 ms"), said


def test_one_source_told_by_two_cores_is_one_source_of_a_common_period() -> None:
    """The host's 100 Hz timer told at 100.06 Hz on one core and 100.02 Hz on the other is one source: a 90 ms
    daemon's 11.11 Hz is no common period of it and the tick. Two sources are: the timer and the tick repeat
    together every 20 ms."""
    assert not analysis.common_period(11.11, [100.06, 100.02, 250.0])
    assert analysis.common_period(50.0, [100.06, 100.02, 250.0])
    assert analysis.common_period(11.11, [100.06, 22.22])


def test_a_common_period_is_the_least_two_sources_share() -> None:
    """The host's 10 ms timer and its 50 ms pattern repeat together every 50 ms: a 250 ms daemon beside them (4 Hz,
    25 and 5 times slower) is no common period of theirs, and was taken for one on a quiet core
    (noise-keep33-quiet). Sources every 10 and 25 ms do repeat together every 50 ms."""
    assert not analysis.common_period(4.0, [100.0, 20.0, 250.0])
    assert analysis.common_period(20.0, [100.0, 40.0])


def test_a_whole_number_of_ticks_brings_the_tick_back_to_its_phase_each_cycle() -> None:
    """1 % of the count made every period from 50 ticks up whole: 271 ms (67.75 ticks of 4 ms) was, and held to
    the tick's 8 % window (22 ms) a 90 ms daemon's stalls named a 3.82 Hz event beside it (noise-keep33-quiet)."""
    assert recurrence.whole_ticks(271e6, 250.0) == 0
    assert recurrence.window_ns(271e6, 250.0) == pytest.approx(0.02 * 271e6)
    assert recurrence.whole_ticks(20e6, 250.0) == 5
    assert recurrence.whole_ticks(250e6, 250.0, 2) == 125
    assert recurrence.whole_ticks(252e6, 250.0) == 63


def test_a_slower_period_the_spectrum_names_a_bin_off_a_whole_share_of_an_event_is_that_events() -> None:
    """Measured (a quiet core, noise-keep33-quiet): a 90 ms daemon at normal priority woke without preempting FWQ
    in every sixth cycle, so its 90 ms held 27 of 33 cycles; the spectrum also named 3.82 Hz (a bin of 0.32 Hz),
    whose stalls recur every 271 ms, three of the daemon's cycles and 3 % off the third of 11.11 Hz, in 11 of 11
    cycles within its three times wider window. Known to its bin, 3.82 Hz is a whole share of 11.11 Hz, and
    11 of 11 against 82 % is no clearly better hold (9 % by chance): the daemon is named, once."""
    stalls, _ = kept_stalls.measured("noise-keep33-quiet-normal90ms-run0-core0")
    bin_hz = 1e9 / stalls.duration_ns
    assert analysis.whole_multiple(11.11, 3.82, bin_hz) and not analysis.whole_multiple(11.11, 3.82)
    periods = (analysis.Period(11.11, 50.0, 3), analysis.Period(3.82, 20.0, 3))
    kept, dropped = analysis.without_harmonics(stalls, bin_hz, 250.0, periods)
    assert [p.frequency_hz for p in kept] == [11.11] and dropped == (3.82,)


def test_a_slow_daemon_at_its_own_phase_is_not_a_faster_host_events_subharmonic() -> None:
    """Measured (a quiet core, noise-keep33-quiet): a 250 ms daemon's long stalls held one phase in 12 of 12
    cycles; the host's 50 ms pattern (20 Hz) held 97 % of its own cycles elsewhere in them. 20 Hz is five times
    4 Hz, but its stalls do not start at the daemon's phase: two events, and the daemon is named (it was dropped
    as the 20 Hz line's subharmonic, in 2 of 3 runs)."""
    stalls, _ = kept_stalls.measured("noise-keep33-quiet-normal250ms-run1-core0")
    periods = (analysis.Period(100.0, 50.0, 3), analysis.Period(4.0, 20.0, 3), analysis.Period(20.0, 30.0, 3))
    kept, dropped = analysis.without_harmonics(stalls, 1e9 / stalls.duration_ns, 250.0, periods)
    assert [p.frequency_hz for p in kept] == [100.0, 4.0] and dropped == (20.0,)


def test_a_slow_spectral_rate_is_placed_within_its_bin() -> None:
    """Measured (a quiet core, noise-keep35-quiet): a real-time 250 ms daemon the spectrum named at 4.01 Hz,
    rounded and known to its bin of 0.33 Hz. Its phase is asked within that bin: at 249.4 ms its stalls drift 7 ms
    over the run and the fold held nothing, so the daemon was taken for the 50 ms pattern's subharmonic."""
    stalls, _ = kept_stalls.measured("noise-keep35-quiet-fifo250ms-run0-core0")
    periods = (analysis.Period(4.01, 20.0, 3), analysis.Period(20.0, 30.0, 3))
    kept, dropped = analysis.without_harmonics(stalls, 1e9 / stalls.duration_ns, 250.0, periods)
    assert [p.frequency_hz for p in kept] == [4.01, 20.0] and dropped == ()


def test_a_cores_own_event_recurring_at_anothers_cycle_does_not_make_that_event_the_hosts() -> None:
    """Measured (a quiet host, noise-keep35-quiet): a real-time 27 ms daemon on core 0 and a 250 ms one on core 1,
    told at 4.02 Hz (a bin of 0.32 Hz). Core 0's spectrum had a line within a bin of 4.02 Hz and its stalls held
    every 243 ms, nine of its daemon's cycles: the 250 ms daemon was said as the host's, on no core, in 3 runs of
    10. Core 0 shows it only where its own event does not explain that recurrence."""
    stalls, _ = kept_stalls.measured("noise-keep35-quiet-fifo27ms-and-250ms-run0-core0")
    bin_hz = 1e9 / stalls.duration_ns
    core0 = analysis.CoreNoise(
        node="node1", rank=0, cpu=0, bound=True, migrated=False, nominal_us=10.0, lost_fraction=0.05,
        max_detour_us=2500.0, detours_per_s=500.0, threshold_us=2.0, duration_s=stalls.duration_ns / 1e9,
        periods=(analysis.Period(37.04, 11631.2, 26),), spectrum=(np.array([0.0, bin_hz]), np.zeros(2)),
        lines=(3.01, 4.0, 37.03, 74.07), tick_hz=250.0, stalls=stalls)
    daemon = analysis.Period(4.02, 418.4, 0, lines=(4.015,))
    assert recurrence.recurs(stalls, 4.02, bin_hz, tick_hz=250.0)      # core 0's stalls do come back at it
    assert not findings.shows(core0, daemon)
    assert findings.shows(replace(core0, periods=()), daemon)            # where no event of its own explains it


def test_a_fold_whose_long_stalls_are_a_named_slower_events_train_is_that_events_share() -> None:
    """Measured (a quiet host, noise-keep36-quiet): a real-time 90 ms daemon, its 2 ms stalls every 90.0 ms in 34
    of 34 cycles. The fold found 45 ms, held in 55 of 63 cycles: the daemon's in every other one, the host timer's
    23 us interrupts 0.2-0.6 ms off its phase plus 45 ms in the others; the spectrum's 11.11 Hz went as its
    subharmonic and the daemon was named at 22.22 Hz in 5 runs of 5."""
    stalls, _ = kept_stalls.measured("noise-keep36-quiet-fifo90ms-run0-core0")
    assert folding.slower_train(stalls, 22.22, 11.11, 250.0)
    periods = (analysis.Period(11.11, 859.4, 82), analysis.Period(22.22, 0.0, 0, folded=(55, 63)))
    kept, dropped = analysis.without_harmonics(stalls, 1e9 / stalls.duration_ns, 250.0, periods)
    assert [p.frequency_hz for p in kept] == [11.11] and dropped == (22.22,)


def test_a_fold_within_a_spectral_lines_bin_is_that_lines_event_told_at_the_folds_rate() -> None:
    """Measured (a quiet host, noise-keep36-quiet): a normal-priority 250 ms daemon, its line at 4.09 Hz (2.2 %
    off, within the 0.34 Hz bin) and its fold at 4.0 Hz (11 of 11 cycles), named as two events on one core."""
    stalls, cpu_ns = kept_stalls.measured("noise-keep36-quiet-normal27ms-and-250ms-run3-core1")
    line = analysis.Period(4.09, 260.0, 1)
    assert [p.frequency_hz for p in analysis.folded_periods(stalls, cpu_ns, 250.0, (line,))] == [4.09, 4.0]
    (one,) = analysis.folded_periods(stalls, cpu_ns, 250.0, (line,), 1e9 / stalls.duration_ns)
    assert one.frequency_hz == 4.0 and one.prominence == 260.0 and not one.folded


def test_a_slow_line_held_by_two_slow_sources_in_a_wide_window_is_no_period() -> None:
    """Measured on a quiet control (noise-keep36-quiet): long stalls every 512 ms and every second, 17 in all.
    The spectrum's 2.89 Hz, 340 ms and a whole number of ticks (its window +-27 ms), held 6 of 8 cycles; the median
    phase 1 of 8 made that luck at under 10^-4, and a control named a 2.89 Hz event. Spread evenly, 17 onsets fill
    such a window a quarter of the time: no period."""
    stalls, _ = kept_stalls.measured("noise-keep36-quiet-control-run4-core0")
    bin_hz = 1e9 / stalls.duration_ns
    assert recurrence.spread_chance(17, 27.2e6, stalls.duration_ns) == pytest.approx(0.26, abs=0.02)
    assert recurrence.fundamental(stalls, 2.89, bin_hz, 250.0, []) == (2.89, 0.0)
