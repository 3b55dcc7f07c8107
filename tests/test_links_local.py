"""linktest on the real local Slurm: real OpenMPI, real faults injected, the analysis must name them.

8 ranks, 4 per fake node, serial mode (one pair at a time; idle ranks sleep). The
two fake nodes share this host's 2 CPUs, so the step is oversubscribed (-O) and
unbound: the kernel usually puts the two measuring ranks on the two cores. The machine is
shared and busy: load averages of 13-64 on its 2 cores were seen while these ran.
Under that load a healthy pair whose two ranks end up on one core waits for the
scheduler at every message: its FASTEST iteration was measured up to 80x the
typical 3-8 us (578 us), in about 1 run of 4 with a 2 ms fault and --ratio 10.
So the faults are 20 ms per message (about 3000x typical) and the tests judge the
fastest iteration of each pair (--statistic min: the scheduler only ever adds
time, a delay on every message moves the fastest one too) against --ratio 300,
about 4x above the worst healthy pair seen and 10x below the fault. On a real
cluster the defaults (median, 2x, 5 robust sigmas) apply.

Faults (tests/linkfault/linkfault.c, LD_PRELOAD, test-only):
- a slow link: every message between ranks 2 (node1) and 5 (node2) is delayed;
- a slow rank: every message from or to rank 6 (node2) is delayed.
"""
from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from helpers.e2e import mpiregress, pipeline  # noqa: F401  (pipeline is a fixture)
from mpiregress import manifest, microarch
from mpiregress.cli import main as cli_main
from mpiregress.links import judge, resultsfile
from mpiregress.local_cluster import LocalCluster
from mpiregress.report import links as report_links

REPO = Path(__file__).resolve().parent.parent
SOURCE = REPO / "checks" / "src" / "linktest"
SHIM = Path(__file__).resolve().parent / "linkfault" / "linkfault.c"
DELAY_US = "20000"
JUDGE = ["--ratio", "300", "--statistic", "min"]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """linktest built by its own Makefile (MPICC, CFLAGS, PREFIX, make install), and the fault shim."""
    work = tmp_path_factory.mktemp("linktest")
    shutil.copytree(SOURCE, work / "src")
    prefix = work / "prefix"
    subprocess.run(["make", "-C", str(work / "src"), "MPICC=mpicc", "CFLAGS=-O2", f"PREFIX={prefix}", "install"],
                   check=True, capture_output=True, text=True, timeout=120)
    shim = work / "linkfault.so"
    subprocess.run(["mpicc", "-O2", "-shared", "-fPIC", "-o", str(shim), str(SHIM)],
                   check=True, capture_output=True, text=True, timeout=120)
    # Two fake nodes on one host: each needs its own shared-memory (vader) backing folder,
    # or the ranks of node1 and node2 with the same local rank open the same segment.
    wrapper = work / "pernode.sh"
    wrapper.write_text('#!/bin/sh\nd="$LINKTEST_SHM/$SLURMD_NODENAME"; mkdir -p "$d"\n'
                       'export OMPI_MCA_btl_vader_backing_directory="$d"\nexec "$@"\n')
    wrapper.chmod(0o755)
    (work / "shm").mkdir()
    return {"binary": prefix / "bin" / "linktest", "shim": shim, "wrapper": wrapper, "shm": work / "shm"}


def slurm_env(cluster: LocalCluster, built: dict[str, Path], extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    # yield_when_idle: when the kernel puts both ranks of the measured pair on one core, the
    # waiting rank gives the core up instead of spinning through its time slice (that costs
    # ~1 ms per message and would make an undisturbed oversubscribed pair look broken).
    env.update(cluster.client_env(), OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_mpi_yield_when_idle="1", LINKTEST_SHM=str(built["shm"]), **extra)
    return env


def linktest(cluster: LocalCluster, built: dict[str, Path], out: Path, ranks: int = 8, nodes: int = 2,
             fault: dict[str, str] | None = None, args: tuple[str, ...] = ("-S", "-w", "5", "-i", "20", "-I", "5")
             ) -> subprocess.CompletedProcess:
    """Run linktest in its own exclusive allocation of ``nodes`` fake nodes (srun inside salloc)."""
    extra = {}
    if fault:
        extra = {"LD_PRELOAD": str(built["shim"]), "LINKFAULT_DELAY_US": DELAY_US, **fault}
    argv = ["salloc", f"-N{nodes}", "--exclusive", "--time=6", "srun", "--mpi=pmix", f"-n{ranks}", "-O",
            "--cpu-bind=none", "--kill-on-bad-exit=1", str(built["wrapper"]), str(built["binary"]),
            *args, "-o", str(out)]
    try:
        return subprocess.run(argv, env=slurm_env(cluster, built, extra), capture_output=True, text=True,
                              timeout=420, cwd=out.parent)
    except subprocess.TimeoutExpired as err:
        pytest.fail(f"linktest did not end within 420 s: {err.stderr!r}", pytrace=False)


def analyze(results: Path, out: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, list[dict]]:
    code = cli_main(["links", "analyze", str(results), "--out", str(out), *JUDGE])
    said = capsys.readouterr()
    with open(out / "bad_links.csv") as f:
        rows = list(csv.DictReader(f))
    return code, said.out + said.err, rows


@pytest.mark.slurm
def test_undisturbed_run_names_nothing(local_cluster: LocalCluster, built: dict[str, Path], tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    proc = linktest(local_cluster, built, tmp_path / "clean.bin")
    assert proc.returncode == 0, proc.stderr
    run = resultsfile.read(tmp_path / "clean.bin")
    assert run.complete and run.problem is None
    assert run.hosts == ["node1"] * 4 + ["node2"] * 4
    code, said, rows = analyze(tmp_path / "clean.bin", tmp_path / "clean", capsys)
    assert code == 0, said
    assert "verdict: no bad node and no bad link" in said
    assert not [r for r in rows if r["attribution"] in ("bad node", "bad link")], rows
    for name in ("matrix.npz", "heatmap.png", "histogram.png", "summary.txt"):
        assert (tmp_path / "clean" / name).stat().st_size > 0


@pytest.mark.slurm
def test_slow_link_is_named_bad_link(local_cluster: LocalCluster, built: dict[str, Path], tmp_path: Path,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    proc = linktest(local_cluster, built, tmp_path / "link.bin", fault={"LINKFAULT_PAIR": "2,5"})
    assert proc.returncode == 0, proc.stderr
    code, said, rows = analyze(tmp_path / "link.bin", tmp_path / "link", capsys)
    assert code == 1, said
    bad = {(r["from_rank"], r["to_rank"], r["from_node"], r["to_node"]) for r in rows if r["attribution"] == "bad link"}
    assert bad == {("2", "5", "node1", "node2")}, said
    assert "BAD LINK node1--node2 (ranks 2-5, inter-node)" in said
    assert "BAD NODE" not in said
    # Both measurements are kept: the re-test is as slow as the first.
    row = next(r for r in rows if r["attribution"] == "bad link" and r["metric"] == "latency")
    assert float(row["first"]) > 10000 and float(row["second"]) > 10000, row


@pytest.mark.slurm
def test_slow_rank_names_its_node(local_cluster: LocalCluster, built: dict[str, Path], tmp_path: Path,
                                  capsys: pytest.CaptureFixture[str]) -> None:
    proc = linktest(local_cluster, built, tmp_path / "node.bin", fault={"LINKFAULT_RANK": "6"})
    assert proc.returncode == 0, proc.stderr
    code, said, rows = analyze(tmp_path / "node.bin", tmp_path / "node", capsys)
    assert code == 1, said
    assert "BAD NODE node2 (rank 6): latency slow in 7 of its 7 pairs" in said, said
    assert "BAD NODE node1" not in said and "BAD LINK" not in said, said
    assert {r["attribution"] for r in rows if "6" in (r["from_rank"], r["to_rank"])} == {"bad node"}
    matrix = np.load(tmp_path / "node" / "matrix.npz")
    latency = matrix["rank_latency"]
    assert latency.shape == (8, 8) and np.isnan(latency[6, 6])
    assert np.nanmin(latency[6]) > 10000  # every pair of rank 6 carries the 20 ms delay


@pytest.mark.slurm
def test_parallel_schedule_measures_every_pair_once(local_cluster: LocalCluster, built: dict[str, Path],
                                                    tmp_path: Path) -> None:
    proc = linktest(local_cluster, built, tmp_path / "par.bin", ranks=6, nodes=1, args=("-i", "20", "-Z", "2"))
    assert proc.returncode == 0, proc.stderr
    run = resultsfile.read(tmp_path / "par.bin")
    pairs = sorted((int(a), int(b)) for a, b in zip(run.main["rank_a"], run.main["rank_b"]))
    assert pairs == [(a, b) for a in range(6) for b in range(a + 1, 6)]
    steps = np.bincount(run.main["step"])
    assert steps.tolist() == [3] * 5  # N-1 steps of N/2 simultaneous pairs
    assert not run.serial and 1 <= len(run.retest) <= 4


@pytest.mark.slurm
def test_odd_rank_count_adds_an_idle_slot(local_cluster: LocalCluster, built: dict[str, Path],
                                          tmp_path: Path) -> None:
    proc = linktest(local_cluster, built, tmp_path / "odd.bin", ranks=5, nodes=1, args=("-i", "20"))
    assert proc.returncode == 0, proc.stderr
    assert ("linktest: 5 ranks is odd: one rank sits out each step (5 steps of 2 pairs); "
            "every pair is still measured once.") in proc.stderr
    run = resultsfile.read(tmp_path / "odd.bin")
    assert sorted((int(a), int(b)) for a, b in zip(run.main["rank_a"], run.main["rank_b"])) == \
        [(a, b) for a in range(5) for b in range(a + 1, 5)]


@pytest.mark.slurm
def test_zero_iterations_is_refused(local_cluster: LocalCluster, built: dict[str, Path], tmp_path: Path) -> None:
    proc = linktest(local_cluster, built, tmp_path / "zero.bin", ranks=2, nodes=1, args=("-i", "0"))
    assert proc.returncode != 0
    assert "linktest: zero iterations measure nothing: give -i and -I at least 1." in proc.stderr
    assert "exited with exit code 2" in proc.stderr or "Exited with exit code 2" in proc.stderr, proc.stderr
    assert not (tmp_path / "zero.bin").exists()


# -- through the ReFrame check: `mpiregress run --families links` (checks/linktest.py) ------------------
# The program is the source build's linktest (the OSU double's build of this session); the local
# partition's `links:` settings (systems/local.yaml) give 4 ranks per node, serial mode, min and 300x.

@pytest.fixture(scope="module")
def manifests(built: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A source-build manifest naming the linktest this module built with its Makefile (the build methods
    do the same, tests/test_programs.py): the check takes its program from here, as from any build."""
    folder = tmp_path_factory.mktemp("manifests")
    prefix = built["binary"].parent.parent
    manifest.write(manifest.Manifest(
        method="source", toolchain="2023b", osu_version="7.2", target=microarch.host_target(), prefix=str(prefix),
        bin_dir=str(prefix / manifest.BIN_SUBDIR), programs={"linktest": str(built["binary"])},
        notes=["tests/test_links_local.py: linktest only, built by its Makefile with mpicc"]), folder)
    return folder


def run_links(pipeline: dict[str, str], manifests: Path, report_dir: Path, *setvars: str
              ) -> subprocess.CompletedProcess:
    args: list[str] = ["--families", "links", "--methods", "source", "--no-build", "--manifest-dir", str(manifests)]
    for setting in setvars:
        args += ["--setvar", setting]
    return mpiregress(pipeline, *args, report_dir=report_dir)


def run_results(report_dir: Path) -> list[dict]:
    return json.loads((report_dir / "results.json").read_text())


@pytest.mark.slurm
def test_check_names_the_slow_pair_and_turns_the_run_red(pipeline: dict[str, str], built: dict[str, Path],
                                                         manifests: Path, tmp_path: Path) -> None:
    done = run_links(pipeline, manifests, tmp_path, f"LinktestCheck.env_vars=LD_PRELOAD:{built['shim']},"
                                         f"LINKFAULT_DELAY_US:{DELAY_US},LINKFAULT_PAIR:2-5")
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-2000:]
    found = run_results(tmp_path)
    failing = [r for r in found if r["status"] == "fail"]
    assert {(tuple(r["parameters"].items()), r["metric"]) for r in failing} == \
        {((("link", "node1--node2"),), "latency")}, failing
    assert failing[0]["reason"].startswith("bad link node1--node2 (ranks 2-5): latency ")
    assert failing[0]["nodelist"] == ["node1", "node2"]
    # Every node's series is recorded (and passes): they go to the history beside the verdict.
    nodes = {(r["parameters"]["node"], r["metric"]) for r in found if "node" in r["parameters"]}
    assert nodes == {(n, m) for n in ("node1", "node2") for m in ("latency", "bandwidth")}
    assert all(r["status"] == "pass" for r in found if "node" in r["parameters"])
    assert "regression" in done.stdout and "bad link node1--node2" in done.stdout
    out = tmp_path / "links" / "local-batch-source"
    for name in judge.ARTIFACTS:
        assert (out / name).stat().st_size > 0, name
    with open(out / "bad_links.csv") as f:
        bad = [r for r in csv.DictReader(f) if r["attribution"] == "bad link"]
    assert {(r["from_rank"], r["to_rank"]) for r in bad} == {("2", "5")}
    assert float(bad[0]["first"]) > 10000 and float(bad[0]["second"]) > 10000  # both measurements kept
    html = str(report_links.section(tmp_path, base=tmp_path))
    assert "node1–node2" in html and "bad link" in html and html.count("data:image/png;base64,") == 2


@pytest.mark.slurm
@pytest.mark.parametrize("setting, parameters, reason", [
    ("LinktestCheck.nodelist=node1,node9", {"nodes": "node1,node9"},
     "Slurm refused the job: 'sbatch: error: Batch job submission failed: Invalid node name specified'"),
    ("LinktestCheck.linktest_args=-S -i 0", None,
     "linktest: zero iterations measure nothing: give -i and -I at least 1."),
], ids=["unknown node in the node list: Slurm's sentence", "zero iterations: the program's sentence"])
def test_check_bad_input_is_one_error_with_one_sentence(pipeline: dict[str, str], manifests: Path, tmp_path: Path,
                                                        setting: str, parameters: dict | None, reason: str) -> None:
    done = run_links(pipeline, manifests, tmp_path, setting)
    assert done.returncode == 2, done.stdout[-3000:]
    [r] = run_results(tmp_path)
    assert r["status"] == "error" and r["reason"] == reason
    if parameters is not None:
        assert r["parameters"] == parameters
    assert "Traceback" not in done.stderr
