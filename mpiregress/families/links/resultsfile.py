"""Reader of linktest's binary results file (format v1, checks/src/linktest/README.md).

The file is a header, the node name of every rank, then 48-byte records appended
step by step. A truncated file keeps every complete record and says so in one
sentence (``LinkRun.problem``); nothing measured is dropped.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import numpy as np

from mpiregress.errors import InputError
from mpiregress.model import inputs

MAGIC = b"MPIRLNK\0"
VERSION = 1
HEADER = struct.Struct("<8s4I2Q6I")
RECORD = np.dtype([("rank_a", "<u4"), ("rank_b", "<u4"), ("phase", "<u2"), ("valid", "<u2"), ("step", "<u4"),
                   ("lat_us", "<f8"), ("lat_median_us", "<f8"), ("lat_min_us", "<f8"),
                   ("bw_mbs", "<f8"), ("bw_median_mbs", "<f8"), ("bw_max_mbs", "<f8")])
PHASE_PARALLEL, PHASE_SERIAL, PHASE_RETEST, PHASE_END = 0, 1, 2, 255


@dataclass
class LinkRun:
    """One linktest run: its settings, the node of every rank, first and re-test measurements."""

    nranks: int
    hosts: list[str]                 # node name of each rank
    small_size: int
    large_size: int
    warmup: int
    lat_iters: int
    bw_iters: int
    serial: bool
    retest_count: int
    main: np.ndarray                 # RECORD array, one per pair measured in the all-pairs phase
    retest: np.ndarray               # RECORD array, re-tested pairs
    complete: bool                   # the end marker was found
    problem: Optional[str] = None    # one sentence when the file is truncated or the run unfinished
    rounds: int = 1                  # all-pairs rounds combined into this run (``combine``)

    @property
    def expected_pairs(self) -> int:
        return self.nranks * (self.nranks - 1) // 2


def read(path: Path) -> LinkRun:
    """Read a results file; InputError (one sentence) when it is not a linktest v1 file at all."""
    path = Path(path)
    return parse(inputs.read_bytes(path, "linktest results file"), str(path))


def parse(data: bytes, name: str = "results") -> LinkRun:
    """Parse the bytes of a results file (see ``read``)."""
    if len(data) < HEADER.size:
        raise InputError(f"{name} is not a linktest results file: {len(data)} bytes, shorter than its header")
    (magic, version, header_size, record_size, nranks, small, large,
     warmup, lat_iters, bw_iters, serial, retest, hostlen) = HEADER.unpack_from(data)
    if magic != MAGIC:
        raise InputError(f"{name} is not a linktest results file (no MPIRLNK magic at its start)")
    if version != VERSION or record_size != RECORD.itemsize:
        raise InputError(f"{name} is linktest results format {version} with {record_size}-byte records; "
                         f"this reader knows format {VERSION} with {RECORD.itemsize}-byte records")
    if header_size != HEADER.size + nranks * hostlen or len(data) < header_size:
        raise InputError(f"{name} is truncated inside its header ({len(data)} of {header_size} bytes): "
                         f"no measurement can be recovered")
    hosts = [data[HEADER.size + i * hostlen: HEADER.size + (i + 1) * hostlen].split(b"\0", 1)[0]
             .decode("utf-8", "replace") for i in range(nranks)]
    body = len(data) - header_size
    whole = body // record_size
    records = np.frombuffer(data, dtype=RECORD, count=whole, offset=header_size)
    problem = None
    end = np.flatnonzero(records["phase"] == PHASE_END)
    complete = end.size > 0
    if body % record_size:
        problem = (f"{name} is truncated: {body % record_size} trailing bytes of a partial record dropped, "
                   f"the {whole} complete records before it kept")
    if complete:
        records = records[: end[0]]
    elif problem is None:
        problem = (f"{name} has no end marker: the run did not finish; "
                   f"its {whole} complete records are analysed")
    main = records[(records["phase"] == PHASE_PARALLEL) | (records["phase"] == PHASE_SERIAL)]
    bad = (main["rank_a"] >= main["rank_b"]) | (main["rank_b"] >= nranks)
    if bad.any():
        raise InputError(f"{name} holds {int(bad.sum())} records whose ranks do not fit its {nranks} ranks")
    return LinkRun(nranks=nranks, hosts=hosts, small_size=small, large_size=large, warmup=warmup,
                   lat_iters=lat_iters, bw_iters=bw_iters, serial=bool(serial), retest_count=retest,
                   main=main.copy(), retest=records[records["phase"] == PHASE_RETEST].copy(),
                   complete=complete, problem=problem)


# How one pair's rounds combine: the median of its rounds, for every field. Not the best of them, even for
# the fastest iteration: on a shared host a pair's fastest iteration is bimodal (a round in which its two
# ranks happened to get cores of their own runs 3-5x faster, measured 2026-11-26 at load 13), so the best
# of k rounds spreads the pairs wider with each round, while their median narrows them.
def combine(runs: list[LinkRun]) -> LinkRun:
    """Rounds of the same ranks measured in one allocation, as one run: each pair's values the median over the
    rounds that measured it, its re-tests likewise. Every round's problem is kept."""
    if len(runs) == 1:
        return runs[0]
    first = runs[0]
    for other in runs[1:]:
        if other.hosts != first.hosts:
            raise InputError(f"linktest rounds of one run must have the same ranks on the same nodes; "
                             f"a round had {other.nranks} ranks on {', '.join(sorted(set(other.hosts)))}")
    problems = [r.problem for r in runs if r.problem]
    return LinkRun(nranks=first.nranks, hosts=first.hosts, small_size=first.small_size,
                   large_size=first.large_size, warmup=first.warmup, lat_iters=first.lat_iters,
                   bw_iters=first.bw_iters, serial=first.serial, retest_count=first.retest_count,
                   main=_combined([r.main for r in runs], first.nranks), retest=_combined([r.retest for r in runs],
                                                                                           first.nranks),
                   complete=all(r.complete for r in runs), problem="; ".join(problems) or None, rounds=len(runs))


def _combined(parts: list[np.ndarray], nranks: int) -> np.ndarray:
    """One record per pair from every round's records of it, in the first appearance's order."""
    records = np.concatenate(parts)
    if len(records) == 0:
        return records.copy()
    keys = records["rank_a"].astype(np.int64) * nranks + records["rank_b"]
    unique, first_at, group = np.unique(keys, return_index=True, return_inverse=True)
    out = records[np.sort(first_at)].copy()
    position = np.empty(len(unique), dtype=np.int64)
    position[np.argsort(first_at)] = np.arange(len(unique))
    slot = position[group]
    order = np.argsort(slot, kind="stable")
    starts = np.flatnonzero(np.r_[True, slot[order][1:] != slot[order][:-1]])
    for name in ("lat_us", "lat_median_us", "lat_min_us", "bw_mbs", "bw_median_mbs", "bw_max_mbs"):
        out[name] = [float(np.median(part)) for part in np.split(records[name][order], starts[1:])]
    return out


def write(path: Path, run: LinkRun) -> None:
    """Write ``run`` in format v1 (synthetic runs for tests and benchmarks; the program writes its own)."""
    hostlen = 64
    header = HEADER.pack(MAGIC, VERSION, HEADER.size + run.nranks * hostlen, RECORD.itemsize, run.nranks,
                         run.small_size, run.large_size, run.warmup, run.lat_iters, run.bw_iters,
                         int(run.serial), run.retest_count, hostlen)
    names = b"".join(h.encode()[: hostlen - 1].ljust(hostlen, b"\0") for h in run.hosts)
    end = np.zeros(1, dtype=RECORD)
    end["phase"], end["valid"], end["rank_a"], end["rank_b"] = PHASE_END, 1, len(run.main), len(run.retest)
    with open(path, "wb") as f:
        f.write(header + names)
        f.write(run.main.tobytes())
        f.write(run.retest.tobytes())
        if run.complete:
            f.write(end.tobytes())
