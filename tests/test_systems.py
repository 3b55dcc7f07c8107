"""One data file per system (systems/<name>.yaml), and everything derived from it.

* the derived files in the checkout are what `mpiregress generate` renders;
* names.SYSTEMS, the toolchain's partitions, the ReFrame partitions and the pipeline's
  per-system jobs all come from the systems data;
* a `demo` cluster added from systems/template.yaml.in (plus its baselines and topology
  files, data only) is accepted by lint, a real ReFrame dry run and gitlab-ci-local's job
  listing, with no Python file changed.
"""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from test_gitlab_ci import LINT, _git, gcl, gitlab_ci_local, make_repo  # noqa: F401 (fixture)

from mpiregress.definitions import generate
from mpiregress.errors import InputError
from mpiregress.model import names, systems, toolchain
from mpiregress.paths import REPO_ROOT


def test_derived_files_are_up_to_date():
    assert generate.stale(REPO_ROOT) == [], "run 'mpiregress generate' and commit the result"
    assert generate.orphans(REPO_ROOT) == []


def test_vocabulary_and_partitions_come_from_the_data():
    assert set(names.SYSTEMS) == {p.stem for p in (REPO_ROOT / "systems").glob("*.yaml")}
    tc = toolchain.load(toolchain.default_path())
    parts = {(p.system, p.partition): (p.target, p.constraint, p.eessi_subdir) for p in tc.partitions()}
    assert parts == {("iris", "broadwell"): ("broadwell", "broadwell", "x86_64/intel/haswell"),
                     ("iris", "skylake"): ("skylake_avx512", "skylake", "x86_64/intel/skylake_avx512"),
                     ("aion", "batch"): ("zen2", "", "x86_64/amd/zen2")}
    site = yaml.safe_load((REPO_ROOT / "checks" / "config" / "site.yaml").read_text())
    access = {(s["name"], p["name"]): p["access"] for s in site["systems"] for p in s["partitions"]}
    assert access[("iris", "skylake")] == ["--partition=batch", "--constraint=skylake"]
    pipeline = yaml.safe_load((REPO_ROOT / ".gitlab-ci.yml").read_text())
    assert pipeline["build:iris:skylake"]["variables"]["MPIREGRESS_SLURM_PARTITION_ARGS"] == \
        "--partition=batch --constraint=skylake"


@pytest.mark.parametrize("edit, key", [
    (lambda d: d["runner"].pop("tags"), "'runner.tags' is missing"),
    (lambda d: d["runner"].update(executor="ssh"), "'runner.executor' must be one of jacamar, shell"),
    (lambda d: d["partitions"]["batch"].update(slurm="--partition=batch"), "'partitions.batch.slurm' must be a list"),
    (lambda d: d.update(noise_floor={"efficiency": 1.5}), "'noise_floor' efficiency must be a number in"),
    (lambda d: d.update(noise_floor={"max_detour_us": -3}), "'noise_floor' max_detour_us must be a positive"),
    (lambda d: d.update(noise_floor={"detour": 500}), "'noise_floor' must be a mapping with 'efficiency'"),
    (lambda d: d.update(known_noise_sources={"hz": 100}), "'known_noise_sources' must be a list of {hz: rate"),
    (lambda d: d.update(known_noise_sources=[{"hz": 0, "what": "a timer"}]),
     "'known_noise_sources' hz must be a positive rate in Hz, found 0"),
    (lambda d: d.update(known_noise_sources=[{"hz": 100}]), "'known_noise_sources' what must say what the 100 Hz"),
    (lambda d: d.update(known_noise_sources=[{"hz": 100, "what": "x", "phase": 2}]),
     "'known_noise_sources' has unknown setting(s) phase (known: hz, what)"),
    (lambda d: d.update(weekly_sweeps=["pt2pt-swep"]), "'weekly_sweeps' unknown famil(ies) pt2pt-swep"),
    (lambda d: d.update(run_noise={"latency": 15}), "'run_noise' must map metrics (latency, bandwidth, efficiency, max_detour) to a relative"),
    (lambda d: d.update(run_noise={"lag": 0.1}), "'run_noise' must map metrics"),
    # What sets the local system apart is data any system may carry, checked as such.
    (lambda d: d["partitions"]["batch"].pop("target"), "'partitions.batch.target' must be an archspec target"),
    (lambda d: d["partitions"]["batch"].update(target="zen9"), "'partitions.batch.target' 'zen9' is not a micro"),
    (lambda d: d["partitions"]["batch"].update(topology="probe"),
     "'partitions.batch.topology' must be one of recorded, detect, found 'probe'"),
    (lambda d: d.update(builds="nightly"), "'builds' must be one of pipeline, on_demand, found 'nightly'"),
    (lambda d: d.update(modules_system="tmod"), "'modules_system' must be one of lmod, nomod, found 'tmod'"),
    (lambda d: d.update(cluster="managed"), "'cluster' must be a mapping"),
    (lambda d: d.update(cluster={"network": "wifi"}), "'cluster' network must be one of"),
    (lambda d: d.update(reframe_general={"poll_rate_min": 0}), "'reframe_general' must map ReFrame's general options"),
    (lambda d: d.update(reframe_general={"purge_environment": 1}), "'reframe_general' must map ReFrame's general"),
    (lambda d: d["partitions"]["batch"].setdefault("reframe", {}).setdefault("extras", {}).update(
        links={"ratio": 1}), "'partitions.batch.reframe.extras.links' ratio must be a number above 1"),
    (lambda d: d["partitions"]["batch"].setdefault("reframe", {}).setdefault("extras", {}).update(
        links={"statistic": "mode"}), "'partitions.batch.reframe.extras.links' statistic must be one of median, "),
    (lambda d: d["partitions"]["batch"].setdefault("reframe", {}).setdefault("extras", {}).update(
        links={"metrics": ["bandwith"]}), "'partitions.batch.reframe.extras.links' metrics must name some of"),
    (lambda d: d["partitions"]["batch"].setdefault("reframe", {}).setdefault("extras", {}).update(
        links="serial"), "'partitions.batch.reframe.extras.links' must be a mapping"),
    (lambda d: d["partitions"]["batch"].setdefault("reframe", {}).setdefault("extras", {}).update(
        links={"ration": 3}), "'partitions.batch.reframe.extras.links' has unknown setting(s) ration (known: "),
    (lambda d: d["partitions"]["batch"].setdefault("reframe", {}).setdefault("extras", {}).update(
        step_timout=400), "'partitions.batch.reframe.extras' has unknown setting(s) step_timout (known: "),
    (lambda d: d["partitions"]["batch"].setdefault("reframe", {}).setdefault("extras", {}).update(
        fwq_iterations="6s"), "'partitions.batch.reframe.extras.fwq_iterations' must be a whole number of FWQ "),
    (lambda d: d["partitions"]["batch"].setdefault("reframe", {}).setdefault("extras", {}).update(
        coll={"cores": 4}), "'partitions.batch.reframe.extras.coll' has unknown setting(s) cores (known: "),
    (lambda d: d["partitions"]["batch"].setdefault("reframe", {}).setdefault("extras", {}).update(
        osu_iterations={"bandwith": 200}), "'partitions.batch.reframe.extras.osu_iterations' has unknown setting(s) "
                                           "bandwith (known: latency, bandwidth"),
    (lambda d: d["partitions"]["batch"].setdefault("reframe", {}).setdefault("extras", {}).update(
        osu_iterations={"bandwidth": 0}), "'partitions.batch.reframe.extras.osu_iterations' bandwidth: 0 is out of "),
    (lambda d: d["partitions"]["batch"].setdefault("reframe", {}).setdefault("extras", {}).update(
        osu_iterations=200), "'partitions.batch.reframe.extras.osu_iterations' must map metrics to measured "),
])
def test_a_bad_system_file_is_one_sentence_naming_the_key(tmp_path: Path, edit, key):
    data = yaml.safe_load((REPO_ROOT / "systems" / "aion.yaml").read_text())
    edit(data)
    path = tmp_path / "aion.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(InputError, match=f"system file {path}: {key}".replace("(", r"\(").replace(")", r"\)")):
        systems.load_file(path)


def test_reframe_polls_the_local_queue_at_least_once_a_second_and_the_clusters_at_its_default():
    """systems/<name>.yaml's reframe_general reaches ReFrame for that system only, as ReFrame itself resolves it."""
    def poll_rate_min(system: str) -> str:
        cmd = [str(Path(sys.executable).parent / "reframe"), "-C", str(REPO_ROOT / "checks" / "config" / "site.yaml"),
               "--system", system, "--show-config=general/0/poll_rate_min"]
        done = subprocess.run(["bash", "-c", "source /usr/share/lmod/lmod/init/bash && exec \"$@\"", "-", *cmd],
                              capture_output=True, text=True, timeout=120, cwd=REPO_ROOT)
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout.strip().splitlines()[-1]

    assert systems.get("local").data["reframe_general"] == {"poll_rate_min": 1}
    assert poll_rate_min("local") == "1"
    assert poll_rate_min("iris:broadwell") == "0.1"     # ReFrame's default


def test_generate_check_exits_2_when_out_of_date(tmp_path: Path):
    repo = _copy_checkout(tmp_path)
    path = repo / "systems" / "aion.yaml"
    path.write_text(path.read_text().replace("slurm: [--partition=batch]", "slurm: [--partition=large]"))
    done = _mpiregress(repo, "generate", "--check")
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.strip().splitlines()[-1].endswith("run 'mpiregress generate'")
    assert ".gitlab-ci.yml is out of date" in done.stderr and "Traceback" not in done.stderr


def _copy_checkout(tmp_path: Path) -> Path:
    from test_gitlab_ci import working_tree_files

    repo = tmp_path / "checkout"
    for rel in working_tree_files():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO_ROOT / rel, repo / rel)
    return repo


def _mpiregress(repo: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """`mpiregress ARGS` running the copy's own code (its REPO_ROOT is the copy)."""
    env = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "PYTHONPATH": str(repo),
           "MPIREGRESS_STATE_DIR": str(repo / "var"), "HOME": str(repo.parent)}
    return subprocess.run([sys.executable, "-m", "mpiregress", *args], cwd=repo, env=env, capture_output=True,
                          text=True, timeout=timeout)


def add_demo_cluster(repo: Path) -> None:
    """What a site admin does to add a cluster: data files only (the topology of an EPYC 7H12
    node, so the target is zen2: the run refuses a binary its nodes cannot execute)."""
    template = (repo / "systems" / "template.yaml.in").read_text()
    (repo / "systems" / "demo.yaml").write_text(template.replace("@NAME@", "demo").replace("@TARGET@", "zen2")
                                                .replace("@EESSI_SUBDIR@", "x86_64/amd/zen2"))
    (repo / "baselines" / "demo.yaml").write_text(
        "schema: mpiregress-baselines/1\nsystem: demo\ntoolchain: \"2023b\"\nprovenance: {}\nreferences: {}\n")
    shutil.copytree(repo / "checks" / "topology" / "aion-batch", repo / "checks" / "topology" / "demo-batch")


@pytest.mark.slow
def test_a_demo_cluster_needs_no_python_change(gitlab_ci_local, tmp_path: Path):
    repo = make_repo(tmp_path, change=add_demo_cluster, message="add the demo cluster")
    before = set(_git(repo, "ls-files", "*.py").split())

    done = _mpiregress(repo, "generate")
    assert done.returncode == 0, done.stderr
    wrote = set(done.stdout.split("generate: wrote ")[1:])
    assert {w.strip() for w in wrote} == {".gitlab-ci.yml", "checks/config/site.yaml", "spack-envs/demo-batch/spack.yaml"}

    done = _mpiregress(repo, "lint", "--easybuild", "no")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "systems/ (aion, demo, iris, local" in done.stdout and "demo-batch" in done.stdout

    # A real ReFrame dry run on the demo system: job scripts written for its partition.
    report_dir = tmp_path / "dry-run-demo"
    done = _mpiregress(repo, "run", "--system", "demo", "--dry-run", "--methods", "source",
                       "--report-dir", str(report_dir), timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    scripts = sorted((report_dir / "reframe" / "stage").rglob("rfm_job.sh"))
    assert scripts and all("demo/batch" in str(s) for s in scripts)
    assert "#SBATCH --partition=batch" in scripts[0].read_text()

    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "generated files for demo")
    assert set(_git(repo, "ls-files", "*.py").split()) == before, "a Python file was added or removed"
    assert _git(repo, "diff", "--name-only", "origin/main", "--", "*.py") == ""
    done = gcl(gitlab_ci_local, repo, "--list-json",
               variables={"CI_PIPELINE_SOURCE": "schedule", "MPIREGRESS_SYSTEMS": "demo"})
    assert done.returncode == 0, done.stdout + done.stderr
    jobs = {job["name"] for job in json.loads(done.stdout) if job["when"] != "never"}
    demo = {name for name in jobs if "demo" in name}
    assert demo == {"lint:dry-run:demo", "run:demo:batch", "verdict:demo", "history:demo", "proposal:demo",
                    *(f"build:demo:batch: [{m}]" for m in ("source", "spack", "easybuild", "eessi")),
                    # the weekly schedule's own jobs: collective and point-to-point sweeps, link matrix, noise
                    "sweep:demo:batch", "pt2pt-sweep:demo:batch", "links:demo:batch", "noise:demo:batch"}
    assert jobs - demo == LINT   # the off-cluster lint jobs every pipeline has; no other system's jobs
