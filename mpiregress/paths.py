"""Where the project's files live. Every path can be overridden from the environment
so that CI jobs, tests and a site's runners can point the same code elsewhere."""
from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent


def _env_path(var: str, default: Path) -> Path:
    value = os.environ.get(var)
    return Path(value).resolve() if value else default


def state_dir() -> Path:
    """Scratch state of runs (local Slurm, builds, reports): never committed."""
    return _env_path("MPIREGRESS_STATE_DIR", REPO_ROOT / "var")


def manifest_dir() -> Path:
    """Folder of build manifests (one JSON file per build)."""
    return _env_path("MPIREGRESS_MANIFEST_DIR", state_dir() / "manifests")


def install_root() -> Path:
    """Root of install prefixes of the builds the project makes itself."""
    return _env_path("MPIREGRESS_INSTALL_ROOT", state_dir() / "install")


def baselines_dir() -> Path:
    return _env_path("MPIREGRESS_BASELINES_DIR", REPO_ROOT / "baselines")


def toolchains_dir() -> Path:
    return _env_path("MPIREGRESS_TOOLCHAINS_DIR", REPO_ROOT / "toolchains")


def checks_dir() -> Path:
    return REPO_ROOT / "checks"


def reports_dir() -> Path:
    return _env_path("MPIREGRESS_REPORTS_DIR", REPO_ROOT / "reports")


def history_db() -> Path:
    return _env_path("MPIREGRESS_HISTORY_DB", state_dir() / "history.sqlite")


def systems_dir(root: Path = REPO_ROOT) -> Path:
    """``<root>/systems``; for this checkout, ``$MPIREGRESS_SYSTEMS_DIR`` when set (a site's or a
    benchmark's own copy of the systems data, like the other paths here)."""
    override = os.environ.get("MPIREGRESS_SYSTEMS_DIR")
    if override and Path(root).resolve() == REPO_ROOT.resolve():
        return Path(override).resolve()
    return Path(root) / "systems"


def system_names(root: Path = REPO_ROOT) -> tuple[str, ...]:
    """Names of the systems: the file names of systems/*.yaml, sorted.

    Read without parsing the files, so that importing the vocabulary never fails: a broken
    system file is reported (one sentence) by the command that reads it.
    """
    return tuple(sorted(p.stem for p in systems_dir(root).glob("*.yaml")))
