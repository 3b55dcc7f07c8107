"""Cross-method consistency names how two builds differ (flags, MCA parameters of their modules), from
their manifests, and stays quiet when the builds are alike. The manifests are shaped as the local
system's real source and EasyBuild builds write them (see tests/test_easybuild_local.py)."""
from __future__ import annotations

import json
from pathlib import Path

from mpiregress.builds import differences
from mpiregress.model.manifest import Manifest
from mpiregress.model.results import pt2pt
from mpiregress.verdict import cross_method as consistency

FLAGS = "-march=x86-64-v4 -mtune=generic"


def source(cflags: str = f"-O2 {FLAGS}") -> Manifest:
    return Manifest(method="source", toolchain="2023b", osu_version="7.2", target="x86_64_v4", prefix="/s",
                    bin_dir="/s", flags=FLAGS, compiler={"name": "gcc", "version": "12.2.0"},
                    mpi={"name": "openmpi", "version": "4.1.4"}, env={"setup": [], "modules": [], "env_vars": {}},
                    extra={"configure": ["./configure", "CC=mpicc", f"CFLAGS={cflags}", "--prefix=/s"]})


def easybuild(module_env: dict | None = None, cflags: str = f"-O2 -ftree-vectorize {FLAGS} -fno-math-errno"
              ) -> Manifest:
    env = {"EBVERSIONGCC": "12.2.0", "EBVERSIONOPENMPI": "4.1.4", **(module_env or {})}
    return Manifest(method="easybuild", toolchain="2023b", osu_version="7.2", target="x86_64_v4", prefix="/e",
                    bin_dir="/e", flags=FLAGS, compiler={"name": "gcc", "version": "12.2.0"},
                    mpi={"name": "openmpi", "version": "4.1.4"},
                    env={"setup": ["module load OSU-Micro-Benchmarks/7.2-gompi-host"], "modules": [], "env_vars": {}},
                    extra={"cflags": cflags, "module_env": env})


def latency(method: str, value: float):
    return pt2pt("local", "batch", method, "same_numa", "latency", value)


def test_alike_builds_have_no_difference_and_no_finding():
    assert differences.between([source(), easybuild()]) == {}
    values = consistency.method_values([latency("source", 3.09), latency("easybuild", 3.06)])
    assert consistency.check(values, builds=differences.between([source(), easybuild()])) == []


def test_a_module_that_sets_another_mca_default_is_named_with_the_method():
    builds = differences.between([source(), easybuild({"OMPI_MCA_btl": "self,tcp"})])
    assert builds == {frozenset(("easybuild", "source")):
                      "easybuild has OMPI_MCA_btl=self,tcp, source has it unset"}
    values = consistency.method_values([latency("source", 3.1), latency("easybuild", 21.7)])
    finding, = consistency.check(values, builds=builds)
    assert finding.method == "easybuild" and finding.best_method == "source"
    assert finding.sentence().endswith("; the builds differ: easybuild has OMPI_MCA_btl=self,tcp, source has it "
                                       "unset")


def test_a_build_at_o0_is_named():
    builds = differences.between([source(cflags=f"-O0 {FLAGS}"), easybuild()])
    assert builds == {frozenset(("easybuild", "source")): "easybuild optimization -O2, source -O0"}
    assert differences.optimization(source(cflags=FLAGS)) == "-O0 (no -O flag)"
    assert differences.optimization(source(cflags=f"-O3 -g -O1 {FLAGS}")) == "-O1"


def test_alike_values_stay_quiet_even_when_builds_differ():
    """A difference in the manifests is context for a finding, never a finding by itself."""
    builds = differences.between([source(cflags=f"-O0 {FLAGS}"), easybuild()])
    values = consistency.method_values([latency("source", 3.09), latency("easybuild", 3.06)])
    assert consistency.check(values, builds=builds) == []


def test_builds_of_different_targets_are_not_compared():
    other = easybuild({"OMPI_MCA_btl": "self,tcp"})
    other.target = "zen2"
    assert differences.between([source(), other]) == {}


def test_what_the_real_local_builds_record(tmp_path: Path):
    """The fields read here are those the real builds write: a manifest round trip keeps them."""
    from mpiregress.model import manifest as manifest_mod

    for m in (source(), easybuild({"OMPI_MCA_btl": "self,tcp"})):
        back = manifest_mod.read(manifest_mod.write(m, tmp_path))
        assert differences.facts(back) == differences.facts(m)
    assert json.loads((tmp_path / "easybuild-x86_64_v4.json").read_text())["extra"]["module_env"]["OMPI_MCA_btl"]


# --- issue 33: the MPI's real capabilities (its own ompi_info), for externals too --------------------

DEBIAN_OMPI = (Path(__file__).parent / "data" / "ompi_info_parsable_debian12_openmpi_4.1.4.txt").read_text()


def test_ompi_info_says_what_the_mpi_can_do_not_a_package_managers_defaults():
    """The host's OpenMPI 4.1.4 (Debian 12): Spack's external record said fabrics=none, schedulers=none."""
    from mpiregress.builds.common import parse_capabilities

    caps = parse_capabilities(DEBIAN_OMPI, "1.13.1")
    assert caps["version"] == "4.1.4" and caps["ucx"] == "1.13.1"
    assert "ucx" in caps["components"]["pml"] and {"ofi", "tcp", "vader"} <= set(caps["components"]["btl"])
    assert caps["slurm"] is True and caps["pmix"] == ["ext3x", "flux"]
    assert "--with-ucx" in caps["configure"] and "--with-slurm" in caps["configure"]


def test_a_build_whose_mpi_lacks_a_toolchain_feature_is_named_by_lint_and_cross_method(tmp_path: Path):
    from mpiregress.builds.common import capability_problems, parse_capabilities
    from mpiregress.definitions import lint
    from mpiregress.model import manifest as manifest_mod
    from mpiregress.model import toolchain
    from mpiregress.paths import REPO_ROOT

    tc = toolchain.load(toolchain.default_path())
    full = parse_capabilities(DEBIAN_OMPI)
    assert capability_problems(full, tc) == []
    no_ucx = parse_capabilities("\n".join(line for line in DEBIAN_OMPI.splitlines() if not line.startswith("mca:pml:ucx")))
    assert capability_problems(no_ucx, tc) == ["its Open MPI 4.1.4 has no ucx (pml:ucx in ompi_info)"]
    a, b = source(), easybuild()
    a.extra["mpi_capabilities"], b.extra["mpi_capabilities"] = full, no_ucx
    said = consistency.stack_differences([a, b], tc)
    assert "source" not in said and said["easybuild"].endswith("its Open MPI 4.1.4 has no ucx (pml:ucx in ompi_info)")
    assert "easybuild MPI transports pml cm,monitoring,ob1,v" in differences.describe(differences.between([a, b]),
                                                                                      "source", "easybuild")
    manifest_mod.write(b, tmp_path)
    report = lint.lint(REPO_ROOT, easybuild=False, manifests=tmp_path)
    assert any("easybuild build for x86_64_v4: its Open MPI 4.1.4 has no ucx" in f.message for f in report.findings)


def test_the_capabilities_of_the_mpi_a_build_uses_are_asked_of_its_own_ompi_info():
    import shutil

    import pytest

    from mpiregress.builds.common import mpi_capabilities

    if shutil.which("ompi_info") is None:
        pytest.skip("no Open MPI (ompi_info) on this machine")
    caps = mpi_capabilities(["true"], str(Path(shutil.which("ompi_info")).parent.parent))
    assert caps["from"].endswith("bin/ompi_info --parsable") and "ob1" in caps["components"]["pml"]
    assert mpi_capabilities(["false"]) == {}      # a setup that fails: nothing claimed
