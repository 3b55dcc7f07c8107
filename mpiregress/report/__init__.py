"""Reports of a run judged against the history: one HTML page, a Markdown summary, a JUnit file.

:func:`build` gathers everything once (gate verdicts, cross-method findings,
baseline-quality findings, change points, the series' trends); the writers in
``html``, ``markdown`` and ``junit`` only present it. The HTML page is one
self-contained file: figures are embedded PNGs, styles inline, no external URL.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from typing import Mapping, Optional, Sequence

from mpiregress.families.coll import algorithms
from mpiregress.families.coll.algorithms import DEFAULT
from mpiregress.families.coll.analysis import Analysis, analyse
from mpiregress.history.store import History, RunPoint
from mpiregress.model import toolchain
from mpiregress.model.baselines import Baselines
from mpiregress.model.results import Result
from mpiregress.model.series import SeriesKey
from mpiregress.verdict import band, compose, policy
from mpiregress.verdict import cross_method as consistency
from mpiregress.verdict import node_noise as nodehistory
from mpiregress.verdict.ab import attribution, evidence
from mpiregress.verdict.changepoint import ChangePoint, scan_runs
from mpiregress.verdict.compose import Evidence, PipelineVerdict
from mpiregress.verdict.cross_method import Finding
from mpiregress.verdict.history_gate import GateConfig, Verdict, counts, judge, series_noise

# How much history a report draws: two years of weekly runs.
TREND_RUNS = 104


@dataclass
class ReportData:
    """Everything a report shows, computed once."""

    results: list[Result]
    verdicts: list[Verdict]
    findings: list[Finding]
    baseline_findings: list[Finding]
    changes: dict[SeriesKey, list[ChangePoint]]
    trends: dict[SeriesKey, list[RunPoint]]
    baselines: dict[str, Baselines]
    config: GateConfig
    results_source: str = ""
    history_source: str = ""
    history_runs: int = 0
    generated: str = field(default_factory=lambda: datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"))
    notes: list[str] = field(default_factory=list)
    collectives: Optional[Analysis] = None     # best algorithms, findings, rules files of a collective sweep
    causes: dict[SeriesKey, str] = field(default_factory=dict)   # one sentence per failing series
    verdict: Optional[PipelineVerdict] = None  # the pipeline event's one verdict (verdict.compose)
    ungated: bool = False   # written by a command that exits 0 whatever the verdict (report without --gate)

    def cause(self, verdict: Verdict) -> str:
        """Why a failing series failed (ab.attribution without A), or ''."""
        return self.causes.get(verdict.key, "")

    @property
    def pipeline_verdict(self) -> PipelineVerdict:
        assert self.verdict is not None, "ReportData.verdict is set by build()"
        return self.verdict

    @property
    def exit_code(self) -> int:
        return compose.exit_code(self.pipeline_verdict)

    @property
    def counts(self) -> dict[str, int]:
        """The history gate's verdicts per series (the per-series table), not the pipeline's state."""
        return counts(self.verdicts)

    @property
    def status(self) -> str:
        return self.pipeline_verdict.state

    def systems(self) -> list[tuple[str, str]]:
        """(system, partition) pairs shown, from the results and the history's series."""
        pairs = {(r.system, r.partition) for r in self.results} | {(k.system, k.partition) for k in self.trends}
        return sorted(pairs)

    def commits(self) -> list[str]:
        return sorted({r.commit for r in self.results if r.commit})

    def pipelines(self) -> list[str]:
        return sorted({r.pipeline for r in self.results if r.pipeline})


def build(results: Sequence[Result], history: Optional[History], baselines: Mapping[str, Optional[Baselines]],
          config: GateConfig = GateConfig(), results_source: str = "", history_source: str = "",
          exclude_run: Optional[str] = None, with_trends: bool = True,
          stacks: Optional[Mapping[str, str]] = None,
          builds: Optional[Mapping[frozenset[str], str]] = None, event: str = "history",
          evidence: Optional[Evidence] = None) -> ReportData:
    """Judge ``results`` and gather the history a report needs (series of the results' systems).

    ``with_trends=False`` (the MR gate) reads only the series of ``results`` and skips
    the change-point scan. ``stacks`` (consistency.stack_differences of the run's manifests) lets a
    cross-method finding name the MPI stack difference behind it, ``builds`` (builds.differences.between)
    the build difference (flags, MCA parameters of the build's modules).
    The pipeline verdict of ``event``
    is composed from the history gate, the cross-method and baseline findings and ``evidence`` (what
    other judges said: paired A/B, confirmations, the run's problems, the MR's changes).
    """
    books = {s: b for s, b in baselines.items() if b is not None}
    # Values, not labels: every measured value is judged again against its band, whatever status the
    # results file gave it (strict where the band gates the event: a value with no baseline is an error).
    partitions = sorted({(r.system, r.partition) for r in results})
    band.rejudge(results, baselines, strict="baseline_band" in policy.load()[event].gates,
                 node_noise={where: nodehistory.node_efficiencies(history, *where, exclude_run=exclude_run)
                             for where in partitions} if history is not None else None)
    verdicts = judge(results, history, baselines, config, exclude_run=exclude_run)
    systems = {r.system for r in results}
    trends: dict[SeriesKey, list[RunPoint]] = {}
    changes: dict[SeriesKey, list[ChangePoint]] = {}
    notes: list[str] = []
    runs_count = 0
    if history is not None:
        runs_count = sum(1 for run in history.runs() if run.accepted)
        keys = history.series_keys() if with_trends else sorted({r.key() for r in results})
        for key in keys:
            if systems and key.system not in systems:
                continue
            runs = history.series_runs(key, last=TREND_RUNS, exclude_run=exclude_run)
            if runs:
                trends[key] = runs
        # Pooled over each partition's series: a system change moves many at once.
        changes = scan_runs(trends) if with_trends else {}
    else:
        notes.append("No history was given: verdicts fall back to the baselines files, and there are no trends.")
    measured = {key: series_noise(runs[-config.noise_runs:]) for key, runs in trends.items()}
    noise = {k: v for k, v in measured.items() if v is not None}
    values = consistency.method_values(results)
    collectives = _collectives(results)
    # One finding per fact: Iris' broadwell and skylake copies of one shortfall are one finding naming both.
    findings = consistency.group(consistency.check(values, noise, stacks=stacks, builds=builds,
                                                   samples=consistency.method_samples(results)))
    baseline_findings = consistency.group(consistency.baseline_gaps(books.values(), values, noise))
    found_causes = causes(results, verdicts, history)
    given = evidence or Evidence()
    before = None
    if given.changed_methods and history is not None:
        # Was a rebuilt method already behind before this MR? The latest accepted run of each series says.
        last = {key: list(runs[-1].samples) for key, runs in trends.items() if runs}
        before = consistency.group(consistency.check(consistency.history_values(last), noise))
    pipeline = compose.compose(event, replace(
        given, results=list(results), history=verdicts, cross=findings, baseline_findings=baseline_findings,
        causes={**found_causes, **given.causes}, cross_before=before,
        cross_power=given.cross_power or consistency.power(values, consistency.method_samples(results), noise)))
    return ReportData(results=list(results), verdicts=verdicts, findings=findings,
                      baseline_findings=baseline_findings,
                      changes=changes, trends=trends, baselines=books, config=config,
                      results_source=results_source, history_source=history_source, history_runs=runs_count,
                      notes=notes, collectives=collectives, causes=found_causes, verdict=pipeline)


def causes(results: Sequence[Result], verdicts: Sequence[Verdict], history: Optional[History]
           ) -> dict[SeriesKey, str]:
    """One sentence per failing series of a run judged by the history gate: the A/B attribution with no A
    (node, build, system, noise, link or unexplained), from the nodes each series ran on, the run's noise
    probes and the latest link matrix of the partition."""

    nodes: dict[SeriesKey, set[str]] = {}
    for r in results:
        nodes.setdefault(r.key(), set()).update(r.nodelist)
    observations = [attribution.Observation(key=v.key, verdict=v.verdict, nodes=tuple(sorted(nodes.get(v.key, ()))),
                                            b_vs_history=v.effect, basis=v.basis, history_runs=v.history_runs)
                    for v in verdicts]
    if not attribution.needing_a_cause(observations):
        return {}
    records = [r.to_dict() for r in results]
    found = attribution.attribute(observations, evidence.probe_flags(records, history),
                                  evidence.link_flags(records, history))
    return attribution.sentences(found)


def _collectives(results: Sequence[Result]) -> Optional[Analysis]:
    """The sweep analysis when the results hold forced collective algorithms (the weekly sweep)."""
    if not any(r.parameters.get("algorithm") not in (None, DEFAULT) for r in results):
        return None

    version = toolchain.load(toolchain.default_path()).mpi["version"]
    return analyse([r.to_dict() for r in results], algorithms.load(version), version)
