"""The stages import down the flow only: import-linter's contracts (pyproject.toml) hold, and break,
naming the import, when a module imports up the flow (issue 34)."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from mpiregress.paths import REPO_ROOT

LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def _lint(root: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(LINT_IMPORTS), "--no-cache", "--config", str(root / "pyproject.toml")], cwd=root,
                          capture_output=True, text=True, timeout=300,
                          env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"})


def test_the_package_keeps_its_layers():
    done = _lint(REPO_ROOT)
    assert done.returncode == 0, done.stdout[-3000:]
    assert "3 kept, 0 broken" in done.stdout


def test_a_fact_that_imports_a_judge_breaks_the_layers_naming_the_import(tmp_path):
    shutil.copytree(REPO_ROOT / "mpiregress", tmp_path / "mpiregress",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO_ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    series = tmp_path / "mpiregress" / "model" / "series.py"
    series.write_text(series.read_text() + "\nfrom mpiregress.verdict import band  # noqa: E402,F401\n")
    done = _lint(tmp_path)
    assert done.returncode == 1
    assert "mpiregress.model is not allowed to import mpiregress.verdict" in done.stdout
    assert "mpiregress.model.series -> mpiregress.verdict.band" in done.stdout
