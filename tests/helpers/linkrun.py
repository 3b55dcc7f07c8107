"""Synthetic linktest runs (format v1 records) with chosen slow ranks, links and transients."""
from __future__ import annotations

from typing import Iterable, Optional

import numpy as np

from mpiregress.families.links.resultsfile import PHASE_PARALLEL, PHASE_RETEST, RECORD, LinkRun


def make_run(hosts: list[str], slow_ranks: Iterable[int] = (), slow_links: Iterable[tuple[int, int]] = (),
             transients: Iterable[tuple[int, int]] = (), factor: float = 10.0, retest: Optional[int] = None,
             seed: int = 0, intra_us: float = 0.5, inter_us: float = 2.0) -> LinkRun:
    """Every pair measured once (latency with 3 % noise, bandwidth its inverse); the faults multiply
    latency by ``factor`` on both measurements (transients: on the first only); the ``retest``
    slowest pairs by latency get a second measurement (default: all pairs)."""
    rng = np.random.default_rng(seed)
    n = len(hosts)
    a, b = np.triu_indices(n, 1)
    node = np.array([hosts.index(h) for h in hosts])
    base = np.where(node[a] == node[b], intra_us, inter_us)
    lat1 = base * rng.normal(1, 0.03, a.size)
    lat2 = base * rng.normal(1, 0.03, a.size)
    for r in slow_ranks:
        sel = (a == r) | (b == r)
        lat1[sel] *= factor
        lat2[sel] *= factor
    for x, y in slow_links:
        sel = (a == min(x, y)) & (b == max(x, y))
        lat1[sel] *= factor
        lat2[sel] *= factor
    for x, y in transients:
        lat1[(a == min(x, y)) & (b == max(x, y))] *= factor
    main = _records(a, b, lat1, PHASE_PARALLEL)
    order = np.argsort(-lat1)[: a.size if retest is None else retest]
    again = _records(a[order], b[order], lat2[order], PHASE_RETEST)
    return LinkRun(nranks=n, hosts=list(hosts), small_size=8, large_size=1 << 20, warmup=10, lat_iters=100,
                   bw_iters=10, serial=False, retest_count=len(order), main=main, retest=again, complete=True)


def _records(a: np.ndarray, b: np.ndarray, lat: np.ndarray, phase: int) -> np.ndarray:
    rec = np.zeros(a.size, dtype=RECORD)
    rec["rank_a"], rec["rank_b"], rec["phase"], rec["valid"] = a, b, phase, 1
    for field in ("lat_us", "lat_median_us", "lat_min_us"):
        rec[field] = lat
    for field in ("bw_mbs", "bw_median_mbs", "bw_max_mbs"):
        rec[field] = 1000.0 / lat  # bandwidth falls with the same fault
    return rec
