"""``mpiregress ab``: exit codes, one-sentence errors, the A/B section written."""
from __future__ import annotations

import json

import numpy as np

from mpiregress.cli import main


def _records(step=0.0, target_b="x86_64_v4"):
    rng = np.random.default_rng(21)
    out = []
    for method in ("source", "easybuild"):
        for placement in ("same_numa", "cross_socket", "cross_node"):
            nodes = ["node1", "node2"] if placement == "cross_node" else ["node1"]
            for pair in range(6):
                for side in "AB":
                    value = 3.0 * float(np.exp(abs(rng.standard_t(3)) * 0.005))
                    if side == "B":
                        value *= 1 + step
                    out.append(dict(system="local", partition="batch", method=method, placement=placement,
                                    metric="latency", unit="us", value=value, status="pass", ab_side=side,
                                    ab_pair=pair, nodelist=nodes, target=target_b if side == "B" else "x86_64_v4"))
    return out


def _run(tmp_path, records, *extra):
    path = tmp_path / "ab.json"
    path.write_text(json.dumps(records))
    return main(["ab", str(path), "--db", str(tmp_path / "none.sqlite"), *extra])


def test_a_slower_mr_exits_1_with_toolchain_as_the_cause(tmp_path, capsys):
    code = _run(tmp_path, _records(step=0.2), "--markdown", str(tmp_path / "ab.md"), "--html",
                str(tmp_path / "ab.html"))
    out = capsys.readouterr().out
    assert code == 1 and out.count("toolchain: ") == 6
    assert "❌ regression" in (tmp_path / "ab.md").read_text()
    assert '<section class="ab">' in (tmp_path / "ab.html").read_text()


def test_an_unchanged_mr_exits_0(tmp_path, capsys):
    assert _run(tmp_path, _records(step=0.0)) == 0
    assert "exit 0" in capsys.readouterr().out


def test_mismatched_targets_exit_2_with_one_sentence(tmp_path, capsys):
    code = _run(tmp_path, _records(target_b="zen2"))
    err = capsys.readouterr().err
    assert code == 2 and "different targets" in err and "Traceback" not in err and err.count("\n") == 1


def test_a_file_that_is_not_a_list_exits_2(tmp_path, capsys):
    path = tmp_path / "ab.json"
    path.write_text('{"a": 1}')
    assert main(["ab", str(path)]) == 2
    assert "is not a list of result records" in capsys.readouterr().err


def test_a_record_missing_a_field_exits_2(tmp_path, capsys):
    records = _records()
    del records[0]["metric"]
    assert _run(tmp_path, records) == 2
    assert "a record without 'metric'" in capsys.readouterr().err
