"""A toolchain MR's A/B run inside ``mpiregress run``: A found and planned, more rounds while a
series is inconclusive (the sequential looks), and the A/B verdict and its reports."""
from __future__ import annotations

import dataclasses
import json
import re
import secrets
import sys
from pathlib import Path
from typing import Any, Sequence

from mpiregress.builds import unavailable_reason
from mpiregress.errors import InputError
from mpiregress.model import results
from mpiregress.model.systems import get
from mpiregress.report import ab as ab_report
from mpiregress.report import summary, verdict_text
from mpiregress.run import folder as run_folder
from mpiregress.run import reframe_report
from mpiregress.run.ab import sides
from mpiregress.run.infrastructure import classify_infrastructure
from mpiregress.run.on_demand_builds import check_binaries
from mpiregress.run.options import (
    RunOptions,
    commit,
    log,
)
from mpiregress.run.reframe_launch import (
    reframe_run,
)
from mpiregress.verdict import compose
from mpiregress.verdict.ab import judge as ab_judge
from mpiregress.verdict.ab import paired
from mpiregress.verdict.ab.sequential import Schedule, schedule_of


def adopt_junit(folder: run_folder.RunFolder, opts: RunOptions, judged: compose.PipelineVerdict) -> None:
    """junit.xml is the verdict's (ReFrame's own, which knows nothing of baselines, is reframe-junit.xml)."""
    folder.write("junit.xml", verdict_text.junit_xml(judged))


def prepare_ab(opts: RunOptions, methods: list[str], env: dict[str, str], manifest_dir: Path,
                folder: run_folder.RunFolder) -> Any:
    """Find A (given folder, manifest store, or built at the merge base), refuse a mismatched A and B,
    and hand A's folder and the pair count to the A/B check through its environment."""

    system = get(opts.system)
    partition = opts.partition or system.partitions[0].name
    if opts.dry_run:
        # The job scripts show the interleaved order with the planned builds on both sides.
        found = sides.FoundA(manifest_dir, "given", "dry run: A and B are both the planned builds")
    else:
        log(f"finding A (the {opts.ab_branch} branch's build) for --ab-against {opts.ab_against}")
        found = sides.find(opts.ab_against or "auto", system=opts.system, partition=partition, methods=methods,
                           branch=opts.ab_branch, store=system.ab_store(), b_dir=manifest_dir)
    pairing = sides.pair_builds(found.directory, manifest_dir, methods)
    if found.directory is not None and not opts.dry_run:
        check_binaries(found.directory, list(pairing.pairs), opts)
    env["MPIREGRESS_AB_MANIFEST_DIR"] = str(found.directory or "")
    schedule = ab_schedule(opts)
    # A new seed per run: no rhythm of the host's load can side with B run after run (plan.block_flipped).
    seed = env.get("MPIREGRESS_AB_ORDER_SEED") or secrets.token_hex(8)
    env.update(MPIREGRESS_AB_PAIRS=str(schedule.initial_pairs), MPIREGRESS_AB_FIRST_PAIR="0",
               MPIREGRESS_AB_LOOK="1", MPIREGRESS_AB_MAX_PAIRS=str(schedule.max_pairs),
               MPIREGRESS_AB_ORDER_SEED=seed)
    record = {**found.to_dict(), "order_seed": seed,
              "pairs": {m: [str(a.path), str(b.path)] for m, (a, b) in pairing.pairs.items()}, "b_only": pairing.b_only}
    folder.write("ab-a.json", json.dumps(record, indent=2) + "\n")
    folder.step(found.sentence)
    log(found.sentence + ("" if found.directory else ": the series are judged by the history gate"))
    return found


def ab_schedule(opts: RunOptions) -> Any:
    """The run's A/B pairs budget: the system's ``ab:`` keys, --ab-pairs and --ab-max-pairs over them."""

    base = schedule_of(get(opts.system))
    initial = opts.ab_pairs or base.initial_pairs
    most = opts.ab_max_pairs or max(base.max_pairs, initial)
    if most < initial:
        raise InputError(f"--ab-max-pairs {most} is below the {initial} pairs of the first look")
    return Schedule(initial_pairs=initial, look_every=base.look_every, max_pairs=most)


def ab_series_filter(keys: Sequence[Any]) -> list[str]:
    """ReFrame ``-n`` patterns selecting exactly these series' A/B tests (parameters in any order)."""
    patterns = []
    for key in keys:
        wanted = {"build_method": key.method, "metric": key.metric, "placement": key.placement}
        patterns += ["-n", "^OsuAbCheck" + "".join(f"(?=.*%{n}={re.escape(str(v))}(%|$))"
                                                     for n, v in wanted.items())]
    return patterns


def ab_more_rounds(loaded: list[results.Result], opts: RunOptions, methods: list[str], env: dict[str, str],
                    folder: run_folder.RunFolder, toolchain_name: str) -> tuple[list[results.Result], list[str]]:
    """The sequential A/B run: after each look, the series still inconclusive beyond the minimum effect get
    the next round of pairs (one ReFrame run per partition and node set, pinned to the series' nodes; in the
    CI job's own allocation on the clusters), until none is left or the budget is spent. Returns every
    sample (no round replaces an earlier one) and one sentence per extra round."""

    schedule = ab_schedule(opts)
    sizes = schedule.look_sizes()
    notes: list[str] = []
    rounds = 0
    # Each pass gives every series that wants more its own next look (by the pairs it has): a series whose power
    # fell short only after later rounds of other series widened its class's pool catches up at the same look
    # sizes, instead of ending "not a pass after 8 of 10 pairs" (a comment-only MR, 2026-11-27). Every round
    # adds pairs, and no series goes beyond the budget: the passes end.
    while True:
        records = [r for r in ab_judge.records(loaded) if "ab_side" in r]
        try:
            config = ab_judge.with_target(records)
            verdicts = paired.judge(records, config)
        except (InputError, KeyError):
            break   # the final verdict says why, after every sample is kept
        more = set(paired.continuing(verdicts, config))
        groups: dict[tuple[int, str, tuple[str, ...]], list[Any]] = {}
        for v in verdicts:
            done = v.pairs + v.dropped
            look = next((j for j, size in enumerate(sizes, 1) if size > done), None)
            if v.key in more and look is not None and look >= 2:
                groups.setdefault((look, v.key.partition, v.nodes), []).append(v.key)
        if not groups:
            break
        measured = 0
        for (look, partition, nodes), keys in sorted(groups.items()):
            first, count = sizes[look - 2], sizes[look - 1] - sizes[look - 2]
            names = ", ".join(k.name() for k in keys)
            note = (f"look {look}: {len(keys)} series still inconclusive beyond the minimum effect or short of "
                    f"the power target get pairs "
                    f"{first}-{first + count - 1} on {','.join(nodes) or 'any node'}: {names}")
            log(note)
            folder.step(note)
            found = ab_round(opts, env, folder, keys, partition, nodes, look, first, count,
                              opts.report_dir / f"ab-look-{look}" / f"{partition}-{rounds}", toolchain_name)
            rounds += 1
            loaded = loaded + found
            samples = sum('ab_side' in r.conditions for r in found)
            measured += samples
            notes.append(note + f" ({samples} samples)")
        if not measured:
            break   # rounds that measured nothing (ReFrame wrote no report) would be asked for again
    return loaded, notes


def ab_round(opts: RunOptions, env: dict[str, str], folder: run_folder.RunFolder, keys: Sequence[Any],
              partition: str, nodes: Sequence[str], look: int, first: int, count: int, round_dir: Path,
              toolchain_name: str) -> list[results.Result]:
    """One extra round of pairs for ``keys`` (same partition and nodes) through the same check and launch path."""

    round_dir.mkdir(parents=True, exist_ok=True)
    round_opts = dataclasses.replace(
        opts, report_dir=round_dir, partition=partition, methods=sorted({k.method for k in keys}),
        metrics=sorted({k.metric for k in keys}), placements=sorted({k.placement for k in keys}), repeat=1)
    round_env = {**env, "MPIREGRESS_AB_FIRST_PAIR": str(first), "MPIREGRESS_AB_PAIRS": str(count),
                 "MPIREGRESS_AB_LOOK": str(look)}
    extra = ab_series_filter(keys)
    if nodes and not env.get("MPIREGRESS_IN_ALLOCATION"):
        extra += ["-J", f"nodelist={','.join(nodes)}"]    # the same nodes as the earlier pairs
    # The run's own ReFrame path: a signal stops this round's ReFrame and cancels its jobs like the first.
    proc = reframe_run(round_opts, sorted({k.method for k in keys}), round_env, folder, extra)
    report = round_dir / "reframe-report.json"
    if not report.exists():
        log(f"look {look}: ReFrame exited with code {proc.returncode} and wrote no report (see "
             f"{round_dir / 'reframe.out'}); the series keep the pairs measured before")
        return []
    return reframe_report.load(report, toolchain_name, opts.commit or commit(), opts.pipeline)


def ab_verdict(loaded: list[results.Result], opts: RunOptions, folder: run_folder.RunFolder,
                env: dict[str, str], found_a: Any, rounds: Sequence[str] = ()) -> int:
    """Judge an A/B run by its pairs and write summary.md, junit.xml, report.html with the A/B section.

    Every sample is kept (results.json: one Result per sample, side and pair in ``conditions``;
    ab-samples.json: the records the judge read) before anything is judged.
    """

    classify_infrastructure(loaded, env)
    folder.write("results.json", results.dump(loaded))
    records = ab_judge.records(loaded)
    folder.write("ab-samples.json", json.dumps(records, indent=2) + "\n")
    folder.step(f"ReFrame report read: {len(records)} A/B sample(s) kept in ab-samples.json")
    samples = [r for r in records if "ab_side" in r]
    verdicts, causes = ab_judge.judge_run(samples)
    # A test case that measured no step at all (skipped placement, refused build) is its series' row.
    judged = {v.key for v in verdicts}
    for r in loaded:
        if "ab_side" not in r.conditions and r.key() not in judged:
            judged.add(r.key())
            verdicts.append(paired.PairedVerdict(key=r.key(), verdict=r.status if r.status == "skip" else "error",
                                                 reason=r.reason or "nothing measured", basis="none",
                                                 metric=r.metric, unit=r.unit, nodes=tuple(r.nodelist)))
    # A method that cannot build on this machine at all (no Spack here) is skipped with its reason, as in a
    # run that builds on demand; one whose build could have run but left nothing measured is an error.
    unavailable = {m: why for m in opts.methods or [] if (why := unavailable_reason(m))}
    problems = summary.require_methods(loaded, [m for m in opts.methods or [] if m not in unavailable])
    event = opts.event if opts.event != "run" else "toolchain_mr"
    decided = compose.compose(event, compose.Evidence(paired=verdicts, causes=causes, problems=problems,
                                                      results=[r for r in loaded if r.status == "error"]))
    code = compose.exit_code(decided, opts.measure_only)
    title = f"A/B run: {opts.system}" + (f":{opts.partition}" if opts.partition else "")
    notes = [found_a.sentence + ("" if found_a.directory else ": no pairs, every series is judged by the "
                                                               "history gate")] + list(rounds) + problems + [
        f"{m} skipped: {why}" for m, why in unavailable.items()]
    section = ab_report.markdown(verdicts, causes)
    top = verdict_text.markdown(decided, heading="##", measure_only=opts.measure_only)
    folder.write("summary.md", f"# {title}\n\n{top}\n" + "".join(f"- {n}\n" for n in notes) + "\n" + section)
    adopt_junit(folder, opts, decided)
    folder.write("verdict.json", json.dumps(decided.to_dict(), indent=2) + "\n")
    rows = ab_report.rows(verdicts, causes)
    folder.write("report.html", ab_report.html_page(ab_report.html(verdicts, causes), title, notes))
    print()
    for row in rows:
        print(f"{row.verdict:<12} {row.series:<52} {row.effect_text:>7} {row.interval_text:>17}  {row.pairs} pairs")
        if row.verdict != "pass":
            print(f"{'':<12} {row.cause or row.reason}")
    for problem in problems:
        print(f"mpiregress run: error: {problem}", file=sys.stderr)
    print(verdict_text.headline(decided, opts.measure_only))
    folder.write_status("finished", code)
    log(f"A/B reports in {opts.report_dir} (summary.md, junit.xml, report.html, ab-samples.json); exit {code}")
    return code
