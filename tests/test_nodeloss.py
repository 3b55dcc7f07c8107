"""Which node states mean a node lost under a job (mpiregress/cluster/nodeloss.py); the whole path, a link taken
down under a real run, is tests/test_link_down.py."""
from __future__ import annotations

import pytest

from mpiregress.cluster.nodeloss import bad_state


@pytest.mark.parametrize("state, lost", [
    ("allocated*", True),     # Slurm's '*': the node did not answer its last ping
    ("mixed*", True), ("down*", True), ("down", True), ("fail", True), ("failing", True),
    ("idle", False), ("allocated", False), ("mixed", False), ("completing", False),
    ("drained", False),       # an admin's drain lets running jobs finish
])
def test_a_node_is_lost_when_slurm_says_it_does_not_answer_or_is_down(state, lost):
    assert bad_state(state) is lost
