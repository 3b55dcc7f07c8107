"""Read a JSON input file, turning every way it can be wrong into one sentence naming it.

Kept for its callers; the checks themselves live in :mod:`mpiregress.model.inputs`.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from mpiregress.model import inputs


def read(path: Path, what: str, missing_hint: str = "") -> Any:
    """The parsed content of ``path``; ``what`` names the file in errors ("manifest", "ReFrame report")."""
    return inputs.read_json(path, what, missing_hint=missing_hint)
