"""pyplot on the Agg backend for the families' own figures (the coll maps, the link heatmap, the noise spectra)."""
from __future__ import annotations

from typing import Any


def agg_pyplot() -> Any:
    """pyplot on the headless Agg backend, loaded at the first figure: matplotlib costs every command and
    ReFrame check that imports a figure module about a second of start-up otherwise (pyproject's
    banned-module-level-imports)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt
