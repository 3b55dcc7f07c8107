"""Point-to-point size sweeps: declared for the weekly schedule, 1 B - 4 MiB per placement as series apart
from the gated sizes, and drawn against size with the sizes that moved ringed."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest
import yaml
from helpers.e2e import mpiregress, pipeline  # noqa: F401  (fixture)
from shared import REPO

from mpiregress import report
from mpiregress.history import store as history
from mpiregress.model.results import Result, load, pt2pt
from mpiregress.report import figures, sweep_marks

SIZES = [2 ** i for i in range(23)]          # 1 B .. 4 MiB


def test_the_weekly_schedule_runs_the_sweep_on_every_cluster_partition():
    jobs = yaml.safe_load((REPO / ".gitlab-ci.yml").read_text())
    for system, partitions in (("iris", ("broadwell", "skylake")), ("aion", ("batch",))):
        for partition in partitions:
            job = jobs[f"pt2pt-sweep:{system}:{partition}"]
            assert job["script"] == ["ci/jobs/pt2pt-sweep.sh"] and job["needs"] == [f"build:{system}:{partition}"]
            assert job["rules"][-1] == {"if": '$CI_PIPELINE_SOURCE == "schedule"'}
            for consumer in (f"verdict:{system}", f"history:{system}"):
                assert {"job": f"pt2pt-sweep:{system}:{partition}", "artifacts": True, "optional": True} \
                    in jobs[consumer]["needs"]
    script = (REPO / "ci" / "jobs" / "pt2pt-sweep.sh").read_text()
    assert "--families pt2pt-sweep" in script and "-pt2pt-sweep" in script


def dry_run(tmp_path, *args: str) -> subprocess.CompletedProcess:
    """`mpiregress run --dry-run` of the source build's sweep family, job scripts under tmp_path/r; it must succeed."""
    env = dict(os.environ, MPIREGRESS_MANIFEST_DIR=str(tmp_path / "none"))
    env.pop("MPIREGRESS_IN_ALLOCATION", None)
    done = subprocess.run([sys.executable, "-m", "mpiregress", "run", "--dry-run", *args, "--families", "pt2pt-sweep",
                           "--methods", "source", "--report-dir", str(tmp_path / "r")],
                          env=env, capture_output=True, text=True, timeout=300, cwd=REPO)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    return done


def test_dry_run_sweeps_every_size_per_placement(tmp_path):
    """ReFrame writes one job per metric and placement Iris offers, each OSU run over 1 B - 4 MiB."""
    done = dry_run(tmp_path, "--system", "iris", "--partition", "skylake")
    assert "cross_numa is not available on iris:skylake" in done.stdout
    scripts = [p.read_text() for p in (tmp_path / "r" / "reframe" / "stage").rglob("rfm_job.sh")]
    runs = sorted(re.search(r"/(osu_\w+) (-m \S+ -x \d+ -i \d+)", s).groups() for s in scripts)  # type: ignore
    assert runs == sorted((b, "-m 1:4194304 -x 100 -i 1000") for b in ("osu_latency", "osu_bw") for _ in range(3))
    assert all("OsuPt2PtCheck" not in s for s in scripts)     # the gated family is not in this run


def test_the_partitions_osu_iterations_set_each_metrics_steps_unless_the_run_asks(tmp_path):
    """systems/local.yaml's osu_iterations {bandwidth: 200}: a 1 MiB osu_bw step over the local TCP moves 64 MiB
    an iteration; latency keeps 1000; --iterations sets both. The sweep's steps follow the same data."""
    def steps(*args: str) -> set[tuple[str, str]]:
        env = dict(os.environ, MPIREGRESS_MANIFEST_DIR=str(tmp_path / "none"))
        env.pop("MPIREGRESS_IN_ALLOCATION", None)
        out = tmp_path / str(len(args))
        done = subprocess.run([sys.executable, "-m", "mpiregress", "run", "--dry-run", "--system", "local", *args,
                               "--methods", "source", "--placements", "same_numa", "--report-dir", str(out)],
                              env=env, capture_output=True, text=True, timeout=300, cwd=REPO)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
        return {re.search(r"/(osu_\w+) -m \S+ -x \d+ -i (\d+)", p.read_text()).groups()  # type: ignore
                for p in (out / "reframe" / "stage").rglob("rfm_job.sh")}

    assert steps() == {("osu_latency", "1000"), ("osu_bw", "200")}
    assert steps("--iterations", "50") == {("osu_latency", "50"), ("osu_bw", "50")}
    assert steps("--families", "pt2pt-sweep", "--metrics", "bandwidth") == {("osu_bw", "200")}


def test_local_dry_run_gives_each_sweep_step_its_share_of_time_warm_up_included(tmp_path):
    """systems/local.yaml's step_timeout (400 s per 100 + 1000 iterations) for 100 + 100 iterations, times
    checks/config/pt2pt_sweep.yaml's step_time_scale: osu_latency 4x, osu_bw 12x (64 messages an iteration);
    the osu_bw job's time limit grows beyond the 10 min default to hold its step."""
    dry_run(tmp_path, "--system", "local", "--iterations", "100")
    found = set()
    for script in (tmp_path / "r" / "reframe" / "stage").rglob("rfm_job.sh"):
        text = script.read_text()
        benchmark = re.search(r"/(osu_\w+) -m 1:4194304 -x 100 -i 100", text).group(1)  # type: ignore
        # Bounded by timeout, or by the step watcher (cross_node: a heterogeneous step here).
        step = re.search(r"(?:timeout -k 10|step-watch --limit) (\d+) ", text).group(1)  # type: ignore
        job = re.search(r"#SBATCH --time=(\S+)", text).group(1)  # type: ignore
        found.add((benchmark, int(step), job))
    assert found == {("osu_latency", 290, "0:10:0"), ("osu_bw", 872, "0:16:42")}


def sweep(method, week, scale_from=None, scale=1.0, placement="cross_node"):
    """One run of an osu_latency sweep: latency grows with size; sizes >= ``scale_from`` scaled."""
    rng = np.random.default_rng(week * 10 + len(method))
    out = []
    for size in SIZES:
        value = (2.0 + size / 10_000) * float(np.exp(rng.normal(0, 0.01)))
        if scale_from is not None and size >= scale_from:
            value *= scale
        out.append(pt2pt("iris", "skylake", method, placement, "latency", value,
                         samples=[value, value * 1.001, value * 0.999], toolchain="2023b",
                         time=f"2025-{1 + week // 4:02d}-{1 + 7 * (week % 4):02d}T02:00:00+00:00",
                         commit=f"c{week}", pipeline=f"p{week}"))
        out[-1].parameters["size"] = size
        out[-1].parameters["sweep"] = "1:4194304"
    return out


def test_a_threshold_shift_is_ringed_at_the_sizes_that_moved(tmp_path):
    """Rendezvous from 16 KiB 30 % slower in this week's run: the gate judges those sizes regressions,
    the figure rings exactly them, and the gated 8 KiB series of the same run is not drawn twice."""
    with history.open_history(tmp_path / "h.sqlite") as db:
        for week in range(12):
            db.import_results(sweep("source", week) + sweep("easybuild", week), run_id=f"w{week}")
        now: list[Result] = sweep("source", 12, scale_from=16384, scale=1.3) + sweep("easybuild", 12)
        gated = pt2pt("iris", "skylake", "source", "cross_node", "latency", 99.0, samples=[99.0], toolchain="2023b")
        data = report.build(now + [gated], db, {})
    moved = sweep_marks.moved(data.verdicts, data.changes, data.trends)
    points, marks = figures.sweep_points(data.results, "iris", "skylake", "latency", moved)
    assert marks == {("cross_node", "source"): {s: "worse" for s in SIZES if s >= 16384}}
    assert sorted(points[("cross_node", "source")]) == SIZES and 99.0 not in points[("cross_node", "source")][8192]
    assert figures.sweeps(data.results, "iris", "skylake", "latency", moved) is not None
    # Under this run's curve, the history's level (the gate's reference) of every swept size: the curves part
    # where the rings are.
    reference = {v.key: v.reference for v in data.verdicts if v.basis == "history" and v.reference is not None}
    levels = figures.sweep_levels(data.results, "iris", "skylake", "latency", reference)
    assert set(levels) == {("cross_node", "source"), ("cross_node", "easybuild")}
    assert sorted(levels[("cross_node", "source")]) == SIZES
    current = {s: v[0] for s, v in points[("cross_node", "source")].items()}
    parted = {s for s in SIZES if current[s] > 1.2 * levels[("cross_node", "source")][s]}
    assert parted == {s for s in SIZES if s >= 16384}
    assert figures.sweeps(data.results, "iris", "skylake", "latency", moved, reference) is not None


def test_a_level_found_by_the_change_point_scan_in_the_last_runs_is_ringed():
    from mpiregress.history.store import RunPoint
    from mpiregress.model.results import pt2pt_key
    from mpiregress.verdict.changepoint import scan_runs

    key = pt2pt_key("iris", "skylake", "source", "cross_node", "latency")
    runs = [RunPoint(f"w{i}", f"2025-01-{1 + i:02d}", f"c{i}", f"p{i}", "2023b", "schedule", True, "",
                     (2.0 * (1.3 if i >= 17 else 1.0) * (1 + 0.003 * (i % 3)),)) for i in range(20)]
    found = scan_runs({key: runs})
    assert found[key][0].run_after.run_id == "w17"
    assert sweep_marks.moved([], found, {key: runs}) == {key: "worse"}
    # Older than the last 2 runs: not this week's.
    assert sweep_marks.moved([], found, {key: runs}, recent=2) == {}


@pytest.mark.slurm
def test_the_sweep_runs_on_the_local_slurm_and_its_report_draws_it(pipeline, tmp_path):  # noqa: F811
    """The real path with the OSU double: ReFrame submits both sweeps to the local Slurm, every size of
    1 B - 4 MiB comes back as its own series, the step's time limit counts the warm-up, and the report
    draws latency and bandwidth against size."""
    out = tmp_path / "r"
    done = mpiregress(pipeline, "--families", "pt2pt-sweep", "--methods", "source", "--placements", "same_numa",
                      "--iterations", "3", "--setvar", "warmup=1", "--allow-missing-baselines", report_dir=out)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    rows = [r for r in json.loads((out / "results.json").read_text()) if r["status"] == "pass"]
    measured = sorted((r["metric"], r["parameters"]["size"]) for r in rows)
    assert measured == sorted((m, s) for m in ("latency", "bandwidth") for s in SIZES)
    assert {(r["benchmark"], r["parameters"]["placement"], r["parameters"]["sweep"]) for r in rows} == {
        ("osu_latency", "same_numa", "1:4194304"), ("osu_bw", "same_numa", "1:4194304")}
    scripts = {p.parent.name: p.read_text() for p in (out / "reframe" / "output").rglob("rfm_job.sh")}
    assert len(scripts) == 2 and all("-m 1:4194304 -x 1 -i 3" in s for s in scripts.values())
    # systems/local.yaml step_timeout 400 s per 1100 iterations; 4 iterations, x4 (latency) or x12 (bandwidth),
    # at least 60 s.
    limits = sorted(int(re.search(r"timeout -k 10 (\d+) ", s).group(1)) for s in scripts.values())  # type: ignore
    assert limits == [60, 60]
    data = report.build(load((out / "results.json").read_text()), None, {})
    for metric in ("latency", "bandwidth"):
        points, marks = figures.sweep_points(data.results, "local", "batch", metric)
        assert sorted(points[("same_numa", "source")]) == SIZES and marks == {}
        assert figures.sweeps(data.results, "local", "batch", metric) is not None
