"""Parse what an OSU Micro-Benchmarks 7.2 binary printed, and recognise how a run failed.

OSU exits 0 on some errors (an unparsable ``-m`` prints the header and no data
row), so "no data row" is a failure here, never an empty success. The launcher's
own words for a dead rank (mpirun, srun) are recognised so that signal 4 reads
as an illegal instruction, not as a slow run.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Optional

_HEADER = re.compile(r"^#\s*OSU MPI(?:-\w+)?\s+(?P<title>.+?)\s+v(?P<version>\d+(?:\.\d+)*)\s*$")
_COLUMNS = re.compile(r"^#\s*Size\s+(?P<columns>.+)$")
_ROW = re.compile(r"^(?P<size>\d+)\s+(?P<rest>\S.*)$")
_COLUMN_SPLIT = re.compile(r"\s{2,}|(?<=\))\s+(?=[A-Z])")

# How launchers say that a rank died of a signal (mpirun/ORTE, srun, a shell).
_SIGNAL_PATTERNS = (
    re.compile(r"process rank (?P<rank>\d+) with PID \d+ on node (?P<node>\S+) "
               r"exited on signal (?P<sig>\d+) \((?P<name>[^)]*)\)"),
    re.compile(r"srun: error: (?P<node>\S+): tasks? (?P<rank>[\d,\-]+): "
               r"(?P<name>[A-Z][\w ]*?)(?: \(core dumped\))?$", re.M),
)
_NEEDS_TWO = "This test requires exactly two processes"
_CANCELLED = re.compile(r"\*\*\* (?P<what>JOB|STEP) (?P<id>\S+) ON (?P<node>\S+) CANCELLED AT (?P<at>\S+)"
                        r"(?P<limit> DUE TO TIME LIMIT)?(?P<node_failure> DUE TO NODE FAILURE)?[^*\n]*\*\*\*")
# Slurm's own words for a node that is gone, a controller that does not answer, a job it killed.
_NODE_FAILURE = re.compile(r"^.*(?:Node failure on (?P<node>\S+)|NODE_FAIL|Node (?P<down>\S+) (?:not responding|"
                           r"is DOWN)).*$", re.M)
_CONTROLLER = re.compile(r"^.*(?:Unable to contact slurm controller|Slurm controller not responding|"
                         r"slurm_(?:load|get)\w* error: Unable to contact).*$", re.M | re.I)
_STEP_CREATE = re.compile(r"^.*srun: error: (?:Unable to create step|Unable to allocate resources|"
                          r"Job allocation \S+ has been revoked).*$", re.M)
# How every infrastructure reason below begins: CI retries these (exit 3), never judges them.
INFRASTRUCTURE_PREFIXES = ("node lost: ", "Slurm controller unreachable: ", "Slurm killed the ")


class OsuOutputError(ValueError):
    """The output holds no usable measurement; the message says why in one sentence."""


@dataclass
class OsuOutput:
    """The parsed output of one OSU benchmark run."""

    title: str                       # e.g. "Latency Test"
    version: str                     # e.g. "7.2"
    columns: list[str]               # e.g. ["Latency (us)"] or ["Avg Latency(us)", "Min Latency(us)", ...]
    rows: dict[int, list[str]] = field(default_factory=dict)  # size -> raw column values
    preamble: list[str] = field(default_factory=list)         # header lines other than title/columns

    def value(self, size: int, column: int = 0) -> float:
        """The value of ``column`` at message size ``size`` (first column by default)."""
        if size not in self.rows:
            sizes = ", ".join(str(s) for s in self.rows) or "none"
            raise OsuOutputError(f"OSU output has no row for message size {size} (sizes present: {sizes})")
        return float(self.rows[size][column])

    def series(self, column: int = 0) -> dict[int, float]:
        """All (size, value) pairs of one column: a sweep, for plots."""
        return {size: float(values[column]) for size, values in self.rows.items()}


def parse(text: str) -> OsuOutput:
    """Parse OSU 7.2 output; raise OsuOutputError when there is no header or no data row."""
    title = version = None
    columns: list[str] = []
    rows: dict[int, list[str]] = {}
    preamble: list[str] = []
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped:
            continue
        header = _HEADER.match(stripped)
        if header:
            title, version = header.group("title"), header.group("version")
            continue
        cols = _COLUMNS.match(stripped)
        if cols:
            columns = [c.strip() for c in _COLUMN_SPLIT.split(cols.group("columns").strip()) if c.strip()]
            continue
        if stripped.startswith("#"):
            preamble.append(stripped.lstrip("# ").strip())
            continue
        row = _ROW.match(stripped)
        if row and title is not None:
            values = row.group("rest").split()
            try:
                float(values[0])
            except ValueError:
                continue
            rows[int(row.group("size"))] = values
    if title is None:
        reason = failure_reason(text)
        raise OsuOutputError(reason or "no OSU benchmark header found in the output (did the binary start?)")
    if not rows:
        raise OsuOutputError(
            f"OSU {title} v{version} printed its header but no data row "
            "(OSU exits 0 on bad options such as an unparsable -m, so this is a failure)")
    if "Validation" in columns:
        index = columns.index("Validation")
        failed = [size for size, values in rows.items() if len(values) > index and values[index] != "Pass"]
        if failed:
            raise OsuOutputError(f"OSU {title} data validation failed at message size(s) {', '.join(map(str, failed))}")
    return OsuOutput(title=title, version=version or "", columns=columns, rows=rows, preamble=preamble)


def swept_sizes(min_size: int, max_size: int) -> list[int]:
    """The message sizes an OSU run with ``-m MIN:MAX`` measures: MIN, doubling, up to MAX (0 is followed by 1)."""
    sizes, size = [], min_size
    while size <= max_size:
        sizes.append(size)
        size = size * 2 if size > 0 else 1
    return sizes


def parse_size_range(text: str) -> tuple[int, int]:
    """``MIN:MAX`` (as given to OSU's ``-m``) as two integers; OsuOutputError when it is not one."""
    parts = str(text).split(":")
    if len(parts) != 2 or not all(p.strip().isdigit() for p in parts):
        raise OsuOutputError(f"message size range {text!r} is not MIN:MAX in bytes (e.g. 1:1048576)")
    low, high = int(parts[0]), int(parts[1])
    if low > high:
        raise OsuOutputError(f"message size range {text!r} has MIN above MAX")
    return low, high


def missing_sizes(output: OsuOutput, min_size: int, max_size: int) -> list[int]:
    """The sizes of the ``-m MIN:MAX`` sweep for which ``output`` has no row."""
    return [size for size in swept_sizes(min_size, max_size) if size not in output.rows]


def sweep_gap(output: OsuOutput, min_size: int, max_size: int) -> Optional[str]:
    """One sentence naming the sizes of the asked sweep that OSU did not print, or None.

    The rows that are there stay usable: a caller records them and reports this
    sentence beside them (a rank killed at 256 KiB still measured 1 B .. 128 KiB).
    """
    missing = missing_sizes(output, min_size, max_size)
    if not missing:
        return None
    asked = len(swept_sizes(min_size, max_size))
    return (f"OSU {output.title} printed {asked - len(missing)} of the {asked} message sizes asked "
            f"({min_size}:{max_size}); missing: {', '.join(str(s) for s in missing)}")


def column_index(output: OsuOutput, name: str) -> int:
    """Index of the column whose header starts with ``name`` (e.g. "Min Latency"); OsuOutputError if absent."""
    for index, column in enumerate(output.columns):
        if column.replace(" ", "").lower().startswith(name.replace(" ", "").lower()):
            return index
    raise OsuOutputError(f"OSU {output.title} output has no {name!r} column (columns: {', '.join(output.columns)}; "
                         "run it with -f for min/max/iterations)")


@dataclass
class RankDeath:
    """A rank killed by a signal, as the launcher reported it."""

    rank: str
    node: str
    signal: Optional[int]
    name: str

    @property
    def illegal_instruction(self) -> bool:
        return self.signal == 4 or "illegal instruction" in self.name.lower()

    @property
    def terminated_by_launcher(self) -> bool:
        """Killed from outside (srun or Slurm ending the step), not a failure of the rank itself."""
        return self.name.strip().lower() in ("terminated", "killed") or self.signal in (9, 15)


def rank_deaths(text: str) -> list[RankDeath]:
    """Every rank death the launcher reported in ``text`` (mpirun or srun wording)."""
    deaths = []
    for pattern in _SIGNAL_PATTERNS:
        for m in pattern.finditer(text):
            sig = m.groupdict().get("sig")
            deaths.append(RankDeath(rank=m.group("rank"), node=m.group("node"),
                                    signal=int(sig) if sig else None, name=m.group("name").strip()))
    return deaths


def _slurm_lost(text: str) -> Optional[str]:
    """Slurm's words for a lost node, an unreachable controller or a time limit, else None."""
    for m in _CANCELLED.finditer(text):
        said = m.group(0).strip("* ").strip()
        if m.group("node_failure"):
            return f"node lost: Slurm ended the {m.group('what').lower()} on a node failure ('{said}')"
    node = _NODE_FAILURE.search(text)
    if node:
        return f"node lost: Slurm says '{' '.join(node.group(0).split())}'"
    controller = _CONTROLLER.search(text)
    if controller:
        return f"Slurm controller unreachable: '{' '.join(controller.group(0).split())}'"
    for m in _CANCELLED.finditer(text):
        if m.group("limit"):
            said = m.group(0).strip("* ").strip()
            return (f"Slurm killed the {m.group('what').lower()} at its time limit "
                    f"({m.group('at')} on {m.group('node')}): the benchmark did not finish ('{said}')")
    return None


def _slurm_killed(text: str) -> Optional[str]:
    """Slurm's words for a job or step it cancelled for no reason it names (scancel, a revoked step)."""
    cancelled = _CANCELLED.search(text)
    if cancelled:
        return f"Slurm killed the {cancelled.group('what').lower()}: '{cancelled.group(0).strip('* ').strip()}'"
    revoked = _STEP_CREATE.search(text)
    if revoked:
        return f"Slurm killed the job step: '{' '.join(revoked.group(0).split())}'"
    return None


def infrastructure_reason(text: str) -> Optional[str]:
    """One sentence, quoting Slurm, when ``text`` shows that Slurm (not the benchmark) ended the run.

    A lost node, an unreachable controller and a job Slurm killed are infrastructure
    faults: a rerun may pass, and a rank "Terminated" by them says nothing about MPI.
    """
    return _slurm_lost(text) or _slurm_killed(text)


def is_infrastructure(reason: str) -> bool:
    """True when ``reason`` is one of :func:`infrastructure_reason`'s sentences."""
    return reason.startswith(INFRASTRUCTURE_PREFIXES)


def failure_reason(text: str) -> Optional[str]:
    """One sentence for a launcher-reported failure in ``text``, or None when there is none.

    Slurm's own account (node lost, controller gone, job killed) comes first: the ranks
    it terminated did not fail on their own.
    """
    lost = _slurm_lost(text)
    if lost:
        return lost
    deaths = rank_deaths(text)
    # A rank that died of its own (SIGILL, a crash) is the cause; the step Slurm then cancelled
    # (--kill-on-bad-exit) and the peers it terminated are the consequence.
    for death in sorted(deaths, key=lambda d: (not d.illegal_instruction, d.terminated_by_launcher)):
        if death.terminated_by_launcher:
            break
        if death.illegal_instruction:
            return (f"rank {death.rank} on {death.node} died of an illegal instruction (SIGILL, signal 4): "
                    "the binary uses instructions this node's CPU does not have")
        return f"rank {death.rank} on {death.node} died: {death.name}"
    killed = _slurm_killed(text)
    if killed:
        return killed
    for death in deaths:
        return f"rank {death.rank} on {death.node} died: {death.name}"
    if _NEEDS_TWO in text:
        return "the benchmark needs exactly two MPI processes and was started with another number"
    return None
