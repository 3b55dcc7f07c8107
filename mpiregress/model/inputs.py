"""The one validation path for every file the project reads.

Each reader (results, ReFrame reports, manifests, baselines, toolchain, topology,
history) takes its file through here first: a file that is missing, unreadable,
a folder, binary, truncated, not JSON/YAML, or of the wrong top-level type
becomes an :class:`InputError` with one sentence naming the file, never a
traceback. The readers then check their own fields on data of the right shape.
"""
from __future__ import annotations

import json
import math
from dataclasses import MISSING, fields
from pathlib import Path
from typing import Any, Optional

import yaml

from mpiregress.errors import InputError
from mpiregress.model.names import METRICS
from mpiregress.model.results import AB_FIELDS, STATUSES, Result, _upgrade, from_data
from mpiregress.model.topology import Topology

# JSON/YAML top-level types by the word a sentence uses for them.
_KINDS: dict[type, str] = {dict: "a mapping (JSON object)", list: "a list (JSON array)"}


def _type_name(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def read_bytes(path: Path, what: str, missing_hint: str = "") -> bytes:
    """The bytes of ``path``, or one sentence saying why they cannot be had (``what`` names the file)."""
    path = Path(path)
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise InputError(f"{what} {path} does not exist{missing_hint}") from None
    except IsADirectoryError:
        raise InputError(f"{what} {path} is a folder, not a file") from None
    except OSError as err:
        raise InputError(f"{what} {path} cannot be read: {err.strerror or err}") from None


def read_text(path: Path, what: str, missing_hint: str = "") -> str:
    """The text of ``path``, or one sentence saying why it cannot be had (``what`` names the file)."""
    raw = read_bytes(path, what, missing_hint)
    if b"\0" in raw:
        raise InputError(f"{what} {path} is binary, not text (NUL byte at offset {raw.index(0)})")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise InputError(f"{what} {path} is not UTF-8 text (byte {err.start} cannot be decoded)") from None
    if not text.strip():
        raise InputError(f"{what} {path} is empty")
    return text


def _expect(data: Any, expect: Optional[type], what: str, path: Path, fmt: str) -> Any:
    if expect is not None and not isinstance(data, expect):
        raise InputError(f"{what} {path} must hold {_KINDS.get(expect, expect.__name__)}, "
                         f"but its {fmt} is {_type_name(data)}")
    return data


def read_json(path: Path, what: str, expect: Optional[type] = None, missing_hint: str = "") -> Any:
    """Parsed JSON of ``path``, checked to be of type ``expect`` (dict or list) when given."""
    text = read_text(path, what, missing_hint)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        cut = " (the file looks truncated)" if err.pos >= len(text.rstrip()) else ""
        raise InputError(f"{what} {path} is not valid JSON: {err.msg} at line {err.lineno} "
                         f"column {err.colno}{cut}") from None
    except RecursionError:
        raise InputError(f"{what} {path} is nested too deeply to be a {what}") from None
    return _expect(data, expect, what, Path(path), "JSON")


def read_yaml(path: Path, what: str, expect: Optional[type] = dict, missing_hint: str = "") -> Any:
    """Parsed YAML of ``path`` (safe loader), checked to be of type ``expect`` when given."""
    text = read_text(path, what, missing_hint)
    try:
        data = yaml.safe_load(text)
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark
        where = f" at line {mark.line + 1} column {mark.column + 1}" if mark else ""
        raise InputError(f"{what} {path} is not valid YAML: {err.problem or err.context}{where}") from None
    except yaml.YAMLError as err:
        raise InputError(f"{what} {path} is not valid YAML: {' '.join(str(err).split())}") from None
    except RecursionError:
        raise InputError(f"{what} {path} is nested too deeply to be a {what}") from None
    return _expect(data, expect, what, Path(path), "YAML")


# -- result records ----------------------------------------------------------

def _is_number(value: Any) -> bool:
    return not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value)


def check_result_record(item: Any, where: str) -> None:
    """Refuse a result record whose fields have the wrong type or an unknown name.

    Checks against the fields of :class:`mpiregress.model.results.Result`, so that
    nothing downstream (history, gate, reports) meets a ``null`` sample, a text
    value or a metric it does not know.
    """


    if not isinstance(item, dict):
        raise InputError(f"{where} must be a mapping (JSON object), found {_type_name(item)}")
    item = upgrade_record(item)
    known = {f.name: f for f in fields(Result)}
    unknown = sorted(set(item) - set(known))
    if unknown:
        raise InputError(f"{where} has unknown field(s) {', '.join(map(repr, unknown))}")
    missing = [name for name, f in known.items()
               if f.default is MISSING and f.default_factory is MISSING and name not in item]
    if missing:
        raise InputError(f"{where} lacks the field(s) {', '.join(missing)}")
    for name, value in item.items():
        kind = str(known[name].type)
        if kind == "str" and not isinstance(value, str):
            raise InputError(f"{where}: {name} must be text, found {_type_name(value)} {value!r:.40}")
        if kind == "int" and (isinstance(value, bool) or not isinstance(value, int)):
            raise InputError(f"{where}: {name} must be a whole number, found {_type_name(value)} {value!r:.40}")
        if kind == "Optional[float]" and value is not None and not _is_number(value):
            raise InputError(f"{where}: {name} must be a finite number or null, found {value!r:.40}")
        if kind == "list[float]":
            if not isinstance(value, list):
                raise InputError(f"{where}: {name} must be a list of numbers, found {_type_name(value)}")
            bad = next((v for v in value if not _is_number(v)), None)
            if bad is not None or any(not _is_number(v) for v in value):
                raise InputError(f"{where}: {name} must hold finite numbers only, found {bad!r:.40}")
        if kind == "list[str]" and (not isinstance(value, list) or not all(isinstance(v, str) for v in value)):
            raise InputError(f"{where}: {name} must be a list of text, found {value!r:.60}")
        if kind == "dict[str, Any]" and not isinstance(value, dict):
            raise InputError(f"{where}: {name} must be a mapping, found {_type_name(value)} {value!r:.40}")
    # A series' parameters: an ordered mapping of names to text or whole numbers (DESIGN.md).
    for name, value in item["parameters"].items():
        if isinstance(value, bool) or not isinstance(value, (str, int)):
            raise InputError(f"{where}: parameter {name!r} must be text or a whole number, "
                             f"found {_type_name(value)} {value!r:.40}")
    if item["metric"] not in METRICS:
        raise InputError(f"{where}: metric {item['metric']!r} is not one of {', '.join(METRICS)}")
    if item["status"] not in STATUSES:
        raise InputError(f"{where}: status {item['status']!r} is not one of {', '.join(STATUSES)}")
    check_physical(item["metric"], item.get("value"), item.get("samples") or [], item.get("reference"), where)
    tolerance = item.get("tolerance")
    if tolerance is not None and tolerance < 0:
        raise InputError(f"{where}: tolerance {tolerance:g} is impossible: a band is zero or wider")


def check_physical(metric: str, value: Any, samples: Any, reference: Any, where: str) -> None:
    """Refuse a value, sample or reference that cannot be a measurement of ``metric`` (names.Metric.impossible):
    a latency or bandwidth that is not above zero or not finite, an efficiency outside (0, 1]."""

    spec = METRICS.get(metric)
    if spec is None:
        return
    for label, number in [("value", value), *((f"sample #{i}", v) for i, v in enumerate(samples)),
                          ("reference", reference)]:
        if number is None:
            continue
        why = spec.impossible(number)
        if why:
            raise InputError(f"{where}: {label}: {why}")


def _identity(item: Any) -> tuple:
    """What makes a record one measurement: its series, and for an A/B sample its side, pair and position."""
    conditions = item.conditions if isinstance(item.conditions, dict) else {}
    return (item.key(), tuple((f, str(conditions[f])) for f in AB_FIELDS if f in conditions))


def check_unique(found: list, path: Path) -> None:
    """Refuse a results file that holds one series twice (a copied or concatenated file would count twice)."""
    seen: dict[tuple, int] = {}
    for index, result in enumerate(found):
        first = seen.setdefault(_identity(result), index)
        if first != index:
            copies = sum(1 for r in found if _identity(r) == _identity(result))
            raise InputError(f"results file {path}: result #{index} repeats the series {result.key().name()} of "
                             f"result #{first} ({copies} records of it): a results file holds each series once")


def upgrade_record(item: dict) -> dict:
    """A record written before series had parameters (placement, message_size), in today's shape."""

    return _upgrade(item)


def read_results(path: Path, allow_empty: bool = False) -> list:
    """The result records of a results file, each checked; an empty list is refused unless allowed.

    Judging nothing must not pass: ``compare``, ``report --gate`` and ``history import``
    all read through here.
    """

    path = Path(path)
    data = read_json(path, "results file", expect=list)
    if not data and not allow_empty:
        raise InputError(f"results file {path} holds no results: there is nothing to judge "
                         "(did the run measure anything?)")
    for index, item in enumerate(data):
        check_result_record(item, f"results file {path}: result #{index}")
    found = from_data(data)
    check_unique(found, path)
    return found


def read_topology(path: Path) -> Any:
    """The :class:`mpiregress.model.topology.Topology` in a ReFrame processor file (``processor.json``)."""

    data = read_json(path, "topology file", expect=dict)
    try:
        return Topology.from_processor_info(data)
    except ValueError as err:
        raise InputError(f"topology file {path}: {err}") from None
