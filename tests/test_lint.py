"""`mpiregress lint`: the repository agrees with its toolchain file, and a one-line
change anywhere that repeats a toolchain fact fails, naming the file and the line."""
from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mpiregress import cli, lint
from mpiregress.errors import InputError
from mpiregress.paths import REPO_ROOT

TOOLCHAIN = Path("toolchains") / "2023b.yaml"
EC = Path("easyconfigs") / "OSU-Micro-Benchmarks-7.2-gompi-2023b.eb"
SHA = "1a4e1f2aab0e65404b3414e23bd46616184b69b6231ce9313d9c630bd6e633c1"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A copy of everything lint reads, to edit without touching the checkout."""
    for name in ("toolchains", "spack-envs", "easyconfigs", "baselines"):
        shutil.copytree(REPO_ROOT / name, tmp_path / name)
    site = REPO_ROOT / "checks" / "config" / "site.yaml"
    if site.is_file():
        (tmp_path / "checks" / "config").mkdir(parents=True)
        shutil.copy(site, tmp_path / "checks" / "config" / "site.yaml")
    return tmp_path


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
    for what in ("spack-envs/", "aion-zen2", "iris-broadwell", "iris-skylake", EC.name, "baselines/",
                 "OSU-Micro-Benchmarks/7.2-gompi-2023b"):
        assert what in checked


def test_lint_is_fast():
    start = time.monotonic()
    lint.lint(REPO_ROOT)
    assert time.monotonic() - start < 3


def test_openmpi_version_in_one_spack_env(repo: Path):
    env = repo / "spack-envs" / "iris-skylake" / "spack.yaml"
    line = edit(env, "@4.1.6 fabrics=ucx", "@4.1.5 fabrics=ucx")
    finding = only_finding(lint.lint(repo))
    assert (finding.path, finding.line) == ("spack-envs/iris-skylake/spack.yaml", line)
    assert "openmpi@4.1.5" in finding.message and "4.1.6" in finding.message


def test_easyconfig_checksum(repo: Path):
    line = edit(repo / EC, SHA, SHA[:-1] + "0")
    finding = only_finding(lint.lint(repo))
    assert (finding.path, finding.line) == (str(EC), line)
    assert "checksum" in finding.message and SHA in finding.message


def test_eessi_module_name(repo: Path):
    line = edit(repo / TOOLCHAIN, "module: OSU-Micro-Benchmarks/7.2-gompi-2023b",
                "module: OSU-Micro-Benchmarks/7.2-gompi-2023a")
    finding = only_finding(lint.lint(repo))
    assert (finding.path, finding.line) == (str(TOOLCHAIN), line)
    assert finding.message.startswith("EESSI module OSU-Micro-Benchmarks/7.2-gompi-2023a")


def test_eessi_subdir_a_partition_cannot_execute(repo: Path):
    line = edit(repo / TOOLCHAIN, "eessi_subdir: x86_64/intel/haswell", "eessi_subdir: x86_64/intel/skylake_avx512")
    finding = only_finding(lint.lint(repo))
    assert (finding.path, finding.line) == (str(TOOLCHAIN), line)
    assert "iris:broadwell (broadwell) nodes cannot execute" in finding.message


def test_spack_env_target_and_compiler(repo: Path):
    env = repo / "spack-envs" / "aion-zen2" / "spack.yaml"
    spec_line = edit(env, "osu-micro-benchmarks@7.2 target=zen2 %gcc@13.2.0",
                     "osu-micro-benchmarks@7.2 target=zen3 %gcc@13.1.0")
    require_line = edit(env, 'require: ["target=zen2"]', 'require: ["target=zen3"]')
    findings = lint.lint(repo).findings
    where = {(f.path, f.line) for f in findings}
    assert ("spack-envs/aion-zen2/spack.yaml", spec_line) in where
    assert ("spack-envs/aion-zen2/spack.yaml", require_line) in where
    text = "\n".join(map(str, findings))
    assert "target=zen3" in text and "%gcc@13.1.0" in text and "target=zen2" in text


def test_spack_target_after_compiler(repo: Path):
    env = repo / "spack-envs" / "iris-broadwell" / "spack.yaml"
    line = edit(env, "osu-micro-benchmarks@7.2 target=broadwell %gcc@13.2.0",
                "osu-micro-benchmarks@7.2 %gcc@13.2.0 target=broadwell")
    finding = only_finding(lint.lint(repo))
    assert finding.line == line and "before the compiler" in finding.message


def test_spack_missing_mpi_feature(repo: Path):
    env = repo / "spack-envs" / "iris-broadwell" / "spack.yaml"
    line = edit(env, "fabrics=ucx schedulers=slurm", "fabrics=ucx")
    finding = only_finding(lint.lint(repo))
    assert finding.line == line and "schedulers=slurm" in finding.message


def test_spack_ci_mapping_for_another_target(repo: Path):
    env = repo / "spack-envs" / "iris-broadwell" / "spack.yaml"
    line = edit(env, 'match: ["target=broadwell"]', 'match: ["target=haswell"]')
    findings = lint.lint(repo).findings
    assert any(f.line == line and "target=haswell" in f.message for f in findings)
    assert any("no ci submapping matches target=broadwell" in f.message for f in findings)


def test_spack_env_for_a_partition_the_toolchain_does_not_have(repo: Path):
    (repo / "spack-envs" / "iris-broadwell").rename(repo / "spack-envs" / "iris-haswell")
    findings = {f.path: f for f in lint.lint(repo).findings}
    assert "matches no partition" in findings["spack-envs/iris-haswell/spack.yaml"].message
    missing = findings[str(TOOLCHAIN)]
    assert "no Spack environment for iris:broadwell" in missing.message
    assert (repo / TOOLCHAIN).read_text().splitlines()[missing.line - 1].strip().startswith("broadwell:")


def test_easyconfig_version_and_toolchain(repo: Path):
    version_line = edit(repo / EC, "version = '7.2'", "version = '7.1'")
    tc_line = edit(repo / EC, "'version': '2023b'}", "'version': '2023a'}")
    findings = {f.line: f.message for f in lint.lint(repo).findings if f.path == str(EC)}
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
    findings = [f for f in lint.lint(repo).findings if f.path == "checks/config/site.yaml"]
    assert [(f.line, f.message) for f in findings] == [
        (8, "environment easybuild: module OpenMPI/4.1.5-GCC-13.2.0: OpenMPI 4.1.5, the toolchain file says 4.1.6"),
        (9, "environment easybuild: EBVERSIONGCC=12.3.0, the toolchain file says 13.2.0"),
    ]


def test_reframe_partition_constraint(repo: Path):
    site = repo / "checks" / "config" / "site.yaml"
    site.parent.mkdir(parents=True, exist_ok=True)
    site.write_text(
        "systems:\n"
        "  - name: iris\n"
        "    partitions:\n"
        "      - name: broadwell\n"
        "        access: ['--partition=batch', '--constraint=skylake']\n"
        "      - name: skylake\n"
        "        access: ['--partition=batch', '--constraint=skylake']\n"
        "environments: []\n")
    finding = only_finding(lint.lint(repo))
    assert (finding.path, finding.line) == ("checks/config/site.yaml", 5)
    assert "--constraint=broadwell" in finding.message


def test_baseline_toolchain(repo: Path):
    line = edit(repo / "baselines" / "iris.yaml", 'toolchain: "2023b"', 'toolchain: "2023a"')
    finding = only_finding(lint.lint(repo))
    assert (finding.path, finding.line) == ("baselines/iris.yaml", line)


def test_invalid_yaml_is_a_finding_with_its_line(repo: Path):
    env = repo / "spack-envs" / "iris-skylake" / "spack.yaml"
    line = edit(env, "  view: false\n", "  view: [false\n")
    finding = only_finding(lint.lint(repo))
    assert finding.path == "spack-envs/iris-skylake/spack.yaml" and "not valid YAML" in finding.message
    assert abs(finding.line - line) <= 2


def test_missing_toolchain_file_is_an_input_error(tmp_path: Path):
    with pytest.raises(InputError, match="does not exist"):
        lint.lint(tmp_path)


def test_cli_exit_codes(repo: Path, capsys):
    assert cli.main(["lint", "--root", str(repo)]) == 0
    assert capsys.readouterr().out.splitlines()[-1].startswith("lint: ok")
    line = edit(repo / "spack-envs" / "iris-skylake" / "spack.yaml", "@4.1.6 fabrics", "@4.1.5 fabrics")
    assert cli.main(["lint", "--root", str(repo)]) == 2
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(f"spack-envs/iris-skylake/spack.yaml:{line}: ")
    assert out[-1] == "lint: 1 finding in 1 file: build definitions disagree with toolchains/2023b.yaml"


def test_cli_toolchain_option_and_real_process(repo: Path):
    """The installed command, as CI runs it: a toolchain file given explicitly."""
    other = repo / "toolchains" / "other.yaml"
    other.write_text((repo / TOOLCHAIN).read_text().replace('version: "4.1.6"', 'version: "4.1.7"'))
    proc = subprocess.run([sys.executable, "-m", "mpiregress", "lint", "--root", str(repo),
                           "--toolchain", str(other)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "openmpi@4.1.6, the toolchain file says 4.1.7" in proc.stdout
    assert proc.stdout.strip().splitlines()[-1].endswith("disagree with toolchains/other.yaml")
