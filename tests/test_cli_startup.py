"""A command imports only its own module: the benchmark jobs call `guard` and `node-target` on every
node of every check, and importing every command (matplotlib, SciPy, the A/B statistics) cost
2-4 s per call, twice per check."""
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from shared import REPO

from mpiregress import cli, commands

HEAVY = ("matplotlib", "scipy", "reframe", "gitlab")


@pytest.mark.parametrize("argv", [["guard", "--build-target", "zen2", "--node-target", "zen2"], ["node-target"]])
def test_a_node_side_command_loads_no_heavy_library(argv):
    probe = (f"import sys; from mpiregress.cli import main; code = main({argv!r}); "
             f"print(code, sorted(m for m in {HEAVY!r} if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "0 []", done.stdout


def test_every_command_is_found_by_its_name_alone():
    """The parser built for one command knows that command (its module is its name, or listed in
    commands.MODULE_OF_COMMAND), for every command the full parser registers."""
    full = cli.build_parser()
    names = next(a for a in full._actions if a.dest == "command").choices
    assert "node-target" in names and "guard" in names
    for name in names:
        one = cli.build_parser(name)
        assert name in next(a for a in one._actions if a.dest == "command").choices, (
            f"{name}: add it to commands.MODULE_OF_COMMAND")


def test_help_and_unknown_names_still_list_every_command(capsys):
    with pytest.raises(SystemExit) as ended:
        cli.main(["nosuch"])
    assert ended.value.code == 2
    err = capsys.readouterr().err
    assert "invalid choice: 'nosuch'" in err and "'verdict'" in err and "'node-target'" in err
    assert set(commands.MODULE_OF_COMMAND) <= set(
        next(a for a in cli.build_parser()._actions if a.dest == "command").choices)


def test_the_run_command_and_the_check_files_load_no_plotting_or_scipy():
    """`mpiregress run` and ReFrame's loading of the check files (checks/linktest.py imports the link judge,
    checks/osu_ab.py the A/B plan) come before any figure or statistic: matplotlib and SciPy cost about
    a second per process, and the test suite alone starts these processes hundreds of times."""
    modules = ["mpiregress.commands.run", "mpiregress.families.links.judge", "mpiregress.run.ab.plan", "mpiregress.families.coll.analysis",
               "mpiregress.families.noise.records", "mpiregress.run.checkbase"]
    probe = (f"import importlib, sys; [importlib.import_module(m) for m in {modules!r}]; "
             f"print(sorted(m for m in ('matplotlib', 'scipy') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "[]", done.stdout


def test_sigusr2_prints_where_every_thread_of_a_command_is_and_it_carries_on() -> None:
    """`kill -USR2 <pid>`: the stacks of a command that is slow to answer (from C, whatever its main thread is
    blocked in), on stderr, and the command goes on to its own end."""
    proc = subprocess.Popen([sys.executable, "-m", "mpiregress", "step-watch", "--limit", "60", "--", "sleep", "5"],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # Not a fixed wait: on a loaded machine the interpreter took over 1.5 s to install its handler (the signal's
    # default action ended it), and in another CI run it was still building its parser when the signal came
    # (2026-11-28). Signal once the command has started its step, waiting in the step watcher.
    assert wait_for_child(proc), "the command never started its step"
    os.kill(proc.pid, signal.SIGUSR2)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, out + err
    assert "most recent call first" in err and "stepwatch.py" in err, err


def wait_for_child(proc: subprocess.Popen, limit_s: float = 120.0) -> bool:
    """Wait until ``proc`` has a child process (a /proc entry whose parent it is); False if it ended first or
    ``limit_s`` passed."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline and proc.poll() is None:
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(")", 1)[1].split()
            except OSError:        # the process ended while we looked
                continue
            if int(fields[1]) == proc.pid:
                return True
        time.sleep(0.05)
    return False
