"""The EESSI build method: not available here (a real exit 4), and the environment ->
manifest translation on environments recorded after EESSI's init and `module load`."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from mpiregress.builds import BuildOptions
from mpiregress.builds.common import BuildError
from mpiregress.builds.eessi import (
    OVERRIDE_VAR,
    manifest_from_env,
    probe_environment,
    setup_lines,
    subdir_override_for,
)
from mpiregress.errors import InputError
from mpiregress.model import manifest as manifest_mod
from mpiregress.model import microarch, toolchain
from mpiregress.paths import REPO_ROOT

DATA = Path(__file__).parent / "data"
INIT = "/cvmfs/software.eessi.io/versions/2023.06/init/bash"
MODULE = "OSU-Micro-Benchmarks/7.2-gompi-2023b"


@pytest.fixture(scope="module")
def tc() -> toolchain.Toolchain:
    return toolchain.load(REPO_ROOT / "toolchains" / "2023b.yaml")


def recorded(name: str) -> dict[str, str]:
    return json.loads((DATA / name).read_text())


def test_build_is_not_available_on_this_machine(tmp_path: Path):
    if Path(INIT).exists():
        pytest.skip("EESSI is mounted here: the not-available path cannot be observed")
    proc = subprocess.run([sys.executable, "-m", "mpiregress", "build", "--method", "eessi", "--system", "iris",
                           "--partition", "broadwell", "--manifest-dir", str(tmp_path / "m")],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 4, proc.stderr
    assert f"EESSI is not available on this machine: {INIT} not found" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "m").exists()


def test_manifest_from_aion_environment(tc, tmp_path: Path):
    env = recorded("eessi_env_aion_zen2.json")
    m = manifest_from_env(env, tc, system="aion", partition="batch")
    assert (m.method, m.target, m.osu_version) == ("eessi", "zen2", "7.2")
    assert m.prefix == env["EBROOTOSUMINMICROMINBENCHMARKS"]
    assert m.binary("osu_latency") == Path(m.prefix) / "libexec/osu-micro-benchmarks/mpi/pt2pt/osu_latency"
    assert m.compiler == {"name": "gcc", "version": "13.2.0"} and m.mpi == {"name": "openmpi", "version": "4.1.6"}
    assert m.env["setup"] == [f"source {INIT}", f"module load {MODULE}"]
    assert m.env["modules"] == [MODULE]
    assert m.extra["eessi_software_subdir"] == "x86_64/amd/zen2"
    assert m.notes == []
    assert manifest_mod.read(manifest_mod.write(m, tmp_path)).target == "zen2"


def test_manifest_with_the_iris_override(tc):
    env = recorded("eessi_env_iris_broadwell_haswell_override.json")
    m = manifest_from_env(env, tc, subdir_override="x86_64/intel/haswell", system="iris", partition="broadwell")
    assert m.target == "haswell"
    assert m.env["setup"] == [f"export {OVERRIDE_VAR}=x86_64/intel/haswell", f"source {INIT}",
                              f"module load {MODULE}"]
    assert m.env["env_vars"] == {OVERRIDE_VAR: "x86_64/intel/haswell"}
    assert m.extra["eessi_software_subdir"] == "x86_64/intel/haswell"
    # The point of the override: one binary both Iris generations can execute.
    assert microarch.check(m.target, ["broadwell", "skylake_avx512"]) is None


def test_override_not_honoured_is_noted(tc):
    env = recorded("eessi_env_aion_zen2.json")
    m = manifest_from_env(env, tc, subdir_override="x86_64/amd/zen3")
    assert any("zen3 was set, but EESSI used x86_64/amd/zen2" in note for note in m.notes)


def test_missing_module_or_subdir_is_an_input_error(tc):
    env = recorded("eessi_env_aion_zen2.json")
    del env["EBROOTOSUMINMICROMINBENCHMARKS"]
    with pytest.raises(InputError, match="EBROOTOSUMINMICROMINBENCHMARKS is not set"):
        manifest_from_env(env, tc)
    with pytest.raises(InputError, match="EESSI_SOFTWARE_SUBDIR is not set"):
        manifest_from_env({}, tc)


def test_subdir_override_comes_from_the_option_else_the_partition(tc, tmp_path: Path):
    def opts(**kw):
        return BuildOptions(method="eessi", toolchain_file=tc.path, target="broadwell",
                            manifest_dir=tmp_path, install_root=tmp_path, **kw)
    assert subdir_override_for(opts(system="iris", partition="broadwell"), tc) == "x86_64/intel/haswell"
    assert subdir_override_for(opts(system="iris", partition="broadwell",
                                    eessi_subdir_override="x86_64/generic"), tc) == "x86_64/generic"
    assert subdir_override_for(opts(), tc) is None


def test_setup_lines_are_shell_safe():
    assert setup_lines("/cvmfs/x y/init/bash", "A/1")[0] == "source '/cvmfs/x y/init/bash'"


def test_probe_environment_runs_the_lines_in_bash():
    """The mechanism build() uses after EESSI's init, on plain shell lines (no EESSI here)."""
    env = probe_environment(["export MPIREGRESS_PROBE='a b'", "echo chatter", "cd /"])
    assert env["MPIREGRESS_PROBE"] == "a b"
    with pytest.raises(BuildError, match="failed at 'false'"):
        probe_environment(["true", "false", "true"])
