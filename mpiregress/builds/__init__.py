"""Build methods: each module here turns a toolchain and a target into an install and a manifest.

Every method module (``source``, ``spack``, ``easybuild``, ``eessi``) is a
:class:`BuildMethod`: ``METHOD`` (its name) and ``build(options) -> Manifest``. A build
provides OSU's binaries (``common.BINARIES``, under ``common.BIN_SUBDIR``), the project's
own programs (``checks/src/*``, built with the same MPI and flags) and records the MPI
stack it really got; it raises NotAvailableError (exit 4) with a one-sentence reason when
the machine cannot do it (no Spack, no /cvmfs), never a fake manifest.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Optional, Protocol, cast

from mpiregress.errors import NotAvailableError

if TYPE_CHECKING:
    from mpiregress.model.manifest import Manifest


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


class BuildMethod(Protocol):
    """What ``mpiregress build`` needs of a method module."""

    METHOD: str

    def build(self, options: BuildOptions) -> "Manifest":
        """Build (or locate) OSU and the project's programs for ``options.target``; write the manifest."""
        ...


def method(name: str) -> BuildMethod:
    """The module of build method ``name`` (``mpiregress.builds.<name>``)."""

    module_name = f"{__name__}.{name}"
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as err:
        if err.name != module_name:
            raise   # a real bug inside the method module: let it show
        raise NotAvailableError(f"the {name} build method is not part of this installation") from None
    return cast(BuildMethod, module)


def unavailable_reason(name: str) -> Optional[str]:
    """Why build method ``name`` cannot build on this machine at all (its tool is missing: no ``spack``,
    no ``eb``), in its own sentence; None when it can try. A method module says so with ``require_tools``.

    A run that measures builds made by other jobs (the A/B job) skips such a method with this reason,
    as a run that builds on demand does; a method that could build but left no manifest stays an error."""
    check = getattr(method(name), "require_tools", None)
    if check is None:
        return None
    try:
        check()
    except NotAvailableError as err:
        return str(err)
    return None
