"""What OpenMPI said about its collectives: which coll component a communicator got, and forced-run warnings.

Two things make a "forced algorithm" result meaningless, and OpenMPI exits 0 in both:
- another coll component (hcoll, ucc, han, ...) outranks coll/tuned on the communicator,
  so the ``coll_tuned_*`` variables are never read; ``--mca coll_base_verbose 100``
  (or ``OMPI_MCA_coll_base_verbose=100``) prints the selection, which works in
  non-debug builds too;
- the forced value is invalid: OpenMPI prints "An invalid value was supplied for an
  enum variable" and runs its default algorithm.
Both become one sentence here, so a check can skip or fail instead of recording them.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Optional

TUNED = "tuned"

# Not anchored at the line start: mpirun and srun forward each process' output in chunks, and
# under load one process' line can start in the middle of another's unfinished one.
_SELECT_NEW = re.compile(r"\[(?P<proc>[^\]]+)\] coll:base:comm_select: new communicator: "
                         r"(?P<comm>\S+) \(cid (?P<cid>\d+)\)")
_SELECTING = re.compile(r"\[(?P<proc>[^\]]+)\] coll:base:comm_select: selecting\s+(?P<name>\S+), "
                        r"priority\s+(?P<prio>-?\d+), (?P<state>Enabled|Disabled)")
_INVALID_ENUM = re.compile(
    r"An invalid value was supplied for an enum variable\.\s*"
    r"Variable\s*:\s*(?P<variable>\S+)\s*"
    r"Value\s*:\s*(?P<value>\S+)\s*"
    r"(?:Valid values\s*:\s*(?P<valid>[^\n]*))?")
# OpenMPI 4.1's mpirun intermittently fails to unpack a help message forwarded by a rank and
# prints this instead of the warning (seen in 8 of 20 runs with an invalid algorithm here;
# every lost warning came with this line).
_LOST_HELP = re.compile(r"ORTE_ERROR_LOG: .* in file \S*show_help\.c at line \d+")
_INVALID_VALUE = re.compile(
    r"(?:An invalid value was supplied for an MCA variable|Unable to set the value of an MCA variable)[^\n]*\s*"
    r"(?:.*\n){0,3}?\s*Variable\s*:\s*(?P<variable>\S+)\s*Value\s*:\s*(?P<value>\S+)")


@dataclass
class Selection:
    """The coll components one process enabled on one communicator, lowest priority first."""

    process: str                     # "host:pid" as OpenMPI prints it
    communicator: str                # MPI_COMM_WORLD, MPI_COMM_SELF, ...
    enabled: list[tuple[str, int]] = field(default_factory=list)

    @property
    def winner(self) -> Optional[str]:
        """The enabled component with the highest priority (it overrides the others' functions)."""
        if not self.enabled:
            return None
        return max(self.enabled, key=lambda item: item[1])[0]

    def priority(self, component: str) -> Optional[int]:
        for name, prio in self.enabled:
            if name == component:
                return prio
        return None


def selections(text: str, communicator: str = "MPI_COMM_WORLD") -> list[Selection]:
    """Every process' component selection for ``communicator`` in ``coll_base_verbose`` output."""
    current: dict[str, Selection] = {}
    found: list[Selection] = []
    for line in text.splitlines():
        new = _SELECT_NEW.search(line)
        if new:
            proc = new.group("proc")
            if new.group("comm") == communicator:
                current[proc] = Selection(proc, communicator)
                found.append(current[proc])
            else:
                current.pop(proc, None)
            continue
        sel = _SELECTING.search(line)
        if sel and sel.group("proc") in current and sel.group("state") == "Enabled":
            current[sel.group("proc")].enabled.append((sel.group("name"), int(sel.group("prio"))))
    return found


def tuned_problem(text: str, collective: str, communicator: str = "MPI_COMM_WORLD") -> Optional[str]:
    """None when coll/tuned is in charge on ``communicator`` in every process, else why not (one sentence).

    A component enabled with a higher priority than tuned overrides tuned's
    function pointers; it is treated as taking ``collective`` too (hcoll, ucc and
    han all provide bcast, scatter or allreduce), so forcing a tuned algorithm
    would measure something else.
    """
    found = selections(text, communicator)
    if not found:
        return (f"OpenMPI printed no coll component selection for {communicator} (run with "
                "OMPI_MCA_coll_base_verbose=100): cannot tell whether coll/tuned handles "
                f"{collective}, so a forced algorithm would not be trustworthy")
    for sel in found:
        tuned_prio = sel.priority(TUNED)
        if tuned_prio is None:
            others = ", ".join(f"{n} ({p})" for n, p in sel.enabled) or "none"
            return (f"coll/tuned is not enabled on {communicator} in process {sel.process} "
                    f"(enabled: {others}): forced {collective} algorithms do not apply")
        above = [(n, p) for n, p in sel.enabled if p > tuned_prio and n != TUNED]
        if above:
            name, prio = max(above, key=lambda item: item[1])
            return (f"coll/{name} (priority {prio}) outranks coll/tuned (priority {tuned_prio}) on "
                    f"{communicator} in process {sel.process}: it takes {collective}, so forced "
                    "coll/tuned algorithms do not apply")
    return None


@dataclass(frozen=True)
class InvalidValue:
    """An MCA variable OpenMPI refused (and replaced by its default)."""

    variable: str
    value: str
    valid: str


def invalid_values(text: str) -> list[InvalidValue]:
    """Every "invalid value" warning OpenMPI printed (one per variable, even if repeated)."""
    seen: dict[str, InvalidValue] = {}
    for pattern in (_INVALID_ENUM, _INVALID_VALUE):
        for m in pattern.finditer(text):
            valid = (m.groupdict().get("valid") or "").strip()
            seen.setdefault(m.group("variable"), InvalidValue(m.group("variable"), m.group("value"), valid))
    return list(seen.values())


def forced_run_problem(text: str) -> Optional[str]:
    """One sentence when OpenMPI ignored a forced coll/tuned setting in ``text`` (it then ran its default),
    or when a warning it printed was lost on the way, so that cannot be ruled out."""
    for bad in invalid_values(text):
        if bad.variable.startswith("coll_tuned_"):
            valid = f" (valid: {bad.valid})" if bad.valid else ""
            return (f"OpenMPI rejected {bad.variable}={bad.value}{valid} and ran its default algorithm "
                    "instead: this run measured the default, not the forced algorithm")
    lost = _LOST_HELP.search(text)
    if lost:
        return ("mpirun lost a warning message of a rank (ORTE_ERROR_LOG in show_help.c): OpenMPI may have "
                "rejected the forced setting and run its default, so this run cannot count as the forced algorithm")
    return None
