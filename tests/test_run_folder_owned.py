"""A run touches only what is its own (issue 20): symlinks, system folders, foreign files.

Every case runs the real command line and checks both the one sentence (exit 2) and that the
files around were not touched.
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from helpers.faults import cli, sentence, stale_folder

from mpiregress.run.folder import OWNED_LIST, RunFolder, refuse_place


@pytest.fixture
def env(tmp_path):
    e = dict(os.environ, MPIREGRESS_STATE_DIR=str(tmp_path / "state"))
    e.pop("MPIREGRESS_DEBUG", None)
    return e


def _tree(folder: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(folder)): (p.lstat().st_size, p.lstat().st_mtime_ns) for p in folder.rglob("*")}


def _someone_elses(folder: Path) -> None:
    """A folder of someone else's, with names a run writes."""
    (folder / "html").mkdir(parents=True)
    (folder / "html" / "index.html").write_text("theirs")
    (folder / "reframe").mkdir()
    (folder / "summary.md").write_text("their summary\n")
    (folder / "results.json").write_text("[]\n")


def _early_failing_run(report_dir: Path, env: dict):
    # --repeat 0 fails after the folder is owned: what a run does to its folder, in a second.
    return cli(["run", "--system", "local", "--repeat", "0", "--report-dir", str(report_dir)], env)


def test_a_report_folder_that_is_a_symlink_is_refused_and_its_target_untouched(tmp_path, env):
    target = tmp_path / "elsewhere"
    _someone_elses(target)
    before = _tree(target)
    link = tmp_path / "reports"
    link.symlink_to(target)
    done = _early_failing_run(link, env)
    assert done.returncode == 2
    assert f"report folder {link} is a symlink (to {target})" in sentence(done)
    assert _tree(target) == before


def test_a_report_folder_linked_to_etc_is_refused_and_etc_is_not_written(tmp_path, env):
    link = tmp_path / "local"
    link.symlink_to("/etc")
    before = sorted(os.listdir("/etc"))
    done = _early_failing_run(link, env)
    assert done.returncode == 2 and "is a symlink (to /etc)" in sentence(done), done.stderr
    assert sorted(os.listdir("/etc")) == before


@pytest.mark.parametrize("where", ["/etc/mpiregress-test-reports", "/usr/share/mpiregress-x", "/"])
def test_a_report_folder_in_a_system_folder_is_refused_before_it_is_created(env, where):
    done = _early_failing_run(Path(where), env)
    assert done.returncode == 2 and "is in the system folder" in sentence(done), done.stderr
    assert where == "/" or not Path(where).exists()


def test_a_parent_symlink_into_etc_is_refused_too(tmp_path, env):
    (tmp_path / "sys").symlink_to("/etc")
    done = _early_failing_run(tmp_path / "sys" / "mpiregress-reports", env)
    assert done.returncode == 2 and "in the system folder /etc/mpiregress-reports" in sentence(done)
    assert not Path("/etc/mpiregress-reports").exists()


def test_a_symlink_inside_the_folder_leading_out_is_refused(tmp_path, env):
    outside = tmp_path / "outside"
    (outside / "keep").mkdir(parents=True)
    reports = tmp_path / "r"
    stale_folder(reports)
    (reports / "html").symlink_to(outside)
    done = _early_failing_run(reports, env)
    assert done.returncode == 2
    assert f"report folder {reports} holds html, a symlink leading out of it (to {outside})" in sentence(done)
    assert (outside / "keep").is_dir() and (reports / "summary.md").read_text().startswith("# MPI regression: local")


def test_foreign_files_a_run_would_remove_are_refused_and_kept(tmp_path, env):
    reports = tmp_path / "r"
    _someone_elses(reports)
    before = _tree(reports)
    done = _early_failing_run(reports, env)
    assert done.returncode == 2
    said = sentence(done)
    assert "holds html, reframe, results.json, summary.md, which no mpiregress run recorded as its own" in said
    assert _tree(reports) == before


def test_other_files_beside_a_runs_own_are_left_alone(tmp_path, env):
    reports = tmp_path / "r"
    stale_folder(reports)
    (reports / "notes.txt").write_text("mine")
    (reports / "data").mkdir()
    (reports / "data" / "x").write_text("mine too")
    done = _early_failing_run(reports, env)
    assert done.returncode == 2
    assert (reports / "notes.txt").read_text() == "mine" and (reports / "data" / "x").read_text() == "mine too"
    assert not (reports / "results.json").exists(), "the earlier run's results are the run's to remove"
    owned = set((reports / OWNED_LIST).read_text().split())
    assert {"summary.md", "junit.xml", "status.json"} <= owned and not owned & {"notes.txt", "data"}


def test_what_a_run_wrote_is_its_own_for_the_next_run(tmp_path):
    reports = tmp_path / "r"
    with RunFolder(reports, "first") as folder:
        folder.write("summary.md", "first\n")
        (reports / "links").mkdir()
        (reports / "links" / "m.npz").write_text("x")
    (reports / "notes.txt").write_text("theirs")
    with RunFolder(reports, "second"):
        assert not (reports / "summary.md").exists() and not (reports / "links").exists()
    assert (reports / "notes.txt").read_text() == "theirs"
    assert "notes.txt" not in (reports / OWNED_LIST).read_text().split()


def test_an_owned_list_naming_paths_outside_is_not_followed(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("keep")
    reports = tmp_path / "r"
    reports.mkdir()
    (reports / OWNED_LIST).write_text(f"../victim.txt\n{victim}\n..\n")
    with RunFolder(reports, "run"):
        pass
    assert victim.read_text() == "keep"


def test_refuse_place_accepts_an_ordinary_new_folder(tmp_path):
    assert refuse_place(tmp_path / "new" / "reports") is None


def test_files_a_person_put_inside_a_runs_own_folders_are_kept(tmp_path, capsys):
    reports = tmp_path / "r"
    with RunFolder(reports, "first") as folder:
        (reports / "perflogs" / "local").mkdir(parents=True)
        (reports / "perflogs" / "local" / "osu.log").write_text("run's")
        (reports / "reframe" / "stage").mkdir(parents=True)
        (reports / "reframe" / "stage" / "rfm_job.sh").write_text("run's")
        folder.write_status("finished", 0)
    time.sleep(3.5)     # later than the run's end, beyond its whole-second "ended"
    (reports / "perflogs" / "mine.txt").write_text("mine")
    (reports / "reframe" / "mine.txt").write_text("mine too")
    with RunFolder(reports, "second"):
        assert (reports / "perflogs" / "mine.txt").read_text() == "mine"
        assert (reports / "reframe" / "mine.txt").read_text() == "mine too"
        assert not (reports / "perflogs" / "local").exists() and not (reports / "reframe" / "stage").exists()
    said = [line for line in capsys.readouterr().out.splitlines() if "no run wrote" in line]
    assert len(said) == 1 and "perflogs/mine.txt" in said[0] and "reframe/mine.txt" in said[0]


@pytest.mark.parametrize("where", ["/opt", "/srv", "/home", "/root", "/home/someone", "/tmp", "/mnt"])
def test_folders_that_hold_other_peoples_folders_are_refused(where):
    said = refuse_place(Path(where))
    assert said and "holds other people's folders" in said and "\n" not in said
    assert refuse_place(Path(where) / "mpiregress-reports-x") is None or where in ("/home",)


def test_a_run_on_srv_is_refused_before_it_writes(env):
    before = sorted(os.listdir("/srv"))
    done = _early_failing_run(Path("/srv"), env)
    assert done.returncode == 2 and "holds other people's folders" in sentence(done), done.stderr
    assert sorted(os.listdir("/srv")) == before


def test_a_folder_left_by_a_run_that_wrote_no_final_state_does_not_say_running(tmp_path):
    reports = tmp_path / "r"
    with RunFolder(reports, "first"):
        pass
    assert json.loads((reports / "status.json").read_text())["state"] == "finished"
