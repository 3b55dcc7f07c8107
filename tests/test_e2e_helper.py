"""The end-to-end helper runs `mpiregress run` a second time only after a library segfault, nothing else."""
import json
import subprocess

import pytest

from helpers.e2e import only_library_segfaults

SEGV = "rank 4 on node2 died: Segmentation fault"
SIGILL = "rank 1 on node1 died: illegal instruction (SIGILL): the binary needs a newer CPU"


@pytest.mark.parametrize("returncode, reasons, again", [
    (2, [SEGV], True),
    (2, [SEGV, SEGV], True),
    (2, [SEGV, SIGILL], False),          # any other error is the test's to judge
    (2, [SIGILL], False),
    (2, ["srun: error: Unable to allocate resources"], False),
    (1, [SEGV], False),                  # a judged regression is never re-run
    (2, [], False),                      # exit 2 without a crash row: a bad input, not a crash
])
def test_only_a_run_whose_every_error_is_a_segfault_runs_again(tmp_path, returncode, reasons, again):
    rows = [{"status": "pass", "reason": ""}] + [{"status": "error", "reason": r} for r in reasons]
    (tmp_path / "results.json").write_text(json.dumps(rows))
    done = subprocess.CompletedProcess([], returncode, "", "")
    assert only_library_segfaults(done, tmp_path) is again


def test_no_results_file_means_no_second_run(tmp_path):
    assert only_library_segfaults(subprocess.CompletedProcess([], 2, "", ""), tmp_path) is False
