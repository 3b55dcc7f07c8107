"""The collective cost benchmark runs on the committed sweep and says, per partition, whether the targets hold."""
import subprocess
import sys

from shared import REPO


def test_cost_script_prints_steps_minutes_and_a_verdict_per_partition():
    result = subprocess.run([sys.executable, str(REPO / "benchmarks" / "coll_cost.py")], capture_output=True,
                            text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    for partition in ("aion-batch", "iris-broadwell", "iris-skylake"):
        for subset in ("weekly", "mr"):
            row = next(line for line in lines if line.split()[:2] == [partition, subset])
            assert row.split()[2].isdigit() and ("meets the target" in row or "OVER the target" in row)


def test_unreduced_sweep_shows_the_reduction_it_needs():
    result = subprocess.run([sys.executable, str(REPO / "benchmarks" / "coll_cost.py"), "--osu-defaults"],
                            capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    assert "aion-batch      weekly" in result.stdout and "OVER the target" in result.stdout
    assert "weekly-r" in result.stdout and "alltoall up to 64 KiB" in result.stdout
