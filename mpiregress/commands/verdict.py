"""``mpiregress verdict``: the pipeline's one verdict job (one per system).

The measurement jobs (run, A/B) exit 0 when they measured and leave their results as artifacts;
this command reads them all, runs every judge the event asks for (the history gate; the paired A/B
verdicts again from the kept samples; on the schedule, a re-measurement of the history gate's
regressions), composes the one verdict (:mod:`mpiregress.verdict.compose`, rules in
``verdict/gating.yaml``) and writes every surface from it: report.html, summary.md, junit.xml and
verdict.json. Its exit code is the verdict's: 0 pass, 5 needs a look, 1 regression, 2 error,
3 infrastructure, 4 not available.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING, Optional, Sequence

from mpiregress import paths
from mpiregress.commands.compare import add_gate_options, build_report, gate_config
from mpiregress.commands.confirm import confirmations as confirm_run
from mpiregress.errors import InputError, MpiRegressError
from mpiregress.history import url as history_url
from mpiregress.history.store import open_existing, read_results_file
from mpiregress.model import inputs
from mpiregress.model.baselines import for_system
from mpiregress.model.results import Result, dump
from mpiregress.report import gitlab, html, junit, markdown, this_week, verdict_text
from mpiregress.run import cancel, outputs
from mpiregress.verdict import policy
from mpiregress.verdict.ab import judge as ab_judge
from mpiregress.verdict.band import apply_baselines
from mpiregress.verdict.compose import Evidence, PipelineVerdict
from mpiregress.verdict.history_gate import load_baselines
from mpiregress.verdict.propose import propose

if TYPE_CHECKING:
    from mpiregress.report import ReportData


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("verdict", help="the pipeline's verdict: judge every measurement job's results by the "
                                       "event's gating rules and write report, summary, JUnit and verdict.json")
    add_gate_options(p)
    p.set_defaults(event=None)
    p.add_argument("more_results", nargs="*", type=Path, help="more results.json files (other partitions)")
    p.add_argument("--ab", type=Path, action="append", default=[], metavar="DIR",
                   help="an A/B job's report folder (its ab-samples.json is judged again here)")
    p.add_argument("--out-dir", type=Path, required=True, help="where report.html, summary.md, junit.xml go")
    p.add_argument("--changed", type=Path, default=None,
                   help="file listing the paths the MR changes, one per line (default: git diff against "
                        "$CI_MERGE_REQUEST_DIFF_BASE_SHA when set)")
    p.add_argument("--confirm", action="store_true",
                   help="when the event confirms history regressions (schedule, default branch): measure them "
                        "again in a fresh allocation before they fail")
    p.add_argument("--iterations", type=int, help="confirmation: measured iterations (default: the check's)")
    p.add_argument("--no-publish", action="store_true",
                   help="in a pipeline, do not write the MR note (MR) or the weekly issue (schedule) on GitLab")
    p.set_defaults(func=run)


def changed_paths(listing: Optional[Path]) -> Optional[list[str]]:
    """The paths the MR changes: from ``listing``, else git against the MR's diff base (or its target
    branch), else None (not an MR, or git cannot say: then every baselines file counts as changed)."""
    if listing is not None:
        try:
            return [line.strip() for line in listing.read_text().splitlines() if line.strip()]
        except OSError as err:
            raise InputError(f"changed-paths file {listing} cannot be read: {err.strerror}") from None
    base = os.environ.get("CI_MERGE_REQUEST_DIFF_BASE_SHA") or (
        f"origin/{os.environ['CI_MERGE_REQUEST_TARGET_BRANCH_NAME']}"
        if os.environ.get("CI_MERGE_REQUEST_TARGET_BRANCH_NAME") else "")
    if not base:
        return None
    done = subprocess.run(["git", "diff", "--name-only", f"{base}...HEAD"], capture_output=True, text=True,
                          cwd=paths.REPO_ROOT, timeout=60)
    if done.returncode != 0:
        print(f"verdict: git cannot list the MR's changes against {base} ({done.stderr.strip()}): every "
              f"baselines file counts as changed")
        return None
    return done.stdout.split()


def _paired(folders: Sequence[Path], db: Optional[history_url.Location]) -> tuple[Optional[list], dict]:
    """Paired verdicts and causes of every A/B folder (None when no A/B job ran)."""

    if not folders:
        return None, {}
    verdicts: list = []
    causes: dict = {}
    for folder in folders:
        samples_file = folder / "ab-samples.json"
        if not samples_file.exists():
            raise InputError(f"A/B folder {folder} has no ab-samples.json: its job measured nothing (see its log)")
        records = inputs.read_json(samples_file, "A/B samples file")
        if not isinstance(records, list):
            raise InputError(f"A/B samples file {samples_file} is not a list of records")
        for index, record in enumerate(records):
            if isinstance(record, dict):
                samples = record.get("samples") if isinstance(record.get("samples"), list) else []
                inputs.check_physical(str(record.get("metric", "")), record.get("value"), samples,
                                      record.get("reference"), f"A/B samples file {samples_file}: record #{index}")
        found, why = ab_judge.judge_run([r for r in records if isinstance(r, dict) and "ab_side" in r], db)
        verdicts += found
        causes.update(why)
    return verdicts, causes


def _b_side(folders: Sequence[Path]) -> list[Result]:
    """B's measurement (one Result per series) of every A/B folder that kept its results.json."""

    out: list[Result] = []
    for folder in folders:
        if (folder / "results.json").exists():
            out += ab_judge.b_measurement(inputs.read_results(folder / "results.json", allow_empty=True))
    return out


def run(args: argparse.Namespace) -> int:
    out = args.out_dir
    # Rejected input or a cancelled confirmation: no earlier pipeline's verdict stays in --out-dir.
    with cancel.signals_cancel(), outputs.replaced_on_failure(
            "verdict", html=[out / "report.html"], markdown=[out / "summary.md"], junit=[out / "junit.xml"]):
        (out / "verdict.json").unlink(missing_ok=True)
        return _verdict(args)


def _verdict(args: argparse.Namespace) -> int:

    changed = changed_paths(args.changed)
    # In a pipeline the event is GitLab's; by hand it is the history gate as it stands, unless named.
    args.event = args.event or (policy.pipeline_event(os.environ, changed) if os.environ.get("CI_PIPELINE_SOURCE")
                                else "history")
    rules = policy.load()[args.event]
    # With A/B folders the run's file may be empty: on a toolchain MR run:* does not run (ci/jobs/verdict.sh).
    results: list[Result] = inputs.read_results(args.results, allow_empty=bool(args.ab))
    for more in args.more_results:
        results += read_results_file(more)
    # An MR's A/B job measured the MR's builds (its B side): that is the MR's measurement, so run:* did not run
    # again (docs/pipeline.md); series a run job did measure keep the run's.
    measured = {r.key() for r in results}
    b_side = [r for r in _b_side(args.ab) if r.key() not in measured]
    if b_side:
        # Judged against their bands here, as the run job judges its own (a baselines MR gates on them).

        books = load_baselines([r.system for r in b_side], args.baselines_dir or paths.baselines_dir())
        for system, book in books.items():
            apply_baselines([r for r in b_side if r.system == system], book, allow_missing=True)
    results += b_side
    if not results and not any((folder / "ab-samples.json").exists() for folder in args.ab):
        raise InputError(f"results file {args.results} holds no results and no A/B folder measured: there is "
                         f"nothing to judge")
    db_path = history_url.resolve(args.db)
    paired, causes = _paired(args.ab, db_path if history_url.exists(db_path) else None)
    confirmations = None
    notes: list[str] = []
    if rules.confirm_history and args.confirm:

        books = load_baselines([r.system for r in results], args.baselines_dir or paths.baselines_dir())
        history = open_existing(db_path)
        try:
            _, confirmations, text = confirm_run(results, history, books, gate_config(args),
                                                 args.out_dir / "confirm", args.iterations, args.exclude_run)
        finally:
            if history:
                history.close()
        notes.append(text.splitlines()[2])
    evidence = Evidence(paired=paired, causes=causes, confirmations=confirmations,
                        changed_methods=policy.changed_methods(changed or ()),
                        changed_baselines=policy.changed_baselines(changed))
    merged = args.out_dir / "results.json"
    if merged.resolve() != Path(args.results).resolve():
        args.out_dir.mkdir(parents=True, exist_ok=True)
        merged.write_text(dump(results))
    args.results = merged

    data = build_report(args, with_trends=True, evidence=evidence)
    data.notes += notes
    out = args.out_dir
    for path in (html.write(data, out / "report.html"), markdown.write(data, out / "summary.md"),
                 junit.write(data, out / "junit.xml")):
        print(f"wrote {path}")
    (out / "verdict.json").write_text(json.dumps(data.pipeline_verdict.to_dict(), indent=2) + "\n")
    print(verdict_text.markdown(data.pipeline_verdict))
    if os.environ.get("CI_PIPELINE_SOURCE") and not args.no_publish:
        weekly = (weekly_sections(data, db_path, args.baselines_dir or paths.baselines_dir())
                  if data.pipeline_verdict.event == "schedule" else "")
        publish(data.pipeline_verdict, out, weekly)
    return data.exit_code


def weekly_sections(data: "ReportData", db_path: history_url.Location, baselines_dir: Path) -> str:
    """What the weekly issue carries beyond the verdict: the week's changes and the held-back proposals.

    Both are decided elsewhere (the change points by the report's scan, what a proposal holds back by
    ``propose``); this only collects their sentences for the issue.
    """

    lines = ["### What changed this week", "", *(f"- {s}" for s in this_week.sentences(data)), ""]
    held: list[str] = []
    history = open_existing(db_path)
    if history is not None:
        try:
            for system in sorted({r.system for r in data.results}):
                path = baselines_dir / f"{system}.yaml"
                if not path.exists():
                    continue
                try:
                    proposal = propose(history, system, for_system(system, baselines_dir), path,
                                       source=str(history.path))
                except MpiRegressError as err:
                    held.append(f"{system}: no proposal: {err}")
                    continue
                held += [f"{system}: {line}" for line in proposal.held_back]
        finally:
            history.close()
    if held:
        lines += ["### Baseline proposals held back", "",
                  "The weekly proposal (job `proposal:<system>`) leaves these series' baselines as they are:", "",
                  *(f"- {line}" for line in held), ""]
    return "\n".join(lines)


def publish(verdict: PipelineVerdict, out: Path, weekly: str = "") -> None:
    """The verdict on GitLab: the MR's note (one per system, updated in place) or the system's weekly issue.

    Never changes the exit code: without a token or when GitLab refuses, one sentence in the log.
    """

    system = sorted({k.system for k in verdict.series}) or [os.environ.get("MPIREGRESS_SYSTEM", "mpiregress")]
    key = "-".join(system)
    try:
        where = str((out / "report.html").resolve().relative_to(Path(os.environ.get("CI_PROJECT_DIR", paths.REPO_ROOT))
                                                                .resolve()))
    except ValueError:
        where = str(out / "report.html")
    body = verdict_text.markdown(verdict, report_link=gitlab.artifact_url(where) or None)
    if verdict.event in ("toolchain_mr", "baselines_mr"):
        gitlab.upsert_mr_note(body, key)
    elif verdict.event == "schedule":
        clean = verdict.state == "pass" and not verdict.findings
        gitlab.upsert_weekly_issue(key, body + ("\n" + weekly if weekly else ""), clean)
