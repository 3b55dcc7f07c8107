"""Infrastructure or measurement: what Slurm says about the nodes of failed results (exit 3 when
the fault is Slurm's, not the benchmark's)."""
from __future__ import annotations

from typing import Optional

from mpiregress.cluster import nodeloss
from mpiregress.cluster.local import slurm_reachable
from mpiregress.families import osu_output
from mpiregress.model import results


def slurm_faults(env: dict[str, str], nodes: set[str]) -> Optional[str]:
    """After failed checks: Slurm's own words when its controller or one of ``nodes`` is gone, else None."""

    ok, said = slurm_reachable(env, timeout=20)
    if not ok:
        return f"Slurm controller unreachable: {said.removeprefix('Slurm is not reachable: ')}"
    for name, state, why in nodeloss.node_states(env, timeout=20) or []:
        if name in nodes and any(word in state.lower() for word in ("down", "fail", "drain", "not_responding")):
            return f"node lost: Slurm reports node {name} {state} ('{why.strip() or 'no reason given'}')"
    return None


def classify_infrastructure(found: list[results.Result], env: dict[str, str],
                             lost: Optional[str] = None) -> list[results.Result]:
    """Mark errors that Slurm caused as infrastructure (``lost``: the node loss that stopped the run, in
    Slurm's words); return the infrastructure errors."""
    errors = [r for r in found if r.status == "error"]
    unexplained = [r for r in errors if not osu_output.is_infrastructure(r.reason)]
    if unexplained:
        fault = lost or slurm_faults(env, {n for r in errors for n in r.nodelist} or {"*"})
        if fault:
            for r in unexplained:
                # ReFrame's words for a check the run stopped ("aborted due to ForceExitError") say the run's.
                saw = "stopped by the run before it finished" if lost and "ForceExitError" in r.reason else r.reason
                r.reason = f"{fault}; the check saw: {saw}"
    infrastructure = [r for r in errors if osu_output.is_infrastructure(r.reason)]
    for r in infrastructure:
        # Slurm, not the build or the benchmark, stopped it: a retry may pass (the verdict's "infrastructure").
        r.conditions["infrastructure"] = True
    return infrastructure
