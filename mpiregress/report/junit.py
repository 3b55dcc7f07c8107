"""JUnit XML for GitLab's test report widget: the pipeline verdict's test cases (report.verdict_text).

The verdict's top line is a case of its own, then one case per series measured and one per finding
about no single series: a gating regression is a <failure>, an error an <error>, a finding to look
at <skipped> with "needs a look" in its message; a series the gating judges passed is a pass whatever
a judge that does not gate for this event said (that is in its <system-out>).
"""
from __future__ import annotations

from pathlib import Path

from mpiregress.report import ReportData, verdict_text


def render(data: ReportData) -> str:
    """The JUnit XML document for ``data`` as text."""
    return verdict_text.junit_xml(data.pipeline_verdict, ungated=data.ungated)


def write(data: ReportData, path: Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render(data))
    return path
