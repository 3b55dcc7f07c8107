"""The easybuild method builds for real on the local system: the host's GCC and OpenMPI offered to a
real EasyBuild as module files written from systems/local.yaml, the project's easyconfig at that
toolchain version, the OSU test double's tarball from the source mirror (accepted by --sha256, as
a site tarball), and a manifest read back from what EasyBuild and Lmod really produced.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from helpers.osu_double import make_tarball
from shared import REPO

from mpiregress.builds import common, host_toolchain
from mpiregress.builds import easybuild as eb
from mpiregress.errors import InputError
from mpiregress.model import manifest as manifest_mod
from mpiregress.model import microarch, systems

assert shutil.which("mpicc") and shutil.which("mpirun"), "mpicc/mpirun not on PATH: run ci/setup.sh"
assert shutil.which("eb"), "EasyBuild's eb is not on PATH: run ci/setup.sh and source ci/env.sh (a pinned " \
    "dependency: its absence fails, never skips)"

LOCAL = host_toolchain.for_system("local")
_CLEAN = ("OSU_SOURCE_MIRROR", "OSU_SHA256", "MPIREGRESS_MANIFEST_DIR", "MPIREGRESS_INSTALL_ROOT", "MODULEPATH",
          "LOADEDMODULES", "_LMFILES_")


def _env(state: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _CLEAN}
    env.update(MPIREGRESS_STATE_DIR=str(state), OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    return env


def _build(root: Path, sha: str, *more: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mpiregress", "build", "--method", "easybuild", "--system", "local",
                           "--source-mirror", str(root / "mirror"), "--sha256", sha,
                           "--install-root", str(root / "install"), "--manifest-dir", str(root / "manifests"), *more],
                          env=_env(root / "state"), capture_output=True, text=True, timeout=600, cwd=REPO)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """One real `eb` build of the double for the local system, shared by the module's tests."""
    root = tmp_path_factory.mktemp("eb-local")
    _, sha = make_tarball(root / "mirror")
    done = _build(root, sha)
    assert done.returncode == 0, done.stderr[-3000:]
    return root, sha, done, manifest_mod.read(Path(done.stdout.strip().splitlines()[-1]))


def test_the_local_system_declares_the_hosts_toolchain():
    assert LOCAL is not None and "easybuild" in systems.get("local").methods
    assert (LOCAL.compiler_module, LOCAL.mpi_module, LOCAL.toolchain_module) == (
        f"GCC/{LOCAL.compiler['version']}", f"OpenMPI/{LOCAL.mpi['version']}-GCC-{LOCAL.compiler['version']}",
        f"gompi/{LOCAL.eb_version}")
    # The data says what this host has (the build checks it too): Debian 12's GCC and OpenMPI.
    host_toolchain.check_host(LOCAL, common.detect_compiler("mpicc"), common.detect_mpi())


def test_real_eb_build_of_the_double_and_its_manifest(built):
    root, sha, done, m = built
    module = f"OSU-Micro-Benchmarks/7.2-gompi-{LOCAL.eb_version}"
    assert m.method == "easybuild" and m.extra["module"] == module
    install = (root / "install" / "easybuild" / m.target).resolve()
    assert Path(m.prefix) == install / "software" / "OSU-Micro-Benchmarks" / f"7.2-gompi-{LOCAL.eb_version}"
    # optarch: archspec's flags for this host and the host's GCC, and EasyBuild really compiled with them.
    assert m.target == microarch.host_target()
    assert m.flags == common.target_flags(m.target, LOCAL.compiler) and "native" not in m.flags
    assert m.flags in m.extra["cflags"] and any(a.startswith("--optarch=") for a in m.extra["command_line"])
    # Its own build folder (never EasyBuild's shared ~/.local/easybuild/build): concurrent builds stay apart.
    assert any(a.startswith("--buildpath=") and str(root / "state") in a for a in m.extra["command_line"])
    # Compiler and MPI as the loaded modules say; the toolchain modules the OSU module pulled in.
    assert m.compiler == {"name": "gcc", "version": LOCAL.compiler["version"]}
    assert m.mpi == {"name": "openmpi", "version": LOCAL.mpi["version"]}
    assert m.extra["loaded_modules"] == [LOCAL.compiler_module, LOCAL.mpi_module, LOCAL.toolchain_module, module]
    assert m.extra["dependency_chain"] == [module, LOCAL.toolchain_module]
    assert m.extra["build_modules"] == [LOCAL.toolchain_module]
    assert m.extra["host_toolchain"]["modules"] == [LOCAL.compiler_module, LOCAL.mpi_module, LOCAL.toolchain_module]
    # The checksum override, recorded as the source method records it.
    assert m.sha256 == sha and m.sha256_official is False
    assert m.extra["checksum_override"]["sha256"] == sha
    assert any("site tarball" in n for n in m.notes) and any("not a 2023b build" in n for n in m.notes)
    # The stack under the host's OpenMPI as its own tools report it, down to hwloc's PCI support.
    assert m.stack["hwloc"]["from"] == "hwloc-info" and isinstance(m.stack["hwloc"]["variants"]["pci"], bool)
    # Every benchmark folder of the easyconfig's sanity check, and the project's programs.
    for kind in ("pt2pt", "collective", "one-sided", "startup"):
        assert any((Path(m.bin_dir) / kind).iterdir())
    assert set(m.programs) >= {"linktest", "fwq"} and all(os.access(p, os.X_OK) for p in m.programs.values())


def test_toolchain_modules_are_generated_from_the_data_into_the_build_tree(built):
    root, _, _, m = built
    host_modules = Path(m.extra["installpath"]) / eb.HOST_MODULES
    texts = {rel: (host_modules / rel).read_text() for rel in host_toolchain.lmod_modules(LOCAL)}
    assert texts == host_toolchain.lmod_modules(LOCAL), "the module files are exactly what the data generates"
    gcc = texts[f"{LOCAL.compiler_module}.lua"]
    assert f'setenv("EBROOTGCC", "{LOCAL.compiler["prefix"]}")' in gcc
    assert f'setenv("EBVERSIONGCC", "{LOCAL.compiler["version"]}")' in gcc
    # Nothing generated lands in the checkout.
    status = subprocess.run(["git", "status", "--porcelain", "--ignored"], cwd=REPO, capture_output=True,
                            text=True).stdout
    assert "host-modules" not in status and "gompi-host" not in status


def test_the_build_runs_under_its_own_module_environment(built):
    """The manifest's setup lines load the module, and OSU's binary runs with the host's MPI."""
    _, _, _, m = built
    script = " && ".join(m.env["setup"] + [
        "mpirun -np 2 --oversubscribe --bind-to none osu_latency -m 8:8 -i 50 -x 5"])
    done = subprocess.run(["bash", "-c", script], env=_env(Path("/nonexistent")), capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert "# OSU MPI Latency Test v7.2" in done.stdout and re.search(r"^8\s+\d+\.\d+$", done.stdout, re.M)


def test_a_second_build_reuses_the_install(built):
    root, sha, _, m = built
    again = _build(root, sha)
    assert again.returncode == 0, again.stderr
    assert "reusing the existing EasyBuild build" in again.stderr
    assert again.stdout.strip().splitlines()[-1] == m.path


def test_a_host_that_is_not_what_the_data_says_is_one_sentence():
    assert LOCAL is not None
    wrong = replace(LOCAL, mpi={**LOCAL.mpi, "version": "4.1.6"})
    with pytest.raises(InputError, match=r"declares the host's MPI as openmpi 4\.1\.6 \(host_toolchain\), but this "
                                         r"host has openmpi 4\.1\.4"):
        host_toolchain.check_host(wrong, common.detect_compiler("mpicc"), common.detect_mpi())
    missing = replace(LOCAL, compiler={**LOCAL.compiler, "prefix": "/nonexistent/gcc"})
    with pytest.raises(InputError, match="under /nonexistent/gcc, which has no bin/ folder"):
        host_toolchain.check_host(missing, common.detect_compiler("mpicc"), common.detect_mpi())


@pytest.mark.parametrize("spec, message", [
    ({"compiler": {"name": "gcc", "version": "12.2.0", "prefix": "/usr"}}, "easybuild_toolchain"),
    ({"easybuild_toolchain": {"name": "gompi", "version": "host"}, "compiler": {"name": "gcc", "version": "12"},
      "mpi": {"name": "openmpi", "version": "4.1.4", "prefix": "/usr"}}, "host_toolchain.compiler"),
    ({"easybuild_toolchain": {"name": "gompi", "version": "host"},
      "compiler": {"name": "gcc", "version": "12.2.0", "prefix": "/usr"},
      "mpi": {"name": "openmpi", "version": "4.1.4", "prefix": "/usr"}, "runtime_env": {"PATH": "/x"}},
     "OMPI_MCA_"),
])
def test_a_wrong_host_toolchain_is_named(spec, message):
    with pytest.raises(InputError, match=re.escape(message)):
        host_toolchain.from_system({"host_toolchain": spec}, "demo")


def test_a_sites_default_mca_parameters_go_into_the_mpi_module():
    assert LOCAL is not None
    site = replace(LOCAL, runtime_env={"OMPI_MCA_btl": "self,tcp"})
    mpi = host_toolchain.lmod_modules(site)[f"{LOCAL.mpi_module}.lua"]
    assert 'setenv("OMPI_MCA_btl", "self,tcp")' in mpi and f'depends_on("{LOCAL.compiler_module}")' in mpi


def test_dry_run_lists_an_external_toolchain_module():
    chain = eb.parse_dry_run(" * [x] /x/OSU-Micro-Benchmarks-7.2-gompi-host.eb (module: OSU-Micro-Benchmarks/7.2-gompi-host)\n"
                             " * [x] (no easyconfig file found) (module: gompi/host)\n")
    assert [(d.module, d.easyconfig, d.installed) for d in chain] == [
        ("OSU-Micro-Benchmarks/7.2-gompi-host", "/x/OSU-Micro-Benchmarks-7.2-gompi-host.eb", True),
        ("gompi/host", "(no easyconfig file found)", True)]


def test_a_stack_built_without_what_the_toolchain_names_is_a_note():
    from mpiregress.model import toolchain

    tc = toolchain.load(toolchain.default_path())
    stack = {"hwloc": {"version": "2.9.2", "variants": {"pci": False}},
             "libfabric": {"version": "1.19.0", "providers": ["sockets", "tcp", "udp"]},
             "ucx": {"version": "1.15.0", "built": {"cma": True}}}
    problems = common.stack_problems(stack, tc)
    assert "hwloc 2.9.2 not +pci" in problems
    assert "libfabric 1.19.0 not +verbs +shm +rxm ~sockets" in problems
    assert not any(p.startswith("UCX") for p in problems)
