"""The ``source`` build method end to end, on the OSU test double.

The double goes through the product path real OSU takes: its release-style
tarball is handed to ``mpiregress build --method source`` (real configure, make,
make install with mpicc), and its binaries run under a real ``mpirun -np 2``.
Network: loopback only (a download test serves the tarball from 127.0.0.1).
"""
from __future__ import annotations

import functools
import hashlib
import http.server
import io
import os
import re
import shutil
import socket
import subprocess
import sys
import tarfile
import threading
from dataclasses import dataclass
from pathlib import Path

import archspec.cpu
import pytest
import yaml
from helpers.osu_double import TARBALL_NAME, make_tarball
from shared import OSU_OUTPUTS, require

from mpiregress.model import manifest as manifest_mod
from mpiregress.model import microarch, toolchain

# OpenMPI is a test dependency (ci/setup.sh installs it): its absence fails, never skips.
assert shutil.which("mpicc") and shutil.which("mpirun"), \
    "mpicc/mpirun not on PATH: run ci/setup.sh (installs openmpi-bin and libopenmpi-dev)"

OFFICIAL_SHA = toolchain.load(toolchain.default_path()).osu["sha256"]
_CLEAN_VARS = ("OSU_SOURCE_MIRROR", "OSU_SHA256", "MPIREGRESS_STATE_DIR", "MPIREGRESS_MANIFEST_DIR",
               "MPIREGRESS_INSTALL_ROOT", "CC", "CFLAGS", "OSU_DOUBLE_ILLEGAL_INSTRUCTION")


def fixture_text(name: str) -> str:
    """A real OSU 7.2 output from shared/osu-7.2-outputs/ (missing = failure, as in the other tests)."""
    return require(OSU_OUTPUTS / name).read_text()


def base_env(state: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _CLEAN_VARS}
    env.update(MPIREGRESS_STATE_DIR=str(state), OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    env.update(extra)
    return env


def mpiregress_build(args: list[str], state: Path, **env: str) -> subprocess.CompletedProcess:
    """``mpiregress build --method source ARGS`` as a CI job runs it."""
    return subprocess.run([sys.executable, "-m", "mpiregress", "build", "--method", "source", *args],
                          env=base_env(state, **env), capture_output=True, text=True, timeout=600)


def mpirun(np: int, binary: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    cmd = ["mpirun", "-np", str(np), "--oversubscribe", "--bind-to", "none", str(binary), *args]
    run_env = {k: v for k, v in os.environ.items() if k not in _CLEAN_VARS}
    run_env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", **env)
    return subprocess.run(cmd, env=run_env, capture_output=True, text=True, timeout=180)


@dataclass
class DoubleBuild:
    root: Path
    mirror: Path
    tarball: Path
    sha: str
    state: Path
    install_root: Path
    manifest_dir: Path
    proc: subprocess.CompletedProcess
    manifest: manifest_mod.Manifest

    def args(self, *more: str) -> list[str]:
        return ["--install-root", str(self.install_root), "--manifest-dir", str(self.manifest_dir), *more]

    def binary(self, name: str) -> Path:
        return self.manifest.binary(name)


@pytest.fixture(scope="module")
def double_build(tmp_path_factory: pytest.TempPathFactory) -> DoubleBuild:
    """One real build of the double through ``mpiregress build``, shared by the module's tests."""
    root = tmp_path_factory.mktemp("source-build")
    tarball, sha = make_tarball(root / "mirror")
    state, install_root, manifest_dir = root / "state", root / "install", root / "manifests"
    proc = mpiregress_build(["--source-mirror", str(root / "mirror"), "--sha256", sha,
                             "--install-root", str(install_root), "--manifest-dir", str(manifest_dir)], state)
    assert proc.returncode == 0, proc.stderr
    path = Path(proc.stdout.strip().splitlines()[-1])
    return DoubleBuild(root, root / "mirror", tarball, sha, state, install_root, manifest_dir, proc,
                       manifest_mod.read(path))


def free_loopback_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def toolchain_with_url(tmp_path: Path, url: str) -> Path:
    """A copy of toolchains/2023b.yaml whose osu.url points at ``url`` (loopback only)."""
    data = yaml.safe_load(toolchain.default_path().read_text())
    data["osu"]["url"] = url
    path = tmp_path / "2023b.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


# --- the build and its manifest ---------------------------------------------------

def test_build_writes_a_truthful_manifest(double_build: DoubleBuild) -> None:
    m = double_build.manifest
    target = microarch.host_target()
    assert (m.method, m.toolchain, m.osu_version, m.target) == ("source", "2023b", "7.2", target)
    assert Path(m.path).name == f"source-{target}.json"
    assert m.prefix == str((double_build.install_root / "source" / target).resolve())
    assert m.bin_dir == str(Path(m.prefix) / "libexec" / "osu-micro-benchmarks" / "mpi")
    for name in ("osu_latency", "osu_bw"):
        assert os.access(Path(m.bin_dir) / "pt2pt" / name, os.X_OK)
    assert not (Path(m.prefix) / "bin").exists()   # OSU 7.2 layout: libexec only

    # The compiler is the one behind mpicc, and the flags are archspec's for it.
    local_version = subprocess.run(["mpicc", "-dumpfullversion", "-dumpversion"], capture_output=True,
                                   text=True, check=True).stdout.strip()
    assert m.compiler["name"] == "gcc" and m.compiler["version"] == local_version
    assert m.flags == archspec.cpu.TARGETS[target].optimization_flags("gcc", local_version)
    assert "native" not in m.flags
    if shutil.which("ompi_info"):
        ompi = subprocess.run(["ompi_info", "--version"], capture_output=True, text=True).stdout
        assert m.mpi["name"] == "openmpi" and f"v{m.mpi['version']}" in ompi
    assert m.build_host["hostname"] == manifest_mod.host_record()["hostname"]
    assert m.build_host["target"] == target

    # The double is not the official tarball: accepted by override, and said so.
    assert m.sha256 == double_build.sha and m.sha256_official is False
    assert any("site tarball" in note and OFFICIAL_SHA in note for note in m.notes)
    # The local system is not the 2023b toolchain; the manifest must not pretend.
    if m.compiler["version"] != "13.2.0":
        assert any(m.compiler["version"] in n and "13.2.0" in n and "not a 2023b build" in n for n in m.notes)
    if m.mpi["version"] != "4.1.6":
        assert any(m.mpi["version"] in n and "4.1.6" in n for n in m.notes)


def test_override_prints_a_loud_banner(double_build: DoubleBuild) -> None:
    err = double_build.proc.stderr
    assert "WARNING" in err and "NOT the official release" in err
    assert double_build.sha in err and OFFICIAL_SHA in err


def test_flags_reach_configure_and_the_compiler(double_build: DoubleBuild) -> None:
    log = Path(double_build.manifest.extra["build_log"]).read_text()
    flags = double_build.manifest.flags
    assert f"'CFLAGS=-O2 {flags}'" in log and "CC=mpicc" in log and "CXX=mpicxx" in log
    compile_lines = [line for line in log.splitlines() if line.startswith("mpicc ")]
    assert compile_lines and all(f"-O2 {flags}" in line for line in compile_lines)
    assert double_build.manifest.extra["configure"][-1] == f"--prefix={double_build.manifest.prefix}"


def test_same_build_is_reused(double_build: DoubleBuild) -> None:
    before = Path(double_build.manifest.path).read_text()
    binary_mtime = double_build.binary("osu_latency").stat().st_mtime_ns
    proc = mpiregress_build(["--source-mirror", str(double_build.mirror), "--sha256", double_build.sha,
                             *double_build.args()], double_build.state)
    assert proc.returncode == 0, proc.stderr
    assert "reusing the existing source build" in proc.stderr and "[configure]" not in proc.stderr
    assert proc.stdout.strip() == double_build.manifest.path
    assert Path(double_build.manifest.path).read_text() == before
    assert double_build.binary("osu_latency").stat().st_mtime_ns == binary_mtime


def test_mirror_and_sha_from_the_environment(double_build: DoubleBuild) -> None:
    proc = mpiregress_build(double_build.args(), double_build.state,
                            OSU_SOURCE_MIRROR=str(double_build.mirror), OSU_SHA256=double_build.sha)
    assert proc.returncode == 0, proc.stderr
    assert "reusing the existing source build" in proc.stderr
    assert str(double_build.tarball) in proc.stderr   # the banner names the file the env var led to


def test_rebuild_builds_again(double_build: DoubleBuild) -> None:
    proc = mpiregress_build(["--source-mirror", str(double_build.mirror), "--sha256", double_build.sha,
                             "--rebuild", *double_build.args()], double_build.state)
    assert proc.returncode == 0, proc.stderr
    assert "reusing" not in proc.stderr
    assert "[configure]" in proc.stderr and "[make install]" in proc.stderr
    assert manifest_mod.read(Path(proc.stdout.strip())).sha256 == double_build.sha


def test_a_changed_input_builds_again_and_the_manifest_records_the_mpi_it_used(double_build: DoubleBuild,
                                                                                tmp_path: Path) -> None:
    """Issue 33: the input hash (toolchain file, tarball, target, flags, compiler, MPI) decides reuse, and the
    manifest records what the MPI really can do (its ompi_info), not a guess."""
    changed = tmp_path / "2023b.yaml"
    changed.write_text(toolchain.default_path().read_text() + "\n# a site's note\n")
    common = ["--source-mirror", str(double_build.mirror), "--sha256", double_build.sha, "--toolchain", str(changed),
              *double_build.args()]
    proc = mpiregress_build(common, double_build.state)
    assert proc.returncode == 0, proc.stderr
    assert "the inputs changed since" in proc.stderr and "[configure]" in proc.stderr
    again = mpiregress_build(common, double_build.state)
    assert again.returncode == 0 and "reusing the existing source build" in again.stderr
    m = manifest_mod.read(Path(again.stdout.strip()))
    assert len(m.extra["input_hash"]) == 64
    assert "ob1" in m.extra["mpi_capabilities"]["components"]["pml"]


def test_partition_target_builds_with_archspec_flags_not_native(double_build: DoubleBuild, tmp_path: Path) -> None:
    # Cross-target: a broadwell build compiled here says -march=broadwell, whatever this host is.
    proc = mpiregress_build(["--system", "iris", "--partition", "broadwell", "--source-mirror",
                             str(double_build.mirror), "--sha256", double_build.sha,
                             "--install-root", str(tmp_path / "install"), "--manifest-dir", str(tmp_path / "m")],
                            tmp_path / "state")
    assert proc.returncode == 0, proc.stderr
    m = manifest_mod.read(tmp_path / "m" / "source-broadwell.json")
    assert m.target == "broadwell" and "-march=broadwell" in m.flags
    assert m.extra["system"] == "iris" and m.extra["partition"] == "broadwell"
    log = Path(m.extra["build_log"]).read_text()
    assert "-march=native" not in log and "-march=broadwell" in log


def test_target_and_partition_are_exclusive(tmp_path: Path) -> None:
    proc = mpiregress_build(["--target", "zen2", "--system", "aion", "--partition", "batch"], tmp_path)
    assert proc.returncode == 2 and "either --target or --system/--partition" in proc.stderr


# --- the tarball and its checksum ------------------------------------------------------

def test_sha_mismatch_names_both_hashes_and_the_file(double_build: DoubleBuild, tmp_path: Path) -> None:
    proc = mpiregress_build(["--source-mirror", str(double_build.mirror),
                             "--install-root", str(tmp_path / "i"), "--manifest-dir", str(tmp_path / "m")],
                            tmp_path / "state")
    assert proc.returncode == 2
    assert "sha256 mismatch" in proc.stderr and OFFICIAL_SHA in proc.stderr
    assert double_build.sha in proc.stderr and str(double_build.tarball) in proc.stderr
    assert "Traceback" not in proc.stderr and not (tmp_path / "m").exists()


def test_wrong_override_is_refused(double_build: DoubleBuild, tmp_path: Path) -> None:
    wrong = "0" * 64
    proc = mpiregress_build(["--source-mirror", str(double_build.mirror), "--sha256", wrong,
                             "--manifest-dir", str(tmp_path / "m")], tmp_path / "state")
    assert proc.returncode == 2 and "sha256 mismatch" in proc.stderr and wrong in proc.stderr
    proc = mpiregress_build(["--source-mirror", str(double_build.mirror), "--sha256", "not-hex"], tmp_path)
    assert proc.returncode == 2 and "64 hexadecimal digits" in proc.stderr


def test_no_tarball_and_no_network_is_one_sentence(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_loopback_port()}/{TARBALL_NAME}"   # refused at once, never leaves the host
    proc = mpiregress_build(["--toolchain", str(toolchain_with_url(tmp_path, url)),
                             "--manifest-dir", str(tmp_path / "m")], tmp_path / "state")
    assert proc.returncode == 2
    error = [line for line in proc.stderr.splitlines() if line.startswith("mpiregress build: error:")]
    assert len(error) == 1 and "Traceback" not in proc.stderr
    sentence = error[0]
    for needed in (TARBALL_NAME, OFFICIAL_SHA, "--source-mirror", "OSU_SOURCE_MIRROR", url):
        assert needed in sentence


def test_mirror_without_the_tarball(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    proc = mpiregress_build(["--source-mirror", str(tmp_path / "empty")], tmp_path / "state")
    assert proc.returncode == 2
    assert f"{tmp_path / 'empty'} has no {TARBALL_NAME}" in proc.stderr and OFFICIAL_SHA in proc.stderr


def test_download_over_loopback_fills_the_cache(double_build: DoubleBuild, tmp_path: Path) -> None:
    handler = functools.partial(_QuietHandler, directory=str(double_build.mirror))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/{TARBALL_NAME}"
        tc = toolchain_with_url(tmp_path, url)
        proc = mpiregress_build(["--toolchain", str(tc), "--sha256", double_build.sha, *double_build.args()],
                                tmp_path / "state")
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
    assert proc.returncode == 0, proc.stderr
    assert f"downloading {url}" in proc.stderr
    cached = tmp_path / "state" / "sources" / TARBALL_NAME
    assert cached.read_bytes() == double_build.tarball.read_bytes()
    assert not list(cached.parent.glob("*.part"))
    # The server is gone: the cache alone now serves the build.
    proc = mpiregress_build(["--toolchain", str(tc), "--sha256", double_build.sha, *double_build.args()],
                            tmp_path / "state")
    assert proc.returncode == 0 and "downloading" not in proc.stderr


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:   # keep pytest output clean
        pass


def test_failing_step_names_the_step_and_the_log(tmp_path: Path) -> None:
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    script = b"#!/bin/sh\necho 'checking for MPI... boom: no MPI here'\nexit 1\n"
    with tarfile.open(mirror / TARBALL_NAME, "w:gz") as tar:
        info = tarfile.TarInfo("osu-micro-benchmarks-7.2/configure")
        info.size, info.mode = len(script), 0o755
        tar.addfile(info, io.BytesIO(script))
    sha = hashlib.sha256((mirror / TARBALL_NAME).read_bytes()).hexdigest()
    proc = mpiregress_build(["--source-mirror", str(mirror), "--sha256", sha,
                             "--manifest-dir", str(tmp_path / "m")], tmp_path / "state")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "build step 'configure' failed" in proc.stderr
    assert str(tmp_path / "state" / "build") in proc.stderr and "build.log" in proc.stderr
    assert "boom: no MPI here" in proc.stderr   # the last lines of the log are shown
    assert not (tmp_path / "m").exists()


def test_double_configure_contract(double_build: DoubleBuild, tmp_path: Path) -> None:
    with tarfile.open(double_build.tarball) as tar:
        tar.extractall(tmp_path, filter="data") if hasattr(tarfile, "data_filter") else tar.extractall(tmp_path)
    src = tmp_path / "osu-micro-benchmarks-7.2"
    proc = subprocess.run(["./configure", "CC=mpicc", "CXX=mpicxx", "CFLAGS=-O1 -DX=a/b&c", "--enable-cuda",
                           "--with-foo=bar", "--prefix", str(tmp_path / "p")], cwd=src, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "unrecognized options" in proc.stderr and "--enable-cuda" in proc.stderr
    makefile = (src / "Makefile").read_text()
    assert "CFLAGS = -O1 -DX=a/b&c" in makefile and f"prefix = {tmp_path / 'p'}" in makefile
    proc = subprocess.run(["./configure", "CC=mpicc", "--prefix=relative/dir"], cwd=src, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 1 and "absolute directory name" in proc.stderr
    proc = subprocess.run(["./configure", "CC=true-but-not-a-compiler", "--prefix=/tmp/x"], cwd=src,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1 and "cannot compile and link an MPI program" in proc.stderr


# --- the double's binaries under a real mpirun ------------------------------------------

ROW = re.compile(r"^(\d+) +(\d+\.\d\d)$")


def check_rows(output: str, header_fixture: str, sizes: list[int]) -> list[float]:
    """Header byte-identical to real OSU 7.2's; each row exactly '%-10d%18.2f'; return the values."""
    header = fixture_text(header_fixture).splitlines(keepends=True)[:3]
    lines = output.splitlines(keepends=True)
    assert lines[:3] == header
    assert len(lines) == 3 + len(sizes), output
    values = []
    for line, size in zip(lines[3:], sizes):
        match = ROW.match(line.rstrip("\n"))
        assert match and line.endswith("\n"), line
        value = float(match.group(2))
        assert line == f"{size:<10d}{value:18.2f}\n"
        values.append(value)
    return values


def test_latency_output_matches_real_osu(double_build: DoubleBuild) -> None:
    proc = mpirun(2, double_build.binary("osu_latency"), "-m", "8192:8192", "-x", "10", "-i", "200")
    assert proc.returncode == 0, proc.stderr
    (latency,) = check_rows(proc.stdout, "osu_latency.txt", [8192])
    assert latency > 0
    real_row = fixture_text("osu_latency.txt").splitlines()[3]
    assert len(proc.stdout.splitlines()[3]) == len(real_row)


def test_bandwidth_output_matches_real_osu(double_build: DoubleBuild) -> None:
    proc = mpirun(2, double_build.binary("osu_bw"), "-m", "1048576:1048576", "-x", "2", "-i", "10")
    assert proc.returncode == 0, proc.stderr
    (bandwidth,) = check_rows(proc.stdout, "osu_bw.txt", [1048576])
    assert bandwidth > 0


def test_size_sweep_doubles_like_osu(double_build: DoubleBuild) -> None:
    proc = mpirun(2, double_build.binary("osu_latency"), "-m", "64", "-x", "1", "-i", "5", "-c")
    assert proc.returncode == 0, proc.stderr   # -c is an OSU option the double ignores
    check_rows(proc.stdout, "osu_latency.txt", [1, 2, 4, 8, 16, 32, 64])
    proc = mpirun(2, double_build.binary("osu_bw"), "-m", "4096:", "-x", "1", "-i", "2", "-W", "4")
    assert proc.returncode == 0, proc.stderr
    check_rows(proc.stdout, "osu_bw.txt", [4096 << k for k in range(11)])   # up to the 4 MiB default


def test_unparsable_size_prints_header_only_and_exits_0(double_build: DoubleBuild) -> None:
    proc = mpirun(2, double_build.binary("osu_latency"), "-m", "abc")
    assert proc.returncode == 0
    assert proc.stdout == fixture_text("osu_latency_badarg.txt")


def test_one_rank_is_refused(double_build: DoubleBuild) -> None:
    proc = mpirun(1, double_build.binary("osu_latency"), "-m", "8")
    assert proc.returncode != 0
    assert "This test requires exactly two processes" in proc.stderr
    assert "This test requires exactly two processes" in fixture_text("osu_latency_one_rank.txt")


def test_illegal_instruction_hook_is_a_real_sigill(double_build: DoubleBuild) -> None:
    proc = mpirun(2, double_build.binary("osu_latency"), "-m", "8", OSU_DOUBLE_ILLEGAL_INSTRUCTION="1")
    assert proc.returncode != 0
    output = proc.stdout + proc.stderr
    assert "exited on signal 4 (Illegal instruction)" in output
    assert "exited on signal 4 (Illegal instruction)" in fixture_text("mpirun_rank_sigill.txt")


def test_tarball_is_reproducible(tmp_path: Path) -> None:
    first = make_tarball(tmp_path / "a")[1]
    assert make_tarball(tmp_path / "b")[1] == first
    with tarfile.open(tmp_path / "a" / TARBALL_NAME) as tar:
        names = tar.getnames()
        assert all(n.startswith("osu-micro-benchmarks-7.2") for n in names)
        assert tar.getmember("osu-micro-benchmarks-7.2/configure").mode & 0o111


def test_a_build_steps_temporary_files_stay_in_the_builds_own_folder(tmp_path: Path) -> None:
    """gcc writes its cc*.s files under TMPDIR; a step killed mid-compile left them in /tmp."""
    from mpiregress.builds import common

    log = tmp_path / "build" / "build.log"
    common.run_logged(["bash", "-c", "mktemp"], step="probe", cwd=tmp_path, log=log,
                      env={"PATH": os.environ["PATH"], "TMPDIR": "/tmp"})
    made = [line for line in log.read_text().splitlines() if line.startswith("/")]
    assert len(made) == 1 and Path(made[0]).parent == tmp_path / "build" / "tmp", log.read_text()
