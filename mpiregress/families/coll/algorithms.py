"""OpenMPI coll/tuned algorithms as data: ids, names, segmenting, and the MCA variables that force them.

The data lives in ``checks/config/coll_tuned/openmpi-<major.minor>.yaml`` (one file per
OpenMPI series, ids verified against OpenMPI's sources and ``ompi_info``). This module
loads and validates it and turns a (collective, algorithm, segment size) choice into the
environment a forced run needs. ``default`` is OpenMPI's fixed decision (id 0): nothing
is forced for it, so the default run is the one users get.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Optional, Union

import yaml

from mpiregress import paths
from mpiregress.errors import InputError

DEFAULT = "default"
COLLECTIVES: tuple[str, ...] = ("bcast", "scatter", "allreduce", "alltoall")
_MSGSIZE_RULES = ("bytes", "bytes_x_comm_size")
MODELS: tuple[Optional[str], ...] = (None, "pipeline", "linear", "binary", "binomial")
_VERSION = re.compile(r"^(?P<series>\d+\.\d+)(?:\.\d+)?(?:[a-z]\w*)?$")


def data_dir() -> Path:
    """Folder of the per-version algorithm files."""
    return paths.checks_dir() / "config" / "coll_tuned"


@dataclass(frozen=True)
class Algorithm:
    """One coll/tuned algorithm of one collective."""

    id: int
    name: str
    segments: bool = False           # takes a segment size
    only_nprocs: Optional[int] = None  # refuses every other communicator size
    model: Optional[str] = None      # seed 002 latency model: pipeline, linear, binary, binomial


@dataclass(frozen=True)
class Collective:
    """A collective's algorithms and how a dynamic rules file names and sizes it."""

    name: str
    rules_id: int                    # index in OpenMPI's COLLTYPE enum
    rules_msgsize: str               # "bytes" or "bytes_x_comm_size"
    faninout: int
    algorithms: tuple[Algorithm, ...]

    def by_name(self, name: str) -> Algorithm:
        for alg in self.algorithms:
            if alg.name == name:
                return alg
        raise InputError(f"OpenMPI coll/tuned has no {self.name} algorithm named {name!r} "
                         f"(known: {', '.join(a.name for a in self.algorithms)})")

    def by_id(self, alg_id: int) -> Algorithm:
        for alg in self.algorithms:
            if alg.id == alg_id:
                return alg
        raise InputError(f"OpenMPI coll/tuned has no {self.name} algorithm {alg_id} "
                         f"(valid: {', '.join(f'{a.id} {a.name}' for a in self.algorithms)})")

    def rule_msgsize(self, osu_size: int, nprocs: int) -> int:
        """The message size OpenMPI's dynamic decision compares with a rule, for an OSU size."""
        return osu_size * nprocs if self.rules_msgsize == "bytes_x_comm_size" else osu_size


@dataclass(frozen=True)
class TunedAlgorithms:
    """Everything the project knows about one OpenMPI series' coll/tuned."""

    series: str                      # "4.1"
    versions: tuple[str, ...]
    default_segsize: int
    mca: Mapping[str, str]
    collectives: Mapping[str, Collective]

    def collective(self, name: str) -> Collective:
        if name not in self.collectives:
            raise InputError(f"collective {name!r} is not described for OpenMPI {self.series} "
                             f"(known: {', '.join(self.collectives)})")
        return self.collectives[name]

    def algorithm(self, collective: str, algorithm: Union[str, int]) -> Algorithm:
        """Look an algorithm up by name or id; an unknown one is an InputError sentence."""
        coll = self.collective(collective)
        if isinstance(algorithm, int) or (isinstance(algorithm, str) and algorithm.isdigit()):
            return coll.by_id(int(algorithm))
        return coll.by_name(algorithm)

    def names(self, collective: str) -> list[str]:
        """``default`` then every forcible algorithm name, in id order."""
        return [DEFAULT] + [a.name for a in self.collective(collective).algorithms]


def _fail(path: Path, what: str) -> InputError:
    return InputError(f"coll/tuned algorithm file {path}: {what}")


def parse(data: Any, path: Path) -> TunedAlgorithms:
    """Validate the YAML of one algorithm file (see the file's comments for the fields)."""
    if not isinstance(data, dict):
        raise _fail(path, "must hold a mapping")
    for key in ("openmpi", "versions", "mca", "default_segsize", "collectives"):
        if key not in data:
            raise _fail(path, f"'{key}' is missing")
    default_segsize = parse_segsize(data["default_segsize"], f"{path}: default_segsize")
    mca = data["mca"]
    if not isinstance(mca, dict) or not {"use_dynamic_rules", "algorithm", "segmentsize",
                                         "rules_filename"} <= set(mca):
        raise _fail(path, "'mca' must name use_dynamic_rules, algorithm, segmentsize and rules_filename")
    collectives: dict[str, Collective] = {}
    if not isinstance(data["collectives"], dict) or not data["collectives"]:
        raise _fail(path, "'collectives' must be a non-empty mapping")
    for name, spec in data["collectives"].items():
        if not isinstance(spec, dict):
            raise _fail(path, f"collective {name!r} must be a mapping")
        if spec.get("rules_msgsize") not in _MSGSIZE_RULES:
            raise _fail(path, f"{name}: rules_msgsize must be one of {', '.join(_MSGSIZE_RULES)}")
        algs = []
        for alg_id, alg in (spec.get("algorithms") or {}).items():
            if not isinstance(alg_id, int) or alg_id < 1:
                raise _fail(path, f"{name}: algorithm id {alg_id!r} must be an integer >= 1 (0 is the default)")
            if not isinstance(alg, dict) or not isinstance(alg.get("name"), str):
                raise _fail(path, f"{name}: algorithm {alg_id} needs a name")
            if alg["name"] == DEFAULT:
                raise _fail(path, f"{name}: '{DEFAULT}' is reserved for OpenMPI's fixed decision (id 0)")
            if alg.get("model") not in MODELS:
                raise _fail(path, f"{name}: algorithm {alg_id} has model {alg.get('model')!r} "
                                  f"(known: {', '.join(str(m) for m in MODELS[1:])})")
            algs.append(Algorithm(alg_id, alg["name"], bool(alg.get("segments", False)),
                                  alg.get("only_nprocs"), alg.get("model")))
        if not algs:
            raise _fail(path, f"{name}: no algorithms")
        try:
            collectives[name] = Collective(name, int(spec["rules_id"]), spec["rules_msgsize"],
                                           int(spec.get("faninout", 0)), tuple(sorted(algs, key=lambda a: a.id)))
        except (KeyError, TypeError, ValueError):
            raise _fail(path, f"{name}: rules_id and faninout must be integers") from None
    return TunedAlgorithms(str(data["openmpi"]), tuple(str(v) for v in data["versions"]),
                           default_segsize, dict(mca), collectives)


def load(openmpi_version: str, directory: Optional[Path] = None) -> TunedAlgorithms:
    """The algorithm data for ``openmpi_version`` (e.g. "4.1.6"); InputError when there is none."""
    match = _VERSION.match(str(openmpi_version).strip())
    if not match:
        raise InputError(f"OpenMPI version {openmpi_version!r} is not a version number like 4.1.6")
    directory = directory or data_dir()
    path = directory / f"openmpi-{match.group('series')}.yaml"
    if not path.is_file():
        known = sorted(p.stem.removeprefix("openmpi-") for p in directory.glob("openmpi-*.yaml"))
        raise InputError(f"no coll/tuned algorithm data for OpenMPI {openmpi_version} ({path} is missing; "
                         f"described series: {', '.join(known) or 'none'})")
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as err:
        raise _fail(path, f"is not valid YAML ({str(err).splitlines()[0]})") from None
    return parse(data, path)


def parse_segsize(value: Any, where: str = "segment size") -> int:
    """A segment size in bytes (a non-negative integer); anything else is an InputError."""
    if isinstance(value, bool):
        raise InputError(f"{where}: {value!r} is not a segment size in bytes")
    if isinstance(value, int):
        number = value
    elif isinstance(value, str) and value.strip().isdigit():
        number = int(value.strip())
    else:
        raise InputError(f"{where}: {value!r} is not a segment size in bytes (a whole number, e.g. 8192)")
    if number < 0:
        raise InputError(f"{where}: {value!r} is negative")
    return number


def forced_env(tuned: TunedAlgorithms, collective: str, algorithm: Union[str, int],
               segsize: Any = None, nprocs: Optional[int] = None) -> dict[str, str]:
    """The environment that forces ``algorithm`` for ``collective`` (empty for ``default``).

    ``segsize`` applies to segmenting algorithms only (None: the data's default);
    a segment size given for an algorithm that does not segment is refused rather
    than silently ignored. ``nprocs`` lets an algorithm that needs an exact
    communicator size (alltoall two_proc) be refused before launch.
    """
    coll = tuned.collective(collective)
    if algorithm == DEFAULT or algorithm == 0 or algorithm == "0":
        if segsize is not None:
            raise InputError(f"{collective}: a segment size ({segsize!r}) was given for the default "
                             "algorithm, which OpenMPI chooses itself")
        return {}
    alg = tuned.algorithm(collective, algorithm)
    if alg.only_nprocs is not None and nprocs is not None and nprocs != alg.only_nprocs:
        raise InputError(f"{collective} algorithm {alg.name} runs only on {alg.only_nprocs} processes, "
                         f"not {nprocs}")
    env = {
        tuned.mca["use_dynamic_rules"]: "1",
        tuned.mca["algorithm"].format(collective=coll.name): str(alg.id),
    }
    if alg.segments:
        size = (tuned.default_segsize if segsize is None
                else parse_segsize(segsize, f"{collective} {alg.name} segment size"))
        env[tuned.mca["segmentsize"].format(collective=coll.name)] = str(size)
    elif segsize is not None:
        parse_segsize(segsize, f"{collective} {alg.name} segment size")
        raise InputError(f"{collective} algorithm {alg.name} does not segment; remove its segment size {segsize!r}")
    return env


def rules_file_env(tuned: TunedAlgorithms, rules_file: Path) -> dict[str, str]:
    """The environment that makes coll/tuned decide from a dynamic rules file."""
    return {tuned.mca["use_dynamic_rules"]: "1", tuned.mca["rules_filename"]: str(rules_file)}
