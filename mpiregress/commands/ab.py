"""``mpiregress ab``: judge an A/B run of a toolchain MR (exit 0 pass, 1 regression, 2 error).

Reads the A/B result records (a JSON list, each tagged ``ab_side``/``ab_pair``, see
:mod:`mpiregress.ab.plan`), judges every series by its paired log-ratios
(:mod:`mpiregress.ab.paired`), falls back to the history gate for series with
no A, names a cause for each failing series (:mod:`mpiregress.ab.attribution`,
with the noise probe and link matrix findings when given) and writes the MR
report's A/B section.
"""
from __future__ import annotations

import argparse
import statistics
from pathlib import Path
from typing import Any, Optional

from .. import jsonfile, paths
from ..ab import attribution, paired
from ..ab import report as ab_report
from ..errors import InputError
from ..gate import GateConfig
from ..names import METRICS


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("ab", help="judge an A/B run (B = the MR's build, A = the target branch's) on the same nodes")
    p.add_argument("results", type=Path, help="A/B result records (JSON list with ab_side, ab_pair, nodelist)")
    p.add_argument("--db", type=Path, default=None,
                   help="history file, for series with no A and for 'system' attribution "
                        "(default: $MPIREGRESS_HISTORY_DB or var/history.sqlite, when it exists)")
    p.add_argument("--noise-probe", type=Path, help="JSON {node: [efficiency, [low, high]]} of this allocation")
    p.add_argument("--links", type=Path, help="JSON {bad_nodes: [...], bad_links: [[a, b], ...]} of the link matrix")
    defaults = paired.PairedConfig()
    p.add_argument("--alpha", type=float, default=defaults.alpha, help="family-wise error over the MR's series")
    p.add_argument("--min-effect", type=float, default=defaults.min_effect["latency"],
                   help="relative effect below which a series never fails")
    p.add_argument("--markdown", type=Path, help="write the A/B section (Markdown) here")
    p.add_argument("--html", type=Path, help="write the A/B section (HTML fragment) here")
    p.set_defaults(func=run)


def _history_inputs(records: list[dict[str, Any]], db: Optional[Path]) -> tuple[dict, dict, dict]:
    """(runs for the gate fallback, A vs history, B vs history) per series, from the history file if any."""
    path = Path(db) if db else paths.history_db()
    if not path.exists():
        return {}, {}, {}
    from ..history import open_history

    history = open_history(path)
    runs: dict = {}
    a_vs: dict = {}
    b_vs: dict = {}
    try:
        groups: dict[Any, dict[str, list[float]]] = {}
        for r in records:
            if r.get("status") in ("pass", "fail") and r.get("value") is not None:
                groups.setdefault(paired.series_key(r), {"A": [], "B": []})[r.get("ab_side", "B")].append(
                    float(r["value"]))
        for key, sides in groups.items():
            points = history.series_runs(key, last=GateConfig().noise_runs)
            runs[key] = [list(p.samples) for p in points]
            if len(points) < GateConfig().min_runs:
                continue
            level = statistics.median(statistics.median(p.samples) for p in points[-GateConfig().last_runs:])
            sign = -1 if METRICS[key.metric].higher_is_better else 1
            for side, out in (("A", a_vs), ("B", b_vs)):
                if sides[side]:
                    out[key] = sign * (statistics.median(sides[side]) - level) / level
    finally:
        history.close()
    return runs, a_vs, b_vs


def run(args: argparse.Namespace) -> int:
    records = jsonfile.read(args.results, "A/B results file")
    if not isinstance(records, list) or not all(isinstance(r, dict) for r in records):
        raise InputError(f"A/B results file {args.results} is not a list of result records")
    config = paired.PairedConfig(alpha=args.alpha, min_effect={m: args.min_effect for m in METRICS})
    history_runs, a_vs, b_vs = _history_inputs(records, args.db)
    try:
        verdicts = paired.judge(records, config, history=history_runs)
    except KeyError as err:
        raise InputError(f"A/B results file {args.results} has a record without {err}") from None
    noise = jsonfile.read(args.noise_probe, "noise probe record") if args.noise_probe else None
    links = jsonfile.read(args.links, "link matrix findings") if args.links else None
    if noise is not None:
        noise = {node: (float(eff), (float(band[0]), float(band[1]))) for node, (eff, band) in noise.items()}
    observations = [attribution.observation(v, a_vs.get(v.key), b_vs.get(v.key)) for v in verdicts]
    causes = attribution.sentences(attribution.attribute(observations, noise, links, args.min_effect))
    for row in ab_report.rows(verdicts, causes):
        print(f"{row.verdict:<12} {row.series:<48} {row.effect_text:>7} {row.interval_text:>17}  "
              f"{row.pairs} pairs")
        if row.verdict != "pass":
            print(f"{'':<12} {row.cause or row.reason}")
    if args.markdown:
        Path(args.markdown).parent.mkdir(parents=True, exist_ok=True)
        Path(args.markdown).write_text(ab_report.markdown(verdicts, causes, config))
    if args.html:
        Path(args.html).parent.mkdir(parents=True, exist_ok=True)
        Path(args.html).write_text(ab_report.html(verdicts, causes, config))
    code = paired.exit_code(verdicts)
    print(f"exit {code}")
    return code
