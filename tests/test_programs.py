"""The project's own MPI programs (checks/src/<name>/) are built by every build method like OSU.

Real: the source method builds the OSU test double and every checks/src/ folder with the
machine's mpicc and archspec's target flags; the manifest records the programs, and the
one written for this test (hello_mpi) runs under a real mpirun against that MPI.
The mechanism is generic: a folder added under checks/src/ is built and recorded with no
Python change (shown with a folder made by the test).
"""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.osu_double import make_tarball
from test_source_build import base_env, mpirun

from mpiregress.builds import common
from mpiregress.errors import InputError
from mpiregress.model import manifest as manifest_mod


def test_every_program_folder_is_found():
    names = [p.name for p in common.program_sources()]
    assert "hello_mpi" in names
    assert all((common.program_sources()[0].parent / n / "Makefile").is_file() for n in names)


def test_binaries_follow_the_metrics():
    from mpiregress.model.names import PT2PT

    assert set(common.BINARIES) == {m.benchmark for m in PT2PT.values()} == {"osu_latency", "osu_bw"}
    assert common.BIN_SUBDIR == manifest_mod.BIN_SUBDIR == Path("libexec/osu-micro-benchmarks/mpi")


def test_source_build_records_and_runs_the_programs(tmp_path: Path):
    tarball, sha = make_tarball(tmp_path / "mirror")
    state = tmp_path / "state"
    proc = subprocess.run([sys.executable, "-m", "mpiregress", "build", "--method", "source",
                           "--source-mirror", str(tmp_path / "mirror"), "--sha256", sha,
                           "--install-root", str(tmp_path / "install"), "--manifest-dir", str(tmp_path / "m")],
                          env=base_env(state), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    m = manifest_mod.read(Path(proc.stdout.strip().splitlines()[-1]))
    assert set(m.programs) == {p.name for p in common.program_sources()}
    hello = m.program("hello_mpi")
    assert hello == tmp_path.resolve() / "install" / "source" / m.target / "programs" / "bin" / "hello_mpi"
    # Same target flags as OSU: the build log shows the program compiled with them.
    log = Path(m.extra["build_log"]).read_text()
    assert f"CFLAGS=-O2 {m.flags}" in log and "==> [program hello_mpi] exit code 0" in log
    done = mpirun(2, hello)
    assert done.returncode == 0, done.stderr
    assert "rank 1 of 2" in done.stdout and "# library: Open MPI" in done.stdout
    # The stack the machine's MPI reports (Debian's OpenMPI has no ucx_info: UCX unknown, not assumed).
    if shutil.which("ucx_info") is None:
        assert m.stack["ucx"] == {"version": "", "from": "not reported by any tool"}
    else:
        assert m.stack["ucx"]["version"] and m.stack["ucx"]["from"] == "ucx_info"
    assert any(c.startswith("pmix:") for c in m.stack["openmpi_components"]["components"])
    with pytest.raises(InputError, match="no program 'fwq_missing'"):
        m.program("fwq_missing")


def test_a_new_program_folder_needs_no_python_change(tmp_path: Path, monkeypatch):
    src = tmp_path / "checks" / "src"
    shutil.copytree(common.program_sources()[0].parent / "hello_mpi", src / "hello_again")
    makefile = src / "hello_again" / "Makefile"
    makefile.write_text(makefile.read_text().replace("$(PREFIX)/bin/hello_mpi", "$(PREFIX)/bin/hello_again"))
    monkeypatch.setenv("MPIREGRESS_STATE_DIR", str(tmp_path / "state"))
    built = common.build_programs(method="source", target="x86_64", cflags="-O2", setup=[],
                                  install_root=tmp_path / "install", log=tmp_path / "log",
                                  sources=common.program_sources(tmp_path))
    assert list(built) == ["hello_again"] and Path(built["hello_again"]).is_file()


def test_a_failing_program_names_itself_and_the_log(tmp_path: Path, monkeypatch):
    src = tmp_path / "checks" / "src" / "broken"
    src.mkdir(parents=True)
    (src / "Makefile").write_text("install:\n\t$(MPICC) $(CFLAGS) -o x missing.c\n")
    monkeypatch.setenv("MPIREGRESS_STATE_DIR", str(tmp_path / "state"))
    with pytest.raises(common.BuildError, match=r"build step 'program broken' failed .* full log: "):
        common.build_programs(method="source", target="x86_64", cflags="-O2", setup=[],
                              install_root=tmp_path / "install", log=tmp_path / "log",
                              sources=common.program_sources(tmp_path))
