"""Turn a ReFrame JSON report (``--report-file``) into result records.

ReFrame knows pass/fail; the project needs to know *why*: a failure anywhere but
the performance phase (setup refusal, sanity, crashed rank, SIGILL, timeout) is an
``error`` with its reason; a measured value is kept for the one judge
(:mod:`mpiregress.verdict.band`). Every test case becomes at least one record, so
nothing that ran is lost from the report.
"""
from __future__ import annotations

import datetime as _dt
import re
from pathlib import Path
from typing import Any

from mpiregress.errors import InputError
from mpiregress.families import osu_output
from mpiregress.model import inputs
from mpiregress.model.names import METRICS, PT2PT
from mpiregress.model.results import Result

# A sanity failure that means "this measurement does not apply here" (coll/tuned not in charge, so a
# forced algorithm measures nothing): a check's sanity reason with this prefix becomes a skip.
NOT_APPLICABLE = "not applicable: "


# sbatch's one-line refusal of a job (ReFrame wraps it in "spawned process error: command ... failed").
_SBATCH_REFUSAL = re.compile(r"sbatch: error: [^\n]+")

# Fields every case of the project's checks carries, as text.
_CASE_TEXT = ("metric", "system", "partition", "build_method")


def _status(case: dict[str, Any]) -> str:
    result = case.get("result")
    if result in ("pass", "xfail"):
        return "pass"
    if result == "skip":
        return "skip"
    if result in ("fail", "xpass") and case.get("fail_phase") == "performance":
        return "fail"
    return "error"


def _time(case: dict[str, Any]) -> str:
    stamp = case.get("job_completion_time_unix")
    if not stamp:
        return ""
    return _dt.datetime.fromtimestamp(stamp, _dt.timezone.utc).isoformat(timespec="seconds")


def _reason(case: dict[str, Any], status: str) -> str:
    reason = (case.get("skip_reason") if status == "skip" else case.get("fail_reason")) or ""
    reason = str(reason).strip()
    for prefix in ("sanity error: ", "performance error: ", "input error: "):
        if reason.startswith(prefix):
            reason = reason[len(prefix):]
    if status == "error" and osu_output.is_infrastructure(reason):
        return reason.splitlines()[0]   # the check already said it in Slurm's words
    if status == "error":
        # Slurm's own words first (node lost, controller unreachable, job killed), wherever
        # ReFrame put them: an sbatch failure's cause sits lines below "failed with exit code 1:".
        infrastructure = osu_output.infrastructure_reason(reason)
        if infrastructure:
            return infrastructure
        refused = _SBATCH_REFUSAL.search(reason)
        if refused:
            # Slurm refused the job as asked (a node it does not know, a partition or QOS it will not
            # give): the request is wrong, not the benchmark; its own words, without ReFrame's wrapping.
            return f"Slurm refused the job: '{refused.group(0).strip()}'"
        lines = [ln.strip() for ln in reason.splitlines() if ln.strip() and not ln.strip().startswith("---")]
        if lines and lines[0].endswith(":") and len(lines) > 1:
            reason = f"{lines[0]} {lines[1]}"
    for prefix in ("sanity error: ", "performance error: ", "input error: "):
        if reason.startswith(prefix):
            reason = reason[len(prefix):]
    if status == "error" and not reason:
        reason = f"failed in the {case.get('fail_phase') or 'unknown'} phase"
    return reason.splitlines()[0] if reason else ""


def _upgrade(case: dict[str, Any]) -> dict[str, Any]:
    """A point-to-point case from before checks declared their series: the series follows from metric and
    placement, the value from ReFrame's perfvalues."""
    if "benchmark" in case or "placement" not in case or case.get("metric") not in PT2PT:
        return case
    spec = PT2PT[case["metric"]]
    case = {**case, "benchmark": spec.benchmark,
            "series_parameters": {"placement": case["placement"], "size": spec.size}}
    for key, perf in (case.get("perfvalues") or {}).items():
        if key.rsplit(":", 1)[-1] == spec.metric and perf[0] is not None:
            case["measured"] = [{"benchmark": spec.benchmark, "parameters": case["series_parameters"],
                                 "metric": spec.metric, "value": perf[0]}]
    return case


# Fields a check that judges its own run (the link matrix) may add to a measured series.
JUDGED_FIELDS = ("nodelist", "samples")


def _measured_result(m: dict[str, Any], common: dict[str, Any]) -> Result:
    """One measured series. Most checks only measure (status pass, judged later against the baselines);
    the link matrix judges each node and link against the typical pair of its own run and says so:
    ``status`` fail with the ``reason`` naming the node or link, and ``conditions['judged_by']``. An A/B
    step that crashed beside the pairs that measured is ``status`` error with no value and its reason;
    ``conditions`` carry the A/B side and pair of that very sample."""
    status = m.get("status", "pass")
    if status not in ("pass", "fail", "error"):
        raise ValueError(f"measured status {status!r} is neither pass, fail nor error")
    fields = {**common, **{k: list(m[k]) for k in JUDGED_FIELDS if m.get(k)},
              "conditions": {**common["conditions"], **dict(m.get("conditions") or {})}}
    return Result(benchmark=m["benchmark"], parameters=dict(m["parameters"]), metric=m["metric"],
                  unit=METRICS[m["metric"]].unit, value=None if m.get("value") is None else float(m["value"]),
                  status=status,
                  reason=str(m.get("reason") or ""), **fields)


def case_to_results(case: dict[str, Any], toolchain: str = "", commit: str = "", pipeline: str = "",
                    dry_run: bool = False) -> list[Result]:
    """One ReFrame test case of an OSU-family check as Results: one per series it measured.

    The check declares its series (``benchmark``, ``series_parameters``, ``metric``) and,
    once it has run, every measured value in ``measured`` (a sweep is many series from
    one job). A case that measured nothing (skipped, failed, crashed) still becomes one
    record of its own series, with the reason. ReFrame's pass/fail against its
    references is not a verdict here: :mod:`mpiregress.verdict.band` judges once.
    """
    case = _upgrade(case)
    status = _status(case)
    if status == "fail":
        status = "pass"   # measured; judged against the baselines later, in one place
    nodelist = [n for n in (case.get("nodes_used") or case.get("job_nodelist") or []) if n and n != "None"]
    common = dict(
        system=case["system"], partition=case["partition"], method=case["build_method"],
        target=case.get("build_target") or "", nodelist=list(nodelist), binding=case.get("cpu_binding") or "",
        toolchain=toolchain, check=case.get("name", ""), jobid=str(case.get("jobid") or ""), time=_time(case),
        commit=commit, pipeline=pipeline, conditions=dict(case.get("conditions") or {}),
    )
    measured = (case.get("measured") or []) if status == "pass" else []
    if measured:
        # What the check asked for and did not get (a sweep missing sizes) is an error beside the rows it did get.
        missing = [Result(benchmark=case["benchmark"], parameters=dict(case.get("series_parameters") or {}),
                          metric=case["metric"], unit=METRICS[case["metric"]].unit, value=None, status="error",
                          reason=problem, **common) for problem in case.get("problems") or []]
        return [_measured_result(m, common) for m in measured] + missing
    reason = _reason(case, status) if status != "pass" else ""
    if status == "error" and reason.startswith(NOT_APPLICABLE):
        status, reason = "skip", reason[len(NOT_APPLICABLE):]
    if status == "pass":
        status, reason = (("skip", "dry run: job script written, nothing measured") if dry_run
                          else ("error", "the check passed but recorded no measurement"))
    return [Result(benchmark=case["benchmark"], parameters=dict(case.get("series_parameters") or {}),
                   metric=case["metric"], unit=METRICS[case["metric"]].unit, value=None, status=status,
                   reason=reason, **common)]


def load(path: Path, toolchain: str = "", commit: str = "", pipeline: str = "", dry_run: bool = False) -> list[Result]:
    """All test cases of every run in the report at ``path``."""
    report = inputs.read_json(path, "ReFrame report", expect=dict, missing_hint=" (did ReFrame run?)")
    try:
        cases = [case for run in report["runs"] for case in run["testcases"]]
    except (KeyError, TypeError):
        raise InputError(f"ReFrame report {path} has no runs/testcases: not a ReFrame 4 report") from None
    results = []
    for index, case in enumerate(cases):
        if not isinstance(case, dict):
            raise InputError(f"ReFrame report {path}: test case #{index} is not a mapping")
        if "metric" not in case:
            continue
        bad = [key for key in _CASE_TEXT if not isinstance(case.get(key), str)]
        if bad or case["metric"] not in METRICS or not isinstance(case.get("perfvalues") or {}, dict):
            what = f"field(s) {', '.join(bad)} missing or not text" if bad else \
                (f"metric {case['metric']!r} unknown" if case["metric"] not in METRICS else "perfvalues not a mapping")
            raise InputError(f"ReFrame report {path}: test case #{index}: {what}")
        try:
            results += case_to_results(case, toolchain, commit, pipeline, dry_run)
        except (TypeError, ValueError, IndexError, KeyError, AttributeError, OverflowError, OSError) as err:
            raise InputError(f"ReFrame report {path}: test case #{index} ({case.get('name', '?')}) has a "
                             f"malformed value: {err!r}") from None
    return results
