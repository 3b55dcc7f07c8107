"""The A/B section: rows, JUnit case data, Markdown and HTML fragments."""
from __future__ import annotations

import numpy as np

from mpiregress.report import ab as report
from mpiregress.verdict.ab import paired
from mpiregress.verdict.ab.attribution import attribute, observation, sentences

CONFIG = paired.PairedConfig(draws=5000, min_pool=4)


def _verdicts(step=0.10, crash_reason="rank 0: <b>killed</b> | signal 9"):
    rng = np.random.default_rng(3)
    records = []
    for method in ("source", "easybuild"):
        for placement in ("same_numa", "cross_socket"):
            for pair in range(6):
                for side in "AB":
                    value = 3.0 * float(np.exp(abs(rng.standard_t(3)) * 0.005))
                    if side == "B":
                        value *= 1 + step
                    record = dict(system="local", partition="batch", method=method, placement=placement,
                                  metric="latency", unit="us", value=value, status="pass", ab_side=side,
                                  ab_pair=pair, nodelist=["node1"], target="t")
                    if (method, placement, pair, side) == ("easybuild", "same_numa", 1, "A"):
                        record.update(status="error", value=None, reason=crash_reason)
                    records.append(record)
    return paired.judge(records, CONFIG)


def test_rows_carry_effect_interval_verdict_and_cause_gating_first():
    verdicts = _verdicts()
    causes = sentences(attribute([observation(v) for v in verdicts]))
    rows = report.rows(verdicts, causes)
    assert len(rows) == 4 and all(r.verdict == "regression" for r in rows)
    first = rows[0]
    assert first.effect_text.startswith("+") and "…" in first.interval_text
    assert first.cause.startswith("toolchain:") and first.junit_message.startswith("toolchain:")
    assert [r.dropped for r in rows].count(1) == 1


def test_junit_cases_fail_regressions_only():
    rows = report.rows(_verdicts(step=0.0))
    cases = report.junit_cases(rows)
    assert {c["outcome"] for c in cases} <= {"pass"}
    assert cases[0]["classname"] == "ab.local.batch"
    failing = report.junit_cases(report.rows(_verdicts()))
    assert {c["outcome"] for c in failing} == {"failure"}


def test_markdown_section_shows_status_rows_and_escapes_pipes():
    verdicts = _verdicts()
    causes = sentences(attribute([observation(v) for v in verdicts]))
    text = report.markdown(verdicts, causes, CONFIG)
    assert text.startswith("### A/B on the same nodes: ❌ regression (exit 1)")
    assert text.count("| ❌ regression |") == 4 and "Holm over 4 series" in text
    assert "(−1)" in text


def test_html_fragment_is_escaped():
    verdicts = _verdicts(step=0.0)
    page = report.html(verdicts, config=CONFIG)
    assert '<section class="ab">' in page and "s-pass" in page
    assert "&lt;b&gt;killed&lt;/b&gt;" in page and "<b>killed</b>" not in page
