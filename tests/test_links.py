"""The link analysis on synthetic runs: reader, attribution, inputs, outputs, series records."""
from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import numpy as np
import pytest
from helpers.linkrun import make_run

from mpiregress.cli import main as cli_main
from mpiregress.errors import InputError
from mpiregress.families.links import analysis, resultsfile, series

HOSTS8 = [f"n{i:02d}" for i in range(8)]           # one rank per node
HOSTS_2PN = [f"n{i // 2}" for i in range(16)]       # 8 nodes x 2 ranks


def write(tmp_path: Path, run: resultsfile.LinkRun, name: str = "run.bin") -> Path:
    path = tmp_path / name
    resultsfile.write(path, run)
    return path


def cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = cli_main(args)
    said = capsys.readouterr()
    return code, said.out + said.err


def test_roundtrip_keeps_every_record(tmp_path: Path) -> None:
    run = make_run(HOSTS8, retest=5)
    back = resultsfile.read(write(tmp_path, run))
    assert back.nranks == 8 and back.hosts == HOSTS8 and back.complete and back.problem is None
    assert len(back.main) == 28 and len(back.retest) == 5
    assert np.array_equal(back.main, run.main)


def test_truncated_file_keeps_complete_records_and_exits_2(tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, make_run(HOSTS8, slow_ranks=[3]))
    data = path.read_bytes()
    header = resultsfile.HEADER.size + 8 * 64
    # Cut inside the 21st record: 20 complete records survive.
    path.write_bytes(data[: header + 20 * resultsfile.RECORD.itemsize + 7])
    run = resultsfile.read(path)
    assert len(run.main) == 20 and not run.complete
    assert run.problem == (f"{path} is truncated: 7 trailing bytes of a partial record dropped, "
                           f"the 20 complete records before it kept")
    code, said = cli(["links", "analyze", str(path), "--out", str(tmp_path / "out")], capsys)
    assert code == 2
    assert f"input: {path} is truncated" in said and "8 of 28 pairs were not measured" in said
    assert (tmp_path / "out" / "matrix.npz").exists()  # nothing measured is lost
    assert "Traceback" not in said


def test_file_cut_inside_its_header_is_one_sentence(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, make_run(HOSTS8))
    path.write_bytes(path.read_bytes()[:100])
    code, said = cli(["links", "analyze", str(path), "--out", str(tmp_path / "out")], capsys)
    assert code == 2
    assert said.strip() == (f"mpiregress links: error: {path} is truncated inside its header "
                            f"(100 of {resultsfile.HEADER.size + 8 * 64} bytes): no measurement can be recovered")


def test_not_a_results_file(tmp_path: Path) -> None:
    path = tmp_path / "x.bin"
    path.write_bytes(b"hello world, this is not linktest output at all, not even close......")
    with pytest.raises(InputError, match="not a linktest results file"):
        resultsfile.read(path)


def test_bad_node_one_rank_per_node() -> None:
    result = analysis.analyse(make_run(HOSTS8, slow_ranks=[3]))
    assert [(b.node, b.metric, b.ranks, b.slow_pairs, b.pairs) for b in result.bad_nodes] == [
        ("n03", "latency", [3], 7, 7), ("n03", "bandwidth", [3], 7, 7)]
    assert result.bad_links == []
    assert {s.attribution for s in result.slow} == {"bad node"}


def test_bad_link_needs_both_ends_fine_and_a_slow_retest() -> None:
    result = analysis.analyse(make_run(HOSTS8, slow_links=[(1, 6)], transients=[(2, 4)]))
    assert result.bad_nodes == []
    assert {(s.rank_a, s.rank_b, s.metric) for s in result.bad_links} == {(1, 6, "latency"), (1, 6, "bandwidth")}
    transient = {(s.rank_a, s.rank_b) for s in result.slow if s.attribution == "transient"}
    assert transient == {(2, 4)}
    link = result.bad_links[0]
    assert link.ratio_first > 8 and link.ratio_second is not None and link.ratio_second > 8


def test_slow_pairs_meeting_at_one_rank_are_bad_links_until_most_of_its_pairs_are() -> None:
    # One rule everywhere: a node is bad only when most of its links are. Three slow pairs of 7
    # at rank 6 are three bad links; a fourth makes most of them slow, and then the node is bad.
    result = analysis.analyse(make_run(HOSTS8, slow_links=[(1, 6), (3, 6), (2, 6)]))
    assert result.bad_nodes == []
    assert {(s.rank_a, s.rank_b) for s in result.bad_links} == {(1, 6), (3, 6), (2, 6)}
    result = analysis.analyse(make_run(HOSTS8, slow_links=[(1, 6), (3, 6), (2, 6), (0, 6)]))
    assert [(b.node, b.metric, b.ranks, b.slow_pairs, b.pairs) for b in result.bad_nodes] == [
        ("n06", "latency", [6], 4, 7), ("n06", "bandwidth", [6], 4, 7)]
    assert result.bad_links == [] and {s.attribution for s in result.slow} == {"bad node"}
    assert result.bad_nodes[0].sentence().startswith("bad node n06 (rank 6): latency slow in 4 of its 7 pairs, ")
    result = analysis.analyse(make_run(HOSTS8, slow_links=[(1, 6), (2, 5)]))
    assert result.bad_nodes == [] and {(s.rank_a, s.rank_b) for s in result.bad_links} == {(1, 6), (2, 5)}


HOSTS_4X4 = [f"node{i // 4 + 1}" for i in range(16)]   # the local cluster: 4 nodes x 4 ranks


def slow_down(run: resultsfile.LinkRun, pairs: list[tuple[int, int]], add_us: float = 0.0,
              bw_factor: float = 1.0) -> resultsfile.LinkRun:
    """A real fault on ``pairs``: latency ``add_us`` higher, bandwidth ``bw_factor`` of what it was,
    at every measurement (main and re-test)."""
    for records in (run.main, run.retest):
        for x, y in pairs:
            sel = (records["rank_a"] == min(x, y)) & (records["rank_b"] == max(x, y))
            for field in ("lat_us", "lat_median_us", "lat_min_us"):
                records[field][sel] += add_us
            for field in ("bw_mbs", "bw_median_mbs", "bw_max_mbs"):
                records[field][sel] *= bw_factor
    return run


def pairs_between(hosts: list[str], one: str, other: str | None = None) -> list[tuple[int, int]]:
    """Rank pairs between node ``one`` and ``other`` (every other node when None)."""
    return [(a, b) for a in range(len(hosts)) for b in range(a + 1, len(hosts))
            if (hosts[a] == one) != (hosts[b] == one) and (other is None or other in (hosts[a], hosts[b]))]


@pytest.mark.parametrize("seed", range(10))
def test_one_slow_pair_of_2_ms_is_a_bad_link_never_a_bad_node(seed: int) -> None:
    # The outside tester's case: ranks 1 and 4 (node1, node2) 2 ms apart on a ~7 us link.
    run = slow_down(make_run(HOSTS_4X4, seed=seed, inter_us=6.8), [(1, 4)], add_us=2000)
    result = analysis.analyse(run)
    assert result.bad_nodes == []
    assert {(s.rank_a, s.rank_b, s.metric) for s in result.bad_links} == {(1, 4, "latency")}


@pytest.mark.parametrize("seed", range(10))
def test_a_rank_slowed_2_ms_on_every_link_names_its_node(seed: int) -> None:
    run = slow_down(make_run(HOSTS_4X4, seed=seed, inter_us=6.8), [(2, r) for r in range(16) if r != 2],
                    add_us=2000)
    result = analysis.analyse(run)
    assert [(b.node, b.ranks) for b in result.bad_nodes if b.metric == "latency"] == [("node1", [2])]
    assert result.bad_links == []


@pytest.mark.parametrize("seed", range(10))
def test_a_link_limited_to_a_quarter_is_a_bad_link_and_a_node_limited_to_a_quarter_is_a_bad_node(seed: int) -> None:
    link = slow_down(make_run(HOSTS_4X4, seed=seed), pairs_between(HOSTS_4X4, "node1", "node3"), bw_factor=0.25)
    result = analysis.analyse(link)
    assert result.bad_nodes == []
    assert {(s.node_a, s.node_b) for s in result.bad_links} == {("node1", "node3")}
    assert {s.metric for s in result.bad_links} == {"bandwidth"}
    node = slow_down(make_run(HOSTS_4X4, seed=seed), pairs_between(HOSTS_4X4, "node2"), bw_factor=0.25)
    result = analysis.analyse(node)
    assert {b.node for b in result.bad_nodes} == {"node2"} and result.bad_links == []
    # Most of a limited node's pairs are slow (12 of 15 per rank), not all: its intra-node ones are fine.
    assert {(b.slow_pairs, b.pairs) for b in result.bad_nodes} == {(48, 54)}


def test_a_rank_slow_only_at_its_first_measurement_is_not_a_bad_node() -> None:
    """A busy moment of a shared node: every pair of rank 2 slow at first, normal on re-test (LinkTest's
    serial re-test with more iterations). Its pairs are transient; nothing is bad. Without the re-test
    the same first measurements name the node."""
    busy = [(2, r) for r in range(8) if r != 2]
    result = analysis.analyse(make_run(HOSTS8, transients=busy))
    assert result.bad_nodes == [] and result.bad_links == []
    assert {s.attribution for s in result.slow} == {"transient"} and len(result.slow) == 2 * len(busy)
    unchecked = analysis.analyse(make_run(HOSTS8, transients=busy, retest=0))
    assert [b.node for b in unchecked.bad_nodes] == ["n02", "n02"]   # latency and bandwidth


def test_slow_pair_not_retested_is_unconfirmed_not_bad() -> None:
    # Only the 1 slowest pair is re-tested; the second slow link is left unconfirmed.
    result = analysis.analyse(make_run(HOSTS8, slow_links=[(1, 6), (2, 5)], retest=1))
    attributions = sorted(s.attribution for s in result.slow if s.metric == "latency")
    assert attributions == ["bad link", "unconfirmed"]


def test_bad_node_several_ranks_per_node_and_kinds() -> None:
    result = analysis.analyse(make_run(HOSTS_2PN, slow_ranks=[5]))
    assert [(b.node, b.ranks) for b in result.bad_nodes if b.metric == "latency"] == [("n2", [5])]
    assert set(result.kinds_present()) == {"intra-node", "inter-node"}
    median, _, count = result.typical[("latency", "intra-node")]
    assert count == 8 and median == pytest.approx(0.5, rel=0.1)


def test_switch_map_splits_inter_node_pairs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    switches = tmp_path / "switches.yaml"
    switches.write_text("switches:\n" + "".join(f"  n{i:02d}: s{i // 4}\n" for i in range(8)))
    path = write(tmp_path, make_run(HOSTS8))
    code, said = cli(["links", "analyze", str(path), "--out", str(tmp_path / "out"),
                      "--switches", str(switches)], capsys)
    assert code == 0, said
    assert "typical same-switch latency" in said and "typical inter-switch latency" in said


def test_switch_map_missing_a_node_is_one_sentence(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    switches = tmp_path / "switches.yaml"
    switches.write_text("switches:\n  n00: s0\n  n01: s0\n")
    path = write(tmp_path, make_run(HOSTS8))
    code, said = cli(["links", "analyze", str(path), "--out", str(tmp_path / "o"), "--switches", str(switches)],
                     capsys)
    assert code == 2
    assert said.strip().startswith(f"mpiregress links: error: the switch map {switches} does not name the switch "
                                   f"of node(s) n02, n03, n04, n05, n06 and more")


def test_unknown_node_in_node_list(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, make_run(HOSTS8))
    code, said = cli(["links", "analyze", str(path), "--out", str(tmp_path / "o"), "--nodes", "n01,n99"], capsys)
    assert code == 2
    assert said.strip().startswith("mpiregress links: error: node(s) n99 of the node list were not in this "
                                   "linktest run")
    code, said = cli(["links", "analyze", str(path), "--out", str(tmp_path / "o"), "--nodes", "n01"], capsys)
    assert code == 0 and "node n01: fine" in said


def test_cli_outputs_and_exit_1_on_bad_node(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, make_run(HOSTS_2PN, slow_ranks=[5], slow_links=[(0, 15)]))
    out = tmp_path / "out"
    code, said = cli(["links", "analyze", str(path), "--out", str(out), "--series", str(tmp_path / "s.json"),
                      "--system", "aion", "--partition", "batch", "--method", "source"], capsys)
    assert code == 1, said
    assert "BAD NODE n2 (rank 5): latency slow in 15 of its 15 pairs" in said
    assert "BAD LINK n0--n7 (ranks 0-15, inter-node)" in said
    with open(out / "bad_links.csv") as f:
        rows = list(csv.DictReader(f))
    assert {(r["from_rank"], r["to_rank"]) for r in rows if r["attribution"] == "bad link"} == {("0", "15")}
    data = np.load(out / "matrix.npz")
    assert data["rank_latency"].shape == (16, 16) and data["node_latency"].shape == (8, 8)
    assert list(data["nodes"]) == [f"n{i}" for i in range(8)]
    assert (out / "heatmap.png").stat().st_size > 10_000 and (out / "histogram.png").stat().st_size > 5_000
    records = json.loads((tmp_path / "s.json").read_text())
    failing = {(tuple(r["parameters"].items())[0], r["metric"]) for r in records if r["status"] == "fail"}
    assert failing == {(("node", "n2"), "latency"), (("node", "n2"), "bandwidth"),
                       (("link", "n0--n7"), "latency"), (("link", "n0--n7"), "bandwidth")}


def test_series_records_follow_the_open_model() -> None:
    result = analysis.analyse(make_run(HOSTS8, slow_links=[(1, 6)]))
    records = series.series_records(result, {"system": "local", "partition": "batch", "method": "source",
                                             "commit": "abc"})
    nodes = [r for r in records if "node" in r["parameters"]]
    assert len(nodes) == 16  # 8 nodes x 2 metrics
    link = [r for r in records if r["parameters"] == {"link": "n01--n06"}]
    assert {r["metric"] for r in link} == {"latency", "bandwidth"}
    for r in records:
        assert r["benchmark"] == "linktest" and r["system"] == "local" and r["commit"] == "abc"
        assert r["unit"] == {"latency": "us", "bandwidth": "MB/s"}[r["metric"]]
        assert isinstance(r["value"], float) and r["samples"]
    assert all(r["status"] == "fail" for r in link) and link[0]["reason"].startswith("bad link n01--n06 (worst pair ranks 1-6): ")
    assert all(len(series.series_records(result, {}, all_links=True)) > len(records) for _ in [0])


def test_undisturbed_synthetic_run_names_nothing() -> None:
    result = analysis.analyse(make_run(HOSTS_2PN, seed=3))
    assert not result.judged_bad and result.slow == []


def test_statistic_min_ignores_a_pair_slowed_only_in_some_iterations() -> None:
    run = make_run(HOSTS8, retest=28)
    for records in (run.main, run.retest):
        sel = (records["rank_a"] == 2) & (records["rank_b"] == 7)
        records["lat_median_us"][sel] *= 20  # preempted in most iterations, its fastest one normal
        records["bw_median_mbs"][sel] /= 20
    median = analysis.analyse(run)
    assert {(s.rank_a, s.rank_b) for s in median.bad_links} == {(2, 7)}
    fastest = analysis.analyse(run, thresholds=analysis.Thresholds(statistic="min"))
    assert fastest.bad_links == [] and not fastest.judged_bad


def test_thresholds_are_checked(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, make_run(HOSTS8))
    code, said = cli(["links", "analyze", str(path), "--out", str(tmp_path / "o"), "--ratio", "0.5"], capsys)
    assert code == 2 and ("the link judging's ratio must be a number above 1 (a slow pair is that many times worse "
                          "than the typical one), found 0.5") in said


def test_a_partitions_judging_takes_what_is_given_over_it() -> None:
    site = {"ratio": 3, "z": 2, "statistic": "min", "metrics": ["bandwidth"], "args": "-S", "ranks_per_node": 2}
    assert analysis.Thresholds.from_site(site) == analysis.Thresholds(ratio=3, z=2, statistic="min",
                                                                     metrics=("bandwidth",))
    # 0, None and '' keep the partition's value (a check variable's "not set").
    assert analysis.Thresholds.from_site(site, ratio=0, z=None, metrics="") == analysis.Thresholds.from_site(site)
    given = analysis.Thresholds.from_site(site, ratio=20, metrics="latency, bandwidth")
    assert (given.ratio, given.z, given.metrics) == (20, 2, ("latency", "bandwidth"))
    assert analysis.Thresholds.from_site({}) == analysis.Thresholds()


@pytest.mark.parametrize("given, said", [
    ({"ratio": 1}, "ratio must be a number above 1 (a slow pair is that many times worse than the typical one), "
                   "found 1"),
    ({"ratio": "2"}, "ratio must be a number above 1"),
    ({"z": -1}, "z must be a number above 0 (robust sigmas), found -1"),
    ({"statistic": "mode"}, "statistic must be one of median, mean, min, found 'mode'"),
    ({"metrics": ["bandwith"]}, "metrics must name some of latency, bandwidth, found bandwith"),
])
def test_thresholds_that_cannot_judge_are_one_sentence(given: dict, said: str) -> None:
    with pytest.raises(InputError, match="^the link judging's " + re.escape(said)):
        analysis.Thresholds.from_site(given)


def test_series_file_loads_as_results_and_keys_are_distinct(tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    from mpiregress.model import results

    path = write(tmp_path, make_run(HOSTS8, slow_links=[(1, 6)]))
    code, said = cli(["links", "analyze", str(path), "--out", str(tmp_path / "o"), "--series",
                      str(tmp_path / "s.json"), "--system", "local", "--partition", "batch", "--method", "source"],
                     capsys)
    assert code == 1, said
    loaded = results.load((tmp_path / "s.json").read_text())
    assert len({r.key() for r in loaded}) == len(loaded) == 16 + 2
    assert {r.benchmark for r in loaded} == {"linktest"}


def test_job_script_dry_run_for_64_aion_nodes(tmp_path: Path) -> None:
    """The CI job's dry run: `mpiregress run --families links --dry-run` with the pipeline's variables,
    then the job script ReFrame wrote, printed."""
    import os
    import subprocess

    from shared import REPO

    env = {**os.environ, "MPIREGRESS_SYSTEM": "aion", "MPIREGRESS_PARTITION": "batch", "LINKTEST_NODES": "64",
           "LINKTEST_TIME": "30", "LINKTEST_REPORT_DIR": str(tmp_path / "r")}
    out = subprocess.run(["bash", str(REPO / "ci" / "jobs" / "linktest.sh"), "--dry-run"], env=env,
                         capture_output=True, text=True, timeout=300, check=True).stdout
    assert "#SBATCH --ntasks=64\n#SBATCH --ntasks-per-node=1\n" in out and "#SBATCH --time=0:30:0\n" in out
    assert ("srun --mpi=pmix --kill-on-bad-exit=1 --nodes=64 --ntasks=64 --ntasks-per-node=1 --cpu-bind=cores "
            "/planned/source/zen2/programs/bin/linktest -Z 20 -o links.bin") in out
    env["LINKTEST_NODELIST"] = "aion-[0001-0004]"
    del env["LINKTEST_NODES"]
    out = subprocess.run(["bash", str(REPO / "ci" / "jobs" / "linktest.sh"), "--dry-run"], env=env,
                         capture_output=True, text=True, timeout=300, check=True).stdout
    assert "#SBATCH --nodelist=aion-[0001-0004]" in out and "--nodes=4 --ntasks=4" in out and "--nodes=64" not in out
    # The pipeline's LINKTEST_RATIO reaches the check (refused here: it would call every pair slow).
    env["LINKTEST_RATIO"] = "1"
    done = subprocess.run(["bash", str(REPO / "ci" / "jobs" / "linktest.sh"), "--dry-run"], env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 2 and "the link judging's ratio must be a number above 1" in done.stderr, done.stderr
