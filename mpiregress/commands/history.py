"""``mpiregress history``: import runs into the history, accept MR runs, list, export, scan for change points,
copy a whole history between stores (SQLite file, PostgreSQL server)."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from mpiregress.errors import OK, InputError
from mpiregress.history import copy as history_copy
from mpiregress.history import store as history
from mpiregress.history import url as history_url
from mpiregress.verdict import changepoint


def _db_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--db", default=None, help=history_url.DB_HELP)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("history", help="the history of results (SQLite file or PostgreSQL): import, accept, list, "
                                       "export, changes, copy")
    verbs = p.add_subparsers(dest="verb", metavar="VERB")
    verbs.required = True

    imp = verbs.add_parser("import", help="import results.json file(s), one run each")
    imp.add_argument("results", type=Path, nargs="+", help="results.json file(s)")
    _db_option(imp)
    imp.add_argument("--run-id", help="id of the run (default: a digest of the file, so re-imports are no-ops)")
    imp.add_argument("--kind", choices=history.KINDS, default="schedule",
                     help="schedule and merge runs join the reference history; mr and manual runs wait for 'accept'")
    imp.add_argument("--new-toolchain", action="store_true",
                     help="start a new toolchain's series deliberately (otherwise a toolchain change is refused)")
    imp.set_defaults(func=run_import)

    acc = verbs.add_parser("accept", help="make an MR run part of the reference history (after its merge)")
    acc.add_argument("run_id")
    _db_option(acc)
    acc.set_defaults(func=run_accept)

    lst = verbs.add_parser("list", help="list the imported runs (or the series)")
    _db_option(lst)
    lst.add_argument("--series", action="store_true", help="list the accepted series instead of the runs")
    lst.set_defaults(func=run_list)

    exp = verbs.add_parser("export", help="write the measurements as CSV")
    _db_option(exp)
    exp.add_argument("--out", type=Path, default=None, help="CSV file (default: standard output)")
    exp.add_argument("--system")
    exp.add_argument("--accepted-only", action="store_true")
    exp.set_defaults(func=run_export)

    chg = verbs.add_parser("changes", help="change points of every accepted series (the weekly scan)")
    _db_option(chg)
    chg.add_argument("--since", help="only change points from this ISO date on, e.g. 2025-05-01")
    chg.add_argument("--store", action="store_true",
                     help="also keep them in the history (table change_points; Grafana's annotations)")
    chg.set_defaults(func=run_changes)

    cp = verbs.add_parser("copy", help="copy a whole history to another store (SQLite <-> PostgreSQL), counts checked")
    cp.add_argument("--from", dest="source", required=True, help="the history to copy: a file or a postgresql:// URL")
    cp.add_argument("--to", dest="destination", required=True,
                    help="where to: a file or a postgresql:// URL (created or migrated; runs it holds are kept)")
    cp.set_defaults(func=run_copy)


def run_import(args: argparse.Namespace) -> int:
    if args.run_id and len(args.results) > 1:
        raise InputError("--run-id names one run: import one results file at a time with it")
    with history.open_history(args.db) as db:
        for path in args.results:
            summary = db.import_results(history.read_results_file(path), run_id=args.run_id, kind=args.kind,
                                        new_toolchain=args.new_toolchain, source=str(path))
            state = "imported" if summary.created else "already imported (unchanged)"
            role = "accepted" if summary.accepted else "not accepted until merged"
            print(f"{path}: run {summary.run_id} {state}, {summary.rows} measurements, {role}")
    return OK


def run_accept(args: argparse.Namespace) -> int:
    with history.open_history(args.db) as db:
        db.accept(args.run_id)
    print(f"run {args.run_id} is now part of the reference history")
    return OK


def run_list(args: argparse.Namespace) -> int:
    with history.open_history(args.db) as db:
        print(f"history {db.path}: {db.journal.sentence()}")
        if args.series:
            for key in db.series_keys():
                print(f"{key.name()}: {len(db.series_runs(key))} accepted runs")
            return OK
        print(f"{'run id':<28} {'kind':<8} {'acc':<3} {'time':<25} {'rows':>6}  commit / pipeline / toolchain")
        for run in db.runs():
            print(f"{run.run_id:<28} {run.kind:<8} {'yes' if run.accepted else 'no':<3} {run.time:<25} "
                  f"{run.rows:>6}  {run.commit or '-'} / {run.pipeline or '-'} / {','.join(run.toolchains) or '-'}")
    return OK


def run_export(args: argparse.Namespace) -> int:
    filters = {"system": args.system, "accepted": True if args.accepted_only else None}
    with history.open_history(args.db) as db:
        if args.out:
            args.out.parent.mkdir(parents=True, exist_ok=True)
            with open(args.out, "w", newline="") as handle:
                count = db.export_csv(handle, **filters)
            print(f"{count} measurements written to {args.out}")
        else:
            db.export_csv(sys.stdout, **filters)
    return OK


def run_changes(args: argparse.Namespace) -> int:
    with history.open_history(args.db) as db:
        found = changepoint.scan(db, since=args.since)
        stored = db.store_change_points(found) if args.store else None
    if stored is not None:
        print(f"{stored} new change point(s) stored in {db.path}")
    if not found:
        print("no change point in any accepted series")
    for points in found.values():
        for cp in points:
            print(cp.sentence())
    return OK


def run_copy(args: argparse.Namespace) -> int:
    source_at = history_url.resolve(args.source)
    destination_at = history_url.resolve(args.destination)
    if history_url.display(source_at) == history_url.display(destination_at):
        raise InputError(f"--from and --to are the same history ({history_url.display(source_at)}): nothing to copy")
    source = history.open_existing(source_at)
    if source is None:
        raise InputError(f"history {history_url.display(source_at)} does not exist (or holds no history): "
                         f"nothing to copy")
    with source, history.open_history(destination_at) as destination:
        summary = history_copy.copy(source, destination)
        print(summary.sentence(str(source.path), str(destination.path)))
    return OK
