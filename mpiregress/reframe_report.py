"""Turn a ReFrame JSON report (``--report-file``) into result records.

ReFrame knows pass/fail; the project needs to know *why*: a failure in the
performance phase is a drift (status ``fail``), a failure anywhere else (setup
refusal, sanity, crashed rank, SIGILL, timeout) is an ``error``. Every test case
becomes a record, so nothing that ran is lost from the report.
"""
from __future__ import annotations

import datetime as _dt
from pathlib import Path
from typing import Any

from . import inputs, osu_output
from .errors import InputError
from .names import METRICS
from .results import Result


# Fields every case of the project's checks carries, as text.
_CASE_TEXT = ("metric", "system", "partition", "build_method", "placement")


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
        lines = [ln.strip() for ln in reason.splitlines() if ln.strip() and not ln.strip().startswith("---")]
        if lines and lines[0].endswith(":") and len(lines) > 1:
            reason = f"{lines[0]} {lines[1]}"
    for prefix in ("sanity error: ", "performance error: ", "input error: "):
        if reason.startswith(prefix):
            reason = reason[len(prefix):]
    if status == "error" and not reason:
        reason = f"failed in the {case.get('fail_phase') or 'unknown'} phase"
    return reason.splitlines()[0] if reason else ""


def case_to_result(case: dict[str, Any], toolchain: str = "", commit: str = "", pipeline: str = "") -> Result:
    """One ReFrame test case of the OSU point-to-point check as a Result."""
    metric = case["metric"]
    spec = METRICS[metric]
    value = reference = tolerance = None
    for key, perf in (case.get("perfvalues") or {}).items():
        if key.rsplit(":", 1)[-1] == metric:
            value, reference, lower, upper = perf[0], perf[1], perf[2], perf[3]
            bound = lower if spec.higher_is_better else upper
            tolerance = abs(bound) if bound is not None else None
    if reference == 0:
        reference = None  # ReFrame's placeholder when there is no reference
    status = _status(case)
    nodelist = [n for n in (case.get("nodes_used") or case.get("job_nodelist") or []) if n and n != "None"]
    return Result(
        system=case["system"], partition=case["partition"], method=case["build_method"],
        placement=case["placement"], metric=metric, benchmark=spec.benchmark,
        message_size=spec.message_size, unit=spec.unit,
        value=float(value) if value is not None else None, status=status,
        reason=_reason(case, status) if status != "pass" else "",
        reference=reference, tolerance=tolerance, target=case.get("build_target") or "",
        nodelist=list(nodelist), binding=case.get("cpu_binding") or "", toolchain=toolchain,
        check=case.get("name", ""), jobid=str(case.get("jobid") or ""), time=_time(case),
        commit=commit, pipeline=pipeline,
    )


def load(path: Path, toolchain: str = "", commit: str = "", pipeline: str = "") -> list[Result]:
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
            results.append(case_to_result(case, toolchain, commit, pipeline))
        except (TypeError, ValueError, IndexError, KeyError, AttributeError, OverflowError, OSError) as err:
            raise InputError(f"ReFrame report {path}: test case #{index} ({case.get('name', '?')}) has a "
                             f"malformed value: {err}") from None
    return results
