"""Toolchain lint: every build definition must agree with the toolchain file and the systems data.

``toolchains/<generation>.yaml`` holds the toolchain and its whole MPI stack;
``systems/<name>.yaml`` holds each cluster's facts. The files derived from them
(``mpiregress generate``) must be up to date, and what the build tools will really
use must match: the Spack environments' requirements (followed through ``include:``),
the dependency chain EasyBuild resolves (``eb --dry-run --robot``, offline), the OSU
easyconfig, module names, ReFrame environments and baselines. Each disagreement is
one ``path:line: message``; line numbers come from PyYAML node marks and Python's
``ast``, so a finding points at the line to edit.
"""
from __future__ import annotations

import ast
import re
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Optional

import archspec.cpu
import yaml

from mpiregress import paths
from mpiregress.builds import easybuild
from mpiregress.builds.common import capability_problems
from mpiregress.builds.easybuild import easyconfig_features
from mpiregress.builds.spack import site_scope_problems
from mpiregress.definitions import generate
from mpiregress.errors import MpiRegressError
from mpiregress.model import manifest as manifest_mod
from mpiregress.model import microarch
from mpiregress.model import systems as systems_mod
from mpiregress.model import toolchain as toolchain_mod

# How Spack's openmpi package spells each MPI feature of the toolchain file
# (spack-packages: repos/spack_repo/builtin/packages/openmpi/package.py).
# pmix: openmpi@4: always uses PMIx; ~internal-pmix selects Spack's own pmix package
# instead of the copy vendored in the OpenMPI tarball.
SPACK_OPENMPI_FEATURES: dict[str, str] = {
    "ucx": "fabrics=ucx",
    "slurm": "schedulers=slurm",
    "pmix": "~internal-pmix",
}
# What a missing UCX transport costs, for the finding's one sentence.
TRANSPORT_EFFECT = {
    "verbs": "UCX gets no InfiniBand transport and inter-node traffic goes over TCP",
    "rc": "no reliable-connection InfiniBand transport",
    "ud": "no unreliable-datagram InfiniBand transport (UCX's default at scale)",
    "dc": "no dynamically-connected InfiniBand transport",
    "mlx5_dv": "no mlx5 accelerated verbs",
    "rdmacm": "no RDMA connection manager",
    "cma": "intra-node messages lose single-copy CMA",
}
# What a build variant of the toolchain file (variants:) changes, for the finding's one sentence.
VARIANT_EFFECT = {
    ("hwloc", "pci"): "without PCI topology hwloc (and OpenMPI through it) cannot tell which NIC is near which "
                      "core",
}
# Spack packages that must come from the site (spack-envs/site-example/).
SITE_EXTERNALS = ("slurm", "rdma-core")
BUILDCACHE_VAR = "$MPIREGRESS_SPACK_BUILDCACHE"

OSU_EASYBUILD_NAME = "OSU-Micro-Benchmarks"
# EasyBuild toolchains that contain gompi (foss = gompi + maths libraries).
GOMPI_FAMILY = ("gompi", "foss")


@dataclass(frozen=True)
class Finding:
    """One disagreement: where it is and what disagrees."""

    path: str
    line: int
    message: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.message}"


@dataclass
class Report:
    """The result of a lint run: findings, and a description of what was compared."""

    toolchain_path: str
    findings: list[Finding] = field(default_factory=list)
    checked: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.findings


class _Yaml:
    """A YAML file's data plus the line of each node, for findings that point at a line."""

    def __init__(self, path: Path):
        text = path.read_text()
        self.node = yaml.compose(text)
        self.data = yaml.safe_load(text)

    def line(self, *keys: Any) -> int:
        """1-based line of the node at ``keys`` (or of its deepest existing parent)."""
        node, line = self.node, 1
        if node is not None:
            line = node.start_mark.line + 1
        for key in keys:
            child = None
            if isinstance(node, yaml.MappingNode):
                for knode, vnode in node.value:
                    if knode.value == key:
                        child = vnode
                        break
            elif isinstance(node, yaml.SequenceNode) and isinstance(key, int) and key < len(node.value):
                child = node.value[key]
            if child is None:
                break
            node, line = child, child.start_mark.line + 1
        return line


class _Linter:
    """Collects findings; one method per kind of file."""

    def __init__(self, root: Path, tc: toolchain_mod.Toolchain):
        self.root = root
        self.tc = tc
        self.tc_yaml = _Yaml(tc.path)
        self.report = Report(toolchain_path=self._rel(tc.path))
        ebtc = tc.data.get("easybuild_toolchain") or {}
        self.eb_tc_name = str(ebtc.get("name", "gompi"))
        self.eb_tc_version = str(ebtc.get("version", tc.name))
        self.systems: list[systems_mod.System] = []

    # -- helpers -------------------------------------------------------------

    def _rel(self, path: Path) -> str:
        try:
            return str(Path(path).resolve().relative_to(self.root.resolve()))
        except ValueError:
            return str(path)

    def add(self, path: Path, line: int, message: str) -> None:
        self.report.findings.append(Finding(self._rel(path), line, message))

    def _load_yaml(self, path: Path) -> Optional[_Yaml]:
        try:
            return _Yaml(path)
        except yaml.YAMLError as err:
            mark = getattr(err, "problem_mark", None)
            self.add(path, mark.line + 1 if mark else 1, f"not valid YAML: {getattr(err, 'problem', err)}")
        except OSError as err:
            self.add(path, 1, f"cannot be read: {err.strerror}")
        return None

    @property
    def compiler_version(self) -> str:
        return str(self.tc.compiler["version"])

    @property
    def mpi_version(self) -> str:
        return str(self.tc.mpi["version"])

    @property
    def osu_version(self) -> str:
        return str(self.tc.osu["version"])

    def expected_osu_module(self) -> str:
        return f"{OSU_EASYBUILD_NAME}/{self.osu_version}-{self.eb_tc_name}-{self.eb_tc_version}"

    # -- module names (EasyBuild naming scheme) ------------------------------

    def module_problem(self, module: str) -> Optional[str]:
        """Why an EasyBuild-style module name disagrees with the toolchain, or None.

        Modules the toolchain says nothing about (e.g. ``Python/3.11.5``) are not judged.
        """
        if "/" not in module:
            return None
        name, version = module.split("/", 1)
        if name in GOMPI_FAMILY:
            if version != self.eb_tc_version:
                return f"module {module}: toolchain version {version}, the toolchain file says {self.eb_tc_version}"
        elif name in ("GCC", "GCCcore"):
            if version != self.compiler_version:
                return f"module {module}: GCC {version}, the toolchain file says {self.compiler_version}"
        elif name == "OpenMPI":
            mpi, _, rest = version.partition("-")
            if mpi != self.mpi_version:
                return f"module {module}: OpenMPI {mpi}, the toolchain file says {self.mpi_version}"
            gcc = re.fullmatch(r"GCC(?:core)?-(.+)", rest) if rest else None
            if gcc and gcc.group(1) != self.compiler_version:
                return (f"module {module}: built with GCC {gcc.group(1)}, "
                        f"the toolchain file says {self.compiler_version}")
        elif name == OSU_EASYBUILD_NAME:
            match = re.fullmatch(r"([^-]+)-([A-Za-z]+)-(.+)", version)
            if not match:
                return (f"module {module}: expected {name}/<version>-<toolchain>-<toolchain version>, "
                        f"e.g. {self.expected_osu_module()}")
            osu, tcname, tcversion = match.groups()
            if osu != self.osu_version:
                return f"module {module}: OSU {osu}, the toolchain file says {self.osu_version}"
            if tcname not in GOMPI_FAMILY or tcversion != self.eb_tc_version:
                return (f"module {module}: built with {tcname}/{tcversion}, the toolchain file says "
                        f"{self.eb_tc_name}/{self.eb_tc_version}")
        return None

    # -- the toolchain file itself --------------------------------------------

    def lint_toolchain_file(self) -> None:
        path = self.tc.path
        eessi_module = str(self.tc.eessi.get("module", ""))
        problem = self.module_problem(eessi_module)
        if problem or not eessi_module.startswith(OSU_EASYBUILD_NAME + "/"):
            self.add(path, self.tc_yaml.line("eessi", "module"),
                     f"EESSI {problem or f'module {eessi_module}: expected {self.expected_osu_module()}'}")
        version, init = str(self.tc.eessi.get("version", "")), str(self.tc.eessi.get("init", ""))
        if version and f"/versions/{version}/" not in init:
            self.add(path, self.tc_yaml.line("eessi", "init"),
                     f"EESSI init {init} is not the one of EESSI version {version}")
        modules = self.tc.data.get("modules") or {}
        for group, names in modules.items():
            for i, module in enumerate(names or []):
                problem = self.module_problem(str(module))
                if problem:
                    self.add(path, self.tc_yaml.line("modules", group, i), problem)
        self.report.checked.append(f"{self._rel(path)} (EESSI module {eessi_module}, EESSI init, "
                                   f"module lists)")

    # -- systems data ------------------------------------------------------------

    def lint_systems(self) -> None:
        """Each systems/<name>.yaml loads; its Spack is supported; its EESSI subdirectories run on its nodes."""
        supported = self.tc.spack_versions
        for path in sorted(paths.systems_dir(self.root).glob("*.yaml")):
            try:
                system = systems_mod.load_file(path)
            except MpiRegressError as err:
                self.add(path, 1, str(err))
                continue
            self.systems.append(system)
            doc = _Yaml(path)
            version = system.spack_version
            if "spack" in system.methods and not version:
                self.add(path, doc.line("methods"), f"system {system.name} builds with Spack but names no "
                                                    f"spack_version (supported: {', '.join(supported)})")
            elif version and ".".join(version.split(".")[:2]) not in supported:
                self.add(path, doc.line("spack_version"),
                         f"Spack {version} is not a supported version (toolchain file, spack.versions: "
                         f"{', '.join(supported)}): the environments are not written or checked for it")
            for part in system.partitions:
                line = doc.line("partitions", part.name, "eessi_subdir")
                if not part.eessi_subdir or not part.target:
                    continue
                subdir_target = microarch.from_eessi_subdir(part.eessi_subdir)
                if subdir_target not in archspec.cpu.TARGETS:
                    self.add(path, line, f"eessi_subdir {part.eessi_subdir}: {subdir_target} is not an archspec target")
                elif not microarch.can_run(subdir_target, part.target):
                    self.add(path, line, f"eessi_subdir {part.eessi_subdir} holds {subdir_target} binaries, which "
                                         f"{system.name}:{part.name} ({part.target}) nodes cannot execute")
        names = ", ".join(s.name for s in self.systems) or "none"
        self.report.checked.append(f"systems/ ({names}: Spack versions, EESSI subdirectories)")

    def lint_derived(self) -> None:
        """Files rendered from systems/ and the toolchain file are what `mpiregress generate` writes."""
        judged = {f.path for f in self.report.findings}
        if any(p.startswith("systems/") for p in judged):
            self.report.checked.append("derived files: not compared (fix the systems/ findings first)")
            return
        try:
            stale = generate.stale(self.root, self.tc.path)
            orphans = generate.orphans(self.root, self.tc.path)
        except MpiRegressError as err:
            self.add(self.root / "systems", 1, str(err))
            return
        for item, why in stale:
            if str(item.path) not in judged:   # a finding inside it already says what is wrong
                self.add(self.root / item.path, 1, f"{why} with {item.template} and the data it renders "
                                                   f"(systems/, {self._rel(self.tc.path)}): run 'mpiregress generate'")
        for path in orphans:
            self.add(self.root / path, 1, f"no system partition builds with Spack as {path.parent.name}: "
                                          f"remove it, or add the partition to systems/")
        self.report.checked.append("derived files (.gitlab-ci.yml, checks/config/site.yaml, spack-envs/: "
                                   "up to date with systems/ and the toolchain file)")

    # -- Spack environments ----------------------------------------------------

    def lint_spack_envs(self) -> None:
        parts = {p.key: p for s in self.systems if "spack" in s.methods for p in s.partitions if p.target}
        files = sorted((self.root / "spack-envs").glob("*/spack.yaml"))
        for path in files:
            if path.parent.name in parts:
                self._lint_spack_env(path, parts[path.parent.name])
        names = ", ".join(p.parent.name for p in files) or "none"
        self.report.checked.append(f"spack-envs/ ({names}: OSU, compiler, MPI stack versions, UCX transports, "
                                   f"targets, site externals, build cache, ci tags)")

    def _lint_spack_env(self, path: Path, part: systems_mod.Partition) -> None:
        doc = self._load_yaml(path)
        if doc is None:
            return
        spack = doc.data.get("spack") if isinstance(doc.data, dict) else None
        if not isinstance(spack, dict):
            self.add(path, 1, "no top-level 'spack:' section")
            return
        # The scopes Spack reads, highest priority first: the environment, then its includes.
        scopes: list[tuple[Path, _Yaml, tuple[str, ...]]] = [(path, doc, ("spack",))]
        for i, inc in enumerate(spack.get("include") or []):
            inc_path = (path.parent / str(inc)).resolve()
            inc_doc = self._load_yaml(inc_path) if inc_path.is_file() else None
            if inc_doc is None:
                if not inc_path.is_file():
                    self.add(path, doc.line("spack", "include", i), f"include {inc} does not exist")
                continue
            scopes.append((inc_path, inc_doc, ()))

        def package(name: str) -> tuple[Path, int, dict]:
            """(file, line, settings) of the scope that defines packages:<name>."""
            for spath, sdoc, prefix in scopes:
                pkgs = _get(sdoc.data, *prefix, "packages") or {}
                if isinstance(pkgs.get(name), dict):
                    return spath, sdoc.line(*prefix, "packages", name, "require"), pkgs[name]
            # Nowhere: the shared part (the last include) is where it belongs.
            spath, sdoc, prefix = scopes[-1]
            return spath, sdoc.line(*prefix, "packages"), {}

        target, where = str(part.target), f"{part.system}:{part.name}"
        apath, aline, settings = package("all")
        targets = [t for s in _strings(settings.get("require")) for t in _variant_values(s, "target")]
        if targets != [target]:
            found = ", ".join(f"target={t}" for t in targets) or "no target"
            self.add(apath, aline, f"packages:all:require has {found}"
                                   f", but {where} builds for target={target} (a preference alone can be ignored)")

        cname = self.tc.compiler["name"]
        cpath, cline, settings = package(cname)
        versions = [v for s in _strings(settings.get("require")) for v in _versions(s)]
        if versions != [self.compiler_version]:
            self.add(cpath, cline, f"packages:{cname}:require pins {', '.join(versions) or 'no version'}, "
                                   f"the toolchain file says {self.compiler_version}")

        mpath, mline, settings = package(self.tc.mpi["name"])
        self._lint_spack_mpi(mpath, mline, " ".join(_strings(settings.get("require"))))
        self._lint_spack_stack(package)

        for name in SITE_EXTERNALS:
            spath, sline, settings = package(name)
            if settings.get("buildable") is not False:
                self.add(spath, sline, f"packages:{name} must be 'buildable: false': it comes from the site "
                                       f"(spack-envs/site-example/), never from a Spack build")

        url = str(((spack.get("mirrors") or {}).get("buildcache-destination") or {}).get("url", ""))
        if not url.startswith(BUILDCACHE_VAR + "/"):
            self.add(path, doc.line("spack", "mirrors"),
                     f"mirror buildcache-destination must be {BUILDCACHE_VAR}/<env> (found {url or 'none'}): "
                     f"the site names its build cache, there is no default")
        self._lint_spack_ci(path, doc, spack.get("ci"))

    def _lint_spack_mpi(self, path: Path, line: int, text: str) -> None:
        mpi_name = self.tc.mpi["name"]
        if not text:
            self.add(path, line, f"packages:{mpi_name}:require does not pin {mpi_name}@{self.mpi_version}")
            return
        versions = _versions(text)
        if not versions:
            self.add(path, line, f"{mpi_name} requirement {text!r} has no version, "
                                 f"the toolchain file says @{self.mpi_version}")
        for v in versions:
            if v != self.mpi_version:
                self.add(path, line, f"{mpi_name}@{v}, the toolchain file says {self.mpi_version}")
        for feature in self.tc.mpi.get("features") or []:
            token = SPACK_OPENMPI_FEATURES.get(str(feature))
            if token is None:
                continue
            key, sep, value = token.partition("=")
            present = value in [v for t in _variant_values(text, key) for v in t.split(",")] if sep \
                else token in text.split()
            if not present:
                self.add(path, line, f"{mpi_name} requirement lacks {token} (the toolchain file "
                                     f"asks for {feature})")
        for tok in (t for t in text.split() if t.startswith("%")):
            cn, _, cv = tok[1:].partition("@")
            if cv and cv.lstrip("=") != self.compiler_version:
                self.add(path, line, f"{mpi_name} built with {tok}, the toolchain file says "
                                     f"{self.tc.compiler['name']}@{self.compiler_version}")

    def _lint_spack_stack(self, package: Any) -> None:
        """Every stack component pinned to the toolchain's version; UCX with exactly the toolchain's transports."""
        for name, component in self.tc.stack.items():
            spack_name = str(component.get("spack", name))
            spath, sline, settings = package(spack_name)
            text = " ".join(_strings(settings.get("require")))
            versions = _versions(text)
            if versions != [str(component["version"])]:
                self.add(spath, sline, f"packages:{spack_name}:require pins {', '.join(versions) or 'no version'}, "
                                       f"the toolchain file (stack.{name}) says {component['version']}")
            tokens = text.split()
            for variant, wanted in (self.tc.transports.get(name) or {}).items():
                want, other = ("+", "~") if wanted else ("~", "+")
                if f"{want}{variant}" in tokens:
                    continue
                found = f"requires {other}{variant}" if f"{other}{variant}" in tokens else f"lacks {want}{variant}"
                effect = TRANSPORT_EFFECT.get(variant, "a transport gompi/2023b has") if wanted \
                    else "a transport gompi/2023b does not have"
                self.add(spath, sline, f"{spack_name} {found}, the toolchain file (transports.{name}.{variant}) "
                                       f"says {want}{variant}: {effect}")
            for variant, wanted in (self.tc.variants.get(name) or {}).items():
                want, other = ("+", "~") if wanted else ("~", "+")
                if f"{want}{variant}" in tokens:
                    continue
                found = f"requires {other}{variant}" if f"{other}{variant}" in tokens else f"lacks {want}{variant}"
                effect = VARIANT_EFFECT.get((name, variant),
                                            f"not how {self.eb_tc_name}/{self.eb_tc_version} builds it")
                self.add(spath, sline, f"{spack_name} {found}, the toolchain file (variants.{name}.{variant}) says "
                                       f"{want}{variant}: {effect}")
            providers = self.tc.providers.get(name) or {}
            if providers:
                have = {v for t in _variant_values(text, "fabrics") for v in t.split(",")}
                conflicts = {v for c in _strings(settings.get("conflict")) for t in _variant_values(c, "fabrics")
                             for v in t.split(",")}
                exact = bool(re.search(r"(?:^|\s)fabrics:=", text))
                missing = [p for p, w in providers.items() if w and p not in have]
                extra = [p for p, w in providers.items() if not w and p in have]
                unexcluded = [p for p, w in providers.items() if not w and p not in conflicts]
                if have and not exact and not missing and not extra and unexcluded:
                    self.add(spath, sline, f"{spack_name} fabrics={','.join(sorted(have))} does not exclude "
                                           f"{', '.join(unexcluded)}: Spack adds its default providers to a fabrics= "
                                           f"requirement (seen: sockets with Spack 1.1); add conflict: "
                                           f"[{', '.join('fabrics=' + p for p in unexcluded)}]")
                elif missing or extra:
                    said = ",".join(p for p, w in providers.items() if w)
                    what = "; ".join(filter(None, [f"lacks {', '.join(missing)}" if missing else "",
                                                   f"has {', '.join(extra)}" if extra else ""]))
                    self.add(spath, sline, f"{spack_name} fabrics={','.join(sorted(have)) or '(Spack default)'} "
                                           f"{what}: the toolchain file (providers.{name}) says fabrics={said}, "
                                           f"the providers {self.eb_tc_name}/{self.eb_tc_version}'s {spack_name} has")

    def _lint_spack_ci(self, path: Path, doc: _Yaml, ci: Any) -> None:
        """`spack ci generate` gives every job it makes runner tags (the rest of ci: is rendered from systems/)."""
        sections = ci.get("pipeline-gen") if isinstance(ci, dict) else None
        if not isinstance(sections, list):
            self.add(path, doc.line("spack", "ci"), "no ci:pipeline-gen section for spack ci generate")
            return
        tagged = {k for s in sections if isinstance(s, dict) for k, v in s.items()
                  if isinstance(v, dict) and v.get("tags")}
        for kind in ("build-job", "reindex-job", "any-job"):
            if kind not in tagged:
                self.add(path, doc.line("spack", "ci", "pipeline-gen"),
                         f"no {kind} section with tags: the jobs spack ci generate makes for it would run "
                         f"on any runner")

    # -- easyconfigs ---------------------------------------------------------------

    def lint_easyconfigs(self) -> None:
        ec_root = self.root / "easyconfigs"
        files = sorted(ec_root.glob("*.eb")) if ec_root.is_dir() else []
        osu_modules = []
        for path in files:
            module = self._lint_easyconfig(path)
            if module:
                osu_modules.append(module)
        if not osu_modules:
            self.add(self.tc.path, self.tc_yaml.line("easybuild_toolchain"),
                     f"no easyconfig for {self.expected_osu_module()} in easyconfigs/")
        wanted = [str(m) for m in (self.tc.data.get("modules") or {}).get("easybuild") or []]
        for module in osu_modules:
            if wanted and module not in wanted:
                self.add(self.tc.path, self.tc_yaml.line("modules", "easybuild"),
                         f"modules:easybuild lists {', '.join(wanted)}, but easyconfigs/ builds {module}")
        names = ", ".join(p.name for p in files) or "none"
        self.report.checked.append(f"easyconfigs/ ({names}: version, toolchain, source, sha256)")

    def _lint_easyconfig(self, path: Path) -> Optional[str]:
        """Check one easyconfig; return the module name it installs when it is the OSU one."""
        text = path.read_text()
        try:
            tree = ast.parse(text, filename=str(path))
        except SyntaxError as err:
            self.add(path, err.lineno or 1, f"not a valid easyconfig (Python syntax): {err.msg}")
            return None
        params: dict[str, ast.expr] = {}
        for node in tree.body:
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                params[node.targets[0].id] = node.value
        name = _literal(params.get("name"))
        version = _literal(params.get("version"))
        tc = _literal(params.get("toolchain"))
        tcname = tc.get("name") if isinstance(tc, dict) else None
        tcversion = tc.get("version") if isinstance(tc, dict) else None

        if name != OSU_EASYBUILD_NAME:
            return None   # a stack easyconfig: judged by what EasyBuild resolves (lint_easybuild_stack)
        if tcname is not None and (tcname not in GOMPI_FAMILY or str(tcversion) != self.eb_tc_version):
            self.add(path, params["toolchain"].lineno,
                     f"toolchain {tcname}/{tcversion}, the toolchain file says {self.eb_tc_name}/{self.eb_tc_version}")
        if str(version) != self.osu_version:
            self.add(path, params["version"].lineno if "version" in params else 1,
                     f"version {version!r}, the toolchain file says OSU {self.osu_version}")

        # sources: the tarball name, with EasyBuild's templates resolved.
        templates = {
            "SOURCELOWER_TAR_GZ": f"{str(name).lower()}-{version}.tar.gz",
            "SOURCE_TAR_GZ": f"{name}-{version}.tar.gz",
        }
        sources = params.get("sources")
        tarballs = []
        if isinstance(sources, ast.List):
            for elt in sources.elts:
                if isinstance(elt, ast.Name):
                    tarballs.append(templates.get(elt.id, elt.id))
                elif isinstance(elt, ast.Constant):
                    tarballs.append(str(elt.value).replace("%(namelower)s", str(name).lower())
                                    .replace("%(version)s", str(version)))
        if sources is not None and tarballs and tarballs[0] != self.tc.osu.get("tarball"):
            self.add(path, sources.lineno,
                     f"source {tarballs[0]}, the toolchain file says {self.tc.osu.get('tarball')}")

        # checksums: the first one belongs to the OSU tarball.
        sha = str(self.tc.osu["sha256"])
        checksums = params.get("checksums")
        consts = [n for n in ast.walk(checksums) if isinstance(n, ast.Constant) and isinstance(n.value, str)] \
            if checksums is not None else []
        if not consts:
            self.add(path, checksums.lineno if checksums is not None else 1,
                     f"no sha256 checksum for the source; the toolchain file says {sha}")
        elif consts[0].value != sha:
            self.add(path, consts[0].lineno,
                     f"checksum {consts[0].value!s} for {tarballs[0] if tarballs else 'the source'}, "
                     f"the toolchain file says sha256 {sha}")

        expected_file = f"{name}-{version}-{tcname}-{tcversion}.eb"
        if path.name != expected_file:
            self.add(path, 1, f"file name should be {expected_file} (EasyBuild finds easyconfigs by name)")
        return f"{name}/{version}-{tcname}-{tcversion}"

    # -- EasyBuild's resolved stack ------------------------------------------------------

    def lint_easybuild_stack(self, enabled: Optional[bool]) -> None:
        """Compare the chain ``eb <osu ec> --dry-run --robot`` resolves with the toolchain's stack.

        ``enabled`` None: when ``eb`` is on PATH; True: always (a missing ``eb`` is a finding);
        False: never.
        """

        if enabled is False or (enabled is None and shutil.which("eb") is None):
            self.report.checked.append("EasyBuild's resolved stack: not compared (no 'eb' on PATH; "
                                       "the lint:easybuild job compares it)")
            return
        try:
            ec = easybuild.easyconfig_for(self.tc, self.root)
            with tempfile.TemporaryDirectory(prefix="mpiregress-lint-eb-") as tmp:
                chain = easybuild.dependency_chain(ec, prefix=Path(tmp), root=self.root)
        except MpiRegressError as err:
            self.add(self.root / "easyconfigs", 1, f"EasyBuild cannot resolve the OSU easyconfig: {err}")
            return
        resolved = easybuild.stack_versions(chain)
        by_name = {str(c.get("easybuild", n)): (n, c) for n, c in self.tc.stack.items()}
        for eb_name, (name, component) in by_name.items():
            found = resolved.get(eb_name)
            if found is None:
                self.add(self.tc.path, self.tc_yaml.line("stack", name),
                         f"EasyBuild's {self.eb_tc_name}/{self.eb_tc_version} chain has no {eb_name}, "
                         f"the toolchain file (stack.{name}) says {component['version']}")
            elif found["version"] != str(component["version"]):
                declared = self._declaring_easyconfig(chain, eb_name)
                self.add(declared[0], declared[1],
                         f"EasyBuild resolves {found['module']}, the toolchain file (stack.{name}) says "
                         f"{eb_name} {component['version']}")
        self._lint_easybuild_variants(chain)
        self.report.checked.append(f"EasyBuild's resolved stack ({len(chain)} easyconfigs; "
                                   f"{', '.join(by_name)} as in stack:, and how they are built: variants, "
                                   f"providers, transports)")

    def _lint_easybuild_variants(self, chain: list) -> None:
        """What the toolchain file says beyond versions (variants, providers, transports) against the
        dependencies and configure options of the easyconfigs EasyBuild resolved."""
        for name, component in self.tc.stack.items():
            eb_name = str(component.get("easybuild", name))
            dep = next((d for d in chain if d.module.startswith(eb_name + "/")), None)
            wanted = {**(self.tc.variants.get(name) or {}), **(self.tc.providers.get(name) or {}),
                      **(self.tc.transports.get(name) or {})}
            if dep is None or not wanted:
                continue
            path = Path(dep.easyconfig)
            try:
                text = path.read_text()
            except OSError:
                continue
            built = easyconfig_features(name, text)
            line = next((i for i, t in enumerate(text.splitlines(), 1) if t.startswith("configopts")), 1)
            for feature, want in wanted.items():
                have = built.get(feature)
                if have is None or have == bool(want):
                    continue
                section = next(s for s, d in (("variants", self.tc.variants), ("providers", self.tc.providers),
                                              ("transports", self.tc.transports)) if feature in (d.get(name) or {}))
                self.add(path, line, f"EasyBuild's {dep.module} is built {'without' if want else 'with'} {feature} "
                                     f"(its dependencies and configopts), the toolchain file ({section}.{name}."
                                     f"{feature}) says {'+' if want else '~'}{feature}")

    def _declaring_easyconfig(self, chain: list, eb_name: str) -> tuple[Path, int]:
        """The easyconfig in the chain that lists ``eb_name`` as a dependency, and that line."""
        pattern = re.compile(r"""\(\s*['"]""" + re.escape(eb_name) + r"""['"]\s*,""")
        for dep in chain:
            path = Path(dep.easyconfig)
            try:
                lines = path.read_text().splitlines()
            except OSError:
                continue
            for number, text in enumerate(lines, 1):
                if pattern.search(text) and not dep.module.startswith(eb_name + "/"):
                    return path, number
        return self.tc.path, self.tc_yaml.line("stack")

    # -- a site's Spack scope -----------------------------------------------------------

    def lint_manifests(self, directory: Optional[Path]) -> None:
        """Each build's MPI, as its own ompi_info says (manifest ``extra.mpi_capabilities``), provides the
        toolchain's MPI features (mpi.features: ucx, slurm, pmix), whatever a package manager's variants say."""
        if directory is None:
            return
        for m in manifest_mod.find_all(Path(directory)):
            path = Path(m.path or directory)
            caps = m.extra.get("mpi_capabilities")
            if not caps:
                self.add(path, 1, f"the {m.method} build for {m.target} records no MPI capabilities (ompi_info): "
                                  f"rebuild it with 'mpiregress build --method {m.method} --rebuild'")
                continue
            for problem in capability_problems(caps, self.tc):
                self.add(path, 1, f"the {m.method} build for {m.target}: {problem}, the toolchain file asks for "
                                  f"mpi.features {', '.join(map(str, self.tc.mpi.get('features') or []))}")
            self.report.checked.append(f"manifest {path.name} (its MPI's ompi_info against mpi.features)")

    def lint_site_scopes(self, scopes: Iterable[Path]) -> None:
        """Every compiler path and external prefix a site scope names exists here (Spack 0.23 would stop
        with "internal error ... unsatisfiable", 1.1 concretize a smaller graph without a word)."""

        for scope in scopes:
            for problem in site_scope_problems(Path(scope)):
                path, _, sentence = problem.partition(": ")
                self.add(Path(path) if Path(path).exists() else Path(scope), 1, sentence or problem)
            self.report.checked.append(f"site scope {scope} (compiler paths and external prefixes exist)")

    # -- ReFrame site configuration --------------------------------------------------

    def lint_reframe_config(self) -> None:
        path = self.root / "checks" / "config" / "site.yaml"
        if not path.is_file():
            self.report.checked.append("checks/config/site.yaml (absent, not checked)")
            return
        doc = self._load_yaml(path)
        if doc is None or not isinstance(doc.data, dict):
            return
        envs = doc.data.get("environments") or []
        count = 0
        for i, env in enumerate(envs):
            if not isinstance(env, dict):
                continue
            count += 1
            for j, module in enumerate(env.get("modules") or []):
                mname = module.get("name") if isinstance(module, dict) else module
                problem = self.module_problem(str(mname))
                if problem:
                    self.add(path, doc.line("environments", i, "modules", j),
                             f"environment {env.get('name')}: {problem}")
            env_vars = env.get("env_vars") or []
            pairs = env_vars.items() if isinstance(env_vars, dict) else \
                [tuple(p) for p in env_vars if isinstance(p, (list, tuple)) and len(p) == 2]
            for k, (var, value) in enumerate(pairs):
                problem = self._env_var_problem(str(var), str(value))
                if problem:
                    self.add(path, doc.line("environments", i, "env_vars", var if isinstance(env_vars, dict) else k),
                             f"environment {env.get('name')}: {problem}")

        self.report.checked.append(f"checks/config/site.yaml ({count} environments: module names)")

    def _env_var_problem(self, var: str, value: str) -> Optional[str]:
        """Judge EasyBuild-style version variables a ReFrame environment may set."""
        expected = {"EBVERSIONGCC": self.compiler_version, "EBVERSIONGCCCORE": self.compiler_version,
                    "EBVERSIONOPENMPI": self.mpi_version, "EBVERSIONOSUMINMICROMINBENCHMARKS": self.osu_version}
        if var in expected and value != expected[var]:
            return f"{var}={value}, the toolchain file says {expected[var]}"
        if "/" in value and re.fullmatch(r"[A-Za-z][\w.+-]*/[\w.+-]+", value):
            return self.module_problem(value)
        return None

    # -- baselines ------------------------------------------------------------------------

    def lint_baselines(self) -> None:
        base = self.root / "baselines"
        files = sorted(base.glob("*.yaml")) if base.is_dir() else []
        known = {}
        for system in self.systems:
            known[system.name] = [p.name for p in system.partitions]
        for path in files:
            doc = self._load_yaml(path)
            if doc is None or not isinstance(doc.data, dict):
                continue
            tcname = doc.data.get("toolchain")
            if str(tcname) != self.tc.name:
                self.add(path, doc.line("toolchain"),
                         f"toolchain {tcname!r}, the toolchain file is {self.tc.name!r}")
            name = str(doc.data.get("system"))
            if name not in known:
                self.add(path, doc.line("system"), f"system {name!r} has no systems/{name}.yaml")
            refs = doc.data.get("references")
            if name in known and isinstance(refs, dict):
                for partition in refs:
                    if partition not in known[name]:
                        self.add(path, doc.line("references", partition),
                                 f"references for {name}:{partition}, a partition the toolchain file "
                                 f"does not have (known: {', '.join(known[name])})")
        names = ", ".join(p.name for p in files) or "none"
        self.report.checked.append(f"baselines/ ({names}: toolchain field, partitions)")


# -- small parsers -----------------------------------------------------------------------------

def _get(data: Any, *keys: str) -> Any:
    for key in keys:
        data = data.get(key) if isinstance(data, dict) else None
    return data


def _strings(value: Any) -> list[str]:
    """A Spack 'require' value as a list of spec strings (dict forms like one_of are flattened)."""
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    out: list[str] = []
    for item in value if isinstance(value, list) else [value]:
        if isinstance(item, str):
            out.append(item)
        elif isinstance(item, dict):
            for key in ("spec", "one_of", "any_of"):
                out.extend(_strings(item.get(key)))
    return out


def _variant_values(spec: str, key: str) -> list[str]:
    """Values of ``key=value`` tokens in a spec string (``target=broadwell`` -> ['broadwell'])."""
    return re.findall(r"(?:^|\s)" + re.escape(key) + r":?=(\S+)", spec)


def _versions(spec: str) -> list[str]:
    """Versions given with ``@`` on the package itself (not on %compiler or ^dependencies)."""
    out = []
    for tok in spec.split("^")[0].split():
        if tok.startswith("%"):
            continue
        if "@" in tok:
            out.append(tok.split("@", 1)[1].lstrip("="))
    return out


def _literal(node: Optional[ast.expr]) -> Any:
    if node is None:
        return None
    try:
        return ast.literal_eval(node)
    except (ValueError, SyntaxError):
        return None


def lint(root: Path, toolchain_path: Optional[Path] = None, easybuild: Optional[bool] = None,
         site_scopes: Iterable[Path] = (), manifests: Optional[Path] = None) -> Report:
    """Compare every build definition under ``root`` with the toolchain file and the systems data.

    ``toolchain_path`` defaults to ``<root>/toolchains/2023b.yaml``; ``easybuild``: compare
    EasyBuild's resolved stack (None: when ``eb`` is on PATH). A toolchain file that cannot
    be loaded raises InputError (the lint cannot judge anything without it). ``manifests``: a folder of
    build manifests whose MPI capabilities (ompi_info) are checked against the toolchain's MPI features.
    """
    root = Path(root)
    tc = toolchain_mod.load(Path(toolchain_path) if toolchain_path else root / "toolchains" / "2023b.yaml")
    linter = _Linter(root, tc)
    linter.lint_toolchain_file()
    linter.lint_systems()
    linter.lint_spack_envs()
    linter.lint_easyconfigs()
    linter.lint_easybuild_stack(easybuild)
    linter.lint_reframe_config()
    linter.lint_baselines()
    linter.lint_derived()
    linter.lint_site_scopes(site_scopes)
    linter.lint_manifests(manifests)
    linter.report.findings = list(dict.fromkeys(linter.report.findings))
    return linter.report


def summary(report: Report) -> Iterable[str]:
    """The lines ``mpiregress lint`` prints: findings, or what was checked, then a count."""
    for finding in report.findings:
        yield str(finding)
    if report.ok:
        for item in report.checked:
            yield f"checked {item}"
        yield f"lint: ok, everything agrees with {report.toolchain_path}"
    else:
        count, files = len(report.findings), len({f.path for f in report.findings})
        yield (f"lint: {count} finding{'s' if count != 1 else ''} in {files} file{'s' if files != 1 else ''}: "
               f"build definitions disagree with {report.toolchain_path}")
