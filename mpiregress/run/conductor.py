"""``mpiregress run``: prepare the system, run the ReFrame checks, judge the results.

The same function runs on a laptop's one-host Slurm, in CI and on Iris/Aion;
only the system name and the environment differ.
"""
from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Sequence

from mpiregress import paths
from mpiregress.builds import BuildOptions
from mpiregress.builds import method as build_method
from mpiregress.builds.common import program_sources
from mpiregress.cluster import nodeloss
from mpiregress.cluster.local import LocalCluster, slurm_reachable
from mpiregress.errors import CANCELLED, ERROR, InfrastructureError, InputError, MpiRegressError, NotAvailableError
from mpiregress.families import osu_output
from mpiregress.families.coll import algorithms, plan
from mpiregress.families.coll.algorithms import COLLECTIVES
from mpiregress.history import url as history_url
from mpiregress.history.store import open_history
from mpiregress.model import baselines, manifest, microarch, results, systems, toolchain
from mpiregress.model.names import FAMILIES, METHODS, METRICS, PLACEMENTS, PT2PT
from mpiregress.model.systems import get
from mpiregress.report import ab as ab_report
from mpiregress.report import summary, verdict_text
from mpiregress.run import cancel, reframe_report
from mpiregress.run import folder as run_folder
from mpiregress.run.ab import sides
from mpiregress.verdict import band, compose, cross_method
from mpiregress.verdict import node_noise as nodehistory
from mpiregress.verdict.ab import evidence as ab_evidence
from mpiregress.verdict.ab import judge as ab_judge
from mpiregress.verdict.ab import paired
from mpiregress.verdict.ab.sequential import Schedule, schedule_of
from mpiregress.verdict.history_gate import GateConfig

SITE_CONFIG = paths.checks_dir() / "config" / "site.yaml"


COLL_CHECK_FILE = "osu_coll.py"


def check_files(families: Sequence[str]) -> list[Path]:
    """The check files: every Python file in checks/ that registers a ReFrame test.

    The collective check declares only the sweep subsets of the requested families
    (``MPIREGRESS_COLL_SUBSETS``); without one it declares none and ReFrame would print a
    warning about an undefined parameter in every run's log, so it is not loaded then.
    """
    found = sorted(p for p in paths.checks_dir().glob("*.py") if "@rfm.simple_test" in p.read_text())
    if not any(f in COLL_SUBSETS for f in families):
        found = [p for p in found if p.name != COLL_CHECK_FILE]
    return found


DRYRUN_MODULES = paths.REPO_ROOT / "ci" / "dryrun-modules"
LMOD_INIT = Path("/usr/share/lmod/lmod/init/bash")


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


# The collective families are subsets of checks/config/coll_sweep.yaml.
COLL_SUBSETS: dict[str, str] = {"coll": "mr", "coll-sweep": "weekly"}
# Where the link matrix's artifacts go inside a run's report folder (the HTML report looks there).
LINKS_SUBDIR = "links"
# The project's own programs a family runs (checked in the manifests before any job).
FAMILY_PROGRAMS: dict[str, str] = {"links": "linktest"}
SETVAR = re.compile(r"^([A-Za-z_]\w*\.)?[A-Za-z_]\w*=")


def _log(message: str) -> None:
    print(f"mpiregress: {message}", flush=True)


def _reframe() -> str:
    here = Path(sys.executable).parent / "reframe"
    found = str(here) if here.exists() else shutil.which("reframe")
    if not found:
        raise InfrastructureError("ReFrame is not installed in this environment: run ci/setup.sh")
    return found


def _commit() -> str:
    if os.environ.get("CI_COMMIT_SHA"):
        return os.environ["CI_COMMIT_SHA"]
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], cwd=paths.REPO_ROOT, capture_output=True,
                              text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def _detect_topologies(opts: RunOptions, topology_dir: Path, env: dict[str, str]) -> None:
    """Write this host's topology where ReFrame looks for each partition of the run that says
    ``topology: detect`` (systems/<name>.yaml); partitions with a recorded topology are left alone."""
    for part in systems.get(opts.system).partitions_named(opts.partition):
        if not part.detects_topology:
            continue
        target = topology_dir / part.key / "processor.json"
        target.parent.mkdir(parents=True, exist_ok=True)
        done = subprocess.run([_reframe(), f"--detect-host-topology={target}"], env=env,
                              capture_output=True, text=True, timeout=120)
        if done.returncode != 0 or not target.exists():
            raise InfrastructureError(f"could not detect this host's topology: {done.stderr.strip()[-400:]}")


def _ensure_builds(opts: RunOptions, tc: toolchain.Toolchain, methods: list[str]) -> dict[str, str]:
    """For a system that builds on demand (``builds: on_demand``): reuse or build, for each target of
    the run's partitions, every one of its ``methods`` the run asks for; {method: sentence} of the methods
    that cannot build here (their checks then skip with the reason)."""

    system = systems.get(opts.system)
    skipped: dict[str, str] = {}
    for part in system.partitions_named(opts.partition):
        target = part.build_target()
        for name in [m for m in system.methods if m in methods]:
            usable = [m for m in manifest.of_system(manifest.find(opts.manifest_dir, name), opts.system)
                      if microarch.can_run(m.target, target)]
            # A named tarball goes through the build's own strict reuse test (same sha256, flags, tools);
            # without one, any build these nodes can run is reused rather than failing offline.
            if usable and not (opts.source_mirror or opts.sha256_override):
                _log(f"reusing {name} build {usable[0].path} (target {usable[0].target})")
                continue
            _log(f"{name} build of OSU {tc.osu['version']} for {target} (reused when nothing changed)")
            try:
                built = build_method(name).build(BuildOptions(
                    method=name, toolchain_file=opts.toolchain_file, target=target,
                    manifest_dir=opts.manifest_dir, install_root=paths.install_root(),
                    system=opts.system, partition=part.name, source_mirror=opts.source_mirror,
                    sha256_override=opts.sha256_override))
            except NotAvailableError as err:
                skipped[name] = f"{name} build not available here: {err}"
                _log(skipped[name])
                continue
            _log(f"built {built.path}")
    return skipped


def _planned_manifests(opts: RunOptions, tc: toolchain.Toolchain, methods: list[str]) -> Path:
    """For --dry-run: real manifests plus clearly marked planned ones, so every job script can be written."""
    planned = opts.report_dir / "planned-manifests"
    planned.mkdir(parents=True, exist_ok=True)
    for existing in manifest.of_system(manifest.find_all(opts.manifest_dir), opts.system):
        if existing.path:
            shutil.copy(existing.path, planned / Path(existing.path).name)
    targets = sorted({p.build_target() for p in systems.get(opts.system).partitions})
    for method in methods:
        for target in targets:
            if (planned / f"{method}-{target}.json").exists():
                continue
            prefix = f"/planned/{method}/{target}"
            manifest.write(manifest.Manifest(
                method=method, toolchain=tc.name, osu_version=tc.osu["version"], target=target,
                prefix=prefix, bin_dir=str(Path(prefix) / manifest.BIN_SUBDIR),
                programs={src.name: f"{prefix}/programs/bin/{src.name}" for src in program_sources()},
                extra={"planned": True},
                notes=["planned by --dry-run: not built; only used to write job scripts"]), planned)
    return planned


def _environment(opts: RunOptions, topology_dir: Path, manifest_dir: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update({
        "MPIREGRESS_MANIFEST_DIR": str(manifest_dir),
        "MPIREGRESS_BASELINES_DIR": str(opts.baselines_dir),
        "MPIREGRESS_TOPOLOGY_DIR": str(topology_dir),
        "MPIREGRESS_CHECKS_DIR": str(paths.checks_dir()),
        "MPIREGRESS_PERFLOG_DIR": str(opts.report_dir / "perflogs"),
        "MPIREGRESS_REFRAME_LOG": str(opts.report_dir / "reframe.log"),
        # Checks that write files of their own (the noise family's spectra) put them under the report.
        "MPIREGRESS_REPORT_DIR": str(opts.report_dir),
        # The check file imports mpiregress from this checkout, whatever the caller's cwd.
        "PYTHONPATH": os.pathsep.join(filter(None, [str(paths.REPO_ROOT), env.get("PYTHONPATH")])),
        "MPIREGRESS_COLL_SUBSETS": ",".join(COLL_SUBSETS[f] for f in opts.families if f in COLL_SUBSETS),
        # The link matrix's artifacts (matrix, heatmap, bad-links CSV), one folder per partition and method.
        "MPIREGRESS_LINKS_DIR": str(opts.report_dir / LINKS_SUBDIR),
    })
    if opts.dry_run:
        env["MODULEPATH"] = os.pathsep.join(filter(None, [env.get("MODULEPATH"), str(DRYRUN_MODULES)]))
    return env


def _reframe_command(opts: RunOptions, methods: list[str], env: dict[str, str],
                     staging: Optional[Path] = None, job_options: Sequence[str] = (),
                     extra: Sequence[str] = ()) -> list[str]:
    """ReFrame's command line; its JSON and JUnit reports go to ``staging`` (default: the report folder);
    ``extra`` arguments (an A/B round's series filter and nodes) come after the run's own."""
    system = f"{opts.system}:{opts.partition}" if opts.partition else opts.system
    reports = staging or opts.report_dir
    cmd = [_reframe(), "-C", str(SITE_CONFIG), "--system", system,
           "--prefix", str(opts.report_dir / "reframe"),
           "--report-file", str(reports / "reframe-report.json"),
           "--report-junit", str(reports / "junit.xml"),
           *job_options,
           "-t", f"^({'|'.join(methods)})$", "-t", f"^({'|'.join(opts.families)})$",
           "--dry-run" if opts.dry_run else "-r"]
    for chosen in (opts.metrics, opts.placements, opts.collectives, opts.algorithms):
        if chosen:
            cmd += ["-t", f"^({'|'.join(chosen)})$"]
    if opts.iterations:
        cmd += ["-S", f"iterations={opts.iterations}"]
    for setting in opts.setvars:
        cmd += ["-S", setting]
    if opts.exclude_nodes:
        cmd += ["-J", f"exclude={','.join(opts.exclude_nodes)}"]   # ReFrame: #SBATCH --exclude=...
    for check in check_files(opts.families):
        cmd += ["-c", str(check)]
    if opts.repeat > 1:
        cmd += ["--repeat", str(opts.repeat)]
    cmd += list(extra)
    if env.get("MPIREGRESS_IN_ALLOCATION"):
        # One allocation, its nodes shared by every check: benchmarks must not overlap.
        cmd += ["--exec-policy=serial"]
    if systems.get(opts.system).uses_lmod and not env.get("LMOD_CMD") and LMOD_INIT.exists():
        # The clusters' programming environments load modules; a login shell has Lmod
        # ready, a bare CI shell may not.
        return ["bash", "-c", f"source {LMOD_INIT} && exec {shlex.join(cmd)}"]
    return cmd


def _check_collective_names(opts: RunOptions, tc: toolchain.Toolchain) -> None:
    """--collectives and --algorithms name what the sweep and the toolchain's OpenMPI have, or one sentence."""

    for kind, chosen, known in (("collective", opts.collectives or [], plan.COLLECTIVES),
                                ("algorithm", opts.algorithms or [],
                                 sorted({name for coll in plan.COLLECTIVES
                                         for name in algorithms.load(tc.mpi["version"]).names(coll)}))):
        unknown = [c for c in chosen if c not in known]
        if unknown:
            raise InputError(f"unknown {kind}(s) {', '.join(unknown)} for OpenMPI {tc.mpi['version']} "
                             f"(known: {', '.join(known)})")


def _skipped_check_files(output: str) -> list[str]:
    """Check files ReFrame refused to load, with its one-line reason ("skipping test file 'X': ...")."""
    return [line.split("skipping test file", 1)[1].strip(" :") for line in output.splitlines()
            if "skipping test file" in line]


def _check_reachable(env: dict[str, str]) -> None:

    ok, message = slurm_reachable(env)
    if not ok:
        raise InfrastructureError(message)


# Inclusive ranges of the numeric options: checked before anything runs.
ITERATIONS_RANGE = (1, 100_000_000)
REPEAT_RANGE = (1, 100)
AB_PAIRS_RANGE = (2, 100)


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
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high):
            raise InputError(f"{option} {value!r} is out of range: give a whole number from {low} to {high}")
    return methods


def _binaries_needed(build: manifest.Manifest, opts: RunOptions) -> list[Path]:
    """The binaries of ``build`` the selected families will launch (the project's own programs too)."""

    needed = []
    if any(f in opts.families for f in ("pt2pt", "pt2pt-sweep", "ab")):
        needed += [build.binary(PT2PT[m].benchmark) for m in (opts.metrics or list(PT2PT)) if m in PT2PT]
    if any(f in COLL_SUBSETS for f in opts.families):
        needed += [build.binary(f"osu_{c}", kind="collective") for c in (opts.collectives or COLLECTIVES)]
    needed += [build.program(FAMILY_PROGRAMS[f]) for f in opts.families if f in FAMILY_PROGRAMS]
    if "noise" in opts.families:
        needed.append(build.program("fwq"))   # one sentence when the build made no fwq
    return needed


def check_binaries(manifest_dir: Path, methods: list[str], opts: RunOptions) -> None:
    """Refuse, before any job, a manifest whose benchmark binary is missing or not executable."""
    for method in methods:
        for build in manifest.of_system(manifest.find(manifest_dir, method), opts.system):
            if build.extra.get("planned"):
                continue
            for binary in _binaries_needed(build, opts):
                if not binary.is_file():
                    raise InputError(f"manifest {build.path} names {binary}, which does not exist: rebuild with "
                                     f"'mpiregress build --method {method}' or remove the manifest")
                if not os.access(binary, os.X_OK):
                    raise InputError(f"manifest {build.path} names {binary}, which is not executable")


def _slurm_faults(env: dict[str, str], nodes: set[str]) -> Optional[str]:
    """After failed checks: Slurm's own words when its controller or one of ``nodes`` is gone, else None."""

    ok, said = slurm_reachable(env, timeout=20)
    if not ok:
        return f"Slurm controller unreachable: {said.removeprefix('Slurm is not reachable: ')}"
    for name, state, why in nodeloss.node_states(env, timeout=20) or []:
        if name in nodes and any(word in state.lower() for word in ("down", "fail", "drain", "not_responding")):
            return f"node lost: Slurm reports node {name} {state} ('{why.strip() or 'no reason given'}')"
    return None


def _classify_infrastructure(found: list[results.Result], env: dict[str, str],
                             lost: Optional[str] = None) -> list[results.Result]:
    """Mark errors that Slurm caused as infrastructure (``lost``: the node loss that stopped the run, in
    Slurm's words); return the infrastructure errors."""
    errors = [r for r in found if r.status == "error"]
    unexplained = [r for r in errors if not osu_output.is_infrastructure(r.reason)]
    if unexplained:
        fault = lost or _slurm_faults(env, {n for r in errors for n in r.nodelist} or {"*"})
        if fault:
            for r in unexplained:
                # ReFrame's words for a check the run stopped ("aborted due to ForceExitError") say the run's.
                saw = "stopped by the run before it finished" if lost and "ForceExitError" in r.reason else r.reason
                r.reason = f"{fault}; the check saw: {saw}"
    infrastructure = [r for r in errors if osu_output.is_infrastructure(r.reason)]
    for r in infrastructure:
        # Slurm, not the build or the benchmark, stopped it: a retry may pass (the verdict's "infrastructure").
        r.conditions["infrastructure"] = True
    return infrastructure


def cancelled_sentence(err: BaseException) -> str:
    """The report's sentence for a run cancelled by a signal (or Ctrl-C)."""
    said = err.sentence if isinstance(err, cancel.Cancelled) else "interrupted (Ctrl-C or SIGINT)"
    return f"{said}: the run cancelled its Slurm jobs and stopped ReFrame; nothing was judged"


def run(opts: RunOptions) -> int:
    """Run the checks for ``opts.system`` and return the exit code of the verdict.

    The run owns its report folder (locked, cleared, written atomically); a failure
    leaves reports that say so. Infrastructure faults (Slurm's words) exit 3.
    """
    description = "mpiregress " + shlex.join(sys.argv[1:] if sys.argv[1:2] == ["run"] else
                                             ["run", "--system", opts.system])
    with cancel.signals_cancel(), run_folder.RunFolder(opts.report_dir, description) as folder:
        cluster = None
        try:
            methods = check_options(opts)
            folder.step("options checked")
            if systems.get(opts.system).managed_cluster and not opts.dry_run:

                cluster = LocalCluster(system=opts.system)
                cluster.claim(f"report folder {opts.report_dir}")
            return _run(opts, methods, folder, cluster)
        except MpiRegressError as err:
            folder.fail(str(err), err.exit_code)
            raise
        except (cancel.Cancelled, KeyboardInterrupt) as err:
            # ReFrame and the Slurm jobs are already stopped (_reframe_run): the report again, with what was
            # stopped, then the locks.
            folder.fail(cancelled_sentence(err), CANCELLED, state="cancelled")
            raise
        except Exception as err:
            folder.fail(f"unexpected {type(err).__name__}: {err}", ERROR)
            raise
        finally:
            if cluster is not None:
                cluster.release()


def _run(opts: RunOptions, methods: list[str], folder: run_folder.RunFolder, cluster: Optional[Any]) -> int:
    tc = toolchain.load(opts.toolchain_file)
    _check_collective_names(opts, tc)
    refs = baselines.for_system(opts.system, opts.baselines_dir)
    if refs.toolchain != tc.name:
        raise InputError(f"baselines file {refs.path}: toolchain: is {refs.toolchain!r} but the run uses "
                         f"toolchain {tc.name!r} ({tc.path})")
    folder.step(f"read toolchain {tc.path} and baselines {refs.path}")
    notes: list[str] = []
    unavailable: dict[str, str] = {}
    if opts.repeat_auto:
        opts.repeat, why = choose_repeat(opts)
        notes.append(f"--repeat auto: {opts.repeat} repetition(s): {why}")
        _log(notes[-1])
        folder.step(notes[-1])
    topology_dir = paths.checks_dir() / "topology"
    manifest_dir = opts.manifest_dir
    env = _environment(opts, topology_dir, manifest_dir)
    _detect_topologies(opts, topology_dir, env)
    if cluster is not None:
        cluster.start()
        env.update(cluster.client_env())
        _log(f"the project's Slurm is up (SLURM_CONF={env.get('SLURM_CONF')})")
        folder.step(f"the project's Slurm up ({cluster.state_dir})")
    if systems.get(opts.system).builds_on_demand and opts.build_missing and not opts.dry_run:
        unavailable = _ensure_builds(opts, tc, methods)
        notes += list(unavailable.values())
        folder.step(f"builds of OSU ready (systems/{opts.system}.yaml methods)")
    if opts.dry_run:
        manifest_dir = _planned_manifests(opts, tc, methods)
        env["MPIREGRESS_MANIFEST_DIR"] = str(manifest_dir)
    else:
        check_binaries(manifest_dir, methods, opts)
        folder.step(f"build manifests in {manifest_dir} checked: their binaries exist and are executable")
        _check_reachable(env)
    found_a = _prepare_ab(opts, methods, env, manifest_dir, folder) if opts.ab_against else None
    report = opts.report_dir / "reframe-report.json"
    lost: list[str] = []
    proc = _reframe_run(opts, methods, env, folder, lost=lost)
    folder.step(f"ReFrame ran (exit {proc.returncode}; its output is in reframe.out)")
    if not report.exists():
        fault = None if opts.dry_run else (lost[0] if lost else _slurm_faults(env, {"*"}))
        if fault:
            raise InfrastructureError(f"ReFrame exited with code {proc.returncode} and wrote no report: {fault}")
        raise MpiRegressError(f"ReFrame exited with code {proc.returncode} and wrote no report; "
                              f"see {opts.report_dir / 'reframe.out'}")
    unloaded = _skipped_check_files((opts.report_dir / "reframe.out").read_text(errors="replace"))
    if unloaded:
        # ReFrame only warns; a check file that did not load would silently measure nothing.
        raise InputError(f"ReFrame could not load {unloaded[0]}; see {opts.report_dir / 'reframe.out'}")
    loaded = reframe_report.load(report, tc.name, opts.commit or _commit(), opts.pipeline, dry_run=opts.dry_run)
    if found_a is not None and not opts.dry_run:
        loaded, rounds = _ab_more_rounds(loaded, opts, methods, env, folder, tc.name)
        return _ab_verdict(loaded, opts, folder, env, found_a, rounds)
    found = results.aggregate(loaded)
    folder.step(f"ReFrame report read: {len(found)} result(s)")
    if opts.dry_run:
        code = _dry_run_verdict(found, opts)
        folder.write_status("finished", code, "dry run: job scripts written, nothing submitted")
        return code
    _classify_infrastructure(found, env, lost[0] if lost else None)
    band.apply_baselines(found, refs, opts.allow_missing_baselines, node_noise=_node_noise(found))
    # A method with no baseline yet is held against the others that measured the series (not an error).
    cross_method.adopt_unbaselined(found)
    # A method the system lists that cannot build on this machine (no Spack on PATH) is skipped with its
    # reason (the notes), not an error of a run that asked for the system's methods.
    problems = summary.require_methods(found, [m for m in opts.methods or [] if m not in unavailable])
    judged = compose.of_run(found, problems, opts.event, causes=ab_evidence.run_causes(found))
    code = compose.exit_code(judged, opts.measure_only)
    title = f"MPI regression: {opts.system}" + (f":{opts.partition}" if opts.partition else "")
    print()
    print(summary.text_table(found))
    # The summary first: if results.json cannot be written, the table still survives.
    top = verdict_text.markdown(judged, heading="##", measure_only=opts.measure_only)
    folder.write("summary.md", summary.markdown(found, title, [], notes, top=top))
    _adopt_junit(folder, opts, judged)
    try:
        folder.write("results.json", results.dump(found))
    except InputError as err:
        raise InputError(f"{err}; the {len(found)} result(s) are in {opts.report_dir / 'summary.md'} and "
                         f"{report}") from None
    folder.write("verdict.json", json.dumps(judged.to_dict(), indent=2) + "\n")
    for problem in problems:
        print(f"mpiregress run: error: {problem}", file=sys.stderr)
    print(verdict_text.headline(judged, opts.measure_only))
    folder.write_status("finished", code)
    _log(f"reports in {opts.report_dir} (reframe-report.json, junit.xml, results.json, summary.md, verdict.json); "
         f"exit {code}")
    return code


def _adopt_junit(folder: run_folder.RunFolder, opts: RunOptions, judged: compose.PipelineVerdict) -> None:
    """junit.xml is the verdict's (ReFrame's own, which knows nothing of baselines, is reframe-junit.xml)."""
    folder.write("junit.xml", verdict_text.junit_xml(judged))


def _reframe_run(opts: RunOptions, methods: list[str], env: dict[str, str],
                 folder: run_folder.RunFolder, extra: Sequence[str] = (),
                 lost: Optional[list[str]] = None) -> "subprocess.Popen[str]":
    """Run ReFrame as a child that cannot outlive the run, its reports staged privately and adopted.

    ReFrame writes its JSON and JUnit reports when it ends, also when it is stopped: they go to a
    private folder and are moved into the report folder by the run itself, so nothing reaches the
    folder behind the run's back. On any exit by exception (a signal included) ReFrame's group is
    stopped and the run's Slurm jobs are cancelled by id before the exception travels on. A node lost
    under one of the run's jobs (Slurm's words, appended to ``lost``) stops ReFrame early: the rest of
    the run could only wait on that node.
    """
    record = None if opts.dry_run else folder.path / cancel.JOBS_FILE
    children = cancel.RunChildren(record, env, watch=not opts.dry_run)
    staging = Path(tempfile.mkdtemp(prefix="mpiregress-reframe-"))
    cmd = _reframe_command(opts, methods, env, staging, children.job_options(), extra)
    _log("running " + shlex.join(cmd))
    try:
        with open(opts.report_dir / "reframe.out", "w") as out:
            proc = children.popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                  cwd=paths.REPO_ROOT)
            assert proc.stdout is not None
            for line in proc.stdout:
                sys.stdout.write(line)
                out.write(line)
            proc.wait()
        children.finish()
        if children.lost is not None:
            folder.step(f"ReFrame stopped: {children.lost}")
            if lost is not None:
                lost.append(children.lost)
        return proc
    except BaseException as err:
        if isinstance(err, (cancel.Cancelled, KeyboardInterrupt)):
            # Said before anything that can take seconds: a SIGKILL may follow the signal within seconds.
            folder.fail(cancelled_sentence(err), CANCELLED, state="cancelled")
        for sentence in children.stop():
            folder.step(sentence)
        raise
    finally:
        # ReFrame's reports are the run's to adopt; its JSON is kept either way (nothing measured is lost),
        # its JUnit as reframe-junit.xml: junit.xml is always the run's own (the verdict's, or its failure).
        for name, kept in (("reframe-report.json", "reframe-report.json"), ("junit.xml", "reframe-junit.xml")):
            if (staging / name).exists():
                with contextlib.suppress(OSError):
                    shutil.move(str(staging / name), str(opts.report_dir / kept))
        shutil.rmtree(staging, ignore_errors=True)


def _node_noise(found: list[results.Result]) -> dict[tuple[str, str], dict[str, list[float]]]:
    """Each measured partition's node noise history ({} per partition without a history file)."""

    partitions = sorted({(r.system, r.partition) for r in found})
    db = history_url.resolve(None)
    if not history_url.exists(db):
        return {where: {} for where in partitions}
    try:
        with open_history(db) as history:
            return {where: nodehistory.node_efficiencies(history, *where) for where in partitions}
    except (InputError, InfrastructureError) as err:
        # The measurements matter more than the noise rule: judge them without it, and say so.
        _log(f"node noise history not read, so no result is reclassified as noisy: {err}")
        return {where: {} for where in partitions}


def choose_repeat(opts: RunOptions) -> tuple[int, str]:
    """``--repeat auto``: repetitions from the latest noise of the partitions' nodes in the history, and why."""

    tolerance = GateConfig().min_effect["latency"]
    db = history_url.resolve(None)
    partitions = [opts.partition] if opts.partition else [p.name for p in get(opts.system).partitions]
    latest: dict[str, float] = {}
    if history_url.exists(db):
        with open_history(db) as history:
            for partition in partitions:
                for node, values in nodehistory.node_efficiencies(history, opts.system, partition).items():
                    latest[f"{partition}/{node}"] = values[-1]
    return nodehistory.auto_repeats(latest, tolerance, history_url.display(db))


def _dry_run_verdict(found: list[results.Result], opts: RunOptions) -> int:
    scripts = sorted((opts.report_dir / "reframe" / "stage").rglob("rfm_job.sh"))
    errors = [r for r in found if r.status == "error"]
    _log(f"dry run: {len(scripts)} job script(s) written under {opts.report_dir / 'reframe' / 'stage'}, "
         f"{sum(r.status == 'skip' for r in found)} skipped, {len(errors)} error(s)")
    for r in errors:
        print(f"mpiregress run: error: {r.key().name()}: {r.reason}", file=sys.stderr)
    return 2 if errors else (0 if scripts else 4)


# -- A/B run of a toolchain MR (issue 13) ---------------------------------------------------------

def _prepare_ab(opts: RunOptions, methods: list[str], env: dict[str, str], manifest_dir: Path,
                folder: run_folder.RunFolder) -> Any:
    """Find A (given folder, manifest store, or built at the merge base), refuse a mismatched A and B,
    and hand A's folder and the pair count to the A/B check through its environment."""

    system = get(opts.system)
    partition = opts.partition or system.partitions[0].name
    if opts.dry_run:
        # The job scripts show the interleaved order with the planned builds on both sides.
        found = sides.FoundA(manifest_dir, "given", "dry run: A and B are both the planned builds")
    else:
        _log(f"finding A (the {opts.ab_branch} branch's build) for --ab-against {opts.ab_against}")
        found = sides.find(opts.ab_against or "auto", system=opts.system, partition=partition, methods=methods,
                           branch=opts.ab_branch, store=system.ab_store(), b_dir=manifest_dir)
    pairing = sides.pair_builds(found.directory, manifest_dir, methods)
    if found.directory is not None and not opts.dry_run:
        check_binaries(found.directory, list(pairing.pairs), opts)
    env["MPIREGRESS_AB_MANIFEST_DIR"] = str(found.directory or "")
    schedule = _ab_schedule(opts)
    env.update(MPIREGRESS_AB_PAIRS=str(schedule.initial_pairs), MPIREGRESS_AB_FIRST_PAIR="0",
               MPIREGRESS_AB_LOOK="1", MPIREGRESS_AB_MAX_PAIRS=str(schedule.max_pairs))
    record = {**found.to_dict(), "pairs": {m: [str(a.path), str(b.path)] for m, (a, b) in pairing.pairs.items()},
              "b_only": pairing.b_only}
    folder.write("ab-a.json", json.dumps(record, indent=2) + "\n")
    folder.step(found.sentence)
    _log(found.sentence + ("" if found.directory else ": the series are judged by the history gate"))
    return found


def _ab_schedule(opts: RunOptions) -> Any:
    """The run's A/B pairs budget: the system's ``ab:`` keys, --ab-pairs and --ab-max-pairs over them."""

    base = schedule_of(get(opts.system))
    initial = opts.ab_pairs or base.initial_pairs
    most = opts.ab_max_pairs or max(base.max_pairs, initial)
    if most < initial:
        raise InputError(f"--ab-max-pairs {most} is below the {initial} pairs of the first look")
    return Schedule(initial_pairs=initial, look_every=base.look_every, max_pairs=most)


def _ab_series_filter(keys: Sequence[Any]) -> list[str]:
    """ReFrame ``-n`` patterns selecting exactly these series' A/B tests (parameters in any order)."""
    patterns = []
    for key in keys:
        wanted = {"build_method": key.method, "metric": key.metric, "placement": key.placement}
        patterns += ["-n", "^OsuAbCheck" + "".join(f"(?=.*%{n}={re.escape(str(v))}(%|$))"
                                                     for n, v in wanted.items())]
    return patterns


def _ab_more_rounds(loaded: list[results.Result], opts: RunOptions, methods: list[str], env: dict[str, str],
                    folder: run_folder.RunFolder, toolchain_name: str) -> tuple[list[results.Result], list[str]]:
    """The sequential A/B run: after each look, the series still inconclusive beyond the minimum effect get
    the next round of pairs (one ReFrame run per partition and node set, pinned to the series' nodes; in the
    CI job's own allocation on the clusters), until none is left or the budget is spent. Returns every
    sample (no round replaces an earlier one) and one sentence per extra round."""

    schedule = _ab_schedule(opts)
    sizes = schedule.look_sizes()
    notes: list[str] = []
    for look in range(2, len(sizes) + 1):
        records = [r for r in ab_judge.records(loaded) if "ab_side" in r]
        try:
            config = ab_judge.with_target(records)
            verdicts = paired.judge(records, config)
        except (InputError, KeyError):
            break   # the final verdict says why, after every sample is kept
        more = set(paired.continuing(verdicts, config))
        if not more:
            break
        first, count = sizes[look - 2], sizes[look - 1] - sizes[look - 2]
        groups: dict[tuple[str, tuple[str, ...]], list[Any]] = {}
        for v in verdicts:
            if v.key in more:
                groups.setdefault((v.key.partition, v.nodes), []).append(v.key)
        for index, ((partition, nodes), keys) in enumerate(sorted(groups.items())):
            names = ", ".join(k.name() for k in keys)
            note = (f"look {look}: {len(keys)} series still inconclusive beyond the minimum effect or short of "
                    f"the power target get pairs "
                    f"{first}-{first + count - 1} on {','.join(nodes) or 'any node'}: {names}")
            _log(note)
            folder.step(note)
            found = _ab_round(opts, env, folder, keys, partition, nodes, look, first, count,
                              opts.report_dir / f"ab-look-{look}" / f"{partition}-{index}", toolchain_name)
            loaded = loaded + found
            notes.append(note + f" ({sum('ab_side' in r.conditions for r in found)} samples)")
    return loaded, notes


def _ab_round(opts: RunOptions, env: dict[str, str], folder: run_folder.RunFolder, keys: Sequence[Any],
              partition: str, nodes: Sequence[str], look: int, first: int, count: int, round_dir: Path,
              toolchain_name: str) -> list[results.Result]:
    """One extra round of pairs for ``keys`` (same partition and nodes) through the same check and launch path."""

    round_dir.mkdir(parents=True, exist_ok=True)
    round_opts = dataclasses.replace(
        opts, report_dir=round_dir, partition=partition, methods=sorted({k.method for k in keys}),
        metrics=sorted({k.metric for k in keys}), placements=sorted({k.placement for k in keys}), repeat=1)
    round_env = {**env, "MPIREGRESS_AB_FIRST_PAIR": str(first), "MPIREGRESS_AB_PAIRS": str(count),
                 "MPIREGRESS_AB_LOOK": str(look)}
    extra = _ab_series_filter(keys)
    if nodes and not env.get("MPIREGRESS_IN_ALLOCATION"):
        extra += ["-J", f"nodelist={','.join(nodes)}"]    # the same nodes as the earlier pairs
    # The run's own ReFrame path: a signal stops this round's ReFrame and cancels its jobs like the first.
    proc = _reframe_run(round_opts, sorted({k.method for k in keys}), round_env, folder, extra)
    report = round_dir / "reframe-report.json"
    if not report.exists():
        _log(f"look {look}: ReFrame exited with code {proc.returncode} and wrote no report (see "
             f"{round_dir / 'reframe.out'}); the series keep the pairs measured before")
        return []
    return reframe_report.load(report, toolchain_name, opts.commit or _commit(), opts.pipeline)


def _ab_verdict(loaded: list[results.Result], opts: RunOptions, folder: run_folder.RunFolder,
                env: dict[str, str], found_a: Any, rounds: Sequence[str] = ()) -> int:
    """Judge an A/B run by its pairs and write summary.md, junit.xml, report.html with the A/B section.

    Every sample is kept (results.json: one Result per sample, side and pair in ``conditions``;
    ab-samples.json: the records the judge read) before anything is judged.
    """

    _classify_infrastructure(loaded, env)
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
    problems = summary.require_methods(loaded, opts.methods or [])
    event = opts.event if opts.event != "run" else "toolchain_mr"
    decided = compose.compose(event, compose.Evidence(paired=verdicts, causes=causes, problems=problems,
                                                      results=[r for r in loaded if r.status == "error"]))
    code = compose.exit_code(decided, opts.measure_only)
    title = f"A/B run: {opts.system}" + (f":{opts.partition}" if opts.partition else "")
    notes = [found_a.sentence + ("" if found_a.directory else ": no pairs, every series is judged by the "
                                                               "history gate")] + list(rounds) + problems
    section = ab_report.markdown(verdicts, causes)
    top = verdict_text.markdown(decided, heading="##", measure_only=opts.measure_only)
    folder.write("summary.md", f"# {title}\n\n{top}\n" + "".join(f"- {n}\n" for n in notes) + "\n" + section)
    _adopt_junit(folder, opts, decided)
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
    _log(f"A/B reports in {opts.report_dir} (summary.md, junit.xml, report.html, ab-samples.json); exit {code}")
    return code
