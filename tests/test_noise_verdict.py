"""Noise findings in the one verdict (summary.md's first lines, JUnit), the report's noise section per
layout and method, and the raw FWQ file kept so the analysis can be re-run (issue 31)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
from shared import REPO
from test_noise_analysis import inject, quiet_core, run_of, write_fwq

from mpiregress import report
from mpiregress.families.noise import analysis, artifacts, findings, fwqfile, known, records
from mpiregress.model import baselines
from mpiregress.model.results import Result
from mpiregress.report import html, summary, verdict_text
from mpiregress.report import noise as noise_report
from mpiregress.verdict import band, compose

EVENT = "A 76.9 Hz event on core 0 on node1 (every 13 ms; spectral line 65x its background, 11 harmonics)."


def fwq(layout: str, node: str, eff: float | None, method: str = "source", status: str = "pass", reason: str = "",
        **conditions) -> Result:
    return Result(system="local", partition="batch", method=method, benchmark="fwq",
                  parameters={"node": node, "layout": layout}, metric="efficiency", unit="", value=eff,
                  samples=[] if eff is None else [eff], status=status, reason=reason, conditions=conditions)


def measured(events: list[str], eff: float = 0.70) -> list[Result]:
    said = [f"node1: efficiency {eff:.3f} over 2 core(s) and 300000 iterations; most time lost on core 0 (20.0%), "
            "largest detour 1000 us.", *events]
    return [fwq("all_cores", "node1", eff, findings=said, events=events, priority="normal", cores=[0, 1],
                nodes={"node1": {"cores": [{"cpu": 0, "lost_fraction": 0.2, "periods_hz": [76.92],
                                            "periods_detour_us": [1000.0]},
                                           {"cpu": 1, "lost_fraction": 0.1, "periods_hz": []}]}})]


def test_a_named_event_is_the_verdicts_first_lines_and_a_junit_case() -> None:
    found = measured([EVENT], eff=0.95)
    judged = compose.of_run(found)
    assert judged.state == "needs a look"
    top = verdict_text.markdown(judged, heading="##")
    text = summary.markdown(found, "MPI regression: local", [], [], top=top)
    head = text.splitlines()[:12]
    assert head[2].startswith("## MPI performance: 👀 needs a look: 1 finding to look at (exit 5)"), head
    assert any(EVENT in line and "| noise |" in line for line in head), head
    assert "node1: efficiency 0.950" in text        # the efficiency as evidence beside it
    junit = verdict_text.junit_xml(judged)
    assert 'skipped message="needs a look (does not gate): ' + EVENT.replace('"', "&quot;") in junit


def test_a_quiet_noise_run_passes_and_still_says_its_efficiency() -> None:
    judged = compose.of_run(measured([], eff=0.95))
    assert judged.state == "pass"
    evidence = [f.sentence for f in judged.of(compose.EVIDENCE)]
    assert evidence and evidence[0].startswith("node1: efficiency 0.950")


def test_a_node_below_the_noise_floor_needs_a_look_without_any_event() -> None:
    """0.70 of the cores kept, no period: the time is lost all the same (the issue's "pass: no finding")."""
    judged = compose.of_run(measured([], eff=0.70))
    assert judged.state == "needs a look"
    (said,) = [f.sentence for f in judged.findings if f.state == "needs a look"]
    assert said == ("node1: efficiency 0.700 over 2 cores, below the noise floor 0.90 (systems/local.yaml "
                    "noise_floor): a job there loses 30% of its time to whatever else runs on the node")
    # A band, where a site sets one, judges the efficiency itself.
    banded = measured([], eff=0.70)
    banded[0].reference = 0.6
    assert compose.of_run(banded).state == "pass"


def test_a_known_source_of_the_system_is_said_with_what_it_is_and_asks_no_one() -> None:
    """The local VM's host timer (systems/local.yaml known_noise_sources) named on a core is said with what it
    is, as evidence; a 13 ms daemon on the other core still needs a look."""
    run = run_of(inject(quiet_core(12), 10_000_000, 300_000), inject(quiet_core(13), 13_000_000, 300_000))
    local = known.known_of("local")
    assert [k.hz for k in local] == [100.0, 20.0]
    events, said = findings.event_sentences(run, local), findings.sentences(run, local)
    assert [e.split(" (")[0] for e in events] == ["A 76.9 Hz event on core 1 on n1"], said
    (timer,) = [s for s in said if s.startswith("A 100 Hz event on core 0 on n1 (every 10 ms, 300 us each,")]
    assert timer.endswith("; known on this system: the VM host's 10 ms timer, measured in controls with no "
                          "injector (systems/local.yaml known_noise_sources)."), timer
    judged = compose.of_run([fwq("all_cores", "n1", 0.95, findings=said, events=events)])
    assert [f.sentence for f in judged.findings if f.state == "needs a look"] == events
    assert timer in [f.sentence for f in judged.of(compose.EVIDENCE)]
    # Elsewhere (no such source in iris.yaml) the same run's 100 Hz asks for a person.
    assert len(findings.event_sentences(run, known.known_of("iris"))) == 2


def test_the_noise_section_shows_each_layout_measured_and_only_its_own_skip_reasons(tmp_path: Path) -> None:
    rows = [*measured([EVENT]),
            # Measured with no baseline: an error for the band, still a measurement to show.
            fwq("one_free_per_socket", "node1", 1.0, status="error", reason="no baseline for it", cores=[0],
                priority="normal"),
            fwq("all_cores", "node1", None, method="eessi", status="skip", reason="no eessi build here"),
            fwq("one_free_per_socket", "node1", None, method="eessi", status="skip", reason="no eessi build here"),
            fwq("smt", "node1", None, status="skip", reason="the nodes have 1 hardware thread per core (SMT off)")]
    (part,) = noise_report.experiments(rows)
    assert part.efficiency == {"all_cores": 0.70, "one_free_per_socket": 1.0}
    assert part.cores["all_cores"]["node1"] == ["core 0: 20.0% lost, periods 76.92 Hz (1 ms each)",
                                                 "core 1: 10.0% lost"]
    html = str(noise_report.render(rows, tmp_path))
    assert "skipped: no eessi build here" not in html
    assert "also asked of eessi, not measured there: no eessi build here (eessi)" in html
    assert "skipped: the nodes have 1 hardware thread per core (SMT off) (source)" in html
    assert EVENT in html and "<td>normal</td>" in html and "no all-cores run to compare with" not in html


def test_the_raw_file_is_kept_and_the_analysis_re_runs_on_it(tmp_path: Path) -> None:
    cores = [quiet_core(7), inject(quiet_core(8), 13_000_000, 1_000_000)]
    write_fwq(tmp_path / "fwq-all_cores.fwq", [("node1", cores)])
    kept = artifacts.keep_raw(tmp_path / "fwq-all_cores.fwq", tmp_path / "artifacts")
    assert kept.name == "fwq-all_cores.fwq.gz" and kept.stat().st_size < (tmp_path / "fwq-all_cores.fwq").stat().st_size
    run = analysis.analyse(fwqfile.read(kept))
    assert [(c.cpu, round(p.frequency_hz, 1)) for c, p in findings.one_core_events(run)] == [(1, 76.9)]
    done = subprocess.run([sys.executable, "-m", "mpiregress", "noise", "analyze", str(kept), "--out",
                           str(tmp_path / "again")], capture_output=True, text=True, timeout=300, cwd=REPO)
    assert done.returncode == 0, done.stderr
    assert "A 76.9 Hz event on core 1 on node1" in (tmp_path / "again" / "summary.txt").read_text()
    (tmp_path / "bad.fwq.gz").write_bytes(kept.read_bytes()[:40])
    done = subprocess.run([sys.executable, "-m", "mpiregress", "noise", "analyze", str(tmp_path / "bad.fwq.gz"),
                           "--out", str(tmp_path / "bad")], capture_output=True, text=True, timeout=300, cwd=REPO)
    assert done.returncode == 2 and "damaged gzip file" in done.stderr and "Traceback" not in done.stderr
    assert records.BENCHMARK == "fwq" and np.isfinite(run.nodes[0].efficiency)


def test_a_noise_only_page_has_no_empty_point_to_point_panels(tmp_path: Path) -> None:
    """The page of a `--families noise` run: the noise section, and one sentence where the point-to-point bars
    would be (they were two empty panels)."""
    page = html.render(report.build(measured([EVENT]), None, {}, results_source=str(tmp_path / "results.json")))
    assert page.count("No point-to-point check in this run.") == 2     # the bars and the size sweeps
    assert "No message-size sweep" not in page
    assert '<h3>local/batch</h3><img' not in page
    assert EVENT in page


def test_a_noise_run_on_a_system_without_fwq_bands_is_judged_by_its_findings_not_an_error() -> None:
    """The FWQ check says its records are judged by the noise analysis: with no band for them in the system's
    baselines they are measured and judged (its events need a look), not "no baseline" errors; a band still
    applies where a site sets one."""
    refs = baselines.for_system("local", REPO / "baselines")
    found = measured([EVENT])
    found[0].conditions["judged_by"] = records.JUDGED_BY
    band.apply_baselines(found, refs)
    assert found[0].status == "pass", found[0].reason
    assert compose.of_run(found).state == "needs a look"
    unmarked = measured([EVENT])
    band.apply_baselines(unmarked, refs)
    assert unmarked[0].status == "error" and "no baseline for" in unmarked[0].reason


def test_two_methods_measuring_one_partition_each_have_their_own_experiments(tmp_path: Path) -> None:
    """Two builds' FWQ runs of one layout (the local main job runs source and easybuild): each method's
    efficiency sits beside its own findings, never one's number beside the other's sentences."""
    rows = [fwq("all_cores", "node1", 0.85, findings=["source's finding"], cores=[0, 1]),
            fwq("all_cores", "node1", 0.46, method="easybuild", findings=["easybuild's finding"], cores=[0, 1]),
            fwq("all_cores", "node1", None, method="eessi", status="skip", reason="no eessi build here")]
    parts = {p.name: p for p in noise_report.experiments(rows)}
    assert sorted(parts) == ["local/batch (easybuild)", "local/batch (source)"]
    assert parts["local/batch (source)"].efficiency == {"all_cores": 0.85}
    assert parts["local/batch (source)"].findings == {"all_cores": ["source's finding"]}
    assert parts["local/batch (easybuild)"].efficiency == {"all_cores": 0.46}
    assert parts["local/batch (easybuild)"].findings == {"all_cores": ["easybuild's finding"]}
    assert all("eessi" in dict(p.skip_lines())["all_cores"] for p in parts.values())
    html = str(noise_report.render(rows, tmp_path))
    assert "local/batch (source): placement experiments" in html and "efficiency 0.85;" in html
