"""Files derived from the systems data and the toolchain file (``mpiregress generate``).

Each cluster fact lives once, in ``systems/<name>.yaml`` or ``toolchains/<generation>.yaml``;
the files the tools read in their own formats are rendered from Jinja2 templates next to
them and committed, so that GitLab, ReFrame and Spack see ordinary files:

* ``.gitlab-ci.yml`` from ``ci/gitlab-ci.yml.j2`` (one block of jobs per system);
* ``checks/config/site.yaml`` from ``checks/config/site.yaml.j2`` (ReFrame systems);
* ``spack-envs/common.yaml`` from ``spack-envs/common.yaml.j2`` (the toolchain's MPI stack);
* ``spack-envs/<system>-<partition>/spack.yaml`` from ``spack-envs/env.yaml.j2``.

``mpiregress lint`` fails when a committed file differs from what this renders.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2

from mpiregress import paths
from mpiregress.errors import InputError
from mpiregress.model import systems as systems_mod
from mpiregress.model import toolchain as toolchain_mod
from mpiregress.paths import REPO_ROOT


@dataclass(frozen=True)
class Derived:
    """One derived file: where it goes, the template it comes from, and its rendered text."""

    path: Path        # relative to the checkout
    template: Path    # relative to the checkout
    text: str


def _reframe_extras(part: systems_mod.Partition) -> dict[str, Any]:
    return {**systems_mod.EXTRAS_DEFAULTS, **(part.reframe.get("extras") or {})}


def _environment(root: Path) -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(root)), undefined=jinja2.StrictUndefined,
                             trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True,
                             autoescape=False)
    return env


def derived_files(root: Path = REPO_ROOT, tc_path: Path | None = None) -> list[Derived]:
    """Every derived file of the checkout at ``root``, rendered (nothing is written).

    A template that does not render raises InputError naming the template and its line.
    """
    try:
        return _render_all(Path(root), tc_path)
    except jinja2.TemplateError as err:
        name = getattr(err, "filename", None) or getattr(err, "name", None) or "a template"
        line = getattr(err, "lineno", None)
        raise InputError(f"{name}{f':{line}' if line else ''} does not render: {err.message or err}") from None


def _render_all(root: Path, tc_path: Path | None) -> list[Derived]:
    tc = toolchain_mod.load(tc_path or root / "toolchains" / "2023b.yaml")
    order = paths.system_names(root)
    systems = sorted(systems_mod.load_all(root), key=lambda s: order.index(s.name))
    env = _environment(root)
    env.globals.update(
        reframe_extras=_reframe_extras,
        run_jobs=lambda system: [f"run:{system.name}:{p.name}" for p in system.partitions],
        systems_with_environ=lambda name: [s.name for s in systems if name in (s.data.get("environs") or [])],
    )
    context = {"systems": systems, "clusters": [s for s in systems if s.executor == "jacamar"], "tc": tc}
    out = []
    for template, target in (("ci/gitlab-ci.yml.j2", ".gitlab-ci.yml"),
                             ("checks/config/site.yaml.j2", "checks/config/site.yaml"),
                             ("spack-envs/common.yaml.j2", "spack-envs/common.yaml")):
        out.append(Derived(Path(target), Path(template), env.get_template(template).render(**context)))
    for system in systems:
        if "spack" not in system.methods or system.data.get("host_toolchain"):
            continue    # a host toolchain's environment is written by the build from that data
        for part in system.partitions:
            if part.target:
                text = env.get_template("spack-envs/env.yaml.j2").render(system=system, part=part, **context)
                out.append(Derived(Path("spack-envs") / part.key / "spack.yaml", Path("spack-envs/env.yaml.j2"), text))
    return out


def stale(root: Path = REPO_ROOT, tc_path: Path | None = None) -> list[tuple[Derived, str]]:
    """Derived files whose committed text differs from the rendered one, with a one-line reason."""
    found = []
    for item in derived_files(root, tc_path):
        path = Path(root) / item.path
        if not path.is_file():
            found.append((item, "does not exist"))
        elif path.read_text() != item.text:
            found.append((item, "is out of date"))
    return found


def orphans(root: Path = REPO_ROOT, tc_path: Path | None = None) -> list[Path]:
    """Spack environment folders no system partition generates (left over from a removed one)."""
    wanted = {d.path.parent for d in derived_files(root, tc_path) if d.path.name == "spack.yaml"}
    return sorted(p.relative_to(root) for p in (Path(root) / "spack-envs").glob("*/spack.yaml")
                  if p.relative_to(root).parent not in wanted)


def write(root: Path = REPO_ROOT, tc_path: Path | None = None) -> list[Path]:
    """Render every derived file into the checkout; return the paths that changed."""
    changed = []
    for item, _ in stale(root, tc_path):
        path = Path(root) / item.path
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(item.text)
        changed.append(item.path)
    return changed
