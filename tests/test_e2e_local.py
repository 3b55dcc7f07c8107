"""End to end: the real ReFrame checks on the real local Slurm, through `mpiregress run`.

OSU's release tarball cannot be downloaded here, so the build goes through the
product's source path with the OSU test double's tarball (tests/osu_double),
accepted by the loudly logged sha256 override exactly as a site tarball would be.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import archspec.cpu
import pytest
import yaml
from helpers.e2e import mpiregress, pipeline, wide_baselines  # noqa: F401  (pipeline is a fixture)
from shared import REPO

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

# Fewer iterations than the design's 1000 keep the suite short; the path is the same.
FAST = ["--iterations", "200"]


def results(report_dir: Path) -> dict:
    return {(r["parameters"]["placement"], r["metric"]): r
            for r in json.loads((report_dir / "results.json").read_text())}


def test_main_job_builds_runs_and_judges_every_placement(pipeline, tmp_path):
    # Its own very wide bands: the test is about what the job does, not about this machine's speed.
    baselines = wide_baselines(tmp_path.parent / f"{tmp_path.name}-baselines")
    done = mpiregress(pipeline, "--methods", "source", *FAST, "--baselines-dir", str(baselines), report_dir=tmp_path)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    found = results(tmp_path)
    for placement in ("same_numa", "cross_node"):
        for metric in ("latency", "bandwidth"):
            r = found[(placement, metric)]
            assert r["status"] == "pass" and r["value"] > 0, r
            assert r["reference"] is not None and r["tolerance"] is not None
    for placement in ("cross_numa", "cross_socket"):
        r = found[(placement, "latency")]
        assert r["status"] == "skip" and "not available on local:batch" in r["reason"]
    cross = found[("cross_node", "latency")]
    assert len(cross["nodelist"]) == 2, "cross_node must span both Slurm nodes"
    # Reports: ReFrame's JSON, JUnit, the summary table.
    report = json.loads((tmp_path / "reframe-report.json").read_text())
    assert report["runs"][0]["testcases"]
    junit = ET.parse(tmp_path / "junit.xml").getroot()
    assert junit.iter("testcase")
    summary = (tmp_path / "summary.md").read_text()
    assert "| local:batch | same_numa | source | latency |" in summary
    assert "verdict" in done.stdout and "same_numa" in done.stdout
    # The partition's step time limit wraps every benchmark step (a hung step ends), through
    # ReFrame's own launcher modifier: its log holds no deprecation warning. The cross-node steps
    # (heterogeneous here) are bounded by the step watcher, which also ends them once both ranks have.
    steps = [p.read_text() for p in (tmp_path / "reframe" / "output").rglob("rfm_job.sh")]
    bounded = (r"^(timeout -k 10 \d+|\S+ -m mpiregress step-watch --limit \d+ --kill-after 10 --ranks 2 --grace 5 --)"
               r" srun ")
    assert steps and all(re.search(bounded, s, re.M) for s in steps)
    assert [("step-watch" in s) for s in steps].count(True) == 2 and all(
        ("step-watch" in s) == ("MPIREGRESS_NODE1" in s.split("srun", 1)[-1]) for s in steps)
    assert "deprecated" not in (tmp_path / "reframe.out").read_text()
    # The manifest says this was not the official tarball.
    manifest_file = Path(found[("same_numa", "latency")]["target"] and
                         next((local_manifests(pipeline)).glob("source-*.json")))
    manifest = json.loads(manifest_file.read_text())
    assert manifest["sha256_official"] is False


def local_manifests(env) -> Path:
    return Path(env["MPIREGRESS_STATE_DIR"]) / "manifests"


def test_drift_beyond_the_band_fails_with_regression(pipeline, tmp_path):
    baselines = tmp_path / "baselines"
    shutil.copytree(REPO / "baselines", baselines)
    data = yaml.safe_load((baselines / "local.yaml").read_text())
    data["references"]["batch"]["source"]["same_numa"]["latency"]["value"] = 0.01
    (baselines / "local.yaml").write_text(yaml.safe_dump(data))
    done = mpiregress(pipeline, "--methods", "source", "--metrics", "latency", "--placements", "same_numa",
                      *FAST, "--baselines-dir", str(baselines), report_dir=tmp_path / "report")
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-2000:]
    r = results(tmp_path / "report")[("same_numa", "latency")]
    assert r["status"] == "fail" and r["reference"] == 0.01
    assert "regression" in done.stdout


def test_malformed_baseline_stops_before_any_job_naming_file_and_key(pipeline, tmp_path):
    baselines = tmp_path / "baselines"
    shutil.copytree(REPO / "baselines", baselines)
    text = (baselines / "local.yaml").read_text().replace("unit: us", "unit: seconds", 1)
    (baselines / "local.yaml").write_text(text)
    done = mpiregress(pipeline, "--methods", "source", "--baselines-dir", str(baselines), report_dir=tmp_path / "r")
    assert done.returncode == 2
    assert f"baselines file {baselines}/local.yaml" in done.stderr and ".unit:" in done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "r" / "reframe-report.json").exists()


def test_rank_dying_of_sigill_is_an_illegal_instruction_error(pipeline, tmp_path):
    done = mpiregress(pipeline, "--methods", "source", "--metrics", "latency", "--placements", "same_numa",
                      *FAST, report_dir=tmp_path, extra_env={"OSU_DOUBLE_ILLEGAL_INSTRUCTION": "1"})
    assert done.returncode == 2, done.stdout[-2000:]
    r = results(tmp_path)[("same_numa", "latency")]
    assert r["status"] == "error" and r["value"] is None
    assert "illegal instruction" in r["reason"] and "build target" in r["reason"]
    assert "node target(s) " + archspec.cpu.host().name in r["reason"]


def incompatible_target() -> str:
    host = archspec.cpu.host()
    for name in ("sapphirerapids", "zen4", "skylake_avx512", "icelake", "zen3"):
        target = archspec.cpu.TARGETS[name]
        if not (target == host or target in host.ancestors):
            return name
    pytest.fail(f"no archspec target found that {host.name} cannot run")


def test_build_the_nodes_cannot_execute_is_refused_before_launch(pipeline, tmp_path):
    # A manifest claiming a newer target than this host: the SIGILL story of seed 001.
    real = next(local_manifests(pipeline).glob("source-*.json"), None)
    if real is None:
        mpiregress(pipeline, "--methods", "source", "--metrics", "latency", "--placements", "same_numa",
                   *FAST, report_dir=tmp_path / "build")
        real = next(local_manifests(pipeline).glob("source-*.json"))
    target = incompatible_target()
    data = json.loads(real.read_text())
    data["target"] = target
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    (manifests / f"source-{target}.json").write_text(json.dumps(data))
    done = mpiregress(pipeline, "--methods", "source", "--metrics", "latency", "--placements", "same_numa",
                      "--no-build", "--manifest-dir", str(manifests), report_dir=tmp_path / "r")
    assert done.returncode == 2
    r = results(tmp_path / "r")[("same_numa", "latency")]
    assert r["status"] == "error"
    assert f"built for {target}" in r["reason"] and archspec.cpu.host().name in r["reason"]
    assert "SIGILL" in r["reason"]


def test_a_requested_method_that_cannot_build_here_is_not_available_never_a_pass(pipeline, tmp_path):
    # Spack is among the local system's methods but not on this machine (no registry has it): the run says
    # why and exits 4 (nothing could run here), never 0; the pipeline's build job exits 4 the same way.
    done = mpiregress(pipeline, "--methods", "spack", report_dir=tmp_path)
    assert done.returncode == 4, done.stdout[-2000:] + done.stderr[-2000:]
    assert "spack build not available here: Spack is not available on this machine" in done.stdout
    summary = (tmp_path / "summary.md").read_text()
    assert "not available" in summary and "0 series measured" in summary


def test_the_local_run_builds_and_measures_source_and_easybuild_side_by_side(pipeline, tmp_path):
    """systems/local.yaml methods: the run builds both for real (EasyBuild with the host's toolchain)
    and measures the same series with each."""
    done = mpiregress(pipeline, "--methods", "source,easybuild", "--metrics", "latency", "--placements", "same_numa",
                      "--iterations", "100", report_dir=tmp_path / "r")
    # Structure, not performance: 0, 1 or 5 are verdicts on measured values (two builds on this loaded host
    # may differ beyond the noise allowance, a cross-method "needs a look"); anything else is a failure.
    assert done.returncode in (0, 1, 5), done.stdout[-2000:] + done.stderr[-2000:]
    found = json.loads((tmp_path / "r" / "results.json").read_text())
    by_method = {r["method"]: r for r in found}
    assert set(by_method) == {"source", "easybuild"}
    assert all(r["status"] in ("pass", "fail") and r["value"] > 0 for r in by_method.values())
    assert re.search(r"same_numa\s.*easybuild", done.stdout), "the table shows the easybuild row"
    eb = [json.loads(p.read_text()) for p in Path(pipeline["MPIREGRESS_STATE_DIR"], "manifests").glob("easybuild-*")]
    assert len(eb) == 1 and eb[0]["extra"]["module"] == "OSU-Micro-Benchmarks/7.2-gompi-host"


def test_slurm_down_is_one_sentence_and_exit_3(tmp_path):
    env = dict(os.environ, SLURM_CONF=str(tmp_path / "nowhere" / "slurm.conf"),
               MPIREGRESS_MANIFEST_DIR=str(tmp_path))
    done = subprocess.run([sys.executable, "-m", "mpiregress", "run", "--system", "iris",
                           "--report-dir", str(tmp_path / "r")],
                          env=env, capture_output=True, text=True, timeout=120, cwd=REPO)
    assert done.returncode == 3, done.stderr
    assert "Slurm is not reachable" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("system, in_allocation, expected", [
    ("iris", False, ["--constraint=broadwell", "--constraint=skylake", "map_cpu:0,14", "module load gompi/2023b"]),
    ("aion", False, ["map_cpu:0,16", "map_cpu:0,64", "module load gompi/2023b", "#SBATCH --exclusive"]),
    ("aion", True, ["--nodes=1 --ntasks=2 --ntasks-per-node=2 --cpu-bind=verbose,map_cpu:0,64",
                    "--nodes=2 --ntasks=2 --ntasks-per-node=1"]),
])
def test_cluster_dry_run_writes_job_scripts_from_topology(system, in_allocation, expected, tmp_path):
    env = dict(os.environ, MPIREGRESS_MANIFEST_DIR=str(tmp_path / "none"))
    env.pop("MPIREGRESS_IN_ALLOCATION", None)
    if in_allocation:
        # A CI job that already is the allocation: no sbatch, srun inside it with explicit geometry.
        env["MPIREGRESS_IN_ALLOCATION"] = "1"
    # The point-to-point family only: the collectives' 88 checks a partition add half a minute and
    # nothing about placement geometry (tests/test_coll_command.py dry-runs them).
    done = subprocess.run([sys.executable, "-m", "mpiregress", "run", "--system", system, "--dry-run",
                           "--families", "pt2pt", "--report-dir", str(tmp_path / "r")],
                          env=env, capture_output=True, text=True, timeout=300, cwd=REPO)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    scripts = "\n".join(p.read_text() for p in (tmp_path / "r" / "reframe" / "stage").rglob("rfm_job.sh"))
    for fragment in expected:
        assert fragment in scripts
    assert "mpiregress guard --build-target" in scripts
    assert ("#SBATCH" in scripts) is not in_allocation
    # No check declared without a test (the collective one, when no collective family is asked).
    assert "skipping test" not in (tmp_path / "r" / "reframe.out").read_text()
    # A dry run finishes its status.json too (it was left "running" with no exit code).
    status = json.loads((tmp_path / "r" / "status.json").read_text())
    assert (status["state"], status["exit_code"]) == ("finished", 0) and status["ended"]


def test_cluster_dry_run_of_a_collective_fills_a_whole_aion_node(tmp_path):
    env = dict(os.environ, MPIREGRESS_MANIFEST_DIR=str(tmp_path / "none"))
    env.pop("MPIREGRESS_IN_ALLOCATION", None)
    done = subprocess.run([sys.executable, "-m", "mpiregress", "run", "--system", "aion", "--dry-run", "--families",
                           "coll", "--collectives", "bcast", "--report-dir", str(tmp_path / "r")],
                          env=env, capture_output=True, text=True, timeout=300, cwd=REPO)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    scripts = [p.read_text() for p in (tmp_path / "r" / "reframe" / "stage").rglob("rfm_job.sh")]
    assert scripts and all("osu_bcast -f" in s and "mpiregress guard --build-target zen2" in s for s in scripts)
    assert any("--nodes=1 --ntasks=128 --ntasks-per-node=128 --distribution=block:block" in s for s in scripts)


def test_osu_output_without_data_row_fails_sanity_although_osu_exits_0(pipeline, tmp_path):
    done = mpiregress(pipeline, "--methods", "source", "--metrics", "bandwidth", "--placements", "same_numa",
                      *FAST, report_dir=tmp_path, extra_env={"OSU_DOUBLE_UNPARSABLE_SIZES": "1"})
    assert done.returncode == 2, done.stdout[-2000:]
    r = results(tmp_path)[("same_numa", "bandwidth")]
    assert r["status"] == "error" and r["value"] is None
    assert "printed its header but no data row" in r["reason"]
