"""The May 2025 ULHPC study's measurements (shared/data/ulhpc-2025-05-osu-results.csv) in the project's names."""
from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

SCENARIO_TO_PLACEMENT = {
    "SameNumaNode": "same_numa",
    "SameSocketDiffNuma": "cross_numa",
    "DifferentSockets": "cross_socket",
    "DifferentNodes": "cross_node",
}
METHOD_NAMES = {"SOURCE": "source", "EASYBUILD": "easybuild", "EESSI": "eessi", "SPACK": "spack"}
# The study ran on Iris' mixed batch partition without recording the node generation,
# so its Iris values stand for both partitions until each is measured on its own.
STUDY_PARTITIONS = {"iris": ("broadwell", "skylake"), "aion": ("batch",)}


@dataclass(frozen=True)
class StudyRow:
    system: str
    placement: str
    method: str
    metric: str
    value: float
    unit: str
    status_in_study: str


def read(path: Path) -> list[StudyRow]:
    """Rows of the study CSV, renamed to placements/methods/metrics of names.py."""
    with open(path, newline="") as handle:
        return [
            StudyRow(
                system=row["system"],
                placement=SCENARIO_TO_PLACEMENT[row["scenario"]],
                method=METHOD_NAMES[row["method"]],
                metric=row["metric"],
                value=float(row["value"]),
                unit=row["unit"],
                status_in_study=row["status_in_study"],
            )
            for row in csv.DictReader(handle)
        ]
