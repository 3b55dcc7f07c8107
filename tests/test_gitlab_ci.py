"""The GitLab pipeline (.gitlab-ci.yml) and its runner configuration.

* The file validates against GitLab's own schema, offline (check-jsonschema).
* gitlab-ci-local (pinned, installed by ci/install-gitlab-ci-local.sh) lists which jobs each
  trigger creates: an MR touching a toolchain file, an MR touching only docs, a fork MR, the
  weekly schedule, a web run. `rules:changes` diffs against an `origin` remote, so every case
  runs in a temporary git repository: a copy of this working tree committed as `main`, an
  `origin/main` ref, and an MR branch with one change.
* The same pipeline really runs with gitlab-ci-local's shell executor against the local
  one-host Slurm (the `local` system): the toolchain MR passes; the same MR with a broken
  local baseline fails at the run job (and still writes its report); the docs MR runs lint
  only; the schedule runs the local matrix and records history. Nothing is mocked: these
  jobs run `mpiregress lint/build/run/compare/report/history` as CI does.
Jacamar, GitLab itself and the clusters cannot run here: their configuration is checked for
the properties the pipeline's safety depends on (tags, fork gate, retry policy,
SCHEDULER_PARAMETERS, resource groups, downscoping), not run.
"""
from __future__ import annotations

import base64
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path
from typing import Iterator

import pytest
import yaml
from helpers.e2e import widen_bands
from helpers.osu_double import make_tarball
from shared import REPO

GCL_INSTALL = REPO / "ci" / "install-gitlab-ci-local.sh"
GCL = REPO / "ci" / ".tools" / "bin" / "gitlab-ci-local"
PROJECT_PATH = "ulhpc/mpiregress"
# Only parsed by gitlab-ci-local (CI_PROJECT_PATH); never contacted.
REMOTE_URL = f"https://gitlab.example.org/{PROJECT_PATH}.git"

LINT = {"lint:toolchain", "lint:pipeline", "lint:easybuild", "lint:dry-run:local"}
# systems/local.yaml methods: source, easybuild (real EasyBuild with the host's toolchain) and spack (exit 4, allowed,
# where no Spack is on PATH).
LOCAL_BENCH = {"build:local:batch: [source]", "build:local:batch: [easybuild]", "build:local:batch: [spack]",
               "run:local:batch", "verdict:local"}
METHODS = ("source", "spack", "easybuild", "eessi")
CLUSTER_BENCH = (
    {f"build:iris:{p}: [{m}]" for p in ("broadwell", "skylake") for m in METHODS}
    | {f"build:aion:batch: [{m}]" for m in METHODS}
    | {"run:iris:broadwell", "run:iris:skylake", "run:aion:batch", "verdict:iris", "verdict:aion"}
)
CLUSTER_HISTORY = {"history:iris", "history:aion"}
# The schedule's baseline proposal merge request, per system, after its verdict and history jobs.
CLUSTER_PROPOSAL = {"proposal:iris", "proposal:aion"}
# Toolchain MRs only: the MR's builds against the target branch's, interleaved (issue 13).
LOCAL_AB = {"ab:local:batch"}
CLUSTER_AB = {"ab:iris:broadwell", "ab:iris:skylake", "ab:aion:batch"}
CLUSTER_PARTITIONS = ("iris:broadwell", "iris:skylake", "aion:batch")
# The weekly schedule's own jobs on the clusters: collective and point-to-point sweeps, link matrix, OS noise
# per partition.
CLUSTER_WEEKLY = {f"{job}:{p}" for job in ("sweep", "pt2pt-sweep", "links", "noise") for p in CLUSTER_PARTITIONS}


# ----------------------------------------------------------------------------- helpers

@pytest.fixture(scope="session")
def gitlab_ci_local() -> Path:
    """The pinned gitlab-ci-local, installed from the npm registry on first use."""
    # --shell-isolation copies each job's checkout with rsync.
    if not shutil.which("rsync"):
        pytest.fail("gitlab-ci-local --shell-isolation needs rsync: the setup script must install it "
                    "(apt-get install rsync)", pytrace=False)
    if not GCL.exists():
        done = subprocess.run(["bash", str(GCL_INSTALL)], capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, f"ci/install-gitlab-ci-local.sh failed:\n{done.stdout}\n{done.stderr}"
    assert GCL.exists(), f"{GCL} missing after ci/install-gitlab-ci-local.sh"
    return GCL


def _git(repo: Path, *args: str) -> str:
    env = dict(os.environ, GIT_AUTHOR_NAME="mpiregress test", GIT_AUTHOR_EMAIL="test@example.org",
               GIT_COMMITTER_NAME="mpiregress test", GIT_COMMITTER_EMAIL="test@example.org")
    done = subprocess.run(["git", *args], cwd=repo, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"git {' '.join(args)}: {done.stderr}"
    return done.stdout


def working_tree_files() -> list[str]:
    """Tracked and untracked-but-not-ignored files of this checkout (what a commit would hold)."""
    out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                         cwd=REPO, capture_output=True, text=True, check=True).stdout
    return sorted({f for f in out.split("\0") if f and (REPO / f).is_file()})


def make_repo(tmp_path: Path, change=None, message: str = "change", widen: bool = True) -> Path:
    """A git repo holding this working tree as `main` (also as origin/main), on an MR branch
    with ``change(repo)`` committed (None: the branch equals main). ``widen=False`` keeps the
    baselines as a user has them (the proving-ground benchmarks)."""
    repo = tmp_path / "repo"
    repo.mkdir()
    for rel in working_tree_files():
        target = repo / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / rel, target)
    # The pipelines these tests run judge real measurements on a shared, loaded machine: their
    # baselines get very wide bands, so what a test checks (jobs, artifacts, codes) is not decided
    # by this machine's speed (issue 20: cross_node latency 64.5 us against a 58.8 us limit at load 51).
    if widen:
        widen_bands(repo / "baselines" / "local.yaml")
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "main")
    # The "remote": gitlab-ci-local diffs rules:changes against origin/<default branch> and
    # derives CI_PROJECT_PATH from the remote URL. No fetch ever happens.
    _git(repo, "remote", "add", "origin", REMOTE_URL)
    _git(repo, "update-ref", "refs/remotes/origin/main", "HEAD")
    _git(repo, "symbolic-ref", "refs/remotes/origin/HEAD", "refs/remotes/origin/main")
    _git(repo, "checkout", "-q", "-b", "mr-branch")
    if change is not None:
        change(repo)
        _git(repo, "add", "-A")
        _git(repo, "commit", "-q", "-m", message)
    return repo


def touch_toolchain(repo: Path) -> None:
    path = repo / "toolchains" / "2023b.yaml"
    path.write_text(path.read_text() + "# MR under test: a toolchain comment, same values\n")


def touch_docs(repo: Path) -> None:
    path = repo / "docs" / "architecture.md"
    path.write_text(path.read_text() + "\nA docs-only change.\n")


def break_local_latency_baseline(repo: Path) -> None:
    """Every local latency reference of the source method becomes 0.01 us with a 10 % band:
    whatever this machine measures is a regression."""
    touch_toolchain(repo)
    path = repo / "baselines" / "local.yaml"
    data = yaml.safe_load(path.read_text())
    changed = 0
    for methods in data["references"].values():
        for placement in (methods.get("source") or {}).values():
            if "latency" in placement:
                placement["latency"].update(value=0.01, tolerance=0.1)
                changed += 1
    assert changed, f"no local source latency reference in {path} to break"
    path.write_text(yaml.safe_dump(data, sort_keys=False))


def mr_vars(source_project: str = PROJECT_PATH) -> dict[str, str]:
    return {"CI_PIPELINE_SOURCE": "merge_request_event",
            "CI_MERGE_REQUEST_SOURCE_PROJECT_PATH": source_project,
            "CI_MERGE_REQUEST_TARGET_BRANCH_NAME": "main"}


def gcl(gitlab_ci_local: Path, repo: Path, *args: str, variables: dict[str, str] | None = None,
        timeout: float = 120) -> subprocess.CompletedProcess:
    """Run gitlab-ci-local in ``repo`` with its own empty home (no user variables leak in)."""
    cmd = [str(gitlab_ci_local), *args, "--home", str(repo.parent / "gcl-home"),
           "--ignore-predefined-vars", "CI_PIPELINE_SOURCE", "--no-color"]
    for key, value in (variables or {}).items():
        cmd += ["--variable", f"{key}={value}"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("GCL_")}
    return subprocess.run(cmd, cwd=repo, env=env, capture_output=True, text=True, timeout=timeout)


def job_list(gitlab_ci_local: Path, repo: Path, variables: dict[str, str]) -> set[str]:
    """Names of the jobs the pipeline would create (--list-json, when:never dropped)."""
    done = gcl(gitlab_ci_local, repo, "--list-json", variables=variables)
    assert done.returncode == 0, done.stdout + done.stderr
    return {job["name"] for job in json.loads(done.stdout) if job["when"] != "never"}


def preview(gitlab_ci_local: Path, repo: Path) -> dict:
    """The pipeline with extends, anchors and !reference expanded, as gitlab-ci-local sees it."""
    done = gcl(gitlab_ci_local, repo, "--preview")
    assert done.returncode == 0, done.stdout + done.stderr
    return yaml.safe_load(done.stdout)


# ----------------------------------------------------------------------------- static checks

def test_pipeline_validates_against_gitlab_schema():
    done = subprocess.run([sys.executable, "-m", "check_jsonschema", "--builtin-schema", "vendor.gitlab-ci",
                           str(REPO / ".gitlab-ci.yml")], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "ok -- validation done" in done.stdout


@pytest.fixture(scope="module")
def expanded(gitlab_ci_local, tmp_path_factory) -> dict:
    return preview(gitlab_ci_local, make_repo(tmp_path_factory.mktemp("preview")))


def real_jobs(pipeline: dict) -> dict[str, dict]:
    reserved = {"stages", "variables", "workflow", "default", "include", "image", "services", "cache",
                "before_script", "after_script"}
    return {k: v for k, v in pipeline.items() if not k.startswith(".") and k not in reserved and isinstance(v, dict)}


def test_cluster_jobs_are_gated_against_forks_and_unselected_systems(expanded):
    jobs = real_jobs(expanded)
    cluster = {name: job for name, job in jobs.items() if "jacamar" in job.get("tags", [])}
    # 3 build matrices, 3 runs, and the verdict, history and baseline proposal for each cluster; per
    # partition the weekly collective and point-to-point sweeps, link matrix and noise jobs, the
    # after-maintenance node-list link test and the toolchain MRs' A/B job.
    assert len(cluster) == 12 + 6 * 3, sorted(cluster)
    for name, job in cluster.items():
        rules = job["rules"]
        system = job["variables"]["MPIREGRESS_SYSTEM"]
        never = [r for r in rules if r.get("when") == "never"]
        # Before any rule that could start the job: the system gate, and the fork gate unless the
        # job never runs for an MR at all (history: schedule and merges only).
        first_runnable = next(i for i, r in enumerate(rules) if r.get("when") != "never")
        assert any(f"/\\b{system}\\b/" in r["if"] for r in rules[:first_runnable]), name
        if any("merge_request_event" in r.get("if", "") for r in rules[first_runnable:]):
            assert any("$CI_MERGE_REQUEST_SOURCE_PROJECT_PATH != $CI_PROJECT_PATH" in r["if"]
                       for r in never), name
        assert "SITE_ID_TOKEN" in job["id_tokens"], name
        assert job["id_tokens"]["SITE_ID_TOKEN"]["aud"] == "$CI_SERVER_URL"
        assert {system, "jacamar"} <= set(job["tags"])
        assert {"login", "shell"} <= set(job["tags"]) or {"compute", "slurm"} <= set(job["tags"]), name
        assert job["variables"]["CUSTOM_CI_BUILDS_DIR"].startswith("$MPIREGRESS_SITE_SCRATCH")


def test_lint_runs_off_cluster_for_every_mr_including_forks(expanded):
    jobs = real_jobs(expanded)
    for name in ("lint:toolchain", "lint:pipeline", "lint:easybuild", "lint:dry-run:local"):
        assert jobs[name]["tags"] == ["mpiregress-lint"], name
        assert "rules" not in jobs[name], name
        assert jobs[name]["interruptible"] is True


def test_the_local_pipeline_builds_and_measures_source_easybuild_and_spack(expanded):
    """systems/local.yaml methods: three build jobs (spack exits 4 where no Spack is on PATH, an allowed
    failure), and the run job measures them side by side (the real pipelines
    below narrow the measurement to source with MPIREGRESS_RUN_ARGS to keep the suite short)."""
    build = expanded["build:local:batch"]
    assert build["parallel"]["matrix"] == [{"MPIREGRESS_METHOD": ["source", "easybuild", "spack"]}]
    assert expanded["run:local:batch"]["variables"]["MPIREGRESS_METHODS"] == "source,easybuild,spack"


def test_retries_are_for_infrastructure_only(expanded):
    for name, job in real_jobs(expanded).items():
        retry = job["retry"]
        assert retry["exit_codes"] == [3], name
        assert set(retry["when"]) == {"runner_system_failure", "stuck_or_timeout_failure",
                                      "scheduler_failure", "api_failure"}, name
        assert retry["max"] <= 2


def test_slurm_jobs_carry_partition_constraints_and_runs_are_serialized(expanded):
    jobs = real_jobs(expanded)
    constraint = {"iris:broadwell": "--constraint=broadwell", "iris:skylake": "--constraint=skylake",
                  "aion:batch": "--partition=batch"}
    for key, flag in constraint.items():
        system, partition = key.split(":")
        run = jobs[f"run:{key}"]
        assert run["resource_group"] == f"mpiregress-{system}-{partition}"
        assert run["interruptible"] is False
        assert {"compute", "slurm"} <= set(run["tags"])
        assert flag in run["variables"]["MPIREGRESS_SLURM_PARTITION_ARGS"]
        assert "$MPIREGRESS_SLURM_PARTITION_ARGS" in run["variables"]["SCHEDULER_PARAMETERS"]
        assert "--nodes=2" in run["variables"]["SCHEDULER_PARAMETERS"]
        assert "--exclusive" in run["variables"]["SCHEDULER_PARAMETERS"]
        # All methods of the partition's build matrix, with their manifests.
        assert [(n["job"], n["artifacts"]) for n in run["needs"]] == [(f"build:{key}", True)]
        build = jobs[f"build:{key}"]
        assert build["interruptible"] is True
        assert build["allow_failure"] == {"exit_codes": [4]}
        assert build["parallel"]["matrix"] == [{"MPIREGRESS_METHOD": list(METHODS)}]
    assert jobs["run:local:batch"]["resource_group"] == "mpiregress-local-batch"
    for key in (*constraint, "local:batch"):
        # The A/B job measures the same partition: it queues behind the run job, never beside it.
        ab = jobs[f"ab:{key}"]
        assert ab["resource_group"] == jobs[f"run:{key}"]["resource_group"], key
        assert [n["job"] for n in ab["needs"]] == [f"build:{key}"] and ab["interruptible"] is False
        assert ab["script"] == ["ci/jobs/ab.sh"] and ab["variables"]["GIT_DEPTH"] == "0"
        # Its pairs are judged by the verdict job, whose JUnit alone feeds the MR widget.
        assert "reports" not in ab["artifacts"]
        assert ab["artifacts"]["when"] == "always"
        if key != "local:batch":
            assert "--nodes=2" in ab["variables"]["SCHEDULER_PARAMETERS"], key
    assert {job["resource_group"] for name, job in jobs.items() if name.startswith("history:")} == {"mpiregress-history"}


def test_reports_are_exposed_in_the_mr_and_weekly_records_kept_longer(expanded):
    jobs = real_jobs(expanded)
    for system in ("iris", "aion", "local"):
        # One verdict per system: passed with warnings on "needs a look" (exit 5), red on 1/2/3.
        assert jobs[f"verdict:{system}"]["allow_failure"] == {"exit_codes": [5]}
        artifacts = jobs[f"verdict:{system}"]["artifacts"]
        assert artifacts["expose_as"] == f"MPI performance report {system}"
        assert artifacts["paths"] == [f"reports/report-{system}/"]
        assert artifacts["reports"]["junit"] == f"reports/report-{system}/junit.xml"
        assert artifacts["when"] == "always"
        run_job = {"iris": "run:iris:broadwell", "aion": "run:aion:batch", "local": "run:local:batch"}[system]
        run_artifacts = jobs[run_job]["artifacts"]
        assert run_artifacts["when"] == "always" and "reports/" in run_artifacts["paths"]
        assert "var/manifests/" in run_artifacts["paths"]
        assert jobs[f"history:{system}"]["artifacts"]["expire_in"] == "1 year"
        assert run_artifacts["expire_in"] == "30 days"


def test_jacamar_configuration_downscopes_and_submits_through_slurm():
    runner = tomllib.loads((REPO / "ci" / "jacamar" / "config.toml").read_text())
    names = {r["name"]: r for r in runner["runners"]}
    assert set(names) == {"iris-login", "iris-slurm"}
    for name, r in names.items():
        assert r["executor"] == "custom"
        custom = r["custom"]
        for stage in ("config", "prepare", "run", "cleanup"):
            assert custom[f"{stage}_exec"].endswith("/jacamar-auth"), (name, stage)
        assert custom["run_args"] == ["run"] and custom["prepare_args"] == ["prepare"]
        config_file = custom["config_args"][custom["config_args"].index("--configuration") + 1]
        assert config_file == custom["cleanup_args"][custom["cleanup_args"].index("--configuration") + 1]
        assert r["token"].startswith("glrt-REPLACE")
    slurm = tomllib.loads((REPO / "ci" / "jacamar" / "jacamar.toml").read_text())
    login = tomllib.loads((REPO / "ci" / "jacamar" / "jacamar-login.toml").read_text())
    assert slurm["general"]["executor"] == "slurm" and login["general"]["executor"] == "shell"
    for conf in (slurm, login):
        assert conf["auth"]["downscope"] == "setuid"
        assert conf["auth"]["user_allowlist"] and "root" in conf["auth"]["user_blocklist"]
        assert conf["general"]["custom_build_dir"] is True
        assert conf["general"]["data_dir"]
        assert conf["general"]["unrestricted_cmd_line"] is False
    assert slurm["batch"]["arguments_variable"] == ["SCHEDULER_PARAMETERS"]


# ----------------------------------------------------------------------------- job lists per trigger

def test_mr_touching_toolchain_runs_the_local_benchmarks(gitlab_ci_local, tmp_path):
    repo = make_repo(tmp_path, touch_toolchain, "toolchain comment")
    jobs = job_list(gitlab_ci_local, repo, {**mr_vars(), "MPIREGRESS_SYSTEMS": "local"})
    # The A/B job's B side is the MR's measurement: run:* does not measure the same builds again.
    assert jobs == LINT | (LOCAL_BENCH - {"run:local:batch"}) | LOCAL_AB
    off = job_list(gitlab_ci_local, repo, {**mr_vars(), "MPIREGRESS_SYSTEMS": "local", "MPIREGRESS_AB": "off"})
    assert off == LINT | LOCAL_BENCH


def test_mr_touching_toolchain_on_the_clusters_runs_the_cluster_matrix(gitlab_ci_local, tmp_path):
    repo = make_repo(tmp_path, touch_toolchain, "toolchain comment")
    jobs = job_list(gitlab_ci_local, repo, mr_vars())
    runs = {"run:iris:broadwell", "run:iris:skylake", "run:aion:batch"}
    assert jobs == LINT | {"lint:dry-run:iris", "lint:dry-run:aion"} | (CLUSTER_BENCH - runs) | CLUSTER_AB


def test_an_mr_touching_only_systems_data_is_measured_by_its_run_jobs(gitlab_ci_local, tmp_path):
    def touch_systems(repo: Path) -> None:
        path = repo / "systems" / "local.yaml"
        path.write_text(path.read_text() + "# a comment\n")

    repo = make_repo(tmp_path, touch_systems, "systems comment")
    assert job_list(gitlab_ci_local, repo, {**mr_vars(), "MPIREGRESS_SYSTEMS": "local"}) == LINT | LOCAL_BENCH


def test_mr_touching_only_docs_runs_lint_only(gitlab_ci_local, tmp_path):
    repo = make_repo(tmp_path, touch_docs, "docs")
    assert job_list(gitlab_ci_local, repo, {**mr_vars(), "MPIREGRESS_SYSTEMS": "local"}) == LINT
    assert job_list(gitlab_ci_local, repo, mr_vars()) == LINT | {"lint:dry-run:iris", "lint:dry-run:aion"}


def test_mr_from_a_fork_never_reaches_a_cluster_or_benchmark_runner(gitlab_ci_local, tmp_path):
    repo = make_repo(tmp_path, touch_toolchain, "toolchain comment")
    for systems in ("iris aion", "local"):
        for source in ("someone/mpiregress", ""):
            variables = {**mr_vars(source), "MPIREGRESS_SYSTEMS": systems}
            if not source:
                del variables["CI_MERGE_REQUEST_SOURCE_PROJECT_PATH"]   # unknown source: fail closed
            jobs = job_list(gitlab_ci_local, repo, variables)
            assert jobs and all(name.startswith("lint:") for name in jobs), (systems, source, jobs)


def test_schedule_on_the_local_machine_runs_only_the_local_matrix(gitlab_ci_local, tmp_path):
    repo = make_repo(tmp_path)
    jobs = job_list(gitlab_ci_local, repo, {"CI_PIPELINE_SOURCE": "schedule", "MPIREGRESS_SYSTEMS": "local"})
    assert jobs == LINT | LOCAL_BENCH | {"history:local", "proposal:local"}


def test_schedule_runs_the_full_matrix_on_both_clusters(gitlab_ci_local, tmp_path):
    repo = make_repo(tmp_path)
    jobs = job_list(gitlab_ci_local, repo, {"CI_PIPELINE_SOURCE": "schedule"})
    assert jobs == (LINT | {"lint:dry-run:iris", "lint:dry-run:aion"} | CLUSTER_BENCH | CLUSTER_HISTORY
                    | CLUSTER_WEEKLY | CLUSTER_PROPOSAL)


def test_an_admin_tests_a_node_list_after_maintenance_from_the_pipeline_page(gitlab_ci_local, tmp_path):
    repo = make_repo(tmp_path)
    web = {"CI_PIPELINE_SOURCE": "web", "MPIREGRESS_SYSTEMS": "aion"}
    assert "links:aion:batch:nodes" not in job_list(gitlab_ci_local, repo, web)
    jobs = job_list(gitlab_ci_local, repo, {**web, "LINKTEST_NODELIST": "aion-[0001-0064]"})
    assert "links:aion:batch:nodes" in jobs and not jobs & CLUSTER_WEEKLY


def test_web_run_benchmarks_the_system_picked_in_the_form(gitlab_ci_local, tmp_path):
    repo = make_repo(tmp_path)
    jobs = job_list(gitlab_ci_local, repo, {"CI_PIPELINE_SOURCE": "web", "MPIREGRESS_SYSTEMS": "aion"})
    assert jobs == LINT | {"lint:dry-run:aion", "build:aion:batch: [source]", "build:aion:batch: [spack]",
                           "build:aion:batch: [easybuild]", "build:aion:batch: [eessi]", "run:aion:batch",
                           "verdict:aion"}
    options = yaml.safe_load((REPO / ".gitlab-ci.yml").read_text())["variables"]["MPIREGRESS_SYSTEMS"]
    assert options["value"] in options["options"] and "local" in options["options"]


# ----------------------------------------------------------------------------- real runs (local Slurm)

SUMMARY = re.compile(r"^\s*(PASS|FAIL|WARN|SKIP)\s+(\S.*?)(?:\s{2,}\S+)?\s*$")


def job_verdicts(output: str) -> dict[str, str]:
    """gitlab-ci-local's closing summary: job name -> PASS/FAIL/WARN."""
    found = {}
    for line in output.splitlines():
        m = SUMMARY.match(line)
        if m and not m.group(2).startswith(">"):
            found[m.group(2)] = m.group(1)
    return found


@pytest.fixture(scope="module")
def local_pipeline_vars(local_cluster, tmp_path_factory) -> Iterator[dict[str, str]]:
    """Variables a local runner would have: the OSU mirror (test double tarball), the session's
    one-host Slurm, a history database outliving the pipelines, and a Python with the deps."""
    mirror = tmp_path_factory.mktemp("osu-mirror")
    _, sha256 = make_tarball(mirror)
    # The runner's state folder: <state>/local-cluster is the session's cluster, install
    # prefixes go beside it. Short, outside pytest's tmp: unix socket paths are limited.
    state = Path(tempfile.mkdtemp(prefix="mrgcl-", dir="/tmp"))
    (state / "local-cluster").symlink_to(local_cluster.state_dir, target_is_directory=True)
    variables = {
        "MPIREGRESS_SYSTEMS": "local",
        "OSU_SOURCE_MIRROR": str(mirror),
        "OSU_SHA256": sha256,
        "MPIREGRESS_LOCAL_STATE_DIR": str(state),
        "MPIREGRESS_HISTORY_DB": str(tmp_path_factory.mktemp("history") / "history.sqlite"),
        # Lean: 20 measured iterations after 2 warm-up ones (the design: 1000 after 200; a cross-node
        # 1 MiB bandwidth iteration moves 64 MiB over TCP on a veth, 0.5-1.3 GB/s here), same code
        # path; three samples per series, as the history gate needs. Point-to-point only: these runs test the
        # pipeline's wiring; the collectives' path has its own end-to-end tests (test_coll_e2e.py).
        # The source build's series only (--methods after the job's own wins): the easybuild build
        # job runs for real in every pipeline here, and measuring its series beside source's is
        # tested end to end without the pipeline (test_e2e_local.py); measuring both here doubled the
        # run job (5 -> 10 min per pipeline on the shared 2-core CI machine).
        "MPIREGRESS_RUN_ARGS": "--iterations 20 --setvar warmup=2 --repeat 3 --families pt2pt --methods source",
        # The A/B job measures every series 2k times: its check has its own real test
        # (tests/test_ab_run.py); these pipelines test the rest of the wiring.
        "MPIREGRESS_AB": "off",
    }
    venv = REPO / ".venv"
    if (venv / "bin" / "python").exists():
        variables["MPIREGRESS_VENV"] = str(venv)
    yield variables
    shutil.rmtree(state, ignore_errors=True)


def run_pipeline(gitlab_ci_local, repo: Path, variables: dict[str, str]) -> tuple[subprocess.CompletedProcess, dict]:
    done = gcl(gitlab_ci_local, repo, "--shell-isolation", "--concurrency", "2", "--no-artifacts-to-source",
               variables=variables, timeout=1800)
    (repo.parent / "gitlab-ci-local.log").write_text(done.stdout + done.stderr)
    return done, job_verdicts(done.stdout)


def safe_job_name(job: str) -> str:
    """gitlab-ci-local's folder name for a job: runs of characters other than [A-Za-z0-9_-]
    replaced by their base64url encoding (Utils.safeDockerString)."""
    return re.sub(r"[^\w-]+", lambda m: base64.urlsafe_b64encode(m.group().encode()).decode().rstrip("="), job)


def artifact(repo: Path, job: str, pattern: str) -> list[Path]:
    return sorted((repo / ".gitlab-ci-local" / "artifacts" / safe_job_name(job)).glob(pattern))


# The local cross_node check is a heterogeneous Slurm step on one host, where Slurm 22.05 and
# PMIx occasionally misbehave (a teardown hang, SchedMD 16817). The toolchain-MR
# run above covers cross_node through the pipeline; the other runs test the pipeline's wiring and
# measure same_numa only, so a rare defect of that path cannot decide them.
ONE_NODE_ONLY = {"MPIREGRESS_RUN_ARGS": "--iterations 20 --setvar warmup=2 --repeat 3 --families pt2pt "
                                        "--placements same_numa --methods source"}


# How gitlab-ci-local shows a verdict job's exit code (5 "needs a look" is an allowed failure).
JOB_OUTCOME = {0: "PASS", 5: "WARN", 1: "FAIL"}


def tail(done: subprocess.CompletedProcess, n: int = 6000) -> str:
    return (done.stdout + done.stderr)[-n:]


@pytest.mark.slurm
@pytest.mark.slow
def test_real_toolchain_mr_pipeline_benchmarks_and_passes(gitlab_ci_local, local_pipeline_vars, tmp_path):
    repo = make_repo(tmp_path, touch_toolchain, "toolchain comment")
    done, verdicts = run_pipeline(gitlab_ci_local, repo, {**mr_vars(), **local_pipeline_vars})
    assert done.returncode == 0, tail(done)
    # Every job passes; the verdict may say "needs a look" (WARN: an allowed failure, exit 5) when two
    # builds differ beyond the noise on this loaded machine, never red.
    assert set(verdicts) == LINT | LOCAL_BENCH, tail(done)
    spack = "build:local:batch: [spack]"
    assert all(verdicts[job] == "PASS" for job in LINT | LOCAL_BENCH - {"verdict:local", spack}), tail(done)
    # No Spack on PATH: its build exits 4 (not available), an allowed failure; with one it builds.
    assert verdicts[spack] == ("PASS" if shutil.which("spack") else "WARN"), tail(done)
    assert verdicts["verdict:local"] in ("PASS", "WARN"), tail(done)
    results = artifact(repo, "run:local:batch", "reports/local-batch/results.json")
    assert results, tail(done)
    measured = [r for r in json.loads(results[0].read_text()) if r["status"] == "pass"]
    assert {(r["parameters"].get("placement"), r["metric"]) for r in measured} >= {
        ("same_numa", "latency"), ("cross_node", "latency")}
    for name in ("reframe-report.json", "junit.xml", "summary.md"):
        assert artifact(repo, "run:local:batch", f"reports/local-batch/{name}"), name
    assert artifact(repo, "build:local:batch: [source]", "var/manifests/source-*.json")
    assert artifact(repo, "verdict:local", "reports/report-local/junit.xml")
    verdict = json.loads(artifact(repo, "verdict:local", "reports/report-local/verdict.json")[0].read_text())
    assert verdict["event"] == "toolchain_mr" and verdict["state"] in ("pass", "needs a look"), verdict


@pytest.mark.slurm
@pytest.mark.slow
def test_real_toolchain_mr_is_measured_once_by_its_ab_job(gitlab_ci_local, local_pipeline_vars, tmp_path):
    repo = make_repo(tmp_path, touch_toolchain, "toolchain comment")
    lean = {"MPIREGRESS_AB": "on", "MPIREGRESS_AB_ARGS": "--iterations 20 --setvar warmup=2 --placements same_numa "
                                                         "--metrics latency --ab-max-pairs 4"}
    done, verdicts = run_pipeline(gitlab_ci_local, repo, {**mr_vars(), **local_pipeline_vars, **lean})
    # The A/B job is the MR's measurement: no run job measured the same builds again.
    assert set(verdicts) == LINT | (LOCAL_BENCH - {"run:local:batch"}) | LOCAL_AB, tail(done)
    assert verdicts["ab:local:batch"] == "PASS", tail(done)
    judged = artifact(repo, "verdict:local", "reports/report-local/results.json")
    assert judged, tail(done)
    series = json.loads(judged[0].read_text())
    assert series and all(r["conditions"].get("measured_by", "").startswith("the A/B job's B side") for r in series)
    verdict = json.loads(artifact(repo, "verdict:local", "reports/report-local/verdict.json")[0].read_text())
    assert verdict["event"] == "toolchain_mr" and verdict["measured"] == len(series) and verdict["power"], verdict
    # One series alone (latency, one placement), four pairs: its own signed ranks bottom out at 1/16, so whatever
    # was measured the judge can neither fail this comment-only MR nor pass it unseen (docs/ab.md, "Thin
    # classes"): needs a look, saying why, and the job ends as its verdict says.
    assert verdict["exit_code"] == 5 and verdicts["verdict:local"] == JOB_OUTCOME[5], (verdict, tail(done))
    looks = [f for f in verdict["findings"] if f["state"] == "needs a look" and f["judge"] == "paired A/B"]
    assert any("no effect could have been shown" in f["sentence"] or "signed-rank p" in f["sentence"]
               for f in looks), verdict


@pytest.mark.slurm
@pytest.mark.slow
def test_real_toolchain_mr_with_broken_baseline_fails_at_the_verdict_job(gitlab_ci_local, local_pipeline_vars, tmp_path):
    repo = make_repo(tmp_path, break_local_latency_baseline, "toolchain + impossible latency baseline")
    done, verdicts = run_pipeline(gitlab_ci_local, repo, {**mr_vars(), **local_pipeline_vars, **ONE_NODE_ONLY})
    # The run job measured (exit 0); the one verdict job fails the MR: the baselines file the MR
    # changes does not accept today's measurement. (gitlab-ci-local 4.73 exits 0 for a pipeline whose
    # failed job has `allow_failure: exit_codes:` at all, whatever the code; GitLab fails it on exit 1,
    # and gitlab-ci-local's own job line says FAIL, not WARN: that line is what is checked.)
    assert verdicts.get("verdict:local") == "FAIL", tail(done)
    builds = {"build:local:batch: [source]", "build:local:batch: [easybuild]"}
    assert all(verdicts.get(job) == "PASS" for job in LINT | builds | {"run:local:batch"}), verdicts
    # Exit 1: a regression (not 2 error, not 3 infrastructure, which alone would be retried).
    assert re.search(r"^verdict:local\s+finished in .*FAIL 1\s*$", done.stdout + done.stderr, re.M), tail(done)
    results = artifact(repo, "run:local:batch", "reports/local-batch/results.json")
    assert results, "a failed run still hands on its results"
    failed = [r for r in json.loads(results[0].read_text()) if r["status"] == "fail"]
    assert failed and all(r["metric"] == "latency" and r["reference"] == 0.01 for r in failed)
    junit = artifact(repo, "verdict:local", "reports/report-local/junit.xml")
    assert junit and "<failure" in junit[0].read_text()
    assert artifact(repo, "verdict:local", "reports/report-local/report.html")
    verdict = json.loads(artifact(repo, "verdict:local", "reports/report-local/verdict.json")[0].read_text())
    gating = [f for f in verdict["findings"] if f["state"] == "regression"]
    assert gating and all(f["judge"] == "baseline band" and "latency" in f["subject"] for f in gating), verdict


@pytest.mark.slurm
@pytest.mark.slow
def test_real_docs_mr_pipeline_runs_lint_only(gitlab_ci_local, local_pipeline_vars, tmp_path):
    repo = make_repo(tmp_path, touch_docs, "docs")
    done, verdicts = run_pipeline(gitlab_ci_local, repo, {**mr_vars(), **local_pipeline_vars})
    assert done.returncode == 0, tail(done)
    assert verdicts == {job: "PASS" for job in LINT}, tail(done)


@pytest.mark.slurm
@pytest.mark.slow
def test_real_schedule_runs_the_local_matrix_and_records_history(gitlab_ci_local, local_pipeline_vars, tmp_path):
    repo = make_repo(tmp_path)
    variables = {"CI_PIPELINE_SOURCE": "schedule", **local_pipeline_vars, **ONE_NODE_ONLY}
    done, verdicts = run_pipeline(gitlab_ci_local, repo, variables)
    assert done.returncode == 0, tail(done)
    jobs = LINT | LOCAL_BENCH | {"history:local", "proposal:local"}
    assert set(verdicts) == jobs, tail(done)
    spack = "build:local:batch: [spack]"
    assert all(verdicts[job] == "PASS" for job in jobs - {"verdict:local", spack}), tail(done)
    # Spack's build job is an allowed failure (exit 4) where no Spack is on PATH: not available, never a pass.
    assert verdicts[spack] == ("PASS" if shutil.which("spack") else "WARN"), tail(done)
    assert verdicts["verdict:local"] in ("PASS", "WARN"), tail(done)
    verdict = json.loads(artifact(repo, "verdict:local", "reports/report-local/verdict.json")[0].read_text())
    assert verdict["event"] == "schedule" and verdict["gating"] == ["history_gate", "links"], verdict
    history = Path(variables["MPIREGRESS_HISTORY_DB"])
    assert history.exists(), "the schedule records its results in the history database"
    import sqlite3
    with sqlite3.connect(history) as db:
        kinds = {row[0] for row in db.execute("select kind from runs")}
    assert "schedule" in kinds


def test_the_schedule_proposes_baselines_after_its_verdict_and_history(expanded):
    """proposal:<system>: weekly only, after verdict:<system> and history:<system> (whatever they ended in:
    the proposal holds anomalies back itself), one `baseline propose --merge-request`, never on a compute node."""
    jobs = real_jobs(expanded)
    for system in ("local", "iris", "aion"):
        job = jobs[f"proposal:{system}"]
        assert [n["job"] for n in job["needs"]] == [f"verdict:{system}", f"history:{system}"]
        assert not any(n["artifacts"] for n in job["needs"])
        assert job["stage"] == "verdict" and job["script"] == ["ci/jobs/proposal.sh"]
        sources = [r.get("if", "") for r in job["rules"] if r.get("when") != "never"]
        assert sources == ['$CI_PIPELINE_SOURCE == "schedule"'] and job["rules"][-1]["when"] == "always"
        assert "compute" not in job.get("tags", [])
        assert job["artifacts"]["paths"] == [f"reports/proposal-{system}/"]
    script = (REPO / "ci" / "jobs" / "proposal.sh").read_text()
    assert re.search(r"^mpiregress baseline propose .*--merge-request", script, re.M)


def test_every_job_that_submits_slurm_jobs_cancels_them_in_after_script(expanded):
    """A cancelled or timed-out job may be killed outright: its after_script cancels the recorded jobs, on
    every system, the local shell runner's included, and its artifacts upload whatever happened."""
    submitting = ("ci/jobs/run.sh", "ci/jobs/ab.sh", "ci/jobs/linktest.sh", "ci/jobs/noise.sh",
                  "ci/jobs/coll-sweep.sh", "ci/jobs/pt2pt-sweep.sh", "ci/jobs/verdict.sh")
    jobs = {name: job for name, job in real_jobs(expanded).items()
            if any(step in " ".join(job.get("script", [])) for step in submitting)}
    cluster = {name: job for name, job in jobs.items() if "jacamar" in job.get("tags", [])}
    local = {name: job for name, job in jobs.items() if name not in cluster}
    assert len(cluster) >= 10 and local, sorted(jobs)
    assert [n for n, job in jobs.items() if "ci/jobs/cancel-jobs.sh" not in job.get("after_script", [])] == []
    assert [n for n, job in jobs.items() if (job.get("artifacts") or {}).get("when") != "always"] == []
