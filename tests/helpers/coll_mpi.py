"""Real OpenMPI runs for the collective tests: the OSU double's collectives and the coll_trace observer.

Both are built the way a site builds OSU (configure CC=mpicc, make, make install) into a
temporary prefix; runs go through mpirun (as root with OpenMPI's two opt-in variables),
oversubscribed on this 2-core machine, so timings are meaningless and never asserted.
"""
from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path
from typing import Mapping, Optional, Sequence

from .osu_double import DOUBLE_DIR

TRACE_DIR = Path(__file__).resolve().parent.parent / "coll_trace"
_TRACE_LINE = re.compile(r"^coll_trace: (?P<coll>\w+) (?P<alg>\w+) count=(?P<count>\d+) segsize=(?P<seg>\d+) "
                         r"comm_size=(?P<size>\d+)$", re.M)


def build(prefix: Path) -> tuple[Path, Path]:
    """Build the double and the observer under ``prefix``; (collective bin dir, libcolltrace.so)."""
    build_dir = prefix / "build"
    build_dir.mkdir(parents=True, exist_ok=True)
    subprocess.run([str(DOUBLE_DIR / "configure"), "CC=mpicc", "CFLAGS=-O2", f"--prefix={prefix}"],
                   cwd=build_dir, check=True, capture_output=True, timeout=120)
    subprocess.run(["make", "install"], cwd=build_dir, check=True, capture_output=True, timeout=300)
    trace_build = prefix / "trace-build"
    subprocess.run(["cp", "-r", str(TRACE_DIR), str(trace_build)], check=True)
    subprocess.run(["make", "install", "MPICC=mpicc", f"PREFIX={prefix}"], cwd=trace_build, check=True,
                   capture_output=True, timeout=120)
    return prefix / "libexec" / "osu-micro-benchmarks" / "mpi" / "collective", prefix / "lib" / "libcolltrace.so"


def mpirun(binary: Path, args: Sequence[str], nprocs: int, env: Optional[Mapping[str, str]] = None,
           trace: Optional[Path] = None, timeout: int = 120) -> subprocess.CompletedProcess:
    """Run ``binary`` on ``nprocs`` ranks of this host; ``env`` is exported to every rank."""
    exported = dict(env or {})
    if trace is not None:
        exported["LD_PRELOAD"] = str(trace)
    command = ["mpirun", "--oversubscribe", "-np", str(nprocs)]
    for key, value in exported.items():
        command += ["-x", f"{key}={value}"]
    command += [str(binary), *args]
    run_env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
                   OMPI_MCA_rmaps_base_oversubscribe="1")
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=run_env, check=False)


def traced(stderr: str) -> list[tuple[str, str, int, int, int]]:
    """(collective, algorithm, count, segsize, comm size) of every coll_trace line."""
    return [(m.group("coll"), m.group("alg"), int(m.group("count")), int(m.group("seg")), int(m.group("size")))
            for m in _TRACE_LINE.finditer(stderr)]


# OpenMPI's base function suffix (what coll_trace prints) -> the algorithm's coll/tuned name.
TRACE_NAMES = {
    ("bcast", "bintree"): "binary_tree", ("bcast", "split_bintree"): "split_binary_tree",
    ("allreduce", "recursivedoubling"): "recursive_doubling", ("allreduce", "ring_segmented"): "segmented_ring",
    ("allreduce", "redscat_allgather"): "rabenseifner", ("alltoall", "basic_linear"): "linear",
    ("alltoall", "bruck"): "modified_bruck", ("alltoall", "two_procs"): "two_proc",
}


def tuned_name(collective: str, traced_algorithm: str) -> str:
    return TRACE_NAMES.get((collective, traced_algorithm), traced_algorithm)
