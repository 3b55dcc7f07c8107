"""The microarchitecture guard: can a binary built for one target run on a node?

archspec orders targets by the instructions they imply: a ``broadwell`` binary
runs on ``skylake_avx512`` (its descendant), not the reverse. That ordering is
the whole guard; this module only turns it into a decision and a sentence.
"""
from __future__ import annotations

from typing import Iterable, Optional, Sequence

import archspec.cpu

from mpiregress.errors import InputError


def lookup(name: str) -> archspec.cpu.Microarchitecture:
    """The archspec target called ``name``, or an InputError naming it."""
    try:
        return archspec.cpu.TARGETS[name]
    except KeyError:
        raise InputError(
            f"'{name}' is not a microarchitecture archspec knows "
            f"(examples: x86_64, haswell, broadwell, skylake_avx512, zen2)"
        ) from None


def host_target() -> str:
    """The archspec name of the machine this runs on."""
    return archspec.cpu.host().name


def can_run(build_target: str, node_target: str) -> bool:
    """True when a binary built for ``build_target`` can execute on ``node_target``."""
    build, node = lookup(build_target), lookup(node_target)
    return build == node or build in node.ancestors


def refusal(build_target: str, node_target: str) -> str:
    """The sentence the pipeline prints when it refuses a (build, node) pair."""
    return (
        f"refusing to run: the binary was built for {build_target}, and a "
        f"{node_target} node cannot execute {build_target} instructions "
        f"(it would die of SIGILL, illegal instruction); build for "
        f"{node_target} or an ancestor of it ({', '.join(a.name for a in lookup(node_target).ancestors[:3])}, ...)"
    )


def check(build_target: str, node_targets: Iterable[str]) -> Optional[str]:
    """None when the build can run on every node, else the refusal sentence for the first node that cannot."""
    for node in node_targets:
        if not can_run(build_target, node):
            return refusal(build_target, node)
    return None


def best_build(build_targets: Sequence[str], node_targets: Sequence[str]) -> Optional[int]:
    """Index of the most specific build that runs on all ``node_targets``, or None.

    The most specific compatible target is the one with the most ancestors:
    a skylake_avx512 build beats a broadwell build on a Skylake node, and both
    beat a generic x86_64 one.
    """
    best, best_depth = None, -1
    for i, target in enumerate(build_targets):
        if all(can_run(target, node) for node in node_targets):
            depth = len(lookup(target).ancestors)
            if depth > best_depth:
                best, best_depth = i, depth
    return best


def from_eessi_subdir(subdir: str) -> str:
    """archspec name for an EESSI software subdirectory (``x86_64/intel/haswell`` -> ``haswell``)."""
    last = subdir.rstrip("/").split("/")[-1]
    return "x86_64" if last == "generic" else last
