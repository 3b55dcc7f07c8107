"""Reader of the FWQ result file, format versions 1 and 2 (checks/src/fwq/fwq_format.h, README.md).

Version 2 adds the kernel's jiffy (1/CONFIG_HZ) to each rank; a version 1 file (an older run's artifacts)
reads with it unknown.

A file cut short keeps every node whose section ends with its trailer; the first
incomplete node is named in ``FwqRun.truncated`` so the caller can say which
data was lost. Anything else malformed raises InputError with one sentence.
"""
from __future__ import annotations

import gzip
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mpiregress.errors import InputError
from mpiregress.model import inputs

UNKNOWN = 2**64 - 1      # FWQ_UNKNOWN: the kernel did not say
MAGIC = b"MPRFWQ\0\0"

# Mirrors of the C structs (little-endian, no padding; sizes asserted in fwq_format.h).
FILE_HEADER = np.dtype([
    ("magic", "S8"), ("version", "<u4"), ("nodes", "<u4"), ("ranks", "<u4"), ("reserved", "<u4"),
    ("iterations", "<u8"), ("quantum_target_ns", "<u8"), ("timer_resolution_ns", "<u8"), ("reserved2", "<u8"),
])
NODE_HEADER = np.dtype([("tag", "S4"), ("ranks", "<u4"), ("name", "S64")])
RANK_HEADER_V1 = np.dtype([
    ("rank", "<u4"), ("cpu_start", "<i4"), ("cpu_end", "<i4"), ("affinity_cpus", "<u4"),
    ("work_per_quantum", "<u8"), ("quantum_ns", "<u8"), ("start_ns", "<u8"), ("end_ns", "<u8"),
])
RANK_HEADER = np.dtype(RANK_HEADER_V1.descr + [("jiffy_ns", "<u8")])
# The rank header of each format version this reader knows (the rest of the file is the same in both).
RANK_HEADERS = {1: RANK_HEADER_V1, 2: RANK_HEADER}
NODE_TRAILER = np.dtype([("tag", "S4"), ("ranks", "<u4")])


@dataclass(frozen=True)
class RankData:
    """One rank: where it ran and the duration of each iteration (ns)."""

    rank: int
    cpu: int
    migrated: bool          # sched_getcpu() differed before and after the loop
    bound: bool             # its affinity mask held a single CPU
    quantum_ns: int         # calibrated duration of one quantum
    start_ns: int
    times_ns: np.ndarray    # uint32, one per iteration
    # The kernel's jiffy (1/CONFIG_HZ) on the rank's node; None when the file or the kernel did not say.
    jiffy_ns: int | None = None

    @property
    def kernel_hz(self) -> float | None:
        """The kernel's configured tick rate (CONFIG_HZ), from its jiffy."""
        return 1e9 / self.jiffy_ns if self.jiffy_ns else None

    def start_times_ns(self) -> np.ndarray:
        """Start of each iteration relative to the first (iterations are back to back)."""
        ends = np.cumsum(self.times_ns, dtype=np.int64)
        return np.concatenate(([0], ends[:-1]))


@dataclass(frozen=True)
class NodeData:
    """The ranks of one node, in rank order."""

    name: str
    ranks: tuple[RankData, ...]


@dataclass(frozen=True)
class FwqRun:
    """A whole FWQ file: the complete nodes, and the node cut short if any."""

    iterations: int
    quantum_target_ns: int
    timer_resolution_ns: int
    ranks: int
    nodes: tuple[NodeData, ...]
    expected_nodes: int
    truncated: str | None  # one sentence naming what was lost, None when complete


def _record(buffer: memoryview, offset: int, dtype: np.dtype) -> np.void | None:
    if offset + dtype.itemsize > len(buffer):
        return None
    return np.frombuffer(buffer, dtype=dtype, count=1, offset=offset)[0]


def _jiffy(rank_head: np.void) -> int | None:
    names = rank_head.dtype.names or ()
    jiffy = int(rank_head["jiffy_ns"]) if "jiffy_ns" in names else UNKNOWN
    return None if jiffy in (0, UNKNOWN) else jiffy


def read(path: Path) -> FwqRun:
    """Read an FWQ file; raise InputError when it is not one or holds no complete node."""
    path = Path(path)
    raw = inputs.read_bytes(path, "FWQ file")
    if raw[:2] == b"\x1f\x8b":   # a run's artifacts keep it gzipped (noise.artifacts.keep_raw)
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError, zlib.error) as err:
            raise InputError(f"{path} is a damaged gzip file: {err}") from None
    if not raw:
        raise InputError(f"{path} is empty: the FWQ run ended before rank 0 wrote anything")
    buffer = memoryview(raw)
    head = _record(buffer, 0, FILE_HEADER)
    if head is None or bytes(head["magic"]).ljust(8, b"\0") != MAGIC:
        raise InputError(f"{path} is not an FWQ result file (no MPRFWQ header)")
    version = int(head["version"])
    if version not in RANK_HEADERS:
        raise InputError(f"{path} is FWQ format version {version}; this reader knows versions "
                         f"{', '.join(map(str, RANK_HEADERS))}")
    rank_header = RANK_HEADERS[version]
    iterations = int(head["iterations"])
    expected = int(head["nodes"])
    if iterations == 0 or expected == 0:
        raise InputError(f"{path} declares {expected} node(s) and {iterations} iteration(s): nothing to analyse")
    times_bytes = iterations * 4
    offset = FILE_HEADER.itemsize
    nodes: list[NodeData] = []
    truncated: str | None = None
    for index in range(expected):
        node_head = _record(buffer, offset, NODE_HEADER)
        if node_head is None:
            truncated = f"the file ends before node {index + 1} of {expected}"
            break
        name = bytes(node_head["name"]).rstrip(b"\0").decode("utf-8", "replace")
        if bytes(node_head["tag"]) != b"NODE":
            raise InputError(f"{path}: node section {index + 1} has no NODE tag at byte {offset}; the file is corrupt")
        offset += NODE_HEADER.itemsize
        ranks: list[RankData] = []
        complete = True
        for _ in range(int(node_head["ranks"])):
            rank_head = _record(buffer, offset, rank_header)
            if rank_head is None or offset + rank_header.itemsize + times_bytes > len(buffer):
                complete = False
                break
            offset += rank_header.itemsize
            times = np.frombuffer(buffer, dtype="<u4", count=iterations, offset=offset)
            offset += times_bytes
            ranks.append(RankData(
                rank=int(rank_head["rank"]), cpu=int(rank_head["cpu_start"]),
                migrated=int(rank_head["cpu_start"]) != int(rank_head["cpu_end"]),
                bound=int(rank_head["affinity_cpus"]) == 1, quantum_ns=int(rank_head["quantum_ns"]),
                start_ns=int(rank_head["start_ns"]), times_ns=times, jiffy_ns=_jiffy(rank_head)))
        trailer = _record(buffer, offset, NODE_TRAILER) if complete else None
        if trailer is None or bytes(trailer["tag"]) != b"DONE":
            truncated = f"node {name} (section {index + 1} of {expected}) was cut short"
            break
        offset += NODE_TRAILER.itemsize
        nodes.append(NodeData(name=name, ranks=tuple(ranks)))
    if truncated and nodes:
        truncated += f"; the {len(nodes)} complete node(s) before it are kept"
    if not nodes:
        raise InputError(f"{path} holds no complete node: {truncated}")
    return FwqRun(iterations=iterations, quantum_target_ns=int(head["quantum_target_ns"]),
                  timer_resolution_ns=int(head["timer_resolution_ns"]), ranks=int(head["ranks"]),
                  nodes=tuple(nodes), expected_nodes=expected, truncated=truncated)
