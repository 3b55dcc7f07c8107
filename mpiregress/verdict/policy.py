"""Which evidence gates, per pipeline event: ``gating.yaml`` read once, and the event a pipeline is.

The event of a CI job comes from GitLab's predefined variables (``CI_PIPELINE_SOURCE``,
``CI_COMMIT_BRANCH``, ``CI_DEFAULT_BRANCH``) and the paths the merge request changes.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping, Optional

import yaml

from mpiregress.errors import InputError

POLICY_FILE = Path(__file__).with_name("gating.yaml")
JUDGES = frozenset({"paired_ab", "build_method", "history_gate", "baseline_band", "baseline_band_changed",
                    "cross_method", "noise", "links"})
# What ``look_at`` may name: the judges, plus the baselines' own quality findings (stale, lenient bands), the
# power of a pass short of its target, and the run's own errors-free notes.
LOOK_AT = JUDGES | {"baselines", "power"}
# The build definition of each method, by path: an MR touching one may make that method fall behind.
METHOD_PATHS: Mapping[str, str] = {"spack": "spack-envs/", "easybuild": "easyconfigs/"}


@dataclass(frozen=True)
class Rules:
    """What gates for one event."""

    name: str
    describe: str
    gates: tuple[str, ...]
    evidence: tuple[str, ...]
    confirm_history: bool = False
    # Which judges' findings may make the event "needs a look" (None: every judge's). A toolchain MR is
    # judged for what it changed: a gap main has too, a stale baseline, a noisy node are evidence there.
    look_at: Optional[tuple[str, ...]] = None


@functools.cache
def load(path: Path = POLICY_FILE) -> Mapping[str, Rules]:
    """Every event's rules, or InputError naming what is wrong in the file."""
    try:
        data = yaml.safe_load(Path(path).read_text())
    except OSError as err:
        raise InputError(f"gating policy {path} cannot be read: {err.strerror}") from None
    except yaml.YAMLError as err:
        where = getattr(err, "problem_mark", None)
        at = f" at line {where.line + 1}" if where is not None else ""
        raise InputError(f"gating policy {path} cannot be read: not valid YAML{at} "
                         f"({getattr(err, 'problem', None) or 'parse error'})") from None
    events = (data or {}).get("events")
    if not isinstance(events, dict) or not events:
        raise InputError(f"gating policy {path}: 'events' must map event names to their rules")
    rules = {}
    for name, spec in events.items():
        gates, evidence = tuple(spec.get("gates") or ()), tuple(spec.get("evidence") or ())
        unknown = sorted(set(gates + evidence) - JUDGES)
        if unknown or not gates:
            raise InputError(f"gating policy {path}: event {name!r} "
                             + (f"names unknown judge(s) {unknown}" if unknown else "gates on nothing"))
        look_at = spec.get("look_at")
        if look_at is not None:
            look_at = tuple(look_at)
            wrong = sorted(set(look_at) - LOOK_AT)
            if wrong:
                raise InputError(f"gating policy {path}: event {name!r} look_at names unknown finding kind(s) "
                                 f"{wrong} (known: {', '.join(sorted(LOOK_AT))})")
        rules[name] = Rules(name, str(spec.get("describe", "")), gates, evidence, bool(spec.get("confirm_history")),
                            look_at)
    return rules


def event_names() -> list[str]:
    """The events the policy knows, for the CLI's choices."""
    return list(load())


def pipeline_event(env: Mapping[str, str], changed: Optional[Iterable[str]] = None) -> str:
    """The event of a GitLab pipeline from its predefined variables and the paths an MR changes.

    A merge request that changes baselines only is a baselines MR; one that changes anything that
    builds or measures (toolchains, Spack environments, easyconfigs, checks) is a toolchain MR.
    """
    source = env.get("CI_PIPELINE_SOURCE", "")
    if source == "merge_request_event":
        paths = list(changed or ())
        if paths and all(p.startswith("baselines/") for p in paths):
            return "baselines_mr"
        return "toolchain_mr"
    if source == "schedule":
        return "schedule"
    if source == "push" and env.get("CI_COMMIT_BRANCH") and env.get("CI_COMMIT_BRANCH") == env.get("CI_DEFAULT_BRANCH"):
        return "default_branch"
    return "schedule" if source in ("web", "api", "trigger") else "run"


def changed_baselines(changed: Optional[Iterable[str]]) -> Optional[frozenset[str]]:
    """Systems whose baselines file is among the ``changed`` paths (None when the changes are not known)."""
    if changed is None:
        return None
    return frozenset(Path(p).stem for p in changed if p.startswith("baselines/") and p.endswith(".yaml"))


def changed_methods(changed: Iterable[str]) -> frozenset[str]:
    """Methods whose build definition is among the ``changed`` paths."""
    paths = list(changed)
    return frozenset(m for m, prefix in METHOD_PATHS.items() if any(p.startswith(prefix) for p in paths))
