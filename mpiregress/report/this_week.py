"""The report's first section, "What changed this week": a few sentences a person reads first.

From the report's own data only (it decides nothing): this run's regressions, errors and
improvements, and the new levels the change-point scan found among each series' last
``RECENT`` runs, grouped by what moved together: a system change that moved 16 series of a
partition at one run is one sentence naming its run, commit range, pipelines and toolchain
change, not 16.
"""
from __future__ import annotations

from typing import Sequence

from mpiregress.report import ReportData
from mpiregress.verdict.changepoint import ChangePoint

RECENT = 4      # a level is seen 3 runs after it starts: new levels among the last 4 runs are this week's
LISTED = 4      # at most this many series are named in one sentence; more are counted


def _group_sentence(points: Sequence[ChangePoint]) -> str:
    first = points[0]
    after = first.run_after
    changes = sorted(abs(p.change) for p in points)
    size = f"{changes[0]:.1%}" if len(points) == 1 or changes[0] == changes[-1] else \
        f"{changes[0]:.1%} to {changes[-1]:.1%}"
    direction = "worse" if first.worse else "better"
    where = f"{first.key.system}/{first.key.partition}"
    if len(points) <= LISTED:
        what = ", ".join(f"{p.key.method} {p.key.label()} {p.key.metric}" for p in points)
    else:
        metrics = sorted({p.key.metric for p in points})
        what = f"{len(points)} series ({', '.join(metrics)}; {len({p.key.method for p in points})} build methods)"
    text = (f"{where}: {what} {size} {direction} from run {after.run_id} ({after.time[:10]}), commit "
            f"{first.commits}, pipelines {first.pipelines}")
    if first.toolchain_changed:
        text += f", toolchain {first.run_before.toolchain} -> {after.toolchain}"
    return text


def sentences(data: ReportData, recent: int = RECENT) -> list[str]:
    """What changed this week, most urgent first; one sentence when nothing did."""
    out: list[str] = []
    for kind, label in (("regression", "regression"), ("error", "error")):
        for v in (v for v in data.verdicts if v.verdict == kind):
            cause = data.cause(v)
            out.append(f"{label}: {v.name()}: {v.reason}" + (f" ({cause})" if cause else ""))
    groups: dict[tuple, list[ChangePoint]] = {}
    for key, points in data.changes.items():
        latest = {r.run_id for r in (data.trends.get(key) or ())[-recent:]}
        for cp in points:
            if cp.run_after.run_id in latest:
                groups.setdefault((key.system, key.partition, cp.run_after.run_id, cp.worse), []).append(cp)
    # Worse before better, then the bigger groups first.
    for _, points in sorted(groups.items(), key=lambda item: (not item[0][3], -len(item[1]), item[0])):
        out.append("new level: " + _group_sentence(sorted(points, key=lambda p: p.key)))
    improved = [v for v in data.verdicts if v.verdict == "improvement"]
    if improved:
        names = ", ".join(v.name() for v in improved[:LISTED]) + (f" and {len(improved) - LISTED} more"
                                                                 if len(improved) > LISTED else "")
        out.append(f"improvement beyond the band (the baseline or history is stale): {names}")
    if not out:
        out.append(_nothing_changed(data, recent))
    return out


def _nothing_changed(data: ReportData, recent: int) -> str:
    """The one sentence when nothing changed; with no (or too little) history it says so instead of
    claiming runs that were never made."""
    runs = max((len(points) for points in data.trends.values()), default=0)
    if runs == 0:
        return ("No history yet: no accepted run to compare with, so no new level can be seen; "
                + ("this run's series are within their bands." if data.verdicts else "nothing was judged."))
    if runs < recent:
        return (f"Nothing changed that can be seen yet: every series is within its band, and the history holds "
                f"only {runs} run(s) of a series, fewer than the {recent} a new level needs to show.")
    return ("Nothing changed: every series is within its band and no series has a new level in its last "
            f"{recent} runs.")
