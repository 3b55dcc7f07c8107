"""How two builds of one toolchain differ, from their manifests: what a cross-method finding names.

Methods that perform differently on the same series either measure another library or were built
or run differently. The manifests say how: the compiler and MPI, the optimisation level and target
flags OSU was compiled with, and the MCA parameters the build's environment sets (the toolchain's
``runtime_env`` and what its module files set, e.g. a site OpenMPI module's ``setenv OMPI_MCA_btl``).
Differences are named per pair of methods, so a finding "easybuild is 80 % behind source" can say
"easybuild has OMPI_MCA_btl=self,tcp, source has it unset".
"""
from __future__ import annotations

import re
from itertools import combinations
from typing import Iterable, Mapping, Optional

from mpiregress.model.manifest import Manifest

_OPT = re.compile(r"(?:^|\s)(-O[0-3sgz]?|-Ofast)(?=\s|$)")


def compile_flags(m: Manifest) -> Optional[str]:
    """The C flags OSU was compiled with, where the manifest records them (None: not recorded)."""
    if m.extra.get("cflags"):
        return str(m.extra["cflags"])                     # easybuild: the CFLAGS EasyBuild set
    for arg in m.extra.get("configure") or []:
        if str(arg).startswith("CFLAGS="):
            return str(arg)[len("CFLAGS="):]              # source: the configure line
    return None


def optimization(m: Manifest) -> Optional[str]:
    """The optimisation level (-O2, -O0, ...) OSU was compiled with; the last one counts, as for gcc."""
    flags = compile_flags(m)
    if flags is None:
        return None
    found = _OPT.findall(flags)
    return found[-1] if found else "-O0 (no -O flag)"


def runtime_env(m: Manifest) -> dict[str, str]:
    """The MCA parameters a job of this build runs with: the manifest's env_vars and what its modules set."""
    env = {str(k): str(v) for k, v in (m.env.get("env_vars") or {}).items()}
    env.update({str(k): str(v) for k, v in (m.extra.get("module_env") or {}).items() if str(k).startswith("OMPI_MCA_")})
    return {k: v for k, v in env.items() if k.startswith("OMPI_MCA_")}


def facts(m: Manifest) -> dict[str, Optional[str]]:
    """What decides a build's performance, as one string each (None: not recorded by this method)."""
    out: dict[str, Optional[str]] = {
        "compiler": f"{m.compiler.get('name')} {m.compiler.get('version')}" if m.compiler else None,
        "MPI": f"{m.mpi.get('name')} {m.mpi.get('version')}" if m.mpi else None,
        "optimization": optimization(m),
        "target flags": m.flags or None,
    }
    out["MPI transports"] = transports(m)
    out.update(runtime_env(m))
    return out


def transports(m: Manifest) -> Optional[str]:
    """The message and launch components the build's MPI has, as its ompi_info says (None: not recorded)."""
    caps = m.extra.get("mpi_capabilities") or {}
    components = caps.get("components") if isinstance(caps, dict) else None
    if not components:
        return None
    said = [f"{kind} {','.join(components[kind])}" for kind in ("pml", "btl", "mtl") if components.get(kind)]
    return "; ".join(said + [f"slurm {'yes' if caps.get('slurm') else 'no'}"])


def pair(a: Manifest, b: Manifest) -> list[str]:
    """One phrase per fact two builds record differently (facts one of them does not record are skipped;
    an MCA variable one build sets and the other does not is a difference)."""
    fa, fb = facts(a), facts(b)
    phrases = []
    for key in dict.fromkeys([*fa, *fb]):
        va, vb = fa.get(key), fb.get(key)
        mca = key.startswith("OMPI_MCA_")
        if va == vb or (not mca and (va is None or vb is None)):
            continue
        if mca:
            left = f"{a.method} has {key}={va}" if va is not None else f"{a.method} has {key} unset"
            right = f"{b.method} has {key}={vb}" if vb is not None else f"{b.method} has it unset"
            phrases.append(f"{left}, {right}")
        else:
            phrases.append(f"{a.method} {key} {va}, {b.method} {vb}")
    return phrases


def between(manifests: Iterable[Manifest]) -> dict[frozenset[str], str]:
    """{frozenset({method, method}): "how they differ"} for each pair of methods whose builds differ.

    Builds are compared per target (a run compares the builds of one partition); a pair that differs
    on several targets says on which.
    """
    by_target: dict[str, dict[str, Manifest]] = {}
    for m in manifests:
        by_target.setdefault(m.target, {}).setdefault(m.method, m)
    found: dict[frozenset[str], dict[str, str]] = {}
    for target, by_method in sorted(by_target.items()):
        for a, b in combinations(sorted(by_method), 2):
            phrases = pair(by_method[a], by_method[b])
            if phrases:
                found.setdefault(frozenset((a, b)), {})[target] = "; ".join(phrases)
    out: dict[frozenset[str], str] = {}
    for key, per_target in found.items():
        texts = set(per_target.values())
        out[key] = texts.pop() if len(texts) == 1 else " | ".join(f"{t}: {d}" for t, d in per_target.items())
    return out


def describe(builds: Mapping[frozenset[str], str], method: str, other: str) -> str:
    """The difference between two methods' builds ('' when they are alike or unknown)."""
    return builds.get(frozenset((method, other)), "")
