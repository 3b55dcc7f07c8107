"""Every real OSU 7.2 output parses or fails with one sentence; collective sweeps keep every size."""
import pytest
from shared import OSU_OUTPUTS, require

from mpiregress.families import osu_output

# Files that are not one benchmark's output (or are failures) and why the parser refuses them.
NOT_RESULTS = {
    "osu_latency_badarg.txt": "header but no data row",
    "osu_latency_one_rank.txt": "exactly two MPI processes",
    "mpirun_rank_sigill.txt": "illegal instruction",
    "ompi_info_coll_tuned_4.1.4.txt": "no OSU benchmark header",
    "osu_bcast_help.txt": "no OSU benchmark header",
    "osu_bw_help.txt": "no OSU benchmark header",
    "osu_latency_help.txt": "no OSU benchmark header",
    "osu_scatter_help.txt": "no OSU benchmark header",
}
COLLECTIVES = {
    "osu_bcast.txt": ("Broadcast Latency Test", 1, 1048576, 1),
    "osu_bcast_full.txt": ("Broadcast Latency Test", 8192, 8192, 4),
    "osu_bcast_alg6_binomial_full.txt": ("Broadcast Latency Test", 4, 1048576, 4),
    "osu_bcast_alg12_invalid.txt": ("Broadcast Latency Test", 8, 8, 1),
    "osu_bcast_coll_base_verbose.txt": ("Broadcast Latency Test", 8, 8, 1),   # the verbose lines around it are ignored
    "osu_scatter.txt": ("Scatter Latency Test", 1, 1048576, 1),
    "osu_scatter_alg2_binomial_np4_full.txt": ("Scatter Latency Test", 1, 65536, 4),
    "osu_allreduce_full.txt": ("Allreduce Latency Test", 8, 1048576, 4),
}


def every_file():
    return sorted(p.name for p in require(OSU_OUTPUTS).glob("*.txt"))


def test_the_lists_cover_every_shared_file():
    known = set(NOT_RESULTS) | set(COLLECTIVES)
    pt2pt = {n for n in every_file() if n not in known}
    assert pt2pt and all(n.startswith(("osu_", "spack_osu_")) for n in pt2pt)


@pytest.mark.parametrize("name", every_file())
def test_every_shared_output_parses_or_says_why(name):
    text = (OSU_OUTPUTS / name).read_text()
    if name in NOT_RESULTS:
        with pytest.raises(osu_output.OsuOutputError, match=NOT_RESULTS[name]):
            osu_output.parse(text)
        return
    out = osu_output.parse(text)
    assert out.version == "7.2" and out.rows
    for values in out.rows.values():
        assert len(values) == len(out.columns)


@pytest.mark.parametrize("name", sorted(COLLECTIVES))
def test_collective_outputs_keep_every_size_of_their_sweep(name):
    title, low, high, ncols = COLLECTIVES[name]
    out = osu_output.parse((OSU_OUTPUTS / name).read_text())
    assert out.title == title and len(out.columns) == ncols
    assert list(out.rows) == osu_output.swept_sizes(low, high)
    assert osu_output.sweep_gap(out, low, high) is None


def test_full_columns_are_found_by_name():
    out = osu_output.parse((OSU_OUTPUTS / "osu_bcast_alg6_binomial_full.txt").read_text())
    assert out.value(1048576, osu_output.column_index(out, "Max Latency")) == pytest.approx(97.08)
    assert out.value(16384, osu_output.column_index(out, "Iterations")) == 100
    short = osu_output.parse((OSU_OUTPUTS / "osu_bcast.txt").read_text())
    with pytest.raises(osu_output.OsuOutputError, match="no 'Min Latency' column .*run it with -f"):
        osu_output.column_index(short, "Min Latency")


def test_missing_sizes_are_named_and_measured_ones_kept():
    out = osu_output.parse((OSU_OUTPUTS / "osu_bcast_alg6_binomial_full.txt").read_text())
    assert osu_output.missing_sizes(out, 1, 1048576) == [1, 2]
    gap = osu_output.sweep_gap(out, 1, 1048576)
    assert gap == "OSU Broadcast Latency Test printed 19 of the 21 message sizes asked (1:1048576); missing: 1, 2"
    assert len(out.rows) == 19 and out.value(4) == pytest.approx(0.17)


def test_truncated_sweep_keeps_the_rows_before_the_cut():
    text = (OSU_OUTPUTS / "osu_allreduce_full.txt").read_text()
    cut = text[:text.index("262144")]
    out = osu_output.parse(cut)
    assert list(out.rows)[-1] == 131072
    assert osu_output.sweep_gap(out, 8, 1048576).endswith("missing: 262144, 524288, 1048576")


@pytest.mark.parametrize("text", ["1:", "abc", "8:4", "1:2:3"])
def test_bad_size_range_is_one_sentence(text):
    with pytest.raises(osu_output.OsuOutputError, match="message size range"):
        osu_output.parse_size_range(text)


def test_swept_sizes_follow_osu():
    assert osu_output.swept_sizes(1, 16) == [1, 2, 4, 8, 16]
    assert osu_output.swept_sizes(0, 4) == [0, 1, 2, 4]
    assert osu_output.swept_sizes(3, 20) == [3, 6, 12]
