"""Best-algorithm map, default vs best, findings beyond the noise, rules-file verification, records."""
import pytest

from mpiregress.families.coll import sweep
from mpiregress.model import results


def row(alg, latency, size=65536, nprocs=64, coll="bcast", nodes=1, dist="block:block"):
    return dict(collective=coll, distribution=dist, nodes=nodes, nprocs=nprocs, algorithm=alg, size=size, latency=latency)


def test_finding_sentence_for_a_default_beyond_the_noise():
    table = sweep.make_table([row("default", 13.8), row("binomial", 10.0), row("pipeline", 30.0)])
    (cell,) = sweep.best_map(table)
    assert cell.best.algorithm == "binomial" and cell.beyond_noise and cell.choice == "binomial"
    assert sweep.findings([cell]) == [
        "bcast, 64 ranks (1 node, block:block), 64 KiB: default 38 % slower than binomial "
        "(13.80 us vs 10.00 us, noise limit 10 %)"]


def test_difference_inside_the_minimum_effect_is_no_finding():
    table = sweep.make_table([row("default", 10.9), row("binomial", 10.0)])
    (cell,) = sweep.best_map(table)
    assert cell.default_slower == pytest.approx(0.09) and not cell.beyond_noise
    assert cell.choice == "default" and sweep.findings([cell]) == []


def test_noise_from_repeated_samples_widens_the_limit():
    # 30 % slower, but the repeats of each spread by 20 %: the limit is 40 %.
    rows = [row("default", v) for v in (11.7, 13.0, 14.3)] + [row("binomial", v) for v in (9.0, 10.0, 11.0)]
    (cell,) = sweep.best_map(sweep.make_table(rows))
    assert cell.threshold == pytest.approx(0.4, abs=1e-6)
    assert cell.default_slower == pytest.approx(0.3) and not cell.beyond_noise
    # The same medians with tight repeats: beyond the noise.
    rows = [row("default", v) for v in (12.9, 13.0, 13.1)] + [row("binomial", v) for v in (9.9, 10.0, 10.1)]
    assert sweep.best_map(sweep.make_table(rows))[0].beyond_noise


def test_map_covers_every_point_and_default_only_points_get_no_cell():
    rows = [row("default", 5, size=s, nprocs=n) for s in (1, 1024) for n in (2, 4)]
    rows += [row("binomial", 4, size=s, nprocs=n) for s in (1, 1024) for n in (2, 4)]
    rows += [row("default", 5, size=2048, nprocs=4)]
    cells = sweep.best_map(sweep.make_table(rows))
    assert [(c.point.nprocs, c.point.size) for c in cells] == [(2, 1), (2, 1024), (4, 1), (4, 1024)]


def test_best_ignores_rules_file_runs_and_breaks_ties_by_name():
    table = sweep.make_table([row("default", 5), row("pipeline", 4), row("binomial", 4), row(sweep.RULES_FILE, 1)])
    assert sweep.best_map(table)[0].best.algorithm == "binomial"


def test_default_vs_best_table_rows():
    rows = sweep.default_vs_best_table(sweep.best_map(sweep.make_table([row("default", 13.8), row("binomial", 10.0)])))
    assert rows == [{"collective": "bcast", "distribution": "block:block", "nodes": 1, "nprocs": 64, "size": 65536,
                     "default_us": 13.8, "best": "binomial", "best_us": 10.0, "default_slower_pct": 38.0,
                     "beyond_noise": True}]


def test_verification_flags_only_points_where_the_rules_file_is_slower_beyond_the_noise():
    rows = [row("default", 10.0, size=1), row(sweep.RULES_FILE, 10.5, size=1),     # +5 %: fine
            row("default", 10.0, size=2), row(sweep.RULES_FILE, 7.0, size=2),      # faster
            row("default", 10.0, size=4), row(sweep.RULES_FILE, 12.5, size=4),     # +25 %: flagged
            row(sweep.RULES_FILE, 9.0, size=8)]                                     # no default: left out
    comparisons = sweep.verify_rules(sweep.make_table(rows))
    assert [(c.point.size, c.flagged) for c in comparisons] == [(1, False), (2, False), (4, True)]
    assert comparisons[2].sentence() == ("bcast, 64 ranks (block:block), 4 B: rules file 12.50 us vs default "
                                         "10.00 us (+25 %, limit 10 %): SLOWER beyond the noise")


def test_records_are_open_series_with_ordered_parameters():
    table = sweep.make_table([row("default", 12.0), row("default", 13.0), row("binomial", 10.0)])
    recs = sweep.records(table, {"system": "local", "partition": "batch", "method": "source"},
                         {"oversubscribed": True})
    assert len(recs) == 2
    binomial = next(r for r in recs if r["parameters"]["algorithm"] == "binomial")
    assert list(binomial["parameters"]) == ["nprocs", "nodes", "distribution", "algorithm", "size"]
    assert binomial["benchmark"] == "osu_bcast" and binomial["metric"] == "latency" and binomial["unit"] == "us"
    default = next(r for r in recs if r["parameters"]["algorithm"] == "default")
    assert default["value"] == 12.5 and default["samples"] == [12.0, 13.0]
    assert default["conditions"] == {"oversubscribed": True} and default["system"] == "local"


@pytest.mark.parametrize("size, text", [(1, "1 B"), (512, "512 B"), (1024, "1 KiB"), (65536, "64 KiB"),
                                        (1048576, "1 MiB"), (1536, "1536 B")])
def test_sizes_read_like_the_findings(size, text):
    assert sweep.format_size(size) == text


def test_records_load_as_results_of_the_series_model():
    table = sweep.make_table([row("default", 12.0), row("binomial", 10.0, size=1024)])
    loaded = results.from_data(sweep.records(table, {"system": "local", "partition": "batch", "method": "source"}))
    keys = sorted(r.key() for r in loaded)
    assert keys[0].benchmark == "osu_bcast" and keys[0].metric == "latency"
    assert keys[0].parameters == (("nprocs", 64), ("nodes", 1), ("distribution", "block:block"),
                                  ("algorithm", "binomial"), ("size", 1024))
    assert {r.size for r in loaded} == {1024, 65536}
