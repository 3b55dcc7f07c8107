"""`mpiregress lint`: the repository agrees with its toolchain file, and a one-line
change anywhere that repeats a toolchain fact fails, naming the file and the line."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from mpiregress import cli
from mpiregress.definitions import lint
from mpiregress.errors import InputError
from mpiregress.paths import REPO_ROOT

TOOLCHAIN = Path("toolchains") / "2023b.yaml"
EC = Path("easyconfigs") / "OSU-Micro-Benchmarks-7.2-gompi-2023b.eb"
SHA = "1a4e1f2aab0e65404b3414e23bd46616184b69b6231ce9313d9c630bd6e633c1"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A copy of everything lint reads, to edit without touching the checkout."""
    for name in ("toolchains", "systems", "spack-envs", "easyconfigs", "baselines"):
        shutil.copytree(REPO_ROOT / name, tmp_path / name)
    for rel in ("checks/config/site.yaml", "checks/config/site.yaml.j2", "ci/gitlab-ci.yml.j2", ".gitlab-ci.yml"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO_ROOT / rel, tmp_path / rel)
    return tmp_path


def run_lint(repo: Path, **kwargs) -> lint.Report:
    """Lint without EasyBuild's dry run (seconds each); the EasyBuild tests ask for it."""
    kwargs.setdefault("easybuild", False)
    return lint.lint(repo, **kwargs)


def edit(path: Path, old: str, new: str) -> int:
    """Replace the one occurrence of ``old`` in ``path``; return its 1-based line number."""
    text = path.read_text()
    assert text.count(old) == 1, f"{old!r} occurs {text.count(old)} times in {path}"
    line = text[:text.index(old)].count("\n") + 1
    path.write_text(text.replace(old, new))
    return line


def only_finding(report: lint.Report) -> lint.Finding:
    assert len(report.findings) == 1, "\n".join(map(str, report.findings))
    return report.findings[0]


def test_the_repository_agrees_with_its_toolchain_file():
    report = lint.lint(REPO_ROOT)
    assert report.ok, "\n".join(map(str, report.findings))
    lines = list(lint.summary(report))
    assert lines[-1] == "lint: ok, everything agrees with toolchains/2023b.yaml"
    checked = "\n".join(lines)
    for what in ("spack-envs/", "aion-batch", "iris-broadwell", "iris-skylake", EC.name, "baselines/",
                 "OSU-Micro-Benchmarks/7.2-gompi-2023b", "systems/ (aion, iris, local",
                 "EasyBuild's resolved stack (37 easyconfigs", "derived files"):
        assert what in checked


def test_lint_without_easybuild_runs_no_easybuild(monkeypatch: pytest.MonkeyPatch) -> None:
    """What takes seconds (EasyBuild's dry run) is not run, and the lint says what it did not compare. (It
    was a timed assertion, under 3 s, which a loaded CI machine failed at 4.5 s.)"""
    def not_run(*args: object, **kwargs: object) -> None:
        raise AssertionError("EasyBuild was asked")

    monkeypatch.setattr(lint.easybuild, "easyconfig_for", not_run)
    monkeypatch.setattr(lint.easybuild, "dependency_chain", not_run)
    report = run_lint(REPO_ROOT)
    assert any(c.startswith("EasyBuild's resolved stack: not compared") for c in report.checked), report.checked


COMMON = Path("spack-envs") / "common.yaml"


def test_spack_ucx_without_verbs(repo: Path):
    line = edit(repo / COMMON, "+verbs ", "")
    finding = only_finding(run_lint(repo))
    assert (finding.path, finding.line) == (str(COMMON), line)
    assert finding.message == ("ucx lacks +verbs, the toolchain file (transports.ucx.verbs) says +verbs: "
                               "UCX gets no InfiniBand transport and inter-node traffic goes over TCP")


def test_spack_ucx_with_a_transport_gompi_does_not_have(repo: Path):
    line = edit(repo / COMMON, "~xpmem", "+xpmem")
    finding = only_finding(run_lint(repo))
    assert finding.line == line and "ucx requires +xpmem" in finding.message and "says ~xpmem" in finding.message


def test_spack_stack_versions(repo: Path):
    line = edit(repo / COMMON, 'require: ["@4.2.6"]', 'require: ["@5.0.3"]')
    finding = only_finding(run_lint(repo))
    assert (finding.path, finding.line) == (str(COMMON), line)
    assert finding.message == "packages:pmix:require pins 5.0.3, the toolchain file (stack.pmix) says 4.2.6"


def test_spack_site_externals_are_not_built(repo: Path):
    edit(repo / COMMON, "  rdma-core:\n", "  rdma-core-renamed:\n")
    finding = only_finding(run_lint(repo))
    assert "packages:rdma-core must be 'buildable: false'" in finding.message


def test_spack_version_outside_the_supported_list(repo: Path):
    line = edit(repo / "systems" / "aion.yaml", 'spack_version: "0.23.1"', 'spack_version: "0.21.2"')
    finding = only_finding(run_lint(repo))
    assert (finding.path, finding.line) == ("systems/aion.yaml", line)
    assert finding.message.startswith("Spack 0.21.2 is not a supported version (toolchain file, spack.versions: "
                                      "0.23, 1.1)")


def test_spack_build_cache_has_no_default(repo: Path):
    env = repo / "spack-envs" / "iris-skylake" / "spack.yaml"
    edit(env, "url: $MPIREGRESS_SPACK_BUILDCACHE/iris-skylake", "url: mirror")
    finding = only_finding(run_lint(repo))
    assert "must be $MPIREGRESS_SPACK_BUILDCACHE/<env> (found mirror)" in finding.message


def test_spack_generated_jobs_all_have_tags(repo: Path):
    env = repo / "spack-envs" / "iris-skylake" / "spack.yaml"
    edit(env, "    - reindex-job:\n        tags: [iris, jacamar]\n", "")
    finding = only_finding(run_lint(repo))
    assert finding.message.startswith("no reindex-job section with tags")


def test_spack_hwloc_without_pci(repo: Path):
    """What Spack 1.1 quietly concretized under `prefer: [%gcc@13.2.0]`: lint names it."""
    line = edit(repo / COMMON, '"@2.9.2 +pci"', '"@2.9.2 ~pci"')
    finding = only_finding(run_lint(repo))
    assert (finding.path, finding.line) == (str(COMMON), line)
    assert finding.message.startswith("hwloc requires ~pci, the toolchain file (variants.hwloc.pci) says +pci: "
                                      "without PCI topology")


def test_spack_libfabric_providers(repo: Path):
    line = edit(repo / COMMON, "fabrics=verbs,tcp,udp,shm,rxm", "fabrics=sockets,tcp,udp,shm,rxm")
    finding = only_finding(run_lint(repo))
    assert (finding.path, finding.line) == (str(COMMON), line)
    assert finding.message == ("libfabric fabrics=rxm,shm,sockets,tcp,udp lacks verbs; has sockets: the toolchain "
                               "file (providers.libfabric) says fabrics=verbs,tcp,udp,shm,rxm, the providers "
                               "gompi/2023b's libfabric has")


def test_spack_libfabric_left_to_spacks_default(repo: Path):
    edit(repo / COMMON, '"@1.19.0 fabrics=verbs,tcp,udp,shm,rxm"', '"@1.19.0"')
    finding = only_finding(run_lint(repo))
    assert finding.message.startswith("libfabric fabrics=(Spack default) lacks verbs, tcp, udp, shm, rxm")


def test_spack_libfabric_providers_not_excluded(repo: Path):
    """`fabrics=` is a lower bound: Spack 1.1 concretized fabrics:=rxm,shm,sockets,tcp,udp,verbs from it."""
    line = edit(repo / COMMON, '    conflict: ["fabrics=sockets", "fabrics=usnic"]\n', "")
    finding = only_finding(run_lint(repo))
    assert finding.line == line - 1
    assert finding.message == ("libfabric fabrics=rxm,shm,tcp,udp,verbs does not exclude sockets, usnic: Spack adds "
                               "its default providers to a fabrics= requirement (seen: sockets with Spack 1.1); add "
                               "conflict: [fabrics=sockets, fabrics=usnic]")


def _site_easyconfig(repo: Path, name: str, old: str, new: str) -> Path:
    """A site copy of one of the gompi/2023b stack's easyconfigs in the project's easyconfigs/ (the robot
    takes it before EasyBuild's own), edited."""
    root = Path(sys.prefix) / "easybuild" / "easyconfigs"
    original = next(root.rglob(name)).read_text()
    assert old in original, f"{old!r} not in {name}"
    path = repo / "easyconfigs" / name
    path.write_text(original.replace(old, new))
    return path


def test_easybuild_hwloc_without_pci_and_libfabric_with_sockets(repo: Path):
    """EasyBuild's side of the same facts: a site hwloc configured --disable-pci and a site libfabric that
    keeps the sockets provider, as EasyBuild's real dry run resolves them."""
    if shutil.which("eb") is None:
        pytest.fail("eb is not installed: ci/setup.sh installs EasyBuild", pytrace=False)
    hwloc = _site_easyconfig(repo, "hwloc-2.9.2-GCCcore-13.2.0.eb", 'configopts = "--disable-cairo',
                             'configopts = "--disable-pci --disable-cairo')
    libfabric = _site_easyconfig(repo, "libfabric-1.19.0-GCCcore-13.2.0.eb", 'configopts = "--disable-sockets "',
                                 'configopts = "--enable-sockets "')
    findings = {f.path: f for f in run_lint(repo, easybuild=True).findings}
    assert set(findings) == {f"easyconfigs/{hwloc.name}", f"easyconfigs/{libfabric.name}"}, findings
    assert findings[f"easyconfigs/{hwloc.name}"].message == (
        "EasyBuild's hwloc/2.9.2-GCCcore-13.2.0 is built without pci (its dependencies and configopts), the "
        "toolchain file (variants.hwloc.pci) says +pci")
    assert findings[f"easyconfigs/{libfabric.name}"].message == (
        "EasyBuild's libfabric/1.19.0-GCCcore-13.2.0 is built with sockets (its dependencies and configopts), the "
        "toolchain file (providers.libfabric.sockets) says ~sockets")


def test_easyconfig_features_of_the_gompi_2023b_stack():
    """The toolchain file's claims beyond versions hold for the easyconfigs EasyBuild ships."""
    root = Path(sys.prefix) / "easybuild" / "easyconfigs"
    text = {n: next(root.rglob(f"{n}-GCCcore-13.2.0.eb")).read_text()
            for n in ("hwloc-2.9.2", "libfabric-1.19.0", "UCX-1.15.0")}
    assert lint.easyconfig_features("hwloc", text["hwloc-2.9.2"]) == {"pci": True}
    fabric = lint.easyconfig_features("libfabric", text["libfabric-1.19.0"])
    assert fabric["verbs"] and fabric["tcp"] and not fabric["sockets"] and not fabric["usnic"]
    ucx = lint.easyconfig_features("ucx", text["UCX-1.15.0"])
    assert ucx["verbs"] and ucx["cma"] and not ucx["knem"] and not ucx["xpmem"]


def test_site_scope_whose_compiler_does_not_exist(repo: Path):
    report = run_lint(repo, site_scopes=[repo / "spack-envs" / "site-example" / "spack-1.x"])
    finding = only_finding(report)
    assert finding.path == "spack-envs/site-example/spack-1.x/packages.yaml"
    assert finding.message.startswith("external gcc@13.2.0 languages:='c,c++,fortran' has prefix "
                                      "/opt/apps/resif/iris-rhel8/2023b/broadwell/software/GCCcore/13.2.0, which "
                                      "does not exist on this machine")


def test_easybuild_stack_with_another_pmix(repo: Path):
    """A site OpenMPI easyconfig that pulls another PMIx: EasyBuild's real dry run resolves it."""
    if shutil.which("eb") is None:
        pytest.fail("eb is not installed: ci/setup.sh installs EasyBuild", pytrace=False)
    root = Path(sys.prefix) / "easybuild" / "easyconfigs"   # the easyconfigs pip's EasyBuild ships
    ompi = next(root.rglob("OpenMPI-4.1.6-GCC-13.2.0.eb"))
    pmix = next(root.rglob("PMIx-4.2.6-GCCcore-13.2.0.eb"))
    (repo / "easyconfigs" / ompi.name).write_text(ompi.read_text().replace("('PMIx', '4.2.6')", "('PMIx', '5.0.2')"))
    (repo / "easyconfigs" / "PMIx-5.0.2-GCCcore-13.2.0.eb").write_text(
        pmix.read_text().replace("version = '4.2.6'", "version = '5.0.2'"))
    line = next(i for i, text in enumerate((repo / "easyconfigs" / ompi.name).read_text().splitlines(), 1)
                if "'PMIx'" in text)
    finding = only_finding(run_lint(repo, easybuild=True))
    assert (finding.path, finding.line) == (f"easyconfigs/{ompi.name}", line)
    assert finding.message == ("EasyBuild resolves PMIx/5.0.2-GCCcore-13.2.0, the toolchain file (stack.pmix) "
                               "says PMIx 4.2.6")


def test_openmpi_version_in_the_common_spack_part(repo: Path):
    line = edit(repo / COMMON, '"@4.1.6 fabrics=', '"@4.1.5 fabrics=')
    finding = only_finding(run_lint(repo))
    assert (finding.path, finding.line) == (str(COMMON), line)
    assert "openmpi@4.1.5" in finding.message and "4.1.6" in finding.message


def test_easyconfig_checksum(repo: Path):
    line = edit(repo / EC, SHA, SHA[:-1] + "0")
    finding = only_finding(run_lint(repo))
    assert (finding.path, finding.line) == (str(EC), line)
    assert "checksum" in finding.message and SHA in finding.message


def test_eessi_module_name(repo: Path):
    line = edit(repo / TOOLCHAIN, "module: OSU-Micro-Benchmarks/7.2-gompi-2023b",
                "module: OSU-Micro-Benchmarks/7.2-gompi-2023a")
    finding = only_finding(run_lint(repo))
    assert (finding.path, finding.line) == (str(TOOLCHAIN), line)
    assert finding.message.startswith("EESSI module OSU-Micro-Benchmarks/7.2-gompi-2023a")


def test_eessi_subdir_a_partition_cannot_execute(repo: Path):
    line = edit(repo / "systems" / "iris.yaml", "eessi_subdir: x86_64/intel/haswell",
                "eessi_subdir: x86_64/intel/skylake_avx512")
    finding = only_finding(run_lint(repo))
    assert (finding.path, finding.line) == ("systems/iris.yaml", line)
    assert "iris:broadwell (broadwell) nodes cannot execute" in finding.message


@pytest.mark.parametrize("env, old, new", [
    ("aion-batch", "osu-micro-benchmarks@7.2 target=zen2 %gcc@13.2.0", "osu-micro-benchmarks@7.2 target=zen3 %gcc@13.2.0"),
    ("iris-broadwell", "osu-micro-benchmarks@7.2 target=broadwell %gcc@13.2.0",
     "osu-micro-benchmarks@7.2 %gcc@13.2.0 target=broadwell"),
    ("iris-broadwell", 'match: ["target=broadwell"]', 'match: ["target=haswell"]'),
])
def test_a_hand_edit_of_a_spack_env_is_out_of_date(repo: Path, env: str, old: str, new: str):
    """Root spec, target and ci mapping are rendered from systems/: a hand edit is named as such."""
    edit(repo / "spack-envs" / env / "spack.yaml", old, new)
    finding = only_finding(run_lint(repo))
    assert finding.path == f"spack-envs/{env}/spack.yaml"
    assert finding.message.startswith("is out of date with spack-envs/env.yaml.j2")


def test_spack_env_target_requirement(repo: Path):
    line = edit(repo / "spack-envs" / "aion-batch" / "spack.yaml", 'require: ["target=zen2"]', 'require: ["target=zen3"]')
    finding = only_finding(run_lint(repo))
    assert (finding.path, finding.line) == ("spack-envs/aion-batch/spack.yaml", line)
    assert "packages:all:require has target=zen3, but aion:batch builds for target=zen2" in finding.message


def test_spack_missing_mpi_feature(repo: Path):
    line = edit(repo / COMMON, "fabrics=ofi,ucc,ucx schedulers=slurm", "fabrics=ofi,ucc,ucx")
    finding = only_finding(run_lint(repo))
    assert finding.line == line and "schedulers=slurm" in finding.message


def test_spack_env_for_a_partition_no_system_has(repo: Path):
    (repo / "spack-envs" / "iris-broadwell").rename(repo / "spack-envs" / "iris-haswell")
    findings = {f.path: f for f in run_lint(repo).findings}
    assert "no system partition builds with Spack as iris-haswell" in findings["spack-envs/iris-haswell/spack.yaml"].message
    assert findings["spack-envs/iris-broadwell/spack.yaml"].message.startswith("does not exist with spack-envs/env.yaml.j2")


def test_easyconfig_version_and_toolchain(repo: Path):
    version_line = edit(repo / EC, "version = '7.2'", "version = '7.1'")
    tc_line = edit(repo / EC, "'version': '2023b'}", "'version': '2023a'}")
    findings = {f.line: f.message for f in run_lint(repo).findings if f.path == str(EC)}
    assert "version '7.1'" in findings[version_line]
    assert "gompi/2023a" in findings[tc_line]


def test_reframe_environment_modules(repo: Path):
    site = repo / "checks" / "config" / "site.yaml"
    site.parent.mkdir(parents=True, exist_ok=True)
    site.write_text(
        "systems: []\n"
        "environments:\n"
        "  - name: foss-2023b\n"
        "    modules: [gompi/2023b]\n"
        "  - name: easybuild\n"
        "    modules:\n"
        "      - OSU-Micro-Benchmarks/7.2-gompi-2023b\n"
        "      - OpenMPI/4.1.5-GCC-13.2.0\n"
        "    env_vars: [[EBVERSIONGCC, '12.3.0']]\n")
    findings = [f for f in run_lint(repo).findings if f.path == "checks/config/site.yaml"]
    assert [(f.line, f.message) for f in findings] == [
        (8, "environment easybuild: module OpenMPI/4.1.5-GCC-13.2.0: OpenMPI 4.1.5, the toolchain file says 4.1.6"),
        (9, "environment easybuild: EBVERSIONGCC=12.3.0, the toolchain file says 13.2.0"),
    ]


def test_a_derived_file_edited_by_hand(repo: Path):
    """The Slurm options live in systems/: a hand edit of the ReFrame partition is out of date."""
    edit(repo / "checks" / "config" / "site.yaml", '["--partition=batch", "--constraint=broadwell"]',
         '["--partition=batch", "--constraint=skylake"]')
    finding = only_finding(run_lint(repo))
    assert (finding.path, finding.line) == ("checks/config/site.yaml", 1)
    assert finding.message.startswith("is out of date with checks/config/site.yaml.j2")
    assert finding.message.endswith("run 'mpiregress generate'")


def test_a_system_edit_without_generate(repo: Path):
    edit(repo / "systems" / "aion.yaml", "slurm: [--partition=batch]", "slurm: [--partition=batch, --qos=high]")
    stale = sorted(f.path for f in run_lint(repo).findings)
    assert stale == [".gitlab-ci.yml", "checks/config/site.yaml", "spack-envs/aion-batch/spack.yaml"]


def test_baseline_toolchain(repo: Path):
    line = edit(repo / "baselines" / "iris.yaml", 'toolchain: "2023b"', 'toolchain: "2023a"')
    finding = only_finding(run_lint(repo))
    assert (finding.path, finding.line) == ("baselines/iris.yaml", line)


def test_invalid_yaml_is_a_finding_with_its_line(repo: Path):
    env = repo / "spack-envs" / "iris-skylake" / "spack.yaml"
    line = edit(env, "  view: false\n", "  view: [false\n")
    finding = only_finding(run_lint(repo))
    assert finding.path == "spack-envs/iris-skylake/spack.yaml" and "not valid YAML" in finding.message
    assert abs(finding.line - line) <= 2


def test_missing_toolchain_file_is_an_input_error(tmp_path: Path):
    with pytest.raises(InputError, match="does not exist"):
        lint.lint(tmp_path)


def test_cli_exit_codes(repo: Path, capsys):
    assert cli.main(["lint", "--root", str(repo), "--easybuild", "no"]) == 0
    assert capsys.readouterr().out.splitlines()[-1].startswith("lint: ok")
    line = edit(repo / COMMON, "@4.1.6 fabrics", "@4.1.5 fabrics")
    assert cli.main(["lint", "--root", str(repo), "--easybuild", "no"]) == 2
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(f"spack-envs/common.yaml:{line}: ")
    assert out[-1] == "lint: 1 finding in 1 file: build definitions disagree with toolchains/2023b.yaml"


def test_cli_toolchain_option_and_real_process(repo: Path):
    """The installed command, as CI runs it: a toolchain file given explicitly."""
    other = repo / "toolchains" / "other.yaml"
    other.write_text((repo / TOOLCHAIN).read_text().replace('version: "4.1.6"', 'version: "4.1.7"'))
    proc = subprocess.run([sys.executable, "-m", "mpiregress", "lint", "--root", str(repo),
                           "--toolchain", str(other), "--easybuild", "no"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "openmpi@4.1.6, the toolchain file says 4.1.7" in proc.stdout
    assert proc.stdout.strip().splitlines()[-1].endswith("disagree with toolchains/other.yaml")
