"""The microarchitecture guard: archspec decides which build may run on which node,
and `mpiregress guard` turns that into an exit code and a sentence."""
from __future__ import annotations

import subprocess
import sys

import pytest

from mpiregress import cli
from mpiregress.errors import InputError
from mpiregress.model import microarch


def test_skylake_build_refused_on_broadwell_with_a_sentence_naming_both():
    assert not microarch.can_run("skylake_avx512", "broadwell")
    sentence = microarch.check("skylake_avx512", ["broadwell"])
    assert sentence is not None
    assert "skylake_avx512" in sentence and "broadwell" in sentence
    assert "SIGILL" in sentence and "illegal instruction" in sentence


def test_broadwell_build_runs_on_skylake():
    assert microarch.can_run("broadwell", "skylake_avx512")
    assert microarch.check("broadwell", ["skylake_avx512", "broadwell"]) is None


def test_zen2_build_refused_on_broadwell_and_the_reverse():
    assert microarch.check("zen2", ["broadwell"]) is not None
    assert not microarch.can_run("broadwell", "zen2")   # different vendors' lines do not mix


def test_eessi_haswell_build_runs_on_both_iris_generations():
    assert microarch.check("haswell", ["broadwell", "skylake_avx512"]) is None


def test_one_incompatible_node_refuses_the_whole_allocation():
    sentence = microarch.check("skylake_avx512", ["skylake_avx512", "broadwell"])
    assert sentence is not None and "a broadwell node" in sentence


@pytest.mark.parametrize("builds, nodes, best", [
    (["x86_64", "broadwell", "skylake_avx512"], ["skylake_avx512"], "skylake_avx512"),
    (["x86_64", "broadwell", "skylake_avx512"], ["broadwell"], "broadwell"),
    (["x86_64", "broadwell", "skylake_avx512"], ["broadwell", "skylake_avx512"], "broadwell"),
    (["haswell", "broadwell", "zen2"], ["zen2"], "zen2"),
    (["haswell", "x86_64_v3"], ["broadwell"], "haswell"),
    (["skylake_avx512", "zen2"], ["broadwell"], None),
])
def test_best_build_is_the_most_specific_compatible_one(builds, nodes, best):
    index = microarch.best_build(builds, nodes)
    assert (builds[index] if index is not None else None) == best


def test_unknown_target_is_an_input_error():
    with pytest.raises(InputError, match="not a microarchitecture archspec knows"):
        microarch.can_run("broadwel", "broadwell")


def test_cli_ok(capsys):
    assert cli.main(["guard", "--build-target", "broadwell", "--node-target", "skylake_avx512"]) == 0
    assert "ok: a broadwell binary runs on skylake_avx512" in capsys.readouterr().out


def test_cli_refusal_exit_code_and_sentence(capsys):
    assert cli.main(["guard", "--build-target", "skylake_avx512", "--node-target", "broadwell"]) == 2
    err = capsys.readouterr().err
    assert "refusing to run" in err and "skylake_avx512" in err and "broadwell" in err


def test_cli_several_nodes_comma_separated_or_repeated(capsys):
    assert cli.main(["guard", "--build-target", "broadwell", "--node-target", "broadwell,skylake_avx512"]) == 0
    assert cli.main(["guard", "--build-target", "zen2", "--node-target", "zen2", "--node-target", "broadwell"]) == 2


def test_cli_unknown_target_is_an_error_not_a_traceback(capsys):
    assert cli.main(["guard", "--build-target", "pentium9", "--node-target", "broadwell"]) == 2
    err = capsys.readouterr().err
    assert "'pentium9' is not a microarchitecture archspec knows" in err and "Traceback" not in err


def test_cli_as_a_process():
    proc = subprocess.run([sys.executable, "-m", "mpiregress", "guard", "--build-target", "zen2",
                           "--node-target", "broadwell"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert "zen2" in proc.stderr and "broadwell" in proc.stderr
