"""One linktest run judged: read its file, analyse it, write the artifacts, give the series.

The one path from a results file to a verdict, shared by the ReFrame check
(``checks/linktest.py``) and ``mpiregress links analyze``. A truncated or unfinished
file is analysed from every complete record and its problem is returned beside the
series (the run is an error; nothing measured is dropped).
"""
from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Sequence

from mpiregress.errors import InputError
from mpiregress.families.links import analysis, figures, output, resultsfile, series, sitetopology

# The artifacts of one run, in its output folder (the CI job keeps them, the HTML report shows them).
RESULTS_FILE = "links.bin"
ARTIFACTS = (RESULTS_FILE, "matrix.npz", "heatmap.png", "histogram.png", "bad_links.csv", "summary.txt")
# Marks the series judged within their own run (verdict.apply_baselines needs no baseline for them).
JUDGED_BY = "linktest analysis: every pair against the typical pair of its kind in the same run"
PROGRAM_PREFIX = "linktest: "
# A run short of its power measures further all-pairs rounds in its allocation (checks/linktest.py), each
# into a file of its own beside RESULTS_FILE: links-round-2.bin, links-round-3.bin, ...
ROUND_PATTERN = "links-round-*.bin"


@dataclass
class Judged:
    """What a linktest run says: the analysis, its summary sentences, and what was wrong with the input."""

    analysis: analysis.LinkAnalysis
    out: Path
    summary: list[str]
    problems: list[str] = field(default_factory=list)   # the run is an error, its measurements still count

    def records(self, context: dict[str, Any]) -> list[dict[str, Any]]:
        """Per-node and per-link series (``series.series_records``), each marked as judged within its run."""
        found = series.series_records(self.analysis, context)
        for record in found:
            record["conditions"] = {**record["conditions"], "judged_by": JUDGED_BY}
        return found


def program_said(stderr: str) -> list[str]:
    """linktest's own sentences on stderr (odd rank count, refused arguments, unwritable file)."""
    return [line.strip() for line in stderr.splitlines() if line.startswith(PROGRAM_PREFIX)]


DEFAULT_THRESHOLDS = analysis.Thresholds()


def round_files(folder: Path) -> list[Path]:
    """The further all-pairs rounds a run measured beside its results file (``links-round-<k>.bin``), in order."""
    return sorted(Path(folder).glob(ROUND_PATTERN), key=lambda p: int(p.stem.rsplit("-", 1)[1]))


def read_rounds(results: Path, rounds: Sequence[Path] = ()) -> resultsfile.LinkRun:
    """The results file and its further rounds as one run (``resultsfile.combine``)."""
    return resultsfile.combine([resultsfile.read(results)] + [resultsfile.read(p) for p in rounds])


def judge_file(results: Path, out: Path, thresholds: analysis.Thresholds = DEFAULT_THRESHOLDS,
               switches: Optional[Path] = None, focus: Optional[str] = None, stderr: str = "",
               rounds: Sequence[Path] = ()) -> Judged:
    """Analyse ``results`` (with its further ``rounds``), write the artifacts into ``out``; InputError (one
    sentence) when there is nothing to judge.

    ``stderr``: the program's standard error, whose ``linktest:`` sentences explain a missing file
    and are kept in the summary.
    """
    said = program_said(stderr)
    if not Path(results).exists():
        raise InputError(said[-1] if said else f"linktest wrote no results file {results}")
    run = read_rounds(results, rounds)
    if len(run.main) == 0:
        raise InputError(f"{results} holds no measured pair" + (f" ({run.problem})" if run.problem else ""))
    nodes = sorted(set(run.hosts))
    site = sitetopology.load_switches(switches, nodes) if switches else None
    wanted = sitetopology.parse_node_list(focus, nodes)
    result = analysis.analyse(run, site, thresholds)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise InputError(f"cannot create the output folder {out}: {err.strerror or err}") from None
    if Path(results).resolve() != (out / RESULTS_FILE).resolve():
        shutil.copyfile(results, out / RESULTS_FILE)
    for further in rounds:     # every round measured is kept beside the first
        if Path(further).resolve() != (out / Path(further).name).resolve():
            shutil.copyfile(further, out / Path(further).name)
    output.write_matrices(result, out / "matrix.npz")
    # matplotlib only here: the link check (checks/linktest.py) imports this module in every ReFrame run.
    figures.heatmap(result, out / "heatmap.png")
    figures.histogram(result, out / "histogram.png")
    output.write_bad_links(result, out / "bad_links.csv")
    lines = [f"program: {line}" for line in said] + output.summary_lines(result, wanted)
    (out / "summary.txt").write_text("\n".join(lines) + "\n")
    return Judged(analysis=result, out=out, summary=lines, problems=[run.problem] if run.problem else [])
