"""The noise probe: a short FWQ run in every benchmark job's allocation, right after the benchmark.

One rank per core on each node of the allocation, for ``seconds`` (the partition's
``noise_probe_s`` knob, systems/*.yaml). Its result is a *condition* of the
benchmark's results, never the check: whatever goes wrong with the probe (no fwq
program, a failed step, a file cut short) becomes one sentence in the conditions
and the benchmark's measurement stands.

Conditions written: ``{"noise": {"node1": {"efficiency": 0.97, "max_detour_us": 130.0}, ...}}``
or ``{"noise": "not probed: <why>"}``.
"""
from __future__ import annotations

import glob
import os
import shlex
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mpiregress.errors import InputError
from mpiregress.families.noise import analysis, fwqfile, records

# The probe's entry in a result's conditions is the results model's: read and merged there.
from mpiregress.model.probe_record import NOT_PROBED, merge, probed  # noqa: F401

QUANTUM_NS = 10_000         # fwq's default quantum (checks/src/fwq): 100 000 iterations a second
FILE_PREFIX = "noise-probe"
LOG = f"{FILE_PREFIX}.log"
FAILED_MARK = "mpiregress-noise-probe-failed:"


def iterations(seconds: float) -> int:
    """fwq iterations for a probe of about ``seconds`` on a quiet core (at least 1000)."""
    return max(1000, int(seconds * 1e9 / QUANTUM_NS))


def priority_label(priority: int | None) -> str:
    """How FWQ was scheduled, as the report says it: 'normal' or 'SCHED_FIFO 10 (where allowed)'."""
    return f"SCHED_FIFO {int(priority)} (where allowed)" if priority else "normal"


def realtime(priority: int | None) -> list[str]:
    """Launch prefix giving a rank SCHED_FIFO ``priority`` where allowed (root), normal priority elsewhere."""
    if not priority:
        return []
    p = int(priority)
    return ["sh", "-c", f'chrt -f {p} true 2>/dev/null && exec chrt -f {p} "$0" "$@"; exec "$0" "$@"']


def commands(fwq: str, cpus: Sequence[int], seconds: float, share_cpus: bool,
             site_options: Sequence[str], priority: int | None = None) -> list[str]:
    """Job-script lines running the probe on every node of the allocation; they never fail the job.

    Nodes that share one host's CPUs (the local system) are probed one after the
    other, or their ranks would measure each other. fwq's own output goes to
    ``noise-probe.log``, never to the job's stdout/stderr that the benchmark's
    sanity reads. ``timeout`` bounds a hung step.
    """
    if not cpus:
        raise ValueError("the noise probe needs at least one core")
    limit = max(30, int(10 * seconds) + 20)
    geometry = [f"--ntasks-per-node={len(cpus)}", "--cpus-per-task=1",
                f"--cpu-bind=map_cpu:{','.join(str(c) for c in cpus)}", "--kill-on-bad-exit=1"]
    srun = ["timeout", "-k", "5", str(limit), "srun", *site_options]
    run = shlex.join(realtime(priority) + [fwq, "-n", str(iterations(seconds))])
    if share_cpus:
        return [
            'for mpiregress_node in $(scontrol show hostnames "$SLURM_JOB_NODELIST"); do',
            f'  {shlex.join(srun)} -N1 -n{len(cpus)} -w "$mpiregress_node" {shlex.join(geometry)} '
            f'{run} -o {FILE_PREFIX}-"$mpiregress_node".fwq >> {LOG} 2>&1 '
            f'|| echo "{FAILED_MARK} $mpiregress_node: exit $?" >> {LOG}',
            'done',
        ]
    return ['mpiregress_nodes=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | wc -l)',
            f'{shlex.join(srun)} -N"$mpiregress_nodes" -n"$((mpiregress_nodes * {len(cpus)}))" '
            f'{shlex.join(geometry)} {run} -o {FILE_PREFIX}.fwq >> {LOG} 2>&1 '
            f'|| echo "{FAILED_MARK} exit $?" >> {LOG}']


def conditions(stagedir: str) -> dict[str, Any] | str:
    """What the probe files in ``stagedir`` say: per node efficiency and largest detour, or why nothing.

    Never raises: a probe that failed is a sentence, and every node it finished is kept.
    """
    files = sorted(glob.glob(os.path.join(stagedir, f"{FILE_PREFIX}*.fwq")))
    log = os.path.join(stagedir, LOG)
    failures = []
    if os.path.exists(log):
        with open(log, errors="replace") as handle:
            text = handle.read()
        failures = [line.split(FAILED_MARK, 1)[1].strip() for line in text.splitlines() if FAILED_MARK in line]
        said = next((line.strip() for line in text.splitlines() if line.startswith("fwq:")), "")
        if said:
            failures = [f"{f} ({said})" for f in failures]
    nodes: dict[str, Any] = {}
    problems = []
    for path in files:
        try:
            run = analysis.analyse(fwqfile.read(Path(path)))
        except InputError as err:
            problems.append(str(err))
            continue
        if run.truncated:
            problems.append(f"{os.path.basename(path)}: {run.truncated}")
        nodes.update(records.probe_conditions(run)["noise"])
    if failures:
        problems.insert(0, "fwq failed on " + "; ".join(failures))
    if not nodes:
        why = "; ".join(problems) or "the probe wrote no file (did the job reach it?)"
        return NOT_PROBED + why
    if problems:
        nodes["problems"] = "; ".join(problems)
    return nodes
