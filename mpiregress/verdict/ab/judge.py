"""Judge the samples of one A/B run: paired verdicts, history fallback and a cause per failing series.

The one place ``mpiregress ab`` (a records file) and ``mpiregress run --ab-against`` (a
run it just measured) turn A/B samples into verdicts and attribution sentences.
"""
from __future__ import annotations

import statistics
from dataclasses import replace
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence, Union

from mpiregress.errors import InputError
from mpiregress.history.store import History, open_existing
from mpiregress.model.names import METRICS
from mpiregress.model.results import AB_FIELDS, Result, aggregate
from mpiregress.model.systems import get as get_system
from mpiregress.verdict.ab import attribution, evidence, paired
from mpiregress.verdict.history_gate import GateConfig
from mpiregress.verdict.power import targets_of, tightest


def records(results: Sequence[Result]) -> list[dict[str, Any]]:
    """A/B result records (the shape :mod:`.paired` reads) from a run's Results: each Result is one
    sample; its side, pair, position and manifest are in its ``conditions``."""
    out = []
    for r in results:
        record = r.to_dict()
        for name in AB_FIELDS:
            if name in r.conditions:
                record[name] = r.conditions[name]
        if r.value is not None:
            record["samples"] = [r.value]
        out.append(record)
    return out


def b_measurement(results: Sequence[Result]) -> list[Result]:
    """The MR's own measurement from its A/B run: B's samples, one Result per series (median, samples kept).

    When ``ab:*`` runs on an MR, its B steps measured exactly what ``run:*`` would have (the MR's builds,
    the same check path, the same nodes), so the pipeline does not measure again: the verdict job judges
    these with the band, the history gate and the cross-method check as it would judge a run's. A's samples
    (the target branch) and B's failed steps (the pairs' verdict says why) are left out.
    """
    b_side = []
    for r in results:
        if r.conditions.get("ab_side") != "B" or r.status not in ("pass", "fail") or r.value is None:
            continue
        conditions = {k: v for k, v in r.conditions.items() if k not in AB_FIELDS}
        conditions["measured_by"] = "the A/B job's B side (the MR's builds)"
        b_side.append(Result(**{**r.to_dict(), "status": "pass", "reason": "", "samples": [],
                                "conditions": conditions}))
    return aggregate(b_side)


def history_inputs(records: Sequence[Mapping[str, Any]], history: Optional[History]
                   ) -> tuple[dict, dict, dict]:
    """(runs for the gate fallback, A vs history, B vs history) per series; empty without a history."""
    runs: dict = {}
    a_vs: dict = {}
    b_vs: dict = {}
    if history is None:
        return runs, a_vs, b_vs
    config = GateConfig()
    groups: dict[Any, dict[str, list[float]]] = {}
    for r in records:
        if r.get("status") in ("pass", "fail") and r.get("value") is not None:
            groups.setdefault(paired.series_key(r), {"A": [], "B": []})[r.get("ab_side", "B")].append(
                float(r["value"]))
    for key, sides in groups.items():
        points = history.series_runs(key, last=config.noise_runs)
        runs[key] = [list(p.samples) for p in points]
        if len(points) < config.min_runs:
            continue
        level = statistics.median(statistics.median(p.samples) for p in points[-config.last_runs:])
        sign = -1 if METRICS[key.metric].higher_is_better else 1
        for side, out in (("A", a_vs), ("B", b_vs)):
            if sides[side]:
                out[key] = sign * (statistics.median(sides[side]) - level) / level
    return runs, a_vs, b_vs


def with_target(ab_records: Sequence[Mapping[str, Any]], config: paired.PairedConfig = paired.PairedConfig()
                ) -> paired.PairedConfig:
    """``config`` with the A/B power target of the records' system (``power.paired_ab`` in its system file)
    when it names none: short of it, a series gets more pairs and, at the budget, "needs a look"."""
    if config.target is not None:
        return config
    systems = {str(r.get("system")) for r in ab_records if r.get("system")}
    declared = []
    for name in sorted(systems):
        try:
            declared.append(targets_of(get_system(name)).get("paired_ab"))
        except InputError:
            pass      # a system without a file (a test's, a site's own): no target declared
    # One A/B run is one system; were it several, the most demanding target holds.
    target = tightest(declared)
    return replace(config, target=target) if target is not None else config


def judge_run(ab_records: Sequence[Mapping[str, Any]], db: Union[Path, str, None] = None,
              config: paired.PairedConfig = paired.PairedConfig(), noise: Optional[Mapping] = None,
              links: Optional[Mapping] = None) -> tuple[list[paired.PairedVerdict], dict]:
    """(verdict per series, cause sentence per failing series) of one A/B run.

    ``noise`` (node -> (efficiency, usual band)) defaults to what the run's own noise probes recorded
    in the samples' conditions, ``links`` to the latest link matrix of the run's system and partition
    (:mod:`.evidence`)."""
    min_effect = max(config.min_effect.values())
    history = open_existing(db)
    try:
        history_runs, a_vs, b_vs = history_inputs(ab_records, history)
        verdicts = paired.judge(ab_records, with_target(ab_records, config), history=history_runs)
        observations = [attribution.observation(v, a_vs.get(v.key), b_vs.get(v.key)) for v in verdicts]
        causes: dict = {}
        if attribution.needing_a_cause(observations, min_effect):
            if noise is None:
                noise = evidence.probe_flags(ab_records, history)
            if links is None:
                links = evidence.link_flags(ab_records, history)
            causes = attribution.sentences(attribution.attribute(observations, noise, links, min_effect))
        for v in verdicts:
            if v.timed_out:
                # Only B's build differs between the two steps on the same nodes: nothing else explains it.
                causes[v.key] = ("toolchain: B's step did not finish within its limit where A's finished on the "
                                 "same nodes")
    finally:
        if history is not None:
            history.close()
    return verdicts, causes
