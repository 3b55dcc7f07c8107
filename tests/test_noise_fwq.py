"""FWQ for real: built through its Makefile with mpicc, run with mpirun (and srun on the local Slurm).

The machine is shared (2 cores, other developers' jobs): the runs are never
quiet. The injected noise source is therefore made unmistakable in the way real
OS noise is: a SCHED_FIFO process (as root; kernel threads and IRQ handlers
preempt like this) on core 1 that wakes every 10 ms and spins 1 ms. The criteria
(see test_injected_noise_is_found) look for what random contention cannot make:
a comb of lines at 100 Hz and its harmonics, strongest on the injected core.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from mpiregress.families.noise import analysis, fwqfile

ROOT = Path(__file__).resolve().parent.parent
FWQ_SRC = ROOT / "checks" / "src" / "fwq"
NOISE_SRC = ROOT / "tests" / "noise_source" / "noise_source.c"
MPI_ENV = {**os.environ, "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
           "OMPI_MCA_rmaps_base_oversubscribe": "0"}
ITERATIONS = 300_000          # ~3 s of 10 us quanta on a free core
NOISE_HZ = 100.0
TOLERANCE_HZ = 3.0

pytestmark = pytest.mark.skipif(not shutil.which("mpicc") or not shutil.which("mpirun"),
                                reason="OpenMPI (mpicc, mpirun) is not installed; run ci/setup.sh")


@pytest.fixture(scope="module")
def fwq(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """fwq built and installed by its own Makefile, as a build method would."""
    prefix = tmp_path_factory.mktemp("fwq-prefix")
    build = tmp_path_factory.mktemp("fwq-build")
    for name in ("fwq.c", "fwq_format.h", "Makefile"):
        shutil.copy(FWQ_SRC / name, build / name)
    subprocess.run(["make", "-s", "install", "MPICC=mpicc", "CFLAGS=-O2", f"PREFIX={prefix}"], cwd=build,
                   check=True, capture_output=True, text=True)
    binary = prefix / "bin" / "fwq"
    assert os.access(binary, os.X_OK)
    return binary


@pytest.fixture(scope="module")
def noise_source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("noise") / "noise_source"
    subprocess.run(["cc", "-O2", "-o", str(out), str(NOISE_SRC)], check=True, capture_output=True, text=True)
    return out


def mpirun(fwq: Path, out: Path, *args: str, ranks: int = 2, timeout: float = 600,
           extra: tuple[str, ...] = ("--bind-to", "core"), priority: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    return subprocess.run(["mpirun", "-n", str(ranks), *extra, *priority, str(fwq), "-o", str(out), *args],
                          check=False, capture_output=True, text=True, timeout=timeout, env=MPI_ENV)




# On this shared 2-core machine other developers' jobs, each in its own cgroup, left FWQ
# 6-10 % of each core (load averages of 20-80 were seen): a normal-priority FWQ then
# measures them and finds the injected source in only 1 of 5 runs. Measured as root, the
# ranks run SCHED_FIFO 5 for their ~3 s, below the source (FIFO 10): FWQ owns its core as on
# an exclusive cluster node, and still sees the kernel's own noise and the injected source.
# CLOCK_MONOTONIC_COARSE (Linux: 6): its resolution is the kernel's jiffy, which FWQ records.
COARSE: int | None = getattr(time, "CLOCK_MONOTONIC_COARSE", 6 if sys.platform == "linux" else None)
MEASURE_PRIORITY: tuple[str, ...] = ("chrt", "-f", "5") if os.geteuid() == 0 and shutil.which("chrt") else ()


def start_noise(noise_source: Path, cpu: int, seconds: int) -> subprocess.Popen:
    argv = [str(noise_source), str(cpu), "10000", "1000", str(seconds)]
    if os.geteuid() == 0:
        argv.append("10")   # SCHED_FIFO priority: preempts on time, whatever else runs
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = proc.stdout.readline() if proc.stdout else ""
    assert line.startswith("noise_source:"), f"noise source did not start: {line}{proc.stderr.read() if proc.stderr else ''}"
    return proc


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=10)


def line_at(core: analysis.CoreNoise, hz: float) -> analysis.Period | None:
    return next((p for p in core.periods if abs(p.frequency_hz - hz) <= TOLERANCE_HZ), None)


def describe(run: analysis.RunNoise) -> str:
    return "; ".join(f"{c.node} core {c.cpu}: eff {n.efficiency:.3f} lost {c.lost_fraction:.3f} periods "
                     f"{[(p.frequency_hz, p.prominence, p.harmonics, p.detour_us) for p in c.periods]}"
                     for n in run.nodes for c in n.cores)


@pytest.mark.slow
def test_injected_noise_is_found_and_absent_without_it(fwq: Path, noise_source: Path, tmp_path: Path) -> None:
    """With the source on core 1: a 100 Hz comb on core 1 (stronger than on core 0) and a lower
    efficiency than the run without it; without it: no 100 Hz event anywhere."""
    quiet_file, noisy_file = tmp_path / "quiet.fwq", tmp_path / "noisy.fwq"
    done = mpirun(fwq, quiet_file, "-n", str(ITERATIONS), priority=MEASURE_PRIORITY)
    assert done.returncode == 0, done.stderr
    proc = start_noise(noise_source, 1, 120)
    try:
        time.sleep(0.2)
        done = mpirun(fwq, noisy_file, "-n", str(ITERATIONS), priority=MEASURE_PRIORITY)
    finally:
        stop(proc)
    assert done.returncode == 0, done.stderr
    keep = os.environ.get("MPIREGRESS_KEEP_FWQ")     # a folder to keep the runs in, for benchmarks/
    if keep:
        stamp = time.strftime("%H%M%S")
        shutil.copy(quiet_file, Path(keep) / f"quiet-{stamp}.fwq")
        shutil.copy(noisy_file, Path(keep) / f"noisy-{stamp}.fwq")
    quiet = analysis.analyse(fwqfile.read(quiet_file))
    noisy = analysis.analyse(fwqfile.read(noisy_file))
    print("quiet:", describe(quiet))
    print("noisy:", describe(noisy))

    assert [c.cpu for c in noisy.nodes[0].cores] == [0, 1]
    # The kernel's own tick, not one guessed from the stalls (this VM's host shows 1 kHz under a 250 Hz kernel).
    jiffy = time.clock_getres(COARSE) if COARSE is not None else None
    assert {r.jiffy_ns for f in (quiet_file, noisy_file) for r in fwqfile.read(f).nodes[0].ranks} == \
        {round(jiffy * 1e9) if jiffy else None}
    assert noisy.nodes[0].tick_from_kernel == bool(jiffy), describe(noisy)
    injected, other = noisy.nodes[0].cores[1], noisy.nodes[0].cores[0]
    found = line_at(injected, NOISE_HZ)
    assert found is not None, f"no {NOISE_HZ} Hz event found on core 1: {describe(noisy)}"
    assert found.harmonics >= 2, f"the 100 Hz line has no comb: {found}"
    # The source's own stalls are its 1 ms spin; the VM host's 10 ms timer, on every core, costs tens of us. Not
    # prominence: the host's timer stood 22668x its background on core 0 beside the source's 9756x (a CI run).
    assert found.detour_us >= 500, f"the 100 Hz event's stalls are not the source's 1 ms: {found}"
    elsewhere = line_at(other, NOISE_HZ)
    assert elsewhere is None or elsewhere.detour_us < found.detour_us / 2, describe(noisy)
    assert noisy.nodes[0].efficiency < quiet.nodes[0].efficiency, (
        f"efficiency did not drop: quiet {quiet.nodes[0].efficiency:.3f}, noisy {noisy.nodes[0].efficiency:.3f}")
    # Without the source: no 100 Hz event of the source's size. (The VM host has a 100 Hz timer of its own, a
    # few tens of us, whose line stood higher than the source's once: it is not the source.)
    quiet_lines = [line_at(c, NOISE_HZ) for c in quiet.nodes[0].cores]
    assert all(q is None or q.detour_us < found.detour_us / 2 for q in quiet_lines), (
        f"a 100 Hz event of the injected one's size ({found.detour_us:.0f} us) was found without the noise "
        f"source: {describe(quiet)}")


def test_uncalibratable_quantum_is_one_sentence(fwq: Path, tmp_path: Path) -> None:
    out = tmp_path / "x.fwq"
    done = mpirun(fwq, out, "-q", "1", "-n", "10")
    assert done.returncode == 11, done.stderr
    first = [line for line in done.stderr.splitlines() if line.startswith("fwq:")]
    assert len(first) == 1 and "too coarse to time a 1 ns quantum" in first[0], done.stderr
    assert not out.exists(), "a run that measured nothing must not leave a file behind"


def test_more_ranks_than_cores_is_refused(fwq: Path, tmp_path: Path) -> None:
    cores = os.cpu_count() or 2
    done = mpirun(fwq, tmp_path / "x.fwq", "-n", "10", ranks=cores + 1,
                  extra=("--oversubscribe", "--bind-to", "core:overload-allowed"))
    assert done.returncode == 12, done.stderr
    assert f"{cores + 1} ranks share {cores} CPU(s)" in done.stderr


def test_bad_arguments_and_unwritable_output(fwq: Path, tmp_path: Path) -> None:
    done = mpirun(fwq, tmp_path / "x.fwq", "-n", "0", ranks=1)
    assert done.returncode == 2 and "bad arguments" in done.stderr
    done = mpirun(fwq, tmp_path / "missing" / "x.fwq", "-n", "10", ranks=1)
    assert done.returncode == 13 and "cannot write" in done.stderr


def two_named_nodes(fwq: Path, out: Path, iterations: int) -> subprocess.CompletedProcess:
    """Two ranks that report different node names (the way SLURMD_NODENAME does on the local Slurm)."""
    argv = ["mpirun", "--bind-to", "core"]
    for index, node in enumerate(("nodeA", "nodeB")):
        argv += ([":"] if index else []) + ["-n", "1", "env", f"SLURMD_NODENAME={node}", str(fwq), "-o", str(out),
                                            "-n", str(iterations)]
    return subprocess.run(argv, check=False, capture_output=True, text=True, timeout=600, env=MPI_ENV)


def test_truncated_file_keeps_complete_nodes(fwq: Path, tmp_path: Path) -> None:
    full = tmp_path / "full.fwq"
    done = two_named_nodes(fwq, full, 20_000)
    assert done.returncode == 0, done.stderr
    run = fwqfile.read(full)
    assert [n.name for n in run.nodes] == ["nodeA", "nodeB"] and run.truncated is None
    cut = tmp_path / "cut.fwq"
    data = full.read_bytes()
    cut.write_bytes(data[: len(data) - 1000])   # inside nodeB's iteration times
    run = fwqfile.read(cut)
    assert [n.name for n in run.nodes] == ["nodeA"]
    assert "node nodeB (section 2 of 2) was cut short" in (run.truncated or "")
    np.testing.assert_array_equal(run.nodes[0].ranks[0].times_ns, fwqfile.read(full).nodes[0].ranks[0].times_ns)

    out = tmp_path / "analysis"
    cli = subprocess.run([sys.executable, "-m", "mpiregress", "noise", "analyze", str(cut), "--out", str(out)],
                         check=False, capture_output=True, text=True, timeout=600)
    assert cli.returncode == 2, cli.stderr
    assert cli.stderr.count("\n") == 1 and "cut short" in cli.stderr and "Traceback" not in cli.stderr
    assert "nodeA: efficiency" in (out / "summary.txt").read_text()
    assert "nodeB" not in (out / "cores.tsv").read_text()


def test_rank_killed_mid_run(fwq: Path, tmp_path: Path) -> None:
    out = tmp_path / "killed.fwq"
    proc = subprocess.Popen(["mpirun", "-n", "2", "--bind-to", "core", str(fwq), "-o", str(out), "-n", "50000000"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=MPI_ENV)
    try:
        deadline = time.monotonic() + 60
        ranks: list[int] = []
        while time.monotonic() < deadline and len(ranks) < 2:
            time.sleep(0.5)
            ranks = children_named(proc.pid, "fwq")
        assert len(ranks) == 2, "the two fwq ranks did not start"
        # Rank 0 opens its output once MPI is up, which a loaded host can take well over a second to be
        # (issue: killed.fwq "does not exist" at load 6.5): the kill comes after that, as the test means.
        while time.monotonic() < deadline and not out.exists():
            time.sleep(0.1)
        assert out.exists(), "fwq rank 0 never opened its output file"
        time.sleep(1.0)                                   # calibrated, now measuring
        os.kill(max(ranks), signal.SIGKILL)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode != 0
    cli = subprocess.run([sys.executable, "-m", "mpiregress", "noise", "analyze", str(out), "--out",
                          str(tmp_path / "a")], check=False, capture_output=True, text=True, timeout=600)
    assert cli.returncode == 2
    assert "ended before rank 0 wrote anything" in cli.stderr and "Traceback" not in cli.stderr


def children_named(pid: int, name: str) -> list[int]:
    """PIDs of descendants of ``pid`` whose command is ``name`` (from /proc, no pkill)."""
    parents: dict[int, int] = {}
    names: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        names[int(entry.name)] = stat[stat.index("(") + 1: stat.rindex(")")]
        parents[int(entry.name)] = int(stat[stat.rindex(")") + 2:].split()[1])
    found = []
    for child, comm in names.items():
        p = child
        while p in parents and p != pid and p > 1:
            p = parents[p]
        if p == pid and comm == name:
            found.append(child)
    return found


@pytest.mark.slurm
def test_fwq_under_local_slurm(local_cluster, fwq: Path, tmp_path: Path) -> None:
    """srun puts one rank per core; the file names the Slurm node; asking for more cores than the node has
    is refused by Slurm before anything runs."""
    env = {**MPI_ENV, **local_cluster.client_env()}
    out = tmp_path / "slurm.fwq"
    done = subprocess.run(["srun", "--mpi=pmix", "-w", "node1", "-n2", "--cpu-bind=map_cpu:0,1", str(fwq),
                           "-o", str(out), "-n", "20000"], check=False, capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    run = fwqfile.read(out)
    assert [n.name for n in run.nodes] == ["node1"]
    assert sorted(r.cpu for r in run.nodes[0].ranks) == [0, 1]
    cores = os.cpu_count() or 2
    refused = subprocess.run(["srun", "--mpi=pmix", "-N1", "-w", "node1", f"-n{cores + 1}", "--immediate=5", str(fwq),
                              "-o", str(tmp_path / "no.fwq"), "-n", "10"], check=False, capture_output=True, text=True,
                             timeout=60, env=env)
    assert refused.returncode != 0
    assert "More processors requested than permitted" in refused.stderr or "Requested node configuration is not available" in refused.stderr, refused.stderr
    assert not (tmp_path / "no.fwq").exists()
