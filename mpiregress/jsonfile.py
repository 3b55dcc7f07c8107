"""Read a JSON input file, turning every way it can be wrong into one sentence naming it."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .errors import InputError


def read(path: Path, what: str, missing_hint: str = "") -> Any:
    """The parsed content of ``path``; ``what`` names the file in errors ("manifest", "ReFrame report")."""
    try:
        text = Path(path).read_text()
    except FileNotFoundError:
        raise InputError(f"{what} {path} does not exist{missing_hint}") from None
    except OSError as err:
        raise InputError(f"{what} {path} cannot be read: {err.strerror}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise InputError(f"{what} {path} is not valid JSON: {err}") from None
