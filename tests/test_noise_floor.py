"""Noise without history: a regression on a node whose probe in this very run is far outside a quiet node's
(the system's ``noise_floor``, systems/<name>.yaml) is "noisy", in the baseline band and in the history gate
alike, through one function (noise.verdict.reclassify).

The probes are the local host's (systems/local.yaml's comment): quiet 0.96-0.98 with detours up to 172 us;
the loaded-host run of issue 18 recorded 1151 us.
"""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from shared import REPO

from mpiregress.errors import NEEDS_A_LOOK, REGRESSION
from mpiregress.history import store as history
from mpiregress.model import baselines
from mpiregress.model.results import Result, pt2pt
from mpiregress.verdict import band, compose
from mpiregress.verdict import history_gate as gate
from mpiregress.verdict import noise as noise_verdict

LOADED = {"node1": {"efficiency": 0.96, "max_detour_us": 1151.0}}     # issue 18's loaded host
QUIET = {"node1": {"efficiency": 0.97, "max_detour_us": 120.0}}
FLOOR = noise_verdict.floor_of("local")


def lat(value: float, noise: dict | None, nodes=("node1",)) -> Result:
    return pt2pt("local", "batch", "source", "same_numa", "latency", value, samples=[value, value, value],
                 nodelist=list(nodes), conditions={} if noise is None else {"noise": noise}, toolchain="2023b",
                 time="2026-11-25T10:00:00+00:00", commit="c1")


@pytest.fixture()
def refs(tmp_path: Path) -> baselines.Baselines:
    """The local baselines with a cluster's 10 % band on same_numa latency (2.9 us), not the VM's 10x one."""
    data = yaml.safe_load((REPO / "baselines" / "local.yaml").read_text())
    data["references"]["batch"]["source"]["same_numa"]["latency"].update(value=2.9, tolerance=0.1)
    (tmp_path / "refs").mkdir()
    (tmp_path / "refs" / "local.yaml").write_text(yaml.safe_dump(data))
    return baselines.for_system("local", tmp_path / "refs")


def test_the_floor_is_data_in_the_system_file() -> None:
    assert FLOOR == noise_verdict.NoiseFloor(0.90, 500.0, "systems/local.yaml")
    assert noise_verdict.floor_of("iris").max_detour_us == 1000.0
    # Results of a system this checkout has no file for: the efficiency floor alone.
    assert noise_verdict.floor_of("elsewhere") == noise_verdict.DEFAULT_FLOOR
    assert noise_verdict.floor_from(None, "x").max_detour_us is None


def test_band_without_history_a_loaded_node_is_noisy(refs: baselines.Baselines) -> None:
    value = 2.9 * 1.3                       # 30 % beyond a 10 % band: a fail on a quiet node
    for node_noise in (None, {("local", "batch"): {}}):      # no history file / an empty one
        loaded = [lat(value, LOADED)]
        band.apply_baselines(loaded, refs, node_noise=node_noise)
        (r,) = loaded
        assert r.status == "pass" and r.conditions["verdict"] == "noisy"
        assert r.reason.startswith("noisy: node node1 stalled its probe for 1151 us at once, 2.3x a quiet node's "
                                   "largest detour (500 us, systems/local.yaml noise_floor) (would otherwise be: ")
    quiet = [lat(value, QUIET)]
    band.apply_baselines(quiet, refs)
    assert quiet[0].status == "fail" and "noisy" not in quiet[0].reason
    low = [lat(value, {"node1": {"efficiency": 0.85, "max_detour_us": 300.0}})]
    band.apply_baselines(low, refs)
    assert low[0].status == "pass" and "efficiency 0.85, below a quiet node's 0.90 (systems/local.yaml " \
                                      "noise_floor) (no earlier probe of this node)" in low[0].reason


def test_band_a_loaded_node_does_not_excuse_a_broken_path(refs: baselines.Baselines) -> None:
    broken = [lat(2.9 * 10, LOADED)]        # 10x: more than a 2.3x stall explains (1 + 2 x 2.3 = 5.6x)
    band.apply_baselines(broken, refs)
    assert broken[0].status == "fail" and "verdict" not in broken[0].conditions
    assert broken[0].reason.endswith("noise_floor), but noise of that level explains at most 5.60x, not 10.00x")


def test_gate_without_history_a_loaded_node_is_noisy(refs: baselines.Baselines, tmp_path: Path) -> None:
    books = {"local": refs}
    (v,) = gate.judge([lat(2.9 * 1.3, LOADED)], None, books)
    assert v.basis == "baseline" and v.verdict == "noisy" and not v.gates
    assert v.reason.startswith("noisy: node node1 stalled its probe for 1151 us at once")
    assert compose.exit_code_of_history([v]) == NEEDS_A_LOOK           # said, never a silent pass
    (v,) = gate.judge([lat(2.9 * 1.3, QUIET)], None, books)
    assert v.verdict == "regression" and compose.exit_code_of_history([v]) == REGRESSION
    with history.open_history(tmp_path / "empty.sqlite") as h:      # a history that knows nothing of it
        (v,) = gate.judge([lat(2.9 * 1.3, LOADED)], h, books)
    assert v.verdict == "noisy"


def test_band_and_gate_say_the_same_sentence(refs: baselines.Baselines) -> None:
    """One function decides both: the same probe gives the same noise sentence in either judge."""
    r = lat(2.9 * 1.3, LOADED)
    band.apply_baselines([r], refs)
    (v,) = gate.judge([lat(2.9 * 1.3, LOADED)], None, {"local": refs})
    first = r.reason.split(" (would otherwise be:")[0]
    assert first == v.reason.split(" (would otherwise be:")[0]
    assert first == noise_verdict.noisy_nodes([{"node": "node1", **LOADED["node1"]}], {}, FLOOR)[0]


def test_the_floor_holds_even_for_a_node_with_a_usual_band() -> None:
    """A node whose own history is noisy (usual 0.86) is still far from a quiet node in this run."""
    usual = {"node1": [0.86, 0.87, 0.85, 0.86, 0.86]}
    entry = [{"node": "node1", "efficiency": 0.86, "max_detour_us": 200.0}]
    (found,) = noise_verdict.outside(entry, usual, FLOOR)
    assert found.sentence == ("noisy: node node1 efficiency 0.86, below a quiet node's 0.90 "
                              "(systems/local.yaml noise_floor)")
    assert noise_verdict.outside(entry, usual, noise_verdict.NoiseFloor(0.80, None)) == []
    name, _ = noise_verdict.reclassify("regression", "x", ["node2"], entry, usual, 1.1, FLOOR)
    assert name == "regression"                       # only the nodes the series ran on count
