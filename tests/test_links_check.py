"""The link matrix as a pipeline family, without Slurm: the dry-run job script of a 64-node Aion run,
the check's judged series through the ReFrame report, verdict and gate, the node-list and option
inputs, and the HTML report's Link matrix block."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.linkrun import make_run
from shared import REPO

from mpiregress.cluster import hostlist
from mpiregress.errors import InputError
from mpiregress.families.links import judge, resultsfile
from mpiregress.model import launch
from mpiregress.model.results import Result
from mpiregress.report import links as report_links
from mpiregress.run import reframe_report
from mpiregress.verdict import band as verdict
from mpiregress.verdict import compose
from mpiregress.verdict import history_gate as gate

HOSTS8 = [f"n{i // 2}" for i in range(8)]   # 4 nodes x 2 ranks


def dry_run(tmp_path: Path, *setvars: str) -> tuple[subprocess.CompletedProcess, str]:
    """`mpiregress run --system aion --dry-run --families links` with these check variables; its job script."""
    cmd = [sys.executable, "-m", "mpiregress", "run", "--system", "aion", "--dry-run", "--families", "links",
           "--methods", "source", "--report-dir", str(tmp_path / "r")]
    for setting in setvars:
        cmd += ["--setvar", setting]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=REPO)
    scripts = sorted((tmp_path / "r" / "reframe" / "stage").rglob("rfm_job.sh"))
    assert done.returncode == 0 and len(scripts) == 1, done.stdout[-3000:] + done.stderr[-2000:]
    assert "LinktestCheck" in str(scripts[0])
    return done, scripts[0].read_text()


def test_dry_run_writes_the_job_script_of_a_64_node_aion_run(tmp_path: Path) -> None:
    _, script = dry_run(tmp_path, "LinktestCheck.nodes=64", "LinktestCheck.time_limit=45m")
    lines = script.splitlines()
    # One rank per node on 64 whole nodes of the batch partition, within the time limit asked.
    for option in ("--ntasks=64", "--ntasks-per-node=1", "--exclusive", "--partition=batch", "--time=0:45:0"):
        assert f"#SBATCH {option}" in lines, script
    # The µarch guard probes all 64 nodes and refuses before launch.
    assert any(line.startswith("mpiregress_targets=$(srun -N64 -n64 --ntasks-per-node=1 --mpi=none") for line in lines)
    assert any("mpiregress guard --build-target zen2" in line and line.endswith("|| exit 86") for line in lines)
    # The program is the source build's (planned) linktest from the manifest, not a private build.
    srun = next(line for line in lines if line.startswith("srun ") and "/linktest " in line)
    assert srun == ("srun --mpi=pmix --kill-on-bad-exit=1 --nodes=64 --ntasks=64 --ntasks-per-node=1 "
                    "--cpu-bind=cores /planned/source/zen2/programs/bin/linktest -Z 20 -o links.bin"), script
    assert 'trap "echo mpiregress-job-end" EXIT' in lines  # sanity waits for the job's real end
    guard = next(i for i, line in enumerate(lines) if "mpiregress guard" in line)
    assert guard < lines.index(srun)  # the guard comes before the launch


def test_dry_run_of_a_node_list_after_maintenance(tmp_path: Path) -> None:
    _, script = dry_run(tmp_path, "LinktestCheck.nodelist=aion-[0001-0004,0010]",
                        "LinktestCheck.ranks_per_node=2", "LinktestCheck.linktest_args=-S -Z 5")
    assert "#SBATCH --nodelist=aion-[0001-0004,0010]" in script and "#SBATCH --ntasks=10" in script
    assert any(line.endswith(
        "--nodes=5 --ntasks=10 --ntasks-per-node=2 --nodelist=aion-[0001-0004,0010] --cpu-bind=cores "
        "/planned/source/zen2/programs/bin/linktest -S -Z 5 -o links.bin") for line in script.splitlines())


def test_a_malformed_setvar_is_one_sentence_and_exit_2(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "mpiregress", "run", "--system", "aion", "--dry-run",
                           "--families", "links", "--setvar", "nodes 64", "--report-dir", str(tmp_path)],
                          capture_output=True, text=True, timeout=120, cwd=REPO)
    assert done.returncode == 2
    assert "--setvar 'nodes 64' is not NAME=VALUE or CHECK.NAME=VALUE" in done.stderr
    assert "Traceback" not in done.stderr


def test_node_lists_expand_like_slurm() -> None:
    assert hostlist.expand("aion-[0001-0003,0010],iris-001") == ["aion-0001", "aion-0002", "aion-0003",
                                                                  "aion-0010", "iris-001"]
    assert len(hostlist.expand("aion-[0001-0064]")) == 64
    assert hostlist.expand("r[1-2]n[1-2]") == ["r1n1", "r1n2", "r2n1", "r2n2"]
    for bad, said in (("aion-[0001-", "unbalanced brackets"), ("n[3-1]", "runs backwards"), ("n[x]", "not a number")):
        with pytest.raises(InputError, match=said):
            hostlist.expand(bad)


def test_the_step_names_its_geometry_or_takes_the_jobs_nodes() -> None:
    fixed = launch.linktest_step(64, 1, "", ["--mpi=pmix"])
    assert fixed.options == ["--mpi=pmix", "--kill-on-bad-exit=1", "--nodes=64", "--ntasks=64",
                             "--ntasks-per-node=1", "--cpu-bind=cores"]
    flexible = launch.linktest_step(0, 4, "", [], shared_cpus=True)
    assert flexible.options == ["--kill-on-bad-exit=1", '--nodes="$SLURM_JOB_NUM_NODES"',
                                '--ntasks="$((SLURM_JOB_NUM_NODES * 4))"', "--ntasks-per-node=4",
                                "--overcommit", "--cpu-bind=none"]
    with pytest.raises(ValueError):
        launch.linktest_step(2, 0, "", [])


def case(measured: list[dict], problems: list[str] = ()) -> dict:
    """A ReFrame report test case of the link check, as the check leaves it."""
    return {"name": "LinktestCheck", "system": "local", "partition": "batch", "build_method": "source",
            "metric": "latency", "benchmark": "linktest", "series_parameters": {"nodes": "partition"},
            "result": "pass", "measured": measured, "problems": list(problems), "nodes_used": ["n0", "n1"]}


def judged_run(tmp_path: Path, **faults) -> judge.Judged:
    path = tmp_path / "links.bin"
    resultsfile.write(path, make_run(HOSTS8, **faults))
    return judge.judge_file(path, tmp_path / "out")


def as_measured(judged: judge.Judged) -> list[dict]:
    return [{"benchmark": "linktest", "parameters": r["parameters"], "metric": r["metric"], "value": r["value"],
             "status": r["status"], "reason": r["reason"], "nodelist": r["nodelist"], "samples": r["samples"],
             "conditions": r["conditions"]} for r in judged.records({})]


def test_a_bad_link_turns_the_run_red_naming_it_and_keeps_every_series(tmp_path: Path) -> None:
    judged = judged_run(tmp_path, slow_links=[(1, 6)])
    found = reframe_report.case_to_results(case(as_measured(judged)), toolchain="2023b")
    failing = [r for r in found if r.status == "fail"]
    assert {r.parameters["link"] for r in failing} == {"n0--n3"}
    # 10x the typical pair (its kind's median without the link's own pairs); its worst pair quoted, and the
    # median of the link's 4 rank pairs, of which only 1-6 is slowed.
    assert re.match(r"bad link n0--n3 \(worst pair ranks 1-6\): latency 10\.\dx typical, 1\d\.\dx on re-test; "
                    r"median of the link's 4 pairs 1\.0x$", failing[0].reason)
    assert "x on re-test" in failing[0].reason
    assert failing[0].nodelist == ["n0", "n3"] and failing[0].conditions["judged_by"] == judge.JUDGED_BY
    assert {r.parameters.get("node") for r in found if "node" in r.parameters} == {"n0", "n1", "n2", "n3"}
    # No baseline for a node or a link: the run's own judgement stands, the healthy series pass.
    verdict.apply_baselines(found, None)
    assert [r for r in found if r.status == "fail"] == failing
    assert all(r.status == "pass" for r in found if r not in failing)
    assert compose.exit_code_of_run(found, []) == 1
    # The history gate keeps it red with the same reason (any history, none here).
    verdicts = gate.judge(found, None, {"local": None})
    red = [v for v in verdicts if v.verdict == "regression"]
    assert {v.key.parameters for v in red} == {(("link", "n0--n3"),)} and red[0].basis == "run"
    assert "bad link n0--n3" in red[0].reason


def test_a_bad_node_is_a_fail_naming_the_node_and_its_rank(tmp_path: Path) -> None:
    judged = judged_run(tmp_path, slow_ranks=[5])
    found = reframe_report.case_to_results(case(as_measured(judged)))
    failing = {(r.parameters.get("node"), r.metric): r.reason for r in found if r.status == "fail"}
    assert set(failing) == {("n2", "latency"), ("n2", "bandwidth")}
    # 6 of 6: its pair inside n2 is of a kind of 4 pairs, too few to judge (analysis.MIN_KIND_PAIRS).
    assert re.match(r"bad node n2 \(rank 5\): latency slow in 6 of its 6 pairs, median 1\d\.\dx typical, "
                    r"worst pair 1\d\.\dx \(ranks \d-\d\)$", failing[("n2", "latency")])


def test_an_undisturbed_run_passes_with_every_node_recorded(tmp_path: Path) -> None:
    found = reframe_report.case_to_results(case(as_measured(judged_run(tmp_path))))
    verdict.apply_baselines(found, None)
    assert found and all(r.status == "pass" for r in found)
    assert compose.exit_code_of_run(found, []) == 0


def test_a_truncated_results_file_is_an_error_beside_the_series_it_kept(tmp_path: Path) -> None:
    path = tmp_path / "links.bin"
    resultsfile.write(path, make_run(HOSTS8))
    header = resultsfile.HEADER.size + 8 * 64
    path.write_bytes(path.read_bytes()[: header + 20 * resultsfile.RECORD.itemsize + 5])
    judged = judge.judge_file(path, tmp_path / "out")
    assert judged.problems == [f"{path} is truncated: 5 trailing bytes of a partial record dropped, "
                               "the 20 complete records before it kept"]
    found = reframe_report.case_to_results(case(as_measured(judged), judged.problems))
    errors = [r for r in found if r.status == "error"]
    assert [r.reason for r in errors] == judged.problems
    assert len([r for r in found if r.status == "pass"]) == 8  # 4 nodes x 2 metrics: nothing measured lost
    assert compose.exit_code_of_run(found, []) == 2
    for name in judge.ARTIFACTS:
        assert (tmp_path / "out" / name).stat().st_size > 0


def test_an_odd_rank_count_is_judged_and_the_programs_sentence_kept(tmp_path: Path) -> None:
    path = tmp_path / "links.bin"
    resultsfile.write(path, make_run(["n0", "n0", "n1", "n1", "n2"]))
    said = ("linktest: 5 ranks is odd: one rank sits out each step (5 steps of 2 pairs); "
            "every pair is still measured once.")
    judged = judge.judge_file(path, tmp_path / "out", stderr=f"noise\n{said}\n")
    assert judged.problems == [] and not judged.analysis.judged_bad
    assert judged.summary[0] == f"program: {said}"
    assert (tmp_path / "out" / "summary.txt").read_text().startswith(f"program: {said}")


def test_no_results_file_says_what_the_program_said(tmp_path: Path) -> None:
    said = "linktest: zero iterations measure nothing: give -i and -I at least 1."
    with pytest.raises(InputError, match="^linktest: zero iterations measure nothing"):
        judge.judge_file(tmp_path / "links.bin", tmp_path / "out", stderr=said)
    with pytest.raises(InputError, match="linktest wrote no results file"):
        judge.judge_file(tmp_path / "links.bin", tmp_path / "out")


def test_a_measured_status_other_than_pass_or_fail_is_refused(tmp_path: Path) -> None:
    bad = case([{"benchmark": "linktest", "parameters": {"node": "n0"}, "metric": "latency", "value": 1.0,
                 "status": "maybe"}])
    report = tmp_path / "report.json"
    report.write_text(json.dumps({"runs": [{"testcases": [bad]}]}))
    with pytest.raises(InputError, match="malformed value"):
        reframe_report.load(report)


def test_the_html_block_shows_heatmap_histogram_bad_links_and_the_csv(tmp_path: Path) -> None:
    run_folder = tmp_path / "run"
    path = tmp_path / "links.bin"
    resultsfile.write(path, make_run(HOSTS8, slow_links=[(1, 6)], transients=[(0, 2)]))
    judge.judge_file(path, run_folder / "links" / "local-batch-source")
    html = str(report_links.section(run_folder, base=run_folder))
    assert html.startswith("<h2>Link matrix</h2>")
    assert "local-batch-source: <span class=\"v-regression\">verdict: bad node(s) or link(s) found" in html
    assert html.count("data:image/png;base64,") == 2
    assert '<a href="links/local-batch-source/bad_links.csv">bad_links.csv</a>' in html
    rows = html.split("<tr class=")[1:]
    # Worst attribution first: the bad link's rows, then the transient.
    assert "n0–n3" in rows[0] and "bad link" in rows[0] and re.search(r"10\.\d×, 1\d\.\d×", rows[0])
    assert any("transient" in row and "n0–n1" in row for row in rows)
    assert str(report_links.section(tmp_path / "elsewhere")) == ""


def test_the_report_command_shows_the_link_matrix_of_the_run_folder(tmp_path: Path) -> None:
    run_folder = tmp_path / "run"
    path = tmp_path / "links.bin"
    resultsfile.write(path, make_run(HOSTS8, slow_ranks=[3]))
    judged = judge.judge_file(path, run_folder / "links" / "local-batch-source")
    found = reframe_report.case_to_results(case(as_measured(judged)), toolchain="2023b")
    (run_folder / "results.json").write_text(json.dumps([r.to_dict() for r in found]))
    done = subprocess.run([sys.executable, "-m", "mpiregress", "report", str(run_folder / "results.json"),
                           "--out-dir", str(run_folder), "--db", str(tmp_path / "none.sqlite")],
                          capture_output=True, text=True, timeout=300, cwd=REPO)
    assert done.returncode == 0, done.stderr
    page = (run_folder / "report.html").read_text()
    assert "<h2>Link matrix</h2>" in page and "BAD NODE n1 (rank 3)" in page
    assert "bad node n1 (rank 3): latency slow in" in page  # the gate's "needs a look" names it too
    assert isinstance(found[0], Result)


def test_dry_run_of_the_whole_partition_needs_no_slurm(tmp_path: Path) -> None:
    # Every idle node is Slurm's answer at submission; a dry run (no Slurm) writes the usual allocation.
    _, script = dry_run(tmp_path)
    assert "#SBATCH --ntasks=2" in script and " --nodes=2 --ntasks=2 --ntasks-per-node=1 " in script


def test_a_negative_node_count_is_one_sentence(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "mpiregress", "run", "--system", "aion", "--dry-run", "--families",
                           "links", "--methods", "source", "--setvar", "LinktestCheck.nodes=-3", "--report-dir",
                           str(tmp_path)], capture_output=True, text=True, timeout=300, cwd=REPO)
    assert done.returncode == 2
    assert "nodes=-3, ranks_per_node=0: give whole numbers from 0 (the default) up" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_ratio_that_would_call_every_pair_slow_is_one_sentence(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "mpiregress", "run", "--system", "aion", "--dry-run", "--families",
                           "links", "--methods", "source", "--setvar", "LinktestCheck.ratio=0.9", "--report-dir",
                           str(tmp_path)], capture_output=True, text=True, timeout=300, cwd=REPO)
    assert done.returncode == 2, done.stdout[-2000:] + done.stderr[-2000:]
    assert ("the link judging's ratio must be a number above 1 (a slow pair is that many times worse than the "
            "typical one), found 0.9") in done.stderr
    assert "Traceback" not in done.stderr


def test_a_build_of_another_system_is_never_used_for_this_one(tmp_path: Path) -> None:
    """A manifest dir holding the local system's zen2 build (linked against this host's MPI): an Aion run,
    also zen2, plans its own build instead of running the local one."""
    from mpiregress.model import manifest
    manifests = tmp_path / "manifests"
    prefix = "/opt/local-build"
    manifest.write(manifest.Manifest(method="source", toolchain="2023b", osu_version="7.2", target="zen2",
                                     prefix=prefix, bin_dir=f"{prefix}/bin",
                                     programs={"linktest": f"{prefix}/programs/bin/linktest"},
                                     extra={"system": "local", "partition": "batch"}), manifests)
    cmd = [sys.executable, "-m", "mpiregress", "run", "--system", "aion", "--dry-run", "--families", "links",
           "--methods", "source", "--manifest-dir", str(manifests), "--report-dir", str(tmp_path / "r")]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=REPO)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    [script] = sorted((tmp_path / "r" / "reframe" / "stage").rglob("rfm_job.sh"))
    text = script.read_text()
    assert "/planned/source/zen2/programs/bin/linktest" in text and prefix not in text


def test_a_run_short_of_its_targets_measures_more_rounds_in_its_allocation(tmp_path: Path) -> None:
    # systems/aion.yaml: a 2x node and a 2x link must be seen, in up to 3 all-pairs rounds. The job asks
    # `mpiregress links enough` after each round and measures another while it says short (exit 1).
    _, script = dry_run(tmp_path, "LinktestCheck.nodes=4")
    assert "for mpiregress_round in $(seq 2 3); do" in script
    assert re.search(r"-m mpiregress links enough links\.bin \$\(ls -v links-round-\*\.bin 2>/dev/null\) "
                     r".*--rounds 3 --node-target 2\.0 --link-target 2\.0; \[ \$\? -eq 1 \] \|\| break", script)
    assert re.search(r"srun .*/linktest -Z 20 -o links-round-\"\$mpiregress_round\"\.bin \|\| break", script)
    # After the first round's step (its exit code kept), before the noise probe.
    assert script.index("-o links.bin") < script.index("mpiregress_links_rc=") < script.index("seq 2 3")
