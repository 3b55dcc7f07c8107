"""Pieces every build method needs: the OSU tarball and its checksum, logged build
steps, the compiler and MPI actually on the machine, target flags, reuse of a build.

The methods differ in who compiles (configure/make, Spack, EasyBuild, nobody for
EESSI); what they share lives here so that a checksum or a toolchain mismatch is
judged the same way whichever method met it.
"""
from __future__ import annotations

import hashlib
import http.client
import os
import re
import shlex
import shutil
import subprocess
import sys
import tarfile
import urllib.request
from collections import deque
from pathlib import Path
from typing import Callable, Mapping, Optional, Sequence

from .. import manifest as manifest_mod
from ..errors import InputError, MpiRegressError, NotAvailableError
from ..toolchain import Toolchain

MIRROR_ENV = "OSU_SOURCE_MIRROR"
SHA256_ENV = "OSU_SHA256"
DOWNLOAD_TIMEOUT_S = 20
_HEX64 = re.compile(r"^[0-9a-f]{64}$")

Downloader = Callable[[str, Path], None]


class BuildError(MpiRegressError):
    """A build step failed or produced nothing usable (exit 2: an error, not a regression)."""


# --- the source tarball -------------------------------------------------------

BINARIES = ("osu_latency", "osu_bw")   # what every build must provide to the checks


def record(manifest: "manifest_mod.Manifest", manifest_dir: Path, done: str, log: object = None) -> "manifest_mod.Manifest":
    """Write ``manifest`` once its benchmark binaries are there; ``done`` names the step that should have made them."""
    for name in BINARIES:
        binary = manifest.binary(name)
        if not os.access(binary, os.X_OK):
            where = f"; log: {log}" if log else ""
            raise BuildError(f"{done} but {binary} is missing{where}")
    manifest.path = str(manifest_mod.write(manifest, manifest_dir))
    return manifest


def say(message: str) -> None:
    """Progress of a build, on stderr: stdout carries only the manifest path."""
    print(f"mpiregress build: {message}", file=sys.stderr, flush=True)


def require_command(command: str, tool: str, hint: str) -> str:
    """Path of ``command``, or NotAvailableError (exit 4): that build method cannot run on this machine."""
    found = shutil.which(command)
    if found is None:
        raise NotAvailableError(f"{tool} is not available on this machine: no '{command}' command on PATH ({hint})")
    return found


def sha256_of(path: Path) -> str:
    """Hex sha256 of a file, read in chunks (tarballs can be large)."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def sources_cache_dir() -> Path:
    """Where downloaded tarballs are kept between builds (``<state_dir>/sources``)."""
    from ..paths import state_dir

    return state_dir() / "sources"


def download_url(url: str, destination: Path) -> None:
    """Download ``url`` to ``destination`` atomically (a partial file never looks complete)."""
    partial = destination.with_name(destination.name + ".part")
    destination.parent.mkdir(parents=True, exist_ok=True)
    try:
        with urllib.request.urlopen(url, timeout=DOWNLOAD_TIMEOUT_S) as response, open(partial, "wb") as out:
            shutil.copyfileobj(response, out)
        os.replace(partial, destination)
    finally:
        partial.unlink(missing_ok=True)


def _where_to_put_it(toolchain: Toolchain) -> str:
    name, sha = toolchain.osu["tarball"], toolchain.osu["sha256"]
    return (f"put {name} (sha256 {sha}) in a folder and pass --source-mirror DIR "
            f"or set {MIRROR_ENV}=DIR")


def resolve_tarball(toolchain: Toolchain, mirror: Optional[Path],
                    download: Downloader = download_url) -> Path:
    """The OSU tarball to build: from ``mirror``, else the sources cache, else downloaded into the cache.

    Errors are one sentence saying where the tarball must go; ``download`` is
    injectable so tests never leave the machine.
    """
    name = toolchain.osu["tarball"]
    if mirror is not None:
        # An explicit mirror that lacks the file is a mistake to report, not a
        # reason to go to the network behind the user's back.
        candidate = Path(mirror) / name
        if candidate.is_file():
            return candidate
        state = "does not exist" if not Path(mirror).is_dir() else f"has no {name}"
        raise InputError(f"the OSU source mirror {mirror} {state}: {_where_to_put_it(toolchain)}")
    cache = sources_cache_dir()
    cached = cache / name
    if cached.is_file():
        return cached
    url = toolchain.osu.get("url", "")
    if not url:
        raise InputError(f"no OSU source tarball in {cache} and the toolchain {toolchain.path} "
                         f"gives no osu.url to download it from: {_where_to_put_it(toolchain)}")
    print(f"mpiregress build: downloading {url} into {cache}", file=sys.stderr)
    try:
        download(url, cached)
    except (OSError, ValueError, http.client.HTTPException) as err:
        reason = getattr(err, "reason", None) or err
        raise InputError(f"cannot get the OSU {toolchain.osu['version']} source: it is not in {cache} "
                         f"and downloading {url} failed ({reason}); {_where_to_put_it(toolchain)}") from None
    return cached


def normalize_sha256(value: Optional[str]) -> Optional[str]:
    """A sha256 given by a user, lower-cased, or an InputError if it is not 64 hex digits."""
    if value is None or value == "":
        return None
    value = value.strip().lower()
    if not _HEX64.match(value):
        raise InputError(f"--sha256 / {SHA256_ENV} must be 64 hexadecimal digits, got {value!r}")
    return value


def site_tarball_banner(path: Path, actual: str, official: str) -> str:
    """The loud warning printed when a non-official tarball is accepted by override."""
    bar = "!" * 78
    lines = [
        bar,
        "!! WARNING: building OSU from a SITE TARBALL, NOT the official release",
        f"!!   file:           {path}",
        f"!!   sha256:         {actual}  (accepted by --sha256 / {SHA256_ENV})",
        f"!!   official sha256: {official}",
        "!! The manifest records sha256_official: false; results of this build are",
        "!! not comparable with builds of the official tarball.",
        bar,
    ]
    return "\n".join(lines)


def verify_sha256(path: Path, toolchain: Toolchain, override: Optional[str]) -> tuple[str, bool]:
    """(actual sha256, is-official) of ``path``; an InputError unless it is official or the override.

    The override exists for sites that must patch or repackage OSU: it accepts
    exactly one other tarball, loudly, and the manifest says so.
    """
    official = toolchain.osu["sha256"].lower()
    actual = sha256_of(path)
    if actual == official:
        return actual, True
    override = normalize_sha256(override)
    if override == actual:
        print(site_tarball_banner(path, actual, official), file=sys.stderr)
        return actual, False
    hint = (f"the override {override} matches neither" if override else
            f"if this is a site tarball you trust, pass --sha256 {actual} (or set {SHA256_ENV})")
    raise InputError(f"sha256 mismatch for {path}: the toolchain {toolchain.path} expects {official} "
                     f"(osu.sha256), the file has {actual}; {hint}")


def extract_tarball(tarball: Path, destination: Path) -> Path:
    """Extract ``tarball`` into ``destination`` and return its single top-level folder."""
    destination.mkdir(parents=True, exist_ok=True)
    try:
        with tarfile.open(tarball) as tar:
            tops = {m.name.removeprefix("./").split("/", 1)[0] for m in tar.getmembers()} - {"", "."}
            if len(tops) != 1:
                raise InputError(f"{tarball} must hold one top-level folder (like osu-micro-benchmarks-7.2/), "
                                 f"found {', '.join(sorted(tops)) or 'nothing'}")
            if hasattr(tarfile, "data_filter"):
                tar.extractall(destination, filter="data")   # refuses absolute paths and ../
            else:   # Python < 3.11.4: check the names ourselves
                for member in tar.getmembers():
                    if member.name.startswith("/") or ".." in Path(member.name).parts:
                        raise InputError(f"{tarball}: unsafe path {member.name!r} in the archive")
                tar.extractall(destination)
    except tarfile.TarError as err:
        raise InputError(f"{tarball} is not a readable tar archive: {err}") from None
    return destination / tops.pop()


# --- logged build steps ---------------------------------------------------------

def tail(path: Path, lines: int = 25) -> str:
    """The last ``lines`` lines of a text file (for error messages)."""
    try:
        with open(path, errors="replace") as handle:
            return "".join(deque(handle, maxlen=lines)).rstrip("\n")
    except OSError:
        return ""


def run_logged(cmd: Sequence[str], *, step: str, cwd: Path, log: Path,
               env: Optional[Mapping[str, str]] = None) -> None:
    """Run one build step with its output appended to ``log``; a BuildError names the step and the log."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "a") as handle:
        handle.write(f"\n==> [{step}] {shlex.join(cmd)}\n==> in {cwd}\n")
        handle.flush()
        try:
            proc = subprocess.run(list(cmd), cwd=cwd, env=dict(env) if env is not None else None,
                                  stdin=subprocess.DEVNULL, stdout=handle, stderr=subprocess.STDOUT)
        except OSError as err:
            raise BuildError(f"build step '{step}' could not start {cmd[0]}: {err.strerror}; log: {log}") from None
        handle.write(f"==> [{step}] exit code {proc.returncode}\n")
    if proc.returncode != 0:
        raise BuildError(f"build step '{step}' failed with exit code {proc.returncode}; full log: {log}; "
                         f"last lines:\n{tail(log)}")


# --- what is really on the machine -----------------------------------------------

def _output(cmd: Sequence[str]) -> Optional[str]:
    """stdout+stderr of a quick query command, or None if it cannot run or fails."""
    try:
        proc = subprocess.run(list(cmd), stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if proc.returncode != 0:
        return None
    return (proc.stdout or proc.stderr).strip()


def _compiler_name(banner: str) -> str:
    """archspec's compiler name from a ``--version`` banner."""
    text = banner.lower()
    if "aocc" in text or ("amd" in text and "clang" in text):
        return "aocc"
    if "apple" in text and "clang" in text:
        return "apple-clang"
    if "oneapi" in text or "icx" in text:
        return "oneapi"
    if "intel" in text or text.startswith("icc"):
        return "intel"
    if "nvc" in text or "nvidia" in text or "pgi" in text:
        return "nvhpc"
    if "clang" in text:
        return "clang"
    if "gcc" in text or "free software foundation" in text:
        return "gcc"
    return banner.split()[0] if banner else "unknown"


def detect_compiler(wrapper: str = "mpicc") -> dict[str, str]:
    """{name, version, command} of the compiler behind an MPI wrapper, as the wrapper itself reports it."""
    if shutil.which(wrapper) is None:
        raise BuildError(f"{wrapper} is not on PATH: the build needs the MPI compiler wrappers "
                         f"(load the toolchain's MPI module, e.g. gompi, or install OpenMPI)")
    banner = _output([wrapper, "--version"]) or ""
    version = _output([wrapper, "-dumpfullversion", "-dumpversion"]) or ""
    if not re.match(r"^\d+(\.\d+)*$", version):
        found = re.search(r"(\d+\.\d+(?:\.\d+)?)", banner.splitlines()[0] if banner else "")
        version = found.group(1) if found else ""
    if not banner or not version:
        raise BuildError(f"cannot tell which compiler {wrapper} runs ('{wrapper} --version' gave "
                         f"{banner.splitlines()[0] if banner else 'nothing'!r})")
    # Open MPI answers -showme:command, MPICH -show: the underlying compiler's name.
    underlying = _output([wrapper, "-showme:command"]) or (_output([wrapper, "-show"]) or "").split(" ")[0]
    return {"name": _compiler_name(banner.splitlines()[0]), "version": version,
            "command": underlying or wrapper}


def detect_mpi() -> dict[str, str]:
    """{name, version} of the MPI library on PATH (ompi_info, else mpirun --version)."""
    text = _output(["ompi_info", "--version"]) or ""
    found = re.search(r"Open MPI v?(\d+\.\d+(?:\.\d+)?)", text)
    if found:
        return {"name": "openmpi", "version": found.group(1)}
    text = _output(["mpirun", "--version"]) or ""
    patterns = (("openmpi", r"\(Open MPI\) (\d+\.\d+(?:\.\d+)?)"),
                ("intel-mpi", r"Intel\(R\) MPI Library.*?Version (\d+(?:\.\d+)*)"),
                ("mpich", r"HYDRA build details:\s*Version:\s*(\S+)"),
                ("mvapich", r"MVAPICH.*?(\d+\.\d+(?:\.\d+)?)"))
    for name, pattern in patterns:
        found = re.search(pattern, text, re.S)
        if found:
            return {"name": name, "version": found.group(1)}
    raise BuildError("cannot tell which MPI is installed: neither 'ompi_info --version' nor "
                     "'mpirun --version' answered with a known MPI and version")


def target_flags(target: str, compiler: Mapping[str, str]) -> str:
    """archspec's optimization flags for ``target`` with this compiler (never -march=native)."""
    import archspec.cpu

    from ..microarch import lookup

    micro = lookup(target)
    try:
        flags = micro.optimization_flags(compiler["name"], compiler["version"])
    except (archspec.cpu.UnsupportedMicroarchitecture, ValueError, KeyError) as err:
        raise InputError(f"{compiler['name']} {compiler['version']} cannot build for {target}: {err}") from None
    if "native" in flags:   # -march=native would encode the build host, not the target
        raise InputError(f"archspec gave host-dependent flags {flags!r} for {target}; refusing")
    return flags


def toolchain_notes(toolchain: Toolchain, compiler: Mapping[str, str], mpi: Mapping[str, str]) -> list[str]:
    """Honest notes where the compiler/MPI used differ from what the toolchain file pins."""
    notes = []
    want_c, want_m = toolchain.compiler, toolchain.mpi
    if (compiler.get("name"), compiler.get("version")) != (want_c["name"], str(want_c["version"])):
        notes.append(f"compiler is {compiler.get('name')} {compiler.get('version')} (the one behind mpicc on "
                     f"the build host), not the toolchain {toolchain.name}'s {want_c['name']} "
                     f"{want_c['version']}: this build is not a {toolchain.name} build")
    if (mpi.get("name"), mpi.get("version")) != (want_m["name"], str(want_m["version"])):
        notes.append(f"MPI is {mpi.get('name')} {mpi.get('version')} (the one on the build host), not the "
                     f"toolchain {toolchain.name}'s {want_m['name']} {want_m['version']}: this build "
                     f"is not a {toolchain.name} build")
    return notes


# --- reuse ------------------------------------------------------------------------

def reusable(manifest_dir: Path, method: str, target: str, expect: Mapping[str, object],
             binaries: Sequence[str] = ("osu_latency", "osu_bw")) -> tuple[Optional[manifest_mod.Manifest], str]:
    """(the existing manifest, "") if it records the same build as ``expect`` and its binaries exist.

    ``expect`` maps Manifest fields (sha256, prefix, flags, compiler, ...) to the
    values of the build about to be made; otherwise (None, why it cannot be reused).
    """
    path = Path(manifest_dir) / f"{method}-{target}.json"
    if not path.is_file():
        return None, f"no manifest {path}"
    try:
        existing = manifest_mod.read(path)
    except InputError as err:
        return None, f"the existing manifest is unusable ({err})"
    for key, value in expect.items():
        if getattr(existing, key) != value:
            return None, f"the existing manifest {path} has {key} {getattr(existing, key)!r}, not {value!r}"
    for name in binaries:
        binary = existing.binary(name)
        if not os.access(binary, os.X_OK):
            return None, f"{binary} of the existing manifest is missing"
    return existing, ""
