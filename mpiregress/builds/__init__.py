"""Build methods: each module here turns a toolchain and a target into an install and a manifest.

Every method module (``source``, ``spack``, ``easybuild``, ``eessi``) exposes
``build(options: BuildOptions) -> Manifest`` and raises NotAvailableError (exit 4)
with a one-sentence reason when the machine cannot do it (no Spack, no /cvmfs),
never a fake manifest.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional


@dataclass
class BuildOptions:
    """What ``mpiregress build`` was asked for, resolved to concrete values."""

    method: str
    toolchain_file: Path
    target: str                      # archspec target to build for
    manifest_dir: Path
    install_root: Path               # builds go to <install_root>/<method>/<target>/
    system: Optional[str] = None     # cluster the target was taken from, if any
    partition: Optional[str] = None
    source_mirror: Optional[Path] = None   # folder holding osu-micro-benchmarks-7.2.tar.gz
    sha256_override: Optional[str] = None  # a site's own tarball; loudly logged
    spack_env: Optional[Path] = None       # spack-envs/<cluster>-<target>
    eessi_subdir_override: Optional[str] = None
    jobs: int = 2
    extra: dict = field(default_factory=dict)
