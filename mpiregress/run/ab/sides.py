"""Finding A for a toolchain MR: the target branch's build of the same method and target.

B is the MR's own builds (its pipeline's manifests). A is, in this order:

1. a folder of manifests given by hand (``--ab-against DIR``);
2. the **manifest store** (``ab.manifest_store`` in ``systems/<name>.yaml``): the default
   branch's build jobs copy each manifest to ``<store>/<branch>/<system>-<partition>/``
   (``ci/jobs/build.sh``), so an MR finds the last main pipeline's builds there; the install
   prefixes those manifests name stay where that pipeline's build put them;
3. **built from the merge base**: ``git merge-base HEAD <branch>``, a detached ``git worktree``
   of it, and ``mpiregress build`` run *from that worktree* (its own code, its own toolchain
   file) into its own manifest folder and install root (``<state>/ab/<commit>/``, reused by
   the next MR on the same base).

When none of these gives an A, there is no pairing: the A/B check measures B alone and
every series falls back to the history gate, saying so (:func:`mpiregress.verdict.ab.paired.judge`).
A and B of one method built for different targets cannot be compared at all: that is
bad input, one sentence, exit 2 (:func:`pair_builds`).
"""
from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, Sequence

from mpiregress import paths
from mpiregress.errors import InputError
from mpiregress.model import manifest, systems
from mpiregress.run.ab.plan import Side, check_comparable

# ``--ab-against SAME``: an A/A run, A is B's own build through the same A/B path (its false alarms are real ones).
SAME = "SAME"


@dataclass(frozen=True)
class FoundA:
    """Where A's manifests are (None: no A), how they were found, in one sentence."""

    directory: Optional[Path]
    source: str            # given | store | merge-base | none
    sentence: str
    commit: str = ""

    def to_dict(self) -> dict[str, str]:
        return {"directory": str(self.directory or ""), "source": self.source, "sentence": self.sentence,
                "commit": self.commit}


def store_folder(store: Path, branch: str, system: str, partition: str) -> Path:
    """``<store>/<branch>/<system>-<partition>``: where a branch's build jobs leave their manifests."""
    return Path(store) / branch.replace("/", "_") / f"{system}-{partition}"


def _has_builds(directory: Path, methods: Sequence[str]) -> bool:
    return any(manifest.find(directory, m) for m in methods)


def _git(args: Sequence[str], cwd: Path, timeout: float = 120) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        raise RuntimeError((done.stderr or done.stdout).strip().splitlines()[-1:] or [f"git {args[0]} failed"])
    return done.stdout.strip()


def merge_base(branch: str, repo: Path = paths.REPO_ROOT) -> str:
    """The commit the MR forked from: ``git merge-base HEAD origin/<branch>`` (or ``<branch>``)."""
    errors = []
    for ref in (f"origin/{branch}", branch):
        try:
            return _git(["merge-base", "HEAD", ref], repo)
        except (RuntimeError, OSError, subprocess.SubprocessError) as err:
            errors.append(f"{ref}: {err}")
    raise RuntimeError("; ".join(errors))


def build_at(commit: str, methods: Sequence[str], system: str, partition: str, work: Path,
             repo: Path = paths.REPO_ROOT) -> tuple[Path, list[str]]:
    """Build ``methods`` as ``commit`` builds them; return (manifest folder, one sentence per method that failed).

    The worktree's own ``mpiregress`` runs the build (PYTHONPATH and cwd point at it), so A is
    what the target branch would have built, with its own toolchain file; builds go to
    ``work/manifests`` and ``work/install`` and never touch B's.
    """
    src, manifests = work / "src", work / "manifests"
    if not (src / "mpiregress").is_dir():
        work.mkdir(parents=True, exist_ok=True)
        _git(["worktree", "add", "--force", "--detach", str(src), commit], repo, timeout=300)
    env = {k: v for k, v in os.environ.items()
           if k not in ("MPIREGRESS_TOOLCHAINS_DIR", "MPIREGRESS_MANIFEST_DIR", "MPIREGRESS_INSTALL_ROOT")}
    env.update(PYTHONPATH=str(src), MPIREGRESS_STATE_DIR=str(work / "state"))
    failed = []
    for method in methods:
        if manifest.find(manifests, method):
            continue   # built for this base already (the build's own reuse test is the method's)
        cmd = [sys.executable, "-m", "mpiregress", "build", "--method", method, "--system", system,
               "--partition", partition, "--manifest-dir", str(manifests), "--install-root", str(work / "install")]
        done = subprocess.run(cmd, cwd=src, env=env, capture_output=True, text=True, timeout=4 * 3600)
        if done.returncode != 0:
            said = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
            failed.append(f"{method} (exit {done.returncode}: {said})")
    return manifests, failed


def find(against: str, *, system: str, partition: str, methods: Sequence[str], branch: str = "main",
         store: Optional[Path] = None, build: bool = True, work_root: Optional[Path] = None,
         b_dir: Optional[Path] = None) -> FoundA:
    """A's manifests for an A/B run (see the module doc); ``against`` is a folder, ``auto`` or :data:`SAME`
    (an A/A run: A is B's own build in ``b_dir``)."""
    if against == SAME:
        if b_dir is None or not manifest.find_all(b_dir):
            raise InputError(f"--ab-against {SAME} (an A/A run) needs B's builds: {b_dir} holds no build manifest")
        return FoundA(Path(b_dir).resolve(), "same", f"A/A run: A is B's own build in {b_dir} (--ab-against "
                      f"{SAME}), so any regression found is a false alarm")
    if against != "auto":
        folder = Path(against)
        if not folder.is_dir() or not manifest.find_all(folder):
            raise InputError(f"--ab-against {against} is not a folder of build manifests (give the target "
                             f"branch's manifests, or 'auto')")
        return FoundA(folder.resolve(), "given", f"A is the build in {folder} (given with --ab-against)")
    if store is not None:
        folder = store_folder(store, branch, system, partition)
        if _has_builds(folder, methods):
            return FoundA(folder, "store", f"A is {branch}'s last pipeline build, from the manifest store {folder}")
    where = f"no {branch} build in the manifest store" + (f" ({store_folder(store, branch, system, partition)})"
                                                           if store is not None else " (none configured)")
    if not build:
        return FoundA(None, "none", f"{where} and building A was not allowed")
    try:
        commit = merge_base(branch)
    except (RuntimeError, OSError, subprocess.SubprocessError) as err:
        return FoundA(None, "none", f"{where}, and the merge base with {branch} is unknown ({err})")
    work = (work_root or paths.state_dir() / "ab") / commit[:12]
    try:
        folder, failed = build_at(commit, methods, system, partition, work)
    except (RuntimeError, OSError, subprocess.SubprocessError) as err:
        return FoundA(None, "none", f"{where}, and A could not be built at the merge base {commit[:12]} ({err})",
                      commit)
    if not _has_builds(folder, methods):
        return FoundA(None, "none", f"{where}, and building A at the merge base {commit[:12]} failed: "
                      f"{'; '.join(failed)}", commit)
    note = f" ({'; '.join(failed)} could not be built: those series have no A)" if failed else ""
    return FoundA(folder, "merge-base", f"A was built from the merge base {commit[:12]} with {branch} in "
                  f"{folder}{note}", commit)


@dataclass
class Pairing:
    """Which A build goes with which B build, per method; methods with no A, and why."""

    pairs: dict[str, tuple[manifest.Manifest, manifest.Manifest]] = field(default_factory=dict)
    b_only: dict[str, str] = field(default_factory=dict)      # method -> why it has no A


def _side(m: manifest.Manifest) -> Side:
    return Side(manifest=str(m.path), method=m.method, target=m.target, toolchain=m.toolchain)


def pair_builds(a_dir: Optional[Path], b_dir: Path, methods: Sequence[str]) -> Pairing:
    """Pair every B build with the A build of the same method and target.

    InputError (exit 2) when A has builds of a method but none for B's target, or when A
    was given and has none of B's methods: such an A and B measure different things.
    """
    out = Pairing()
    a_all = manifest.find_all(a_dir) if a_dir is not None else []
    for method in methods:
        for b in manifest.find(b_dir, method):
            a_same = [a for a in a_all if a.method == method]
            if not a_same:
                out.b_only[method] = (f"no A build of method {method} in {a_dir}" if a_dir is not None
                                      else "no A build")
                continue
            match = [a for a in a_same if a.target == b.target]
            check_comparable(_side(match[0] if match else a_same[0]), _side(b))
            out.pairs[method] = (match[0], b)
    if a_all and not out.pairs and any(manifest.find(b_dir, m) for m in methods):
        b_any = next(b for m in methods for b in manifest.find(b_dir, m))
        check_comparable(_side(a_all[0]), _side(b_any))
    return out


def keep_in_store(system: str, partition: str, branch: str, manifest_dir: Path, method: str) -> list[Path]:
    """Copy ``method``'s manifests from a build job's folder into the system's manifest store (the
    default branch's build jobs do, so that later MRs find their A there); returns the copies."""

    store = systems.get(system).ab_store()
    if store is None:
        raise InputError(f"system {system} has no ab.manifest_store (systems/{system}.yaml), or its variables "
                         f"are not set, so its builds cannot be kept for A/B runs")
    folder = store_folder(store, branch, system, partition)
    folder.mkdir(parents=True, exist_ok=True)
    kept = []
    for found in manifest.find(Path(manifest_dir), method):
        target = folder / Path(str(found.path)).name
        tmp = target.with_suffix(".json.tmp")
        tmp.write_text(Path(str(found.path)).read_text())
        os.replace(tmp, target)
        kept.append(target)
    return kept


if __name__ == "__main__":
    # ci/jobs/build.sh: python -m mpiregress.run.ab.sides keep SYSTEM PARTITION BRANCH MANIFEST_DIR METHOD
    if len(sys.argv) != 7 or sys.argv[1] != "keep":
        sys.exit("usage: python -m mpiregress.run.ab.sides keep SYSTEM PARTITION BRANCH MANIFEST_DIR METHOD")
    try:
        for path in keep_in_store(sys.argv[2], sys.argv[3], sys.argv[4], Path(sys.argv[5]), sys.argv[6]):
            print(f"kept for A/B runs: {path}")
    except InputError as err:
        sys.exit(f"mpiregress.run.ab.sides: {err}")
