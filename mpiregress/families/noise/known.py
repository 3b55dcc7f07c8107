"""The periodic sources a system is known to have (``known_noise_sources`` in ``systems/<name>.yaml``).

An event the noise family names at a known source's rate is still said, with what the system's file says it
is, but it is evidence in the verdict, not "needs a look" in every weekly run: on the local cluster the VM
host's 10 ms timer was named in 6 of 15 controls of one set (benchmarks/noise_injected.py, noise-keep27).
A new source, or a known one at a new rate, still asks for a person.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mpiregress.model import systems

KEY = "known_noise_sources"


@dataclass(frozen=True)
class KnownSource:
    """A periodic source at ``hz`` the system's admins know of, and what it is (``what``, said beside it)."""

    hz: float
    what: str
    source: str            # where it is written: systems/<name>.yaml


def sources_from(data: Any, source: str) -> tuple[KnownSource, ...]:
    """The known sources of a system file's ``known_noise_sources`` list; ValueError names what is wrong."""
    if data is None:
        return ()
    if not isinstance(data, list):
        raise ValueError("must be a list of {hz: rate, what: what it is}")
    out: list[KnownSource] = []
    for entry in data:
        systems.known_settings(entry, ("hz", "what"))
        rate, what = entry.get("hz"), entry.get("what")
        if isinstance(rate, bool) or not isinstance(rate, (int, float)) or rate <= 0:
            raise ValueError(f"hz must be a positive rate in Hz, found {rate!r}")
        if not isinstance(what, str) or not what.strip():
            raise ValueError(f"what must say what the {rate} Hz source is, found {what!r}")
        out.append(KnownSource(float(rate), what.strip(), source))
    return tuple(out)


@systems.section_check(KEY)
def _check(value: Any, path: Path, key: str) -> None:
    sources_from(value, str(path))


def known_of(system: str) -> tuple[KnownSource, ...]:
    """The known sources of ``system`` (none for a name with no system file: results imported from elsewhere)."""
    found = systems.section(system, KEY)
    return () if found is None else sources_from(*found)
