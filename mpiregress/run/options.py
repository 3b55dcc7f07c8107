"""The options of one ``mpiregress run``, and their checks before anything starts."""
from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from mpiregress import paths
from mpiregress.errors import InputError
from mpiregress.model import systems, toolchain
from mpiregress.model.names import FAMILIES, METHODS, METRICS, PLACEMENTS
from mpiregress.model.systems import get


@dataclass
class RunOptions:
    """Everything one run needs, resolved by the command line."""

    system: str
    report_dir: Path
    partition: Optional[str] = None
    methods: Optional[list[str]] = None          # None: every method, skipped where absent
    metrics: Optional[list[str]] = None          # None: latency and bandwidth
    placements: Optional[list[str]] = None       # None: all four (unavailable ones are skipped)
    iterations: Optional[int] = None             # None: the check's default (1000)
    families: list[str] = field(default_factory=list)  # empty: the system's own (systems/<name>.yaml)
    collectives: Optional[list[str]] = None      # None: every collective of the sweep
    algorithms: Optional[list[str]] = None       # None: every algorithm of the subset
    setvars: list[str] = field(default_factory=list)  # ReFrame -S NAME=VALUE (e.g. LinktestCheck.nodes=64)
    dry_run: bool = False
    repeat: int = 1
    repeat_auto: bool = False                     # --repeat auto: k from the nodes' noise (choose_repeat)
    manifest_dir: Path = field(default_factory=paths.manifest_dir)
    baselines_dir: Path = field(default_factory=paths.baselines_dir)
    toolchain_file: Path = field(default_factory=toolchain.default_path)
    allow_missing_baselines: bool = False
    build_missing: bool = True                    # local: build OSU from source when no usable build exists
    source_mirror: Optional[Path] = None
    sha256_override: Optional[str] = None
    commit: str = ""
    pipeline: str = ""
    # A/B run of a toolchain MR (family ab): A's manifests ("auto": store, else merge base), k pairs.
    ab_against: Optional[str] = None
    ab_pairs: Optional[int] = None               # None: the system's ab.initial_pairs
    ab_max_pairs: Optional[int] = None           # None: the system's ab.max_pairs (sequential budget)
    ab_branch: str = "main"
    event: str = "run"               # the pipeline event whose gating rules judge this run (verdict/gating.yaml)
    measure_only: bool = False       # a pipeline measurement job: exit 0 when it measured; the verdict job judges
    # Confirm-before-failing (mpiregress confirm): a fresh allocation away from the first run's nodes.
    exclude_nodes: list[str] = field(default_factory=list)


# Where the link matrix's artifacts go inside a run's report folder (the HTML report looks there).
LINKS_SUBDIR = "links"


# The project's own programs a family runs (checked in the manifests before any job).
FAMILY_PROGRAMS: dict[str, str] = {"links": "linktest"}


SETVAR = re.compile(r"^([A-Za-z_]\w*\.)?[A-Za-z_]\w*=")


# Inclusive ranges of the numeric options: checked before anything runs.
ITERATIONS_RANGE = (1, 100_000_000)


@systems.section_check("osu_iterations", extras=True)
def _check_osu_iterations(value: object, path: object, key: str) -> None:
    """A partition's ``reframe.extras.osu_iterations``: measured iterations per OSU step, per metric (the
    ``--iterations`` of a run without one; 1000 for a metric it does not name)."""
    if not isinstance(value, dict) or not value:
        raise ValueError("must map metrics to measured iterations, e.g. {bandwidth: 200}")
    systems.known_settings(value, tuple(METRICS))
    for metric, count in value.items():
        if not whole_number_in(count, ITERATIONS_RANGE):
            raise ValueError(f"{metric}: {count!r} is out of range: give a whole number from "
                             f"{ITERATIONS_RANGE[0]} to {ITERATIONS_RANGE[1]}")


def whole_number_in(value: object, bounds: tuple[int, int]) -> bool:
    """``value`` is a whole number (not a bool) within the inclusive ``bounds``."""
    return not isinstance(value, bool) and isinstance(value, int) and bounds[0] <= value <= bounds[1]


REPEAT_RANGE = (1, 100)


AB_PAIRS_RANGE = (2, 100)


# The collective families are subsets of checks/config/coll_sweep.yaml.
COLL_SUBSETS: dict[str, str] = {"coll": "mr", "coll-sweep": "weekly"}


def check_options(opts: RunOptions) -> list[str]:
    """The build methods to run, after refusing unknown names and numbers out of range (InputError)."""
    methods = opts.methods or list(METHODS)
    if opts.ab_against:
        opts.families = ["ab"]
    elif "ab" in opts.families:
        raise InputError("the ab family pairs the MR's builds with the target branch's: run it with "
                         "--ab-against DIR|auto")
    if not opts.families:

        opts.families = get(opts.system).families
    for kind, chosen, known in (("build method", methods, METHODS), ("metric", opts.metrics or [], list(METRICS)),
                                ("placement", opts.placements or [], PLACEMENTS),
                                ("family", opts.families, FAMILIES)):
        unknown = [c for c in chosen if c not in known]
        if unknown:
            raise InputError(f"unknown {kind}(s) {', '.join(unknown)} (known: {', '.join(known)})")
    for setting in opts.setvars:
        if not SETVAR.match(setting):
            raise InputError(f"--setvar {setting!r} is not NAME=VALUE or CHECK.NAME=VALUE "
                             "(e.g. LinktestCheck.nodes=64)")
    for option, value, (low, high) in (("--iterations", opts.iterations, ITERATIONS_RANGE),
                                       ("--repeat", opts.repeat, REPEAT_RANGE),
                                       ("--ab-pairs", opts.ab_pairs, AB_PAIRS_RANGE),
                                       ("--ab-max-pairs", opts.ab_max_pairs, AB_PAIRS_RANGE)):
        if value is not None and not whole_number_in(value, (low, high)):
            raise InputError(f"{option} {value!r} is out of range: give a whole number from {low} to {high}")
    return methods


def log(message: str) -> None:
    print(f"mpiregress: {message}", flush=True)


def commit() -> str:
    if os.environ.get("CI_COMMIT_SHA"):
        return os.environ["CI_COMMIT_SHA"]
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], cwd=paths.REPO_ROOT, capture_output=True,
                              text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""
