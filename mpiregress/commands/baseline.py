"""``mpiregress baseline propose``: new baseline values and tolerances from the history, as a diff to review."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from mpiregress import paths
from mpiregress.errors import OK, InputError
from mpiregress.history import url as history_url
from mpiregress.history.store import open_existing
from mpiregress.model.baselines import for_system
from mpiregress.model.names import SYSTEMS
from mpiregress.report.gitlab import Settings, propose_merge_request
from mpiregress.report.gitlab.changes import Change, check_path
from mpiregress.report.proposal_text import render
from mpiregress.verdict.propose import Proposal, propose


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("baseline", help="baselines from the history")
    verbs = p.add_subparsers(dest="verb", metavar="VERB")
    verbs.required = True
    pro = verbs.add_parser("propose", help="print a unified diff of proposed baselines (nothing is written by default)")
    pro.add_argument("--system", required=True, choices=SYSTEMS)
    pro.add_argument("--db", default=None, help=history_url.DB_HELP)
    pro.add_argument("--baselines-dir", type=Path, default=None,
                     help="default: $MPIREGRESS_BASELINES_DIR or baselines/")
    pro.add_argument("--toolchain", help="toolchain of the proposal (default: the current file's)")
    pro.add_argument("--write", type=Path, metavar="PATH", help="also write the proposed file to PATH")
    pro.add_argument("--accept-anomalies", action="store_true",
                     help="propose values for series that cross-method consistency flags or whose level changed "
                          "recently (held back by default); the evidence still names what was found")
    pro.add_argument("--evidence", type=Path, metavar="PATH",
                     help="write the evidence per series (proposed and held back) as JSON to PATH")
    pro.add_argument("--description", type=Path, metavar="PATH",
                     help="write the evidence per series as Markdown (the merge request's description) to PATH")
    pro.add_argument("--merge-request", action="store_true",
                     help="push the proposed file to the branch mpiregress/baselines-<system> and open or update "
                          "its one merge request with the evidence per series (token: $MPIREGRESS_GITLAB_TOKEN; "
                          "without it, or outside GitLab CI, one sentence and exit 0; docs/gitlab.md)")
    pro.set_defaults(func=run_propose)


def run_propose(args: argparse.Namespace) -> int:
    directory = args.baselines_dir or paths.baselines_dir()
    path = Path(directory) / f"{args.system}.yaml"
    current = for_system(args.system, Path(directory)) if path.exists() else None
    history = open_existing(args.db)
    if history is None:
        raise InputError(f"history {history_url.display(history_url.resolve(args.db))} does not exist: "
                         f"nothing to propose from")
    with history:
        proposal = propose(history, args.system, current, path, toolchain=args.toolchain,
                           source=str(history.path), accept_anomalies=args.accept_anomalies)
    for line in proposal.changed:
        print(f"proposed: {line}", file=sys.stderr)
    for line in proposal.held_back:
        print(f"held back: {line}", file=sys.stderr)
    for line in proposal.kept:
        print(f"kept: {line}", file=sys.stderr)
    for line in proposal.notes:
        print(f"note: {line}", file=sys.stderr)
    if proposal.held_back and not args.accept_anomalies:
        print(f"{len(proposal.held_back)} series held back; --accept-anomalies proposes them anyway",
              file=sys.stderr)
    sys.stdout.write(proposal.diff or f"# no change proposed for {proposal.relpath}\n")
    if args.evidence:
        args.evidence.parent.mkdir(parents=True, exist_ok=True)
        args.evidence.write_text(json.dumps({
            "system": proposal.system, "file": proposal.relpath, "accept_anomalies": args.accept_anomalies,
            "notes": proposal.notes, "kept": proposal.kept,
            "series": [e.to_dict() for e in proposal.evidence]}, indent=2) + "\n")
        print(f"wrote the evidence of {len(proposal.evidence)} series to {args.evidence}", file=sys.stderr)
    if args.write:
        args.write.parent.mkdir(parents=True, exist_ok=True)
        args.write.write_text(proposal.text)
        print(f"wrote the proposed file to {args.write}", file=sys.stderr)
    if args.description or args.merge_request:
        _publish(proposal, args, source=str(history.path))
    return OK


def _publish(proposal: Proposal, args: argparse.Namespace, source: str) -> None:
    """Write the Markdown evidence (``--description``) and open or update the merge request (``--merge-request``)."""

    settings = Settings.from_env()
    description = render(proposal, source=source, pipeline_url=settings.pipeline_url,
                         accept_anomalies=args.accept_anomalies)
    if args.description:
        args.description.parent.mkdir(parents=True, exist_ok=True)
        args.description.write_text(description)
        print(f"wrote the merge request description to {args.description}", file=sys.stderr)
    if not args.merge_request:
        return
    changes = []
    if proposal.diff:
        # The file as the proposal wrote it, at its repository path: the diff's own path, checked like a diff's.
        changes.append(Change(check_path(proposal.relpath, f"the proposal for {args.system}"), proposal.text,
                              proposal.path.exists()))
    propose_merge_request(changes, description, settings=settings)
