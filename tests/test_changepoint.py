"""Change points: found at the injected step, naming its commit and toolchain; quiet on noise and outliers."""
from __future__ import annotations

import numpy as np
import pytest

from mpiregress import changepoint, history
from mpiregress.history import RunPoint
from mpiregress.names import METRICS
from mpiregress.results import Result, pt2pt, pt2pt_key

KEY = pt2pt_key("aion", "batch", "eessi", "same_numa", "latency")


def noisy_series(n=52, step_at=None, step=0.0, sigma=0.01, seed=1, base=0.58):
    rng = np.random.default_rng(seed)
    values = base * np.exp(rng.normal(0, sigma, n))
    if step_at is not None:
        values[step_at:] *= 1 + step
    return values.tolist()


def runs_of(values, toolchain_from=None):
    return [RunPoint(run_id=f"w{i:02d}", time=f"2025-01-01T00:00:{i:02d}+00:00", commit=f"c{i:02d}",
                     pipeline=f"p{i}", toolchain="2024a" if toolchain_from is not None and i >= toolchain_from
                     else "2023b", kind="schedule", accepted=True, nodelist="", samples=(v,))
            for i, v in enumerate(values)]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_five_percent_step_is_found_where_it_was_injected(seed):
    assert changepoint.detect(noisy_series(step_at=30, step=0.05, seed=seed)) == [30]


@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5])
def test_pure_noise_has_no_change_point(seed):
    assert changepoint.detect(noisy_series(seed=seed, sigma=0.02)) == []


def test_one_slow_week_is_not_a_change_point():
    values = noisy_series(seed=4)
    values[20] *= 1.5
    assert changepoint.detect(values) == []


def test_a_negligible_shift_is_not_reported():
    assert changepoint.detect(noisy_series(step_at=26, step=0.01, sigma=0.001)) == []


def test_the_change_point_names_its_commit_range_and_toolchain():
    values = noisy_series(step_at=40, step=-0.06, seed=7)
    [cp] = changepoint.series_changepoints(KEY, runs_of(values, toolchain_from=40))
    assert cp.index == 40 and not cp.worse and cp.change == pytest.approx(-0.06, abs=0.01)
    assert cp.commits == "c39..c40" and cp.toolchain_changed
    sentence = cp.sentence()
    assert "c39..c40" in sentence and "toolchain 2023b -> 2024a" in sentence and "better" in sentence


def test_a_bandwidth_drop_is_worse():
    values = noisy_series(step_at=35, step=-0.7, base=15000.0, seed=2)
    [cp] = changepoint.series_changepoints(pt2pt_key("iris", "skylake", "eessi", "same_numa", "bandwidth"), runs_of(values))
    assert cp.worse and cp.index == 35 and "worse" in cp.sentence()


def test_scan_reads_every_accepted_series_of_the_history(tmp_path):
    spec = METRICS["latency"]
    values = noisy_series(n=30, step_at=18, step=0.10, seed=3)
    with history.open_history(tmp_path / "h.sqlite") as db:
        for i, v in enumerate(values):
            db.import_results([pt2pt("aion", "batch", "eessi", "same_numa", "latency", v, samples=[v, v * 1.001],
                                      toolchain="2023b", time=f"2025-{1 + i // 4:02d}-{1 + 7 * (i % 4):02d}",
                                      commit=f"sha{i}")], run_id=f"w{i}")
        found = changepoint.scan(db)
        assert list(found) == [KEY]
        [cp] = found[KEY]
        assert cp.run_after.commit == "sha18" and cp.run_before.commit == "sha17" and cp.worse
        assert changepoint.scan(db, since="2025-12-01") == {}
