"""Turn a ReFrame JSON report (``--report-file``) into result records.

ReFrame knows pass/fail; the project needs to know *why*: a failure anywhere but
the performance phase (setup refusal, sanity, crashed rank, SIGILL, timeout) is an
``error`` with its reason; a measured value is kept for the one judge
(:mod:`mpiregress.verdict`). Every test case becomes at least one record, so
nothing that ran is lost from the report.
"""
from __future__ import annotations

import datetime as _dt
from pathlib import Path
from typing import Any

from . import jsonfile
from .errors import InputError
from .names import METRICS, PT2PT

# A sanity failure that means "this measurement does not apply here" (coll/tuned not in charge, so a
# forced algorithm measures nothing): a check's sanity reason with this prefix becomes a skip.
NOT_APPLICABLE = "not applicable: "
from .results import Result


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
    reason = reason.strip()
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


def case_to_results(case: dict[str, Any], toolchain: str = "", commit: str = "", pipeline: str = "",
                    dry_run: bool = False) -> list[Result]:
    """One ReFrame test case of an OSU-family check as Results: one per series it measured.

    The check declares its series (``benchmark``, ``series_parameters``, ``metric``) and,
    once it has run, every measured value in ``measured`` (a sweep is many series from
    one job). A case that measured nothing (skipped, failed, crashed) still becomes one
    record of its own series, with the reason. ReFrame's pass/fail against its
    references is not a verdict here: :mod:`mpiregress.verdict` judges once.
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
        return [Result(benchmark=m["benchmark"], parameters=dict(m["parameters"]), metric=m["metric"],
                       unit=METRICS[m["metric"]].unit, value=float(m["value"]), status="pass", **common)
                for m in measured] + missing
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
    report = jsonfile.read(path, "ReFrame report", " (did ReFrame run?)")
    try:
        cases = [case for run in report["runs"] for case in run["testcases"]]
    except (KeyError, TypeError):
        raise InputError(f"ReFrame report {path} has no runs/testcases: not a ReFrame 4 report") from None
    return [r for case in cases if "metric" in case for r in case_to_results(case, toolchain, commit, pipeline, dry_run)]
