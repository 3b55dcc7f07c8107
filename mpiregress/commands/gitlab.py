"""``mpiregress gitlab``: publish Markdown to GitLab (MR note, weekly issue, baseline proposal MR).

Thin: read the files, call mpiregress.report.gitlab, print its one sentence. Exit 0 whether or not
anything could be published (no token, not a merge request pipeline, GitLab refused: one sentence);
exit 2 only for a bad input file or argument, with one sentence.
"""
from __future__ import annotations

import argparse
from pathlib import Path

from mpiregress.errors import OK, InputError
from mpiregress.model.names import SYSTEMS
from mpiregress.paths import REPO_ROOT
from mpiregress.report.gitlab import (
    changes_from_diff,
    changes_from_files,
    propose_merge_request,
    report_link,
    upsert_mr_note,
    upsert_weekly_issue,
)
from mpiregress.report.gitlab.settings import check_key


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("gitlab", help="publish to GitLab: the MR note, the weekly issue, the baseline proposal MR "
                                      "(token: $MPIREGRESS_GITLAB_TOKEN; exit 0 even when nothing is published)")
    verbs = p.add_subparsers(dest="verb", metavar="VERB")
    verbs.required = True

    note = verbs.add_parser("note", help="create or update this merge request's comment for KEY (one per MR and key)")
    note.add_argument("--key", required=True, help="what the comment is about, e.g. the system: iris")
    note.add_argument("--body", required=True, type=Path, help="Markdown file: the comment")
    note.add_argument("--report", metavar="PATH",
                      help="artifact path of the HTML report (relative to the project folder, e.g. "
                           "reports/iris/index.html): a 'View report' link to it in this job's artifacts "
                           "is added at the end")
    note.set_defaults(func=run_note)

    issue = verbs.add_parser("weekly-issue", help="create or update the weekly issue of SYSTEM (label "
                                                  "mpiregress::weekly); --clean closes it, a finding reopens it")
    issue.add_argument("--system", required=True, choices=SYSTEMS)
    issue.add_argument("--body", required=True, type=Path, help="Markdown file: the issue's description")
    issue.add_argument("--clean", action="store_true",
                       help="the week had nothing to look at: close the issue (do not open one)")
    issue.add_argument("--title", help="issue title (default: 'mpiregress weekly: SYSTEM')")
    issue.add_argument("--report", metavar="PATH", help="artifact path of the HTML report, linked at the end")
    issue.set_defaults(func=run_issue)

    mr = verbs.add_parser("proposal-mr", help="push the baseline proposal to a branch and open or update its one "
                                              "merge request")
    source = mr.add_mutually_exclusive_group(required=True)
    source.add_argument("--diff", type=Path, help="unified diff with repository-relative paths (baselines/*.yaml)")
    source.add_argument("--file", action="append", metavar="REPO_PATH=LOCAL_FILE",
                        help="new content of a baselines file, e.g. baselines/iris.yaml=proposed.yaml (repeatable)")
    mr.add_argument("--description", required=True, type=Path,
                    help="Markdown file: the merge request's description (the evidence per series)")
    mr.add_argument("--title", help="merge request title (default: 'Baselines: proposal for <files>')")
    mr.add_argument("--branch", help="source branch (default: mpiregress/baselines-<system>)")
    mr.add_argument("--root", type=Path, default=REPO_ROOT,
                    help="repository checkout the diff applies to (default: this checkout)")
    mr.set_defaults(func=run_proposal)


def _read(path: Path, what: str, may_be_empty: bool = False) -> str:
    """A (non-empty unless ``may_be_empty``) text file's content; InputError (exit 2, one sentence) otherwise."""
    try:
        text = path.read_text()
    except FileNotFoundError as err:
        raise InputError(f"{what} {path} does not exist") from err
    except (OSError, UnicodeDecodeError) as err:
        raise InputError(f"cannot read {what} {path}: {getattr(err, 'strerror', None) or err}") from err
    if not text.strip() and not may_be_empty:
        raise InputError(f"{what} {path} is empty")
    return text


def _with_report(body: str, report: str | None) -> str:

    link = report_link(report) if report else ""
    return f"{body.rstrip()}\n\n{link}\n" if link else body


def run_note(args: argparse.Namespace) -> int:

    try:
        check_key(args.key)
    except ValueError as err:
        raise InputError(f"--key: {err}") from err
    upsert_mr_note(_with_report(_read(args.body, "the note body"), args.report), args.key)
    return OK


def run_issue(args: argparse.Namespace) -> int:

    upsert_weekly_issue(args.system, _with_report(_read(args.body, "the issue body"), args.report),
                        clean=args.clean, title=args.title)
    return OK


def run_proposal(args: argparse.Namespace) -> int:

    description = _read(args.description, "the merge request description")
    if args.diff is not None:
        diff = _read(args.diff, "the diff", may_be_empty=True)
        changes = changes_from_diff(diff, args.root, source=f"the diff {args.diff}")
    else:
        files = {}
        for item in args.file:
            repo_path, sep, local = item.partition("=")
            if not sep or not repo_path or not local:
                raise InputError(f"--file {item}: expected REPO_PATH=LOCAL_FILE, e.g. "
                                 f"baselines/iris.yaml=proposed.yaml")
            files[repo_path] = Path(local)
        changes = changes_from_files(files, args.root)
    try:
        propose_merge_request(changes, description, title=args.title, branch=args.branch)
    except ValueError as err:      # a branch or file name that cannot be a branch name: the caller's input
        raise InputError(str(err)) from err
    return OK
