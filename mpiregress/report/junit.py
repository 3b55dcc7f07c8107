"""JUnit XML for GitLab's test report widget: one testcase per series.

``regression`` is a <failure>, ``error`` an <error>, ``skip`` <skipped>; the other
verdicts pass, with their reason in <system-out> (an improvement says the
reference is stale, a noisy series says why it could not be judged).
"""
from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from . import ReportData


def render(data: ReportData) -> str:
    """The JUnit XML document for ``data`` as text."""
    counts = data.counts
    suite = ET.Element("testsuite", name="mpiregress", tests=str(len(data.verdicts)),
                       failures=str(counts["regression"]), errors=str(counts["error"]),
                       skipped=str(counts["skip"]), timestamp=data.generated)
    for v in data.verdicts:
        k = v.key
        case = ET.SubElement(suite, "testcase", classname=f"{k.system}.{k.partition}.{k.method}",
                             name=f"{k.label()}.{k.metric}".replace(" ", "."), time="0")
        if v.verdict == "regression":
            cause = data.cause(v)
            ET.SubElement(case, "failure", type="regression", message=v.reason).text = \
                f"{v.reason}\nlikely cause: {cause}" if cause else v.reason
        elif v.verdict == "error":
            ET.SubElement(case, "error", type="error", message=v.reason).text = v.reason
        elif v.verdict == "skip":
            ET.SubElement(case, "skipped", message=v.reason)
        ET.SubElement(case, "system-out").text = f"{v.verdict}: {v.reason}"
    root = ET.Element("testsuites", name="mpiregress", tests=suite.get("tests", "0"),
                      failures=suite.get("failures", "0"), errors=suite.get("errors", "0"))
    root.append(suite)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def write(data: ReportData, path: Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render(data))
    return path
