"""The sequential A/B run's rounds (run/ab/looks.ab_more_rounds): who gets more pairs, and that the rounds end.

The rounds here are the judge's real decisions on samples drawn in the test; only the measuring of a round
(``ab_round``: ReFrame on Slurm, exercised by tests/test_ab_run.py) is replaced by drawing its pairs.
"""
from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from mpiregress.model.results import pt2pt
from mpiregress.run.ab import looks


class Steps:
    """What the run's folder is told (``folder.step``)."""

    def __init__(self) -> None:
        self.said: list[str] = []

    def step(self, sentence: str) -> None:
        self.said.append(sentence)


def sample(rng: np.random.Generator, placement: str, pair: int, side: str, look: int, spread: float):
    return pt2pt("local", "batch", "source", placement, "bandwidth", 1000 * math.exp(rng.normal(0, spread)),
                 nodelist=["node1", "node2"] if placement == "cross_node" else ["node1"],
                 conditions=dict(ab_side=side, ab_pair=pair, ab_look=look, ab_max_pairs=12,
                                 ab_position=2 * pair + (side == "B")))


def run_rounds(monkeypatch, spread: dict[str, float], measures: bool = True):
    rng = np.random.default_rng(7)
    calls: list[tuple[int, int, int, tuple[str, ...]]] = []

    def drawn_round(opts, env, folder, keys, partition, nodes, look, first, count, round_dir, toolchain_name):
        calls.append((look, first, count, tuple(sorted(k.placement for k in keys))))
        if not measures:
            return []
        return [sample(rng, k.placement, p, s, look, spread[k.placement]) for k in keys
                for p in range(first, first + count) for s in "AB"]

    monkeypatch.setattr(looks, "ab_round", drawn_round)
    first = [sample(rng, placement, p, s, 1, spread[placement]) for placement in spread for p in range(4)
             for s in "AB"]
    opts = SimpleNamespace(system="local", ab_pairs=None, ab_max_pairs=None, report_dir=Path("unused"))
    loaded, notes = looks.ab_more_rounds(first, opts, ["source"], {}, Steps(), "2023b")
    return loaded, notes, calls


def test_a_series_short_of_its_target_gets_every_look_up_to_the_budget_and_no_further(monkeypatch):
    # Cross-node bandwidth scattering by 150 % a pair: short of the local 100 % target at every look.
    loaded, notes, calls = run_rounds(monkeypatch, {"cross_node": 1.5})
    assert [(look, first, count) for look, first, count, _ in calls] == [(2, 4, 2), (3, 6, 2), (4, 8, 2), (5, 10, 2)]
    pairs = {r.conditions["ab_pair"] for r in loaded}
    assert pairs == set(range(12)) and len(notes) == 4


def test_a_clear_series_gets_no_round(monkeypatch):
    # Four quiet series of one metric: each finds 12 residuals of the others (the cross-node one's borrowed),
    # enough to be judged at 4 pairs.
    _, notes, calls = run_rounds(monkeypatch, {p: 0.001 for p in ("same_numa", "cross_numa", "cross_socket",
                                                                  "cross_node")})
    assert calls == [] and notes == []


def test_a_quiet_series_alone_in_its_class_gets_every_look_its_own_signed_ranks_need(monkeypatch):
    # Nothing to learn its jitter from: 4 pairs can show no effect at all, so it is short of any target.
    loaded, notes, calls = run_rounds(monkeypatch, {"same_numa": 0.001})
    # At 10 pairs its signed ranks reach the 1 % over these looks (at 8 they cannot), and 0.1 % jitter then
    # lets them see the local 15 % target: the rounds end there, short of the budget of 12.
    assert [(look, first, count) for look, first, count, _ in calls] == [(2, 4, 2), (3, 6, 2), (4, 8, 2)]
    assert {r.conditions["ab_pair"] for r in loaded} == set(range(10))


def test_rounds_that_measure_nothing_end_the_run_instead_of_being_asked_for_again(monkeypatch):
    loaded, _, calls = run_rounds(monkeypatch, {"cross_node": 1.5}, measures=False)
    assert [(look, first) for look, first, _, _ in calls] == [(2, 4)]
    assert {r.conditions["ab_pair"] for r in loaded} == set(range(4))


@pytest.mark.parametrize("seed", range(3))
def test_every_series_ends_with_whole_looks_of_the_schedule(monkeypatch, seed):
    """Whatever the pairs: a series' pairs are one of the schedule's look sizes, never beyond the budget, and a
    series is given a look only once."""
    rng_spread = np.random.default_rng(seed)
    spread = {p: float(rng_spread.uniform(0.01, 1.5)) for p in ("same_numa", "cross_node")}
    loaded, _, calls = run_rounds(monkeypatch, spread)
    for placement in spread:
        mine = [r for r in loaded if r.parameters["placement"] == placement]
        assert len({r.conditions["ab_pair"] for r in mine}) in (4, 6, 8, 10, 12)
        looks_given = [look for look, _, _, who in calls if placement in who]
        assert looks_given == sorted(set(looks_given))
