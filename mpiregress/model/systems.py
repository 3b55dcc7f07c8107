"""The systems data: one file per cluster, ``systems/<name>.yaml``, the one place its facts live.

A system file says which targets its partitions build for, which Slurm options land a job
on them, the EESSI subdirectory forced on them, its runner tags and its Spack version.
Everything else that used to repeat these facts is derived from here: the vocabulary
(``names.SYSTEMS``), the toolchain's partitions, the ReFrame site configuration, the Spack
environments and the pipeline's per-system jobs (``mpiregress generate``).
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Optional

import yaml

from mpiregress import paths
from mpiregress.errors import InputError
from mpiregress.model.microarch import host_target, lookup
from mpiregress.model.names import FAMILIES, METRICS
from mpiregress.paths import REPO_ROOT, state_dir

SCHEMA = "mpiregress-system/1"
EXECUTORS = ("jacamar", "shell")
# A partition's ``target``: an archspec name, or HOST_TARGET for "whatever this host is" (detected at run time).
HOST_TARGET = "host"
# A partition's ``topology``: "recorded" (checks/topology/<system>-<partition>/, committed) or "detect"
# (ReFrame detects this host's at run time and writes it there).
TOPOLOGIES = ("recorded", "detect")
# A system's ``builds``: "pipeline" (its build jobs make them; a run refuses a missing build) or
# "on_demand" (a run builds each of its ``methods`` that has no usable build, for its partitions' targets).
BUILDS = ("pipeline", "on_demand")
MODULES_SYSTEMS = ("lmod", "nomod")
# A system's ``reframe_general``: the ReFrame general options (checks/config/site.yaml) it may set for itself.
REFRAME_GENERAL = ("poll_rate_min", "poll_rate_max", "poll_rate_decay")
# A partition's settings for the checks (reframe.extras, rendered into site.yaml by generate.py over
# these defaults; noise_probe_s: seconds of the FWQ noise probe in every benchmark's job, noise/probe.py),
# the others it may set, its collectives' (coll:) and its link matrix's (links: checks/linktest.py's;
# its judging's are links.analysis.SITE_SETTINGS).
EXTRAS_DEFAULTS: dict[str, Any] = {"launcher_options": ["--mpi=pmix"], "num_nodes": 2, "nodes_share_cpus": False,
                                   "noise_probe_s": 2.0}
# fwq_realtime_priority: the noise family's FWQ at SCHED_FIFO (an explicit option: normal priority, a job's,
# when absent); probe_realtime_priority: the probe's (docs/noise.md).
EXTRAS = (*EXTRAS_DEFAULTS, "fwq_realtime_priority", "fwq_iterations", "osu_iterations", "probe_realtime_priority",
          "step_timeout", "step_end_grace", "coll", "links")
COLL_SETTINGS = ("cores_per_node", "multinode_env", "oversubscribed_env")
LINK_RUN_SETTINGS = ("ranks_per_node", "args", "env", "switches")
_NAME = re.compile(r"^[a-z][a-z0-9_]*$")


@dataclass(frozen=True)
class Partition:
    """One partition of a system: where its jobs land and what its builds target."""

    system: str
    name: str
    descr: str
    target: Optional[str]          # None: this host's target (``target: host``), detected at run time
    slurm: tuple[str, ...]         # sbatch/ReFrame access options, e.g. ("--partition=batch", "--constraint=skylake")
    eessi_subdir: str = ""
    reframe: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)
    topology: str = "recorded"     # one of TOPOLOGIES

    def build_target(self) -> str:
        """The archspec target its builds are made for: the fixed one, or this host's (``target: host``)."""

        return self.target or host_target()

    @property
    def detects_topology(self) -> bool:
        """True when the run detects this partition's topology on this host (``topology: detect``)."""
        return self.topology == "detect"

    @property
    def constraint(self) -> str:
        """The Slurm ``--constraint`` of the partition ('' when it has none)."""
        found = [o.split("=", 1)[1] for o in self.slurm if o.startswith("--constraint=")]
        return found[0] if found else ""

    @property
    def key(self) -> str:
        """``<system>-<partition>``: the name of its Spack environment, topology folder, jobs."""
        return f"{self.system}-{self.name}"


@dataclass(frozen=True)
class System:
    """One cluster (or the local one-host Slurm) as its data file describes it."""

    name: str
    path: Path
    data: dict[str, Any] = field(hash=False, compare=False)
    partitions: tuple[Partition, ...] = ()

    @property
    def methods(self) -> list[str]:
        return [str(m) for m in self.data.get("methods") or []]

    @property
    def managed_cluster(self) -> bool:
        """True when the project starts this system's Slurm itself (a ``cluster:`` section, read by
        ``mpiregress cluster start``): a run claims it and starts it when it is down."""
        return isinstance(self.data.get("cluster"), dict)

    @property
    def builds_on_demand(self) -> bool:
        """True when a run builds its missing builds itself (``builds: on_demand``), not the pipeline's build jobs."""
        return self.data.get("builds", "pipeline") == "on_demand"

    @property
    def uses_lmod(self) -> bool:
        """True when its programming environments load Lmod modules (``modules_system: lmod``)."""
        return self.data.get("modules_system") == "lmod"

    def partitions_named(self, name: Optional[str]) -> list[Partition]:
        """Its partition ``name`` (every partition when None); an InputError names the known ones."""
        if name is None:
            return list(self.partitions)
        found = [p for p in self.partitions if p.name == name]
        if not found:
            raise InputError(f"system {self.name} has no partition {name!r} "
                             f"(known: {', '.join(p.name for p in self.partitions)})")
        return found

    @property
    def families(self) -> list[str]:
        """The families a run measures unless told otherwise (default: point-to-point and the MR collectives)."""
        return [str(f) for f in self.data.get("families") or ("pt2pt", "coll")]

    @property
    def weekly_sweeps(self) -> list[str]:
        """The sweep families the weekly schedule measures on each partition, one job each
        (``weekly_sweeps``; default: the collective and the point-to-point size sweeps)."""
        return [str(f) for f in self.data.get("weekly_sweeps") or ("coll-sweep", "pt2pt-sweep")]

    @property
    def executor(self) -> str:
        return str((self.data.get("runner") or {}).get("executor", ""))

    @property
    def tags(self) -> list[str]:
        return [str(t) for t in (self.data.get("runner") or {}).get("tags") or []]

    @property
    def spack_version(self) -> str:
        return str(self.data.get("spack_version") or "")

    @property
    def run_noise(self) -> dict[str, float]:
        """Relative run-to-run noise of one series where no history has measured it, per metric
        (``run_noise``; {} when the file does not say: the cross-method check's own default then)."""
        return {str(k): float(v) for k, v in (self.data.get("run_noise") or {}).items()}

    def ab_store(self) -> Optional[Path]:
        """Where the default branch's build jobs keep their manifests for A/B runs (``ab.manifest_store``:
        environment variables expanded, ``{state}`` = the state folder), or None when the system has none."""


        store = str((self.data.get("ab") or {}).get("manifest_store") or "")
        if not store:
            return None
        expanded = os.path.expandvars(store.replace("{state}", str(state_dir())))
        return None if "$" in expanded else Path(expanded)


# A section that one subsystem reads (the noise floor, the local cluster, the host toolchain, the A/B
# budget, a partition's link judging) is checked by that subsystem: it registers its check here, beside
# the code that reads the section, so this reader knows no judge, family, build method or cluster and a
# bad section is still named when the file is read, not after a run. A check is given the section's value,
# the file and the key; it raises ValueError with what is wrong (the reader puts the file and the key in
# front) or an InputError that is already a whole sentence.
SectionCheck = Callable[[Any, Path, str], None]
_SECTION_CHECKS: dict[str, SectionCheck] = {}
_EXTRAS_CHECKS: dict[str, SectionCheck] = {}


def section_check(key: str, *, extras: bool = False) -> Callable[[SectionCheck], SectionCheck]:
    """Register the decorated function as the check of the top-level section ``key`` (or, with ``extras``,
    of ``partitions.<name>.reframe.extras.<key>``); it runs on every system file read from then on."""
    def register(check: SectionCheck) -> SectionCheck:
        (_EXTRAS_CHECKS if extras else _SECTION_CHECKS)[key] = check
        _load_all.cache_clear()
        return check
    return register


def known_settings(block: Any, known: tuple[str, ...]) -> None:
    """``block`` is a mapping of ``known`` settings only: a misspelt one would be ignored, its default used."""
    if not isinstance(block, dict):
        raise ValueError(f"must be a mapping of {', '.join(known)}")
    unknown = sorted(str(k) for k in block if k not in known)
    if unknown:
        raise ValueError(f"has unknown setting(s) {', '.join(unknown)} (known: {', '.join(known)})")


def _run_check(path: Path, key: str, check: SectionCheck, value: Any) -> None:
    try:
        check(value, path, key)
    except ValueError as err:
        raise _fail(path, key, str(err)) from None


def _fail(path: Path, key: str, message: str) -> InputError:
    return InputError(f"system file {path}: '{key}' {message}")


def load_file(path: Path) -> System:
    """Load and check one system file; an InputError names the file and the key."""
    path = Path(path)
    name = path.stem
    if not _NAME.match(name):
        raise InputError(f"system file {path}: the file name must be a lower-case system name like iris.yaml")
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        raise InputError(f"system file {path}: not valid YAML{where}: {getattr(err, 'problem', None) or err}") from None
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise _fail(path, "schema", f"must be '{SCHEMA}'")
    for key in ("descr", "environs", "methods", "runner", "partitions"):
        if not data.get(key):
            raise _fail(path, key, "is missing")
    executor = (data["runner"] or {}).get("executor")
    if executor not in EXECUTORS:
        raise _fail(path, "runner.executor", f"must be one of {', '.join(EXECUTORS)}, found {executor!r}")

    for key in ("families", "weekly_sweeps"):
        unknown = [f for f in data.get(key) or () if f not in FAMILIES]
        if unknown:
            raise _fail(path, key,
                        f"unknown famil(ies) {', '.join(map(str, unknown))} (known: {', '.join(FAMILIES)})")

    noise = data.get("run_noise") or {}
    if not isinstance(noise, dict) or any(m not in METRICS or isinstance(v, bool) or not isinstance(v, (int, float))
                                          or not 0 < v <= 1 for m, v in noise.items()):
        raise _fail(path, "run_noise", f"must map metrics ({', '.join(METRICS)}) to a relative noise in (0, 1], "
                                       f"found {noise!r}")
    general = data.get("reframe_general") or {}
    if not isinstance(general, dict) or any(k not in REFRAME_GENERAL or isinstance(v, bool)
                                            or not isinstance(v, (int, float)) or v <= 0 for k, v in general.items()):
        raise _fail(path, "reframe_general", f"must map ReFrame's general options ({', '.join(REFRAME_GENERAL)}) "
                                             f"to positive numbers, found {general!r}")
    for key, allowed, default in (("modules_system", MODULES_SYSTEMS, None), ("builds", BUILDS, "pipeline")):
        value = data.get(key, default)
        if value not in allowed:
            raise _fail(path, key, f"must be one of {', '.join(allowed)}, found {value!r}")
    if not (data["runner"] or {}).get("tags"):
        raise _fail(path, "runner.tags", "is missing: a job without tags runs on any runner")
    for key, check in _SECTION_CHECKS.items():
        if data.get(key) is not None:
            _run_check(path, key, check, data[key])
    parts = []
    for pname, spec in (data["partitions"] or {}).items():
        key = f"partitions.{pname}"
        if not isinstance(spec, dict) or not _NAME.match(str(pname)):
            raise _fail(path, key, "must be a mapping under a lower-case partition name")
        slurm = spec.get("slurm") or []
        if not isinstance(slurm, list) or not all(isinstance(o, str) and o.startswith("--") for o in slurm):
            raise _fail(path, f"{key}.slurm", "must be a list of sbatch options like --partition=batch")
        target = spec.get("target")
        if not target or not isinstance(target, str):
            raise _fail(path, f"{key}.target", f"must be an archspec target like skylake_avx512, or "
                                                f"'{HOST_TARGET}' for this host's target detected at run time")
        if target != HOST_TARGET:

            try:
                lookup(target)
            except InputError as err:
                raise _fail(path, f"{key}.target", f"{err} (or '{HOST_TARGET}' for this host's)") from None
        _check_extras(path, key, (spec.get("reframe") or {}).get("extras"))
        topology = spec.get("topology", "recorded")
        if topology not in TOPOLOGIES:
            raise _fail(path, f"{key}.topology", f"must be one of {', '.join(TOPOLOGIES)}, found {topology!r}")
        parts.append(Partition(system=name, name=str(pname), descr=str(spec.get("descr", pname)),
                               target=None if target == HOST_TARGET else target, slurm=tuple(slurm),
                               eessi_subdir=str(spec.get("eessi_subdir") or ""),
                               reframe=dict(spec.get("reframe") or {}), topology=str(topology)))
    return System(name=name, path=path, data=data, partitions=tuple(parts))


def _known_settings(path: Path, where: str, block: Any, known: tuple[str, ...]) -> None:
    try:
        known_settings(block, known)
    except ValueError as err:
        raise _fail(path, where, str(err)) from None


def _check_extras(path: Path, key: str, extras: Any) -> None:
    """A partition's check settings (``reframe.extras``) are named when the file is read, not after a run."""
    if extras is None:
        return
    where = f"{key}.reframe.extras"
    _known_settings(path, where, extras, EXTRAS)
    if "coll" in extras:
        _known_settings(path, f"{where}.coll", extras["coll"], COLL_SETTINGS)
    for key, check in _EXTRAS_CHECKS.items():
        if extras.get(key) is not None:
            _run_check(path, f"{where}.{key}", check, extras[key])


@lru_cache(maxsize=8)
def _load_all(directory: Path) -> tuple[System, ...]:
    files = sorted(Path(directory).glob("*.yaml"))
    if not files:
        raise InputError(f"no system files in {directory}: each cluster is described by systems/<name>.yaml")
    return tuple(load_file(p) for p in files)


def load_all(root: Path = REPO_ROOT) -> list[System]:
    """Every system of the checkout at ``root``, sorted by name."""
    return list(_load_all(paths.systems_dir(root).resolve()))


def section(name: str, key: str) -> tuple[Any, str] | None:
    """(the value of the top-level section ``key`` of system ``name``'s file, None when absent; where it is
    written, 'systems/<name>.yaml'), or None for a name with no system file (results imported from elsewhere).
    A malformed file raises its one-sentence InputError."""
    if name not in paths.system_names():
        return None
    found = get(name)
    return found.data.get(key), f"systems/{found.name}.yaml"


def get(name: str, root: Path = REPO_ROOT) -> System:
    """The system called ``name``; an InputError lists the known ones."""
    for system in load_all(root):
        if system.name == name:
            return system
    known = ", ".join(s.name for s in load_all(root))
    raise InputError(f"no system {name!r} (known: {known}): add systems/{name}.yaml")
