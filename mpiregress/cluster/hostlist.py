"""Slurm's compact node lists (``aion-[0001-0064]``, ``node[1,3-4],login1``) as node names.

A pure function, so a check can size its job from a node list without asking Slurm (a dry run
writes job scripts where there is no Slurm at all). Slurm itself says whether the nodes exist.
"""
from __future__ import annotations

import re

from mpiregress.errors import InputError

_GROUP = re.compile(r"\[([^\[\]]*)\]")
MAX_NODES = 100_000


def _split_top(text: str) -> list[str]:
    """Split at the commas outside brackets."""
    items, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += (ch == "[") - (ch == "]")
        if depth < 0:
            break
        if ch == "," and depth == 0:
            items.append(text[start:i])
            start = i + 1
    if depth != 0:
        raise InputError(f"node list {text!r} has unbalanced brackets")
    items.append(text[start:])
    return [item.strip() for item in items if item.strip()]


def _range(spec: str, whole: str) -> list[str]:
    out = []
    for part in spec.split(","):
        low, _, high = part.strip().partition("-")
        if not low.isdigit() or (high and not high.isdigit()):
            raise InputError(f"node list {whole!r}: {part.strip()!r} is not a number or a range like 01-64")
        if high and int(high) < int(low):
            raise InputError(f"node list {whole!r}: range {part.strip()} runs backwards")
        width = len(low)
        out += [str(n).zfill(width) for n in range(int(low), int(high or low) + 1)]
        if len(out) > MAX_NODES:
            raise InputError(f"node list {whole!r} names more than {MAX_NODES} nodes")
    return out


def expand(text: str) -> list[str]:
    """The node names of a Slurm node list, in order, without repeats; InputError (one sentence) when malformed."""
    names: list[str] = []
    for item in _split_top(text.strip()):
        partial = [""]
        pos = 0
        for match in _GROUP.finditer(item):
            prefix = item[pos:match.start()]
            partial = [p + prefix + n for p in partial for n in _range(match.group(1), text)]
            pos = match.end()
        if "[" in item[pos:] or "]" in item[pos:]:
            raise InputError(f"node list {text!r} has unbalanced brackets")
        names += [p + item[pos:] for p in partial]
    if not names:
        raise InputError(f"node list {text!r} names no node")
    return list(dict.fromkeys(names))
