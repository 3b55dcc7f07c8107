"""The site's switch map (YAML: node -> switch) and node lists, checked against a run's nodes.

Example ``switches.yaml``::

    switches:
      aion-0001: s01
      aion-0002: s01
      aion-0129: s02
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterable, Optional

from mpiregress.errors import InputError
from mpiregress.model import inputs


def load_switches(path: Path, nodes: Iterable[str]) -> dict[str, str]:
    """node -> switch for every node of the run; InputError when the file is malformed or misses a node."""
    data = inputs.read_yaml(Path(path), "the switch map", expect=None)
    mapping = data.get("switches") if isinstance(data, dict) else None
    if not isinstance(mapping, dict) or not all(isinstance(v, (str, int)) for v in mapping.values()):
        raise InputError(f"the switch map {path} needs a 'switches:' mapping of node name to switch name")
    switches = {str(k): str(v) for k, v in mapping.items()}
    missing = sorted(set(nodes) - set(switches))
    if missing:
        raise InputError(f"the switch map {path} does not name the switch of node(s) {', '.join(missing[:5])}"
                         f"{' and more' if len(missing) > 5 else ''}, which the run measured")
    return switches


def parse_node_list(text: Optional[str], nodes: Iterable[str]) -> list[str]:
    """A comma-separated node list, every name known to the run; InputError naming the unknown ones."""
    if not text:
        return []
    wanted = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in wanted if n not in set(nodes)]
    if unknown:
        raise InputError(f"node(s) {', '.join(unknown)} of the node list were not in this linktest run "
                         f"(its nodes: {', '.join(sorted(set(nodes))[:8])}{' ...' if len(set(nodes)) > 8 else ''})")
    return wanted
