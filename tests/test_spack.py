"""The Spack build method: not available here (a real exit 4), and the spec.json ->
manifest translation on spec files modelled on Spack's formats 4 (0.20-0.23) and 5 (1.x)."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from mpiregress.builds import BuildOptions
from mpiregress.builds.spack import (
    check_buildcache,
    check_version,
    copy_environment,
    environment_for,
    manifest_from_spec,
)
from mpiregress.errors import InputError
from mpiregress.model import manifest as manifest_mod
from mpiregress.model import toolchain
from mpiregress.paths import REPO_ROOT

DATA = Path(__file__).parent / "data"
PREFIX = ("/home/users/ci/mpiregress/var/install/spack/broadwell/opt/linux-rhel8-broadwell/gcc-13.2.0/"
          "osu-micro-benchmarks-7.2-mq6knhvfgobu24bmrzhkdnzp5eprpwwn")


@pytest.fixture(scope="module")
def tc() -> toolchain.Toolchain:
    return toolchain.load(REPO_ROOT / "toolchains" / "2023b.yaml")


def spec(name: str) -> dict:
    return json.loads((DATA / name).read_text())


def options(tmp_path: Path, **kw) -> BuildOptions:
    base = dict(method="spack", toolchain_file=REPO_ROOT / "toolchains" / "2023b.yaml", target="broadwell",
                manifest_dir=tmp_path / "manifests", install_root=tmp_path / "install")
    base.update(kw)
    return BuildOptions(**base)


def test_build_is_not_available_on_this_machine(tmp_path: Path):
    if shutil.which("spack"):
        pytest.skip("Spack is installed here: the not-available path cannot be observed")
    proc = subprocess.run([sys.executable, "-m", "mpiregress", "build", "--method", "spack", "--system", "iris",
                           "--partition", "broadwell", "--manifest-dir", str(tmp_path / "m"),
                           "--install-root", str(tmp_path / "i")], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 4, proc.stderr
    assert "Spack is not available on this machine: no 'spack' command on PATH" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "m").exists()   # skipped means no manifest, never a fake one


def test_manifest_from_spec_format_4(tc, tmp_path: Path):
    m = manifest_from_spec(spec("spack_osu_spec_v4_broadwell.json"), PREFIX, tc, env_name="iris-broadwell",
                           system="iris", partition="broadwell")
    assert (m.method, m.target, m.osu_version, m.toolchain) == ("spack", "broadwell", "7.2", "2023b")
    assert m.compiler == {"name": "gcc", "version": "13.2.0"}
    assert m.mpi == {"name": "openmpi", "version": "4.1.6"}
    assert m.flags == "-march=broadwell -mtune=broadwell"
    assert m.bin_dir == f"{PREFIX}/libexec/osu-micro-benchmarks/mpi"
    assert m.binary("osu_latency") == Path(PREFIX) / "libexec/osu-micro-benchmarks/mpi/pt2pt/osu_latency"
    assert m.extra["spack_hash"] == "mq6knhvfgobu24bmrzhkdnzp5eprpwwn"
    assert m.extra["specfile_version"] == 4
    assert m.extra["mpi_variants"]["fabrics"] == ["ucx"] and m.extra["mpi_variants"]["schedulers"] == ["slurm"]
    assert m.extra["mpi_variants"]["internal-pmix"] is False
    # A real Spack 0.23 concretization of the pre-issue-10 environment: not gompi/2023b's stack.
    assert m.notes == ["MPI stack differs from toolchain 2023b: " + p for p in (
        "UCX 1.16.0 (toolchain: 1.15.0)", "UCX 1.16.0 without rc, ud, dc, mlx5_dv", "PMIx 5.0.3 (toolchain: 4.2.6)",
        "hwloc 2.11.1 (toolchain: 2.9.2)", "no libfabric", "no UCC")]
    assert m.stack["ucx"]["transports"] == ["cma", "rdmacm", "verbs"]
    assert m.stack["pmix"]["version"] == "5.0.3" and m.stack["libevent"]["version"] == "2.1.12"
    # What a check will read back.
    back = manifest_mod.read(manifest_mod.write(m, tmp_path))
    assert back.target == "broadwell" and back.extra["spack_env"] == "iris-broadwell"


def test_manifest_from_spec_format_5_compiler_as_a_dependency(tc):
    m = manifest_from_spec(spec("spack_osu_spec_v5_zen2.json"), "/opt/osu", tc, env_name="aion-zen2")
    assert m.target == "zen2" and m.flags == "-march=znver2 -mtune=znver2"
    assert m.compiler == {"name": "gcc", "version": "13.2.0"}
    assert m.mpi == {"name": "openmpi", "version": "4.1.6"}
    assert m.extra["specfile_version"] == 5


def test_a_different_openmpi_is_recorded_with_a_note(tc):
    data = spec("spack_osu_spec_v4_broadwell.json")
    for node in data["spec"]["nodes"]:
        if node["name"] == "openmpi":
            node["version"] = "5.0.5"
    m = manifest_from_spec(data, "/opt/osu", tc)
    assert m.mpi["version"] == "5.0.5"
    assert any("openmpi 5.0.5" in note and "not a 2023b build" in note for note in m.notes)


def test_spec_files_that_are_not_osu_are_refused(tc):
    with pytest.raises(InputError, match="no spec.nodes"):
        manifest_from_spec({"nodes": []}, "/opt/x", tc)
    data = spec("spack_osu_spec_v4_broadwell.json")
    data["spec"]["nodes"] = [n for n in data["spec"]["nodes"] if n["name"] != "osu-micro-benchmarks"]
    with pytest.raises(InputError, match="not osu-micro-benchmarks"):
        manifest_from_spec(data, "/opt/x", tc)


def test_environment_for_partitions(tc, tmp_path: Path):
    assert environment_for(options(tmp_path, system="iris", partition="broadwell"), tc).name == "iris-broadwell"
    assert environment_for(options(tmp_path, target="skylake_avx512", system="iris", partition="skylake"),
                           tc).name == "iris-skylake"
    assert environment_for(options(tmp_path, target="zen2"), tc).name == "aion-batch"
    with pytest.raises(InputError, match="no Spack environment builds target haswell"):
        environment_for(options(tmp_path, target="haswell"), tc)
    with pytest.raises(InputError, match="has no spack.yaml"):
        environment_for(options(tmp_path, spack_env=tmp_path), tc)


@pytest.mark.parametrize("env", ["iris-broadwell", "iris-skylake", "aion-batch"])
def test_spack_envs_follow_spacks_format(env, tc):
    """Structure Spack requires of an environment used by `spack ci generate` (its own
    schemas are checked against these files by hand; see the report)."""
    data = yaml.safe_load((REPO_ROOT / "spack-envs" / env / "spack.yaml").read_text())["spack"]
    assert set(data) <= {"include", "specs", "packages", "concretizer", "view", "mirrors", "ci", "config",
                         "definitions"}
    # The shared part is a config scope file: only sections Spack allows in one.
    common = yaml.safe_load((REPO_ROOT / "spack-envs" / env / data["include"][0]).read_text())
    assert set(common) <= {"packages", "concretizer", "config", "mirrors", "ci", "compilers", "modules"}
    assert "buildcache-destination" in data["mirrors"]
    sections = data["ci"]["pipeline-gen"]
    for section in sections:   # each item is exactly one kind of section
        assert len(set(section) - {"match_behavior"}) == 1
    submaps = [s for s in sections if "submapping" in s]
    assert submaps and all(set(e) <= {"match", "build-job", "build-job-remove"}
                           for s in submaps for e in s["submapping"])
    assert any(s.get("build-job", {}).get("tags") for s in sections)   # the fallback
    # Every kind of job `spack ci generate` makes carries the system's runner tags.
    for kind in ("reindex-job", "any-job"):
        assert any({"jacamar"} <= set(s.get(kind, {}).get("tags", [])) for s in sections), kind


def test_spack_version_and_build_cache_are_checked(tc, monkeypatch):
    assert check_version("0.23.1", tc) == "0.23.1"
    assert check_version("1.1.0 (abc123)", tc) == "1.1.0"
    with pytest.raises(InputError, match=r"Spack 0\.21\.2 is not supported by toolchain 2023b"):
        check_version("0.21.2", tc)
    for bad in ({}, {"MPIREGRESS_SPACK_BUILDCACHE": ""}, {"MPIREGRESS_SPACK_BUILDCACHE": "mirror"}):
        with pytest.raises(InputError, match="must name the Spack build cache"):
            check_buildcache(bad)
    assert check_buildcache({"MPIREGRESS_SPACK_BUILDCACHE": "/scratch/cache"}) == "/scratch/cache"


def test_environment_copy_keeps_its_include(tmp_path: Path):
    copy_environment(REPO_ROOT / "spack-envs" / "iris-broadwell", tmp_path / "env" / "iris-broadwell")
    assert (tmp_path / "env" / "common.yaml").read_text() == (REPO_ROOT / "spack-envs" / "common.yaml").read_text()


@pytest.mark.parametrize("value", [None, "", "relative/cache"])
def test_ci_generate_refuses_without_a_named_build_cache(value, tmp_path: Path):
    """spack-envs/ci-generate.sh stops before Spack when the build cache is unset or relative."""
    import os
    import subprocess

    env = {k: v for k, v in os.environ.items() if k != "MPIREGRESS_SPACK_BUILDCACHE"}
    if value is not None:
        env["MPIREGRESS_SPACK_BUILDCACHE"] = value
    env["PATH"] = f"{tmp_path}:/usr/bin:/bin"   # no spack: it must not get that far anyway
    done = subprocess.run(["bash", str(REPO_ROOT / "spack-envs" / "ci-generate.sh"),
                           str(REPO_ROOT / "spack-envs" / "iris-broadwell"), str(tmp_path / "ci.yml")],
                          env=env, capture_output=True, text=True, timeout=30)
    assert done.returncode == 2
    assert "must name the build cache (an absolute path or a URL)" in done.stderr
    assert not (tmp_path / "ci.yml").exists()


# --- OSU's tarball at Spack's mirror layout, the local environment, site scopes (issue 21) --------------

def test_the_tarball_goes_where_spack_looks_for_it(tc, tmp_path: Path):
    """Spack searches a file mirror at _source-cache/archive/<sha[:2]>/<sha>.tar.gz, keyed by the sha256 its
    package records (the toolchain's osu.sha256), whatever the file's own checksum."""
    from helpers.osu_double import make_tarball

    from mpiregress.builds.spack import add_mirror, mirror_path, place_in_mirror

    tarball, _ = make_tarball(tmp_path / "src")
    official = tc.osu["sha256"]
    placed = place_in_mirror(tarball, tmp_path / "mirror", official)
    assert placed == tmp_path / "mirror" / "_source-cache" / "archive" / official[:2] / f"{official}.tar.gz"
    assert placed.read_bytes() == tarball.read_bytes()
    assert mirror_path(official) == Path("_source-cache/archive/1a") / f"{official}.tar.gz"
    with pytest.raises(InputError, match="not a sha256"):
        mirror_path("osu-micro-benchmarks/osu-micro-benchmarks-7.2.tar.gz")
    env = tmp_path / "env"
    env.mkdir()
    (env / "spack.yaml").write_text("spack:\n  specs: [osu-micro-benchmarks@7.2]\n")
    add_mirror(env, tmp_path / "mirror")
    data = yaml.safe_load((env / "spack.yaml").read_text())
    assert data["spack"]["mirrors"] == {"mpiregress-osu-source": f"file://{(tmp_path / 'mirror').resolve()}"}
    assert data["spack"]["specs"] == ["osu-micro-benchmarks@7.2"]


@pytest.mark.parametrize("version", ["0.23.1", "1.1.0"])
def test_the_local_environment_is_written_from_the_host_toolchain(tc, version):
    from mpiregress.builds import host_toolchain
    from mpiregress.builds.spack import host_environment

    host = host_toolchain.for_system("local")
    assert host is not None
    env = host_environment(host, tc, "x86_64_v4", version)["spack"]
    cc, mpi = host.compiler, host.mpi
    assert env["specs"] == [f"osu-micro-benchmarks@7.2 target=x86_64_v4 %gcc@{cc['version']}"]
    assert env["packages"]["mpi"] == {"require": ["openmpi"]}
    assert env["packages"]["openmpi"] == {"buildable": False, "externals": [
        {"spec": f"openmpi@{mpi['version']}", "prefix": mpi["prefix"]}]}
    if version.startswith("1."):
        assert "compilers" not in env
        external = env["packages"]["gcc"]["externals"][0]
        assert external["spec"].startswith(f"gcc@{cc['version']} ") and external["prefix"] == cc["prefix"]
    else:
        compiler = env["compilers"][0]["compiler"]
        assert compiler["spec"] == f"gcc@={cc['version']}" and compiler["paths"]["cc"] == f"{cc['prefix']}/bin/gcc"


def test_a_site_scope_whose_compiler_does_not_exist_is_one_sentence_before_spack(tmp_path: Path):
    """The shipped example names Iris' paths: on another machine it fails before Spack runs, naming the path."""
    from mpiregress.builds.spack import check_site_scopes, site_scope_problems

    example = REPO_ROOT / "spack-envs" / "site-example"
    problems = site_scope_problems(example / "spack-0.2x") + site_scope_problems(example / "spack-1.x")
    assert problems and all("/opt/apps/resif/iris-rhel8/2023b" in p and "does not exist on this machine" in p
                            for p in problems)
    with pytest.raises(InputError, match=r"compiler gcc@=13\.2\.0 has cc: /opt/apps/.*/bin/gcc, which does not "
                                         r"exist on this machine: put in this cluster's real paths"):
        check_site_scopes([example / "spack-0.2x"])
    # A scope whose paths exist is quiet.
    good = tmp_path / "site"
    good.mkdir()
    (good / "compilers.yaml").write_text(yaml.safe_dump({"compilers": [{"compiler": {
        "spec": "gcc@=12.2.0", "paths": {"cc": "/usr/bin/gcc", "cxx": "/usr/bin/g++", "f77": None, "fc": None}}}]}))
    (good / "packages.yaml").write_text(yaml.safe_dump({"packages": {"openmpi": {"externals": [
        {"spec": "openmpi@4.1.4", "prefix": "/usr"}]}}}))
    assert site_scope_problems(good) == []
    check_site_scopes([good])


def test_build_refuses_a_broken_site_scope_in_one_sentence(tmp_path: Path):
    """`mpiregress build --method spack --site-scope DIR`: the scope is judged before Spack is looked for."""
    proc = subprocess.run([sys.executable, "-m", "mpiregress", "build", "--method", "spack", "--system", "local",
                           "--site-scope", str(REPO_ROOT / "spack-envs" / "site-example" / "spack-1.x"),
                           "--manifest-dir", str(tmp_path / "m"), "--install-root", str(tmp_path / "i")],
                          capture_output=True, text=True, timeout=60)
    assert "Traceback" not in proc.stderr
    assert proc.returncode == 2 and "which does not exist on this machine" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and not (tmp_path / "m").exists()


@pytest.mark.skipif(shutil.which("spack") is None, reason="Spack is not installed here (no registry has it); "
                    "benchmarks/spack_local_build.py runs this build with a Spack checkout by hand")
def test_real_spack_build_of_the_double_on_the_local_system(tmp_path: Path):
    from helpers.osu_double import make_tarball

    _, sha = make_tarball(tmp_path / "mirror")
    proc = subprocess.run([sys.executable, "-m", "mpiregress", "build", "--method", "spack", "--system", "local",
                           "--source-mirror", str(tmp_path / "mirror"), "--sha256", sha,
                           "--manifest-dir", str(tmp_path / "m"), "--install-root", str(tmp_path / "i")],
                          capture_output=True, text=True, timeout=1500)
    assert proc.returncode == 0, proc.stderr[-3000:]
    m = manifest_mod.read(Path(proc.stdout.strip().splitlines()[-1]))
    assert m.method == "spack" and m.sha256 == sha and m.sha256_official is False
    assert m.extra["checksum_override"]["sha256"] == sha and m.extra["spack_hash"]
    assert Path(m.extra["source_mirror"]).name.startswith(toolchain.load(REPO_ROOT / "toolchains" / "2023b.yaml")
                                                          .osu["sha256"])
    # The project's programs from Spack's own install, loaded with its install tree (issue 33).
    assert "config:install_tree:root:" in m.extra["programs_setup"][0] and m.extra["programs_mpicc"]
    assert m.extra["mpi_capabilities"]["components"]["pml"] and "mpi_variants" not in m.extra or \
        not m.extra["mpi_external"] or m.extra["mpi_variants"] == {}
    again = subprocess.run(proc.args, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0 and "reusing the existing Spack build" in again.stderr, again.stderr[-2000:]


def test_manifest_of_the_by_hand_local_build_with_an_external_openmpi(tc):
    """The spec.json of a real Spack 0.23.1 build on the local system (benchmarks/spack_local_build.py,
    2026-11-25): OpenMPI is the host's external, so its stack is not claimed missing."""
    m = manifest_from_spec(spec("spack-0.23.1-local-host-spec.json"), "/p", tc, system="local", partition="batch")
    assert (m.target, m.compiler, m.mpi) == ("x86_64_v4", {"name": "gcc", "version": "12.2.0"},
                                             {"name": "openmpi", "version": "4.1.4"})
    assert any("is an external of Spack (/usr)" in n for n in m.notes)
    assert not any(n.endswith(": no UCX") or n.endswith(": no hwloc") for n in m.notes), m.notes


# --- issue 33: the project's MPI programs come from the Spack install, loaded as it was installed -------

SPACK_LOAD_ERROR = "==> Error: Spec 'osu-micro-benchmarks' matches no installed packages."


def _failing_spack(tmp_path: Path) -> Path:
    """A command that fails as `spack load --sh` does without the install tree and scopes of the install."""
    fake = tmp_path / "spack-load-fails"
    fake.write_text(f"#!/bin/sh\necho \"{SPACK_LOAD_ERROR}\" >&2\nexit 1\n")
    fake.chmod(0o755)
    return fake


def test_a_failed_load_stops_the_build_before_any_program_is_built(tmp_path: Path):
    """The build of fwq/hello_mpi/linktest went on with the host's mpicc after "matches no installed
    packages": now the load is tried first and its failure is the build's one sentence."""
    from mpiregress.builds import common
    from mpiregress.builds.spack import programs_from_load

    with pytest.raises(common.BuildError) as err:
        programs_from_load([str(_failing_spack(tmp_path))], "osu-micro-benchmarks", target="x86_64_v4",
                           cflags="-O2", install_root=tmp_path / "install", log=tmp_path / "spack.log",
                           mpi_prefix="/usr")
    said = str(err.value)
    assert said.startswith("loading Spack's osu-micro-benchmarks failed (loading Spack's osu-micro-benchmarks "
                           "failed: ") and "not built" in said and "\n" not in said
    assert not (tmp_path / "install").exists() and not (tmp_path / "spack.log").exists()


def test_the_load_line_never_falls_through_to_the_next_command(tmp_path: Path):
    """`eval "$(spack load --sh X)"` evaluates nothing when spack fails and the build carries on; the
    load line exits 3 instead, whatever comes after it."""
    from mpiregress.builds.common import load_line

    line = load_line([str(_failing_spack(tmp_path))], "Spack's osu-micro-benchmarks")
    proc = subprocess.run(["bash", "-c", f"{{ {line}; }} && echo built-with-the-host-mpicc"], capture_output=True,
                          text=True, timeout=30)
    assert proc.returncode == 3 and "built-with-the-host-mpicc" not in proc.stdout
    assert SPACK_LOAD_ERROR in proc.stderr and "loading Spack's osu-micro-benchmarks failed" in proc.stderr
    ok = load_line(["echo", "export MPIREGRESS_LOADED=yes"], "a test environment")
    assert subprocess.run(["bash", "-c", f"{ok}; echo $MPIREGRESS_LOADED"], capture_output=True, text=True,
                          timeout=30).stdout.strip() == "yes"


@pytest.mark.skipif(shutil.which("mpicc") is None, reason="no mpicc on this machine")
def test_programs_are_not_built_with_an_mpicc_outside_the_methods_mpi(tmp_path: Path):
    from mpiregress.builds import common

    with pytest.raises(common.BuildError, match=r"mpicc is .*, not under the build's MPI .*not built"):
        common.build_programs(method="spack", target="x86_64_v4", cflags="-O2", setup=["true"],
                              install_root=tmp_path / "install", log=tmp_path / "log",
                              mpi_prefix=str(tmp_path / "the-methods-mpi"))
    assert not (tmp_path / "install").exists()


def test_the_load_uses_the_install_tree_and_scopes_of_the_install(tmp_path: Path):
    from mpiregress.builds.spack import load_command

    base = ["spack", "-C", "/site/scope", "-e", "/env", "-c", "config:install_tree:root:/opt/tree"]
    assert load_command(base, "osu-micro-benchmarks") == [*base, "load", "--sh", "osu-micro-benchmarks"]


def test_the_input_hash_changes_with_each_input_and_only_then(tmp_path: Path):
    from mpiregress.builds.spack import environment_inputs

    env = tmp_path / "env"
    env.mkdir()
    (env / "spack.yaml").write_text("spack: {specs: [osu-micro-benchmarks@7.2]}\n")
    tc_file = REPO_ROOT / "toolchains" / "2023b.yaml"
    from mpiregress.builds.common import input_hash

    def h(**kw):
        args = dict(scopes=[], toolchain_file=tc_file, sha256="a" * 64, target="broadwell", spack_version="1.1.0")
        args.update(kw)
        return input_hash(environment_inputs(env, **args))

    first = h()
    assert h() == first
    assert h(target="skylake") != first and h(sha256="b" * 64) != first and h(spack_version="0.23.1") != first
    (env / "spack.yaml").write_text("spack: {specs: [osu-micro-benchmarks@7.2 +cuda]}\n")
    assert h() != first


def test_a_method_whose_tool_is_missing_is_unavailable_before_any_build(monkeypatch, tmp_path):
    """What a run that measures other jobs' builds (the A/B job) asks: can this machine build with it at all."""
    from mpiregress.builds import unavailable_reason

    monkeypatch.setenv("PATH", str(tmp_path))
    assert unavailable_reason("spack").startswith("Spack is not available on this machine: no 'spack' command")
    assert unavailable_reason("source") is None     # plain make and mpicc: nothing to probe, it can try
