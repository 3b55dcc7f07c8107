"""What one FWQ job left behind, as the FWQ check's sanity reads it: the analysed nodes and what went wrong.

Nothing usable (no file, a quantum that could not be calibrated, a file with no
complete node) is one sentence (InputError). A run that ended badly but left
complete nodes (a rank killed mid-run, a file cut short) keeps every finished
node and says what was lost in ``problems``.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from mpiregress.errors import InputError
from mpiregress.families import osu_output
from mpiregress.families.noise import analysis, fwqfile


@dataclass
class Outcome:
    run: analysis.RunNoise
    raw: fwqfile.FwqRun                   # the samples analysed (what power.node_power measures on)
    problems: list[str] = field(default_factory=list)


def fwq_said(stderr: str) -> str:
    """fwq's own one sentence ("fwq: ..."), or the µarch guard's refusal, or ''."""
    return next((line.strip() for line in stderr.splitlines()
                 if line.startswith("fwq:") or line.startswith("refusing to run:")), "")


def read(path: Path, stdout: str, stderr: str, cpus: Sequence[int], layout: str) -> Outcome:
    """The analysed run at ``path`` and its problems; InputError when nothing was measured."""
    said = fwq_said(stderr)
    crash = osu_output.failure_reason(stdout + "\n" + stderr) or ""
    why = said or crash
    if not path.exists():
        raise InputError(why or f"fwq wrote no result file {path.name}")
    try:
        raw = fwqfile.read(path)
        run = analysis.analyse(raw)
    except InputError as err:
        raise InputError(f"{err}" + (f" ({why})" if why else "")) from None
    problems = []
    if run.truncated:
        problems.append(f"FWQ file cut short: {run.truncated}" + (f" ({why})" if why else ""))
    elif why:
        problems.append(why)
    missing = sorted(set(cpus) - {c.cpu for n in run.nodes for c in n.cores})
    if missing and not run.truncated:
        problems.append(f"no rank ran on core(s) {', '.join(map(str, missing))} of the {layout} layout: "
                        f"the binding was not the one asked for")
    return Outcome(run, raw, problems)
