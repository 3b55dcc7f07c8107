"""Point-to-point size sweeps: declared for the weekly schedule, 1 B - 4 MiB per placement as series apart
from the gated sizes, and drawn against size with the sizes that moved ringed."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import yaml

from mpiregress import history, report
from mpiregress.report import figures, sweep_marks
from mpiregress.results import Result, pt2pt
from shared import REPO

SIZES = [2 ** i for i in range(23)]          # 1 B .. 4 MiB


def test_the_weekly_schedule_runs_the_sweep_on_every_cluster_partition():
    pipeline = yaml.safe_load((REPO / ".gitlab-ci.yml").read_text())
    for system, partitions in (("iris", ("broadwell", "skylake")), ("aion", ("batch",))):
        for partition in partitions:
            job = pipeline[f"pt2pt-sweep:{system}:{partition}"]
            assert job["script"] == ["ci/jobs/pt2pt-sweep.sh"] and job["needs"] == [f"build:{system}:{partition}"]
            assert job["rules"][-1] == {"if": '$CI_PIPELINE_SOURCE == "schedule"'}
            for consumer in (f"verdict:{system}", f"history:{system}"):
                assert {"job": f"pt2pt-sweep:{system}:{partition}", "artifacts": True, "optional": True} \
                    in pipeline[consumer]["needs"]
    script = (REPO / "ci" / "jobs" / "pt2pt-sweep.sh").read_text()
    assert "--families pt2pt-sweep" in script and "-pt2pt-sweep" in script


def test_dry_run_sweeps_every_size_per_placement(tmp_path):
    """ReFrame writes one job per metric and placement Iris offers, each OSU run over 1 B - 4 MiB."""
    env = dict(os.environ, MPIREGRESS_MANIFEST_DIR=str(tmp_path / "none"))
    env.pop("MPIREGRESS_IN_ALLOCATION", None)
    done = subprocess.run([sys.executable, "-m", "mpiregress", "run", "--dry-run", "--system", "iris", "--partition",
                           "skylake", "--families", "pt2pt-sweep", "--methods", "source", "--report-dir",
                           str(tmp_path / "r")], env=env, capture_output=True, text=True, timeout=300, cwd=REPO)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "cross_numa is not available on iris:skylake" in done.stdout
    scripts = [p.read_text() for p in (tmp_path / "r" / "reframe" / "stage").rglob("rfm_job.sh")]
    runs = sorted(re.search(r"/(osu_\w+) (-m \S+ -x \d+ -i \d+)", s).groups() for s in scripts)  # type: ignore
    assert runs == sorted((b, "-m 1:4194304 -x 100 -i 1000") for b in ("osu_latency", "osu_bw") for _ in range(3))
    assert all("OsuPt2PtCheck" not in s for s in scripts)     # the gated family is not in this run


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


def test_a_level_found_by_the_change_point_scan_in_the_last_runs_is_ringed():
    from mpiregress.changepoint import scan_runs
    from mpiregress.history import RunPoint
    from mpiregress.results import pt2pt_key

    key = pt2pt_key("iris", "skylake", "source", "cross_node", "latency")
    runs = [RunPoint(f"w{i}", f"2025-01-{1 + i:02d}", f"c{i}", f"p{i}", "2023b", "schedule", True, "",
                     (2.0 * (1.3 if i >= 17 else 1.0) * (1 + 0.003 * (i % 3)),)) for i in range(20)]
    found = scan_runs({key: runs})
    assert found[key][0].run_after.run_id == "w17"
    assert sweep_marks.moved([], found, {key: runs}) == {key: "worse"}
    # Older than the last 2 runs: not this week's.
    assert sweep_marks.moved([], found, {key: runs}, recent=2) == {}
