"""The pipeline's sequential A/B looks over simulated pairs: the one loop the A/B simulations share.

As `mpiregress run --ab-against` does it: every series gets ``initial_pairs`` pairs, then after each look the
series the real judge sends on (``paired.continuing``) get their schedule's next round, until none wants more.
"""
from __future__ import annotations

from typing import Callable, Hashable, Sequence

from mpiregress.verdict.ab import paired
from mpiregress.verdict.ab.sequential import Schedule

# measure(key, first pair index, pairs, look) -> the A and B records of those pairs
Measure = Callable[[Hashable, int, int, int], list[dict]]


def run_looks(keys: Sequence[Hashable], measure: Measure, schedule: Schedule,
              config: paired.PairedConfig) -> tuple[list[paired.PairedVerdict], int, int]:
    """(the last look's verdicts, looks taken, pairs measured over all series) of one simulated MR."""
    records: list[dict] = []
    measured = dict.fromkeys(keys, 0)

    def take(key: Hashable, count: int, look: int) -> None:
        records.extend(measure(key, measured[key], count, look))
        measured[key] += count

    for key in keys:
        take(key, schedule.initial_pairs, 1)
    look = 1
    while True:
        verdicts = paired.judge(records, config)
        more = paired.continuing(verdicts, config)
        if not more:
            return verdicts, look, sum(measured.values())
        look += 1
        for key in more:
            take(key, schedule.next_round(measured[key])[1], look)
