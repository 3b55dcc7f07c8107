"""Best-algorithm map and default-vs-best figures render to PNG files (matplotlib Agg)."""
import pytest

from mpiregress.errors import InputError
from mpiregress.families.coll import figures, sweep


def cells():
    rows = []
    for n in (2, 4, 8):
        for size in (1, 1024, 65536):
            rows.append(dict(collective="bcast", distribution="block:block", nodes=1, nprocs=n, algorithm="default",
                             size=size, latency=10.0 + (5 if size == 65536 and n == 8 else 0)))
            rows.append(dict(collective="bcast", distribution="block:block", nodes=1, nprocs=n, algorithm="binomial",
                             size=size, latency=9.5))
            rows.append(dict(collective="bcast", distribution="block:block", nodes=1, nprocs=n, algorithm="pipeline",
                             size=size, latency=9.0 if size == 1 else 12.0))
    return sweep.best_map(sweep.make_table(rows))


def test_best_map_and_default_vs_best_are_png_files(tmp_path):
    best = figures.best_map(cells(), tmp_path / "best.png", ["default", "basic_linear", "pipeline", "binomial"])
    gap = figures.default_vs_best(cells(), tmp_path / "gap.png")
    for path in (best, gap):
        data = path.read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000


def test_one_figure_per_collective_and_distribution(tmp_path):
    mixed = cells()
    other = [sweep.Cell(sweep.Point("scatter", "block:block", 1, 2, 1), c.best, c.default, c.default_slower,
                        c.beyond_noise, c.threshold) for c in mixed[:1]]
    with pytest.raises(InputError, match="one figure per collective and distribution"):
        figures.best_map(mixed + other, tmp_path / "x.png", [])
    with pytest.raises(InputError, match="nothing to compare"):
        figures.default_vs_best([], tmp_path / "y.png")
