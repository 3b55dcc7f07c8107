"""One code path (issue 22, item 4): the runner and the checks never ask whether the system is called
`local`. What sets the local system apart is data in systems/local.yaml, read the same way for any
system: its `cluster:` section (the project starts this Slurm), `builds: on_demand`, `modules_system`,
and its partition's `target: host` and `topology: detect`. A copy of local.yaml under another name
gets the same treatment, down to a real ReFrame dry run in a checkout where only data was added.
"""
from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from test_systems import _copy_checkout, _mpiregress

from mpiregress.model import microarch, systems
from mpiregress.paths import REPO_ROOT
from mpiregress.run import options, reframe_launch

# A comparison with the name, or a lookup of the local system by name: what a branch on it looks like.
NAME_BRANCH = re.compile(r"""(==|!=|\bin)\s*\(?\s*['"]local['"]|\.get\(\s*['"]local['"]\s*\)""")


def test_no_code_branches_on_the_local_system_name():
    found = [f"{path.relative_to(REPO_ROOT)}:{number}: {line.strip()}"
             for folder in ("mpiregress", "checks")
             for path in sorted((REPO_ROOT / folder).rglob("*.py"))
             for number, line in enumerate(path.read_text().splitlines(), 1) if NAME_BRANCH.search(line)]
    assert found == [], "branches on the system name; make the difference data in systems/<name>.yaml"


# The pipeline's job scripts: a test of the system's name in shell ([ "$MPIREGRESS_SYSTEM" = local ]).
SHELL_NAME_BRANCH = re.compile(r"""MPIREGRESS_SYSTEM[^\n]*\]?\s*!?=\s*['"]?local\b""")


def test_no_job_script_branches_on_the_local_system_name():
    found = [f"{path.relative_to(REPO_ROOT)}:{number}: {line.strip()}"
             for path in sorted((REPO_ROOT / "ci").rglob("*.sh"))
             for number, line in enumerate(path.read_text().splitlines(), 1)
             if SHELL_NAME_BRANCH.search(line) and not line.lstrip().startswith("#")]
    assert found == [], "job scripts branch on the system name; make the difference data"


@pytest.fixture
def proving_systems(tmp_path: Path, monkeypatch) -> Path:
    """The checkout's systems plus `proving`, a copy of local.yaml under another name."""
    folder = tmp_path / "systems"
    shutil.copytree(REPO_ROOT / "systems", folder)
    shutil.copy(folder / "local.yaml", folder / "proving.yaml")
    monkeypatch.setenv("MPIREGRESS_SYSTEMS_DIR", str(folder))
    return folder


def _traits(name: str) -> dict:
    system = systems.get(name)
    part = system.partitions[0]
    return {"managed_cluster": system.managed_cluster, "builds_on_demand": system.builds_on_demand,
            "uses_lmod": system.uses_lmod, "build_target": part.build_target(),
            "detects_topology": part.detects_topology}


def test_a_copy_of_local_yaml_reads_as_the_local_system(proving_systems):
    assert _traits("proving") == _traits("local") == {
        "managed_cluster": True, "builds_on_demand": True, "uses_lmod": False,
        "build_target": microarch.host_target(), "detects_topology": True}
    assert _traits("iris") == {"managed_cluster": False, "builds_on_demand": False, "uses_lmod": True,
                               "build_target": "broadwell", "detects_topology": False}


def test_lmod_is_initialised_by_the_modules_system_not_the_name(proving_systems, tmp_path, monkeypatch):
    init = tmp_path / "lmod-init.sh"
    init.write_text("# Lmod's bash init\n")
    monkeypatch.setattr(reframe_launch, "LMOD_INIT", init)
    env = {"PATH": "/usr/bin:/bin"}
    commands = {name: reframe_launch.reframe_command(options.RunOptions(system=name, report_dir=tmp_path / name,
                                                                families=["pt2pt"]), ["source"], env)
                for name in ("proving", "local", "iris")}
    assert commands["iris"][:2] == ["bash", "-c"] and str(init) in commands["iris"][2]
    for name in ("proving", "local"):
        assert commands[name][0] != "bash" and "--system" in commands[name]


@pytest.mark.slow
def test_a_system_added_as_a_copy_of_local_yaml_dry_runs_like_local(tmp_path: Path):
    repo = _copy_checkout(tmp_path)
    (repo / "systems" / "proving.yaml").write_text((repo / "systems" / "local.yaml").read_text())
    (repo / "baselines" / "proving.yaml").write_text(
        (repo / "baselines" / "local.yaml").read_text().replace("\nsystem: local\n", "\nsystem: proving\n"))
    done = _mpiregress(repo, "generate")
    assert done.returncode == 0, done.stderr

    report_dir = tmp_path / "dry-run-proving"
    done = _mpiregress(repo, "run", "--system", "proving", "--dry-run", "--families", "pt2pt", "--methods",
                       "source", "--report-dir", str(report_dir), timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    host = microarch.host_target()
    # topology: detect -> this host's topology written where ReFrame reads the partition's.
    detected = json.loads((repo / "checks" / "topology" / "proving-batch" / "processor.json").read_text())
    assert detected["arch"] == host
    # target: host -> the planned build is for this host's target, and the job script's guard says so.
    assert [p.name for p in (report_dir / "planned-manifests").iterdir()] == [f"source-{host}.json"]
    scripts = sorted((report_dir / "reframe" / "stage").rglob("rfm_job.sh"))
    assert scripts and all("proving/batch" in str(s) for s in scripts)
    text = scripts[0].read_text()
    assert "#SBATCH --partition=batch" in text and f"mpiregress guard --build-target {host}" in text
    # modules_system: nomod -> no module command in the job, as for local.
    assert "module load" not in text
