"""A node lost under a running job of this run, in Slurm's words, as soon as Slurm knows it.

A link taken down or a node that stops answering does not end an MPI job: its ranks wait on TCP
forever, srun waits on the step, and Slurm ends the job (NODE_FAIL) only once it has declared the
node DOWN. Slurm flags the node as not responding (``*`` after its state) at the first ping it does
not answer, well before that. The run reads the queue every few seconds anyway (cancel.RunChildren);
:func:`lost_node` tells it, from the same look, that a node of one of its running jobs is lost, so
the run can stop ReFrame (which writes its report with what finished) and end as infrastructure.
"""
from __future__ import annotations

import subprocess
from typing import Optional

from mpiregress.cluster.hostlist import expand

# Job states in which a job still holds its nodes.
HOLDING = ("RUNNING", "COMPLETING", "CONFIGURING")


def _lines(argv: list[str], env: dict[str, str], timeout: float) -> Optional[list[str]]:
    try:
        done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.splitlines() if done.returncode == 0 else None


def node_states(env: dict[str, str], names: Optional[list[str]] = None,
                timeout: float = 20) -> Optional[list[tuple[str, str, str]]]:
    """(node, state, reason) as sinfo reports them, for ``names`` (default: every node); None when Slurm
    cannot say."""
    argv = ["sinfo", "-h", "-N", *(["-n", ",".join(names)] if names else []), "-o", "%N|%T|%E"]
    lines = _lines(argv, env, timeout)
    if lines is None:
        return None
    states = []
    for line in lines:
        name, state, why = (line.split("|", 2) + ["", ""])[:3]
        states.append((name, state, why))
    return states


def bad_state(state: str) -> bool:
    """True for a node state (sinfo %T) in which the node no longer runs work: down, failing, or not
    responding (Slurm's ``*`` suffix)."""
    lowered = state.lower()
    return state.endswith("*") or any(word in lowered for word in ("down", "fail", "not_responding"))


def lost_node(env: dict[str, str], token: str, timeout: float = 20) -> Optional[str]:
    """Slurm's words when a job tagged ``token`` ended on a node failure or runs on a node Slurm reports
    down or not responding; None otherwise, and when Slurm cannot say (the run's other checks decide then)."""
    jobs = _lines(["squeue", "-h", "-o", "%i|%T|%N|%k"], env, timeout)
    if not jobs:
        return None
    held: dict[str, str] = {}
    for line in jobs:
        job, state, nodes, comment = (line.split("|", 3) + ["", "", ""])[:4]
        if comment.strip() != token:
            continue
        if state == "NODE_FAIL":
            return f"node lost: Slurm ended job {job} on a node failure (NODE_FAIL on {nodes or 'its nodes'})"
        if state in HOLDING and nodes.strip():
            for node in expand(nodes.strip()):
                held.setdefault(node, job)
    if not held:
        return None
    # Only the run's own nodes: a site's sinfo of every node, every few seconds, would be a load of its own.
    for name, state, why in node_states(env, sorted(held), timeout) or []:
        if name in held and bad_state(state):
            # Slurm gives a reason once it sets the node DOWN; before, the '*' is all it says.
            said = why.strip() if why.strip().lower() not in ("", "none") else "not responding"
            return f"node lost: Slurm reports node {name} {state} ('{said}') under job {held[name]}"
    return None
