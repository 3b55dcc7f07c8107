"""Pieces every build method needs: the OSU tarball and its checksum, logged build
steps, the compiler and MPI actually on the machine, target flags, reuse of a build.

The methods differ in who compiles (configure/make, Spack, EasyBuild, nobody for
EESSI); what they share lives here so that a checksum or a toolchain mismatch is
judged the same way whichever method met it.
"""
from __future__ import annotations

import hashlib
import http.client
import json
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

import archspec.cpu

from mpiregress.errors import InputError, MpiRegressError, NotAvailableError
from mpiregress.model import manifest as manifest_mod
from mpiregress.model.microarch import lookup
from mpiregress.model.names import PT2PT
from mpiregress.model.toolchain import Toolchain
from mpiregress.paths import checks_dir, state_dir

MIRROR_ENV = "OSU_SOURCE_MIRROR"
SHA256_ENV = "OSU_SHA256"
DOWNLOAD_TIMEOUT_S = 20
_HEX64 = re.compile(r"^[0-9a-f]{64}$")

Downloader = Callable[[str, Path], None]


class BuildError(MpiRegressError):
    """A build step failed or produced nothing usable (exit 2: an error, not a regression)."""


# --- what every build provides ---------------------------------------------------

# Where OSU 7.2 installs its benchmarks under a prefix, whoever builds it (configure/make,
# Spack's and EasyBuild's packages, EESSI): there is no bin/.
BIN_SUBDIR = manifest_mod.BIN_SUBDIR
# The OSU binaries the checks run: those of the point-to-point measurements (names.PT2PT).
BINARIES: tuple[str, ...] = tuple(dict.fromkeys(m.benchmark for m in PT2PT.values()))


def record(manifest: manifest_mod.Manifest, manifest_dir: Path, done: str, log: object = None) -> manifest_mod.Manifest:
    """Write ``manifest`` once its binaries and programs are there (``done``: the step that should have made them)."""
    binaries = [manifest.binary(name) for name in BINARIES] + [Path(p) for p in manifest.programs.values()]
    for binary in binaries:
        if not os.access(binary, os.X_OK):
            where = f"; log: {log}" if log else ""
            raise BuildError(f"{done} but {binary} is missing{where}")
    manifest.path = str(manifest_mod.write(manifest, manifest_dir))
    return manifest


# Lmod's `module` is a shell function a non-login shell (a build step, a batch job) may not have yet.
LMOD_INIT = ("type module >/dev/null 2>&1 || { [ -f /usr/share/lmod/lmod/init/bash ] && "
             ". /usr/share/lmod/lmod/init/bash; }")


# --- the project's own MPI programs (checks/src/<name>/) ---------------------------------

def program_sources(root: Optional[Path] = None) -> list[Path]:
    """Folders of the project's MPI programs: every ``checks/src/<name>/`` with a Makefile."""

    base = Path(root) / "checks" / "src" if root is not None else checks_dir() / "src"
    return sorted(p.parent for p in base.glob("*/Makefile"))


def load_line(command: Sequence[str], what: str) -> str:
    """A shell line that loads the environment ``command`` prints (``spack load --sh``) and stops when it fails.

    ``eval "$(cmd)"`` carries on after a failed ``cmd`` (it evaluates nothing): the build would then take
    whatever ``mpicc`` is on PATH. This line exits 3 with ``what`` and the command instead.
    """
    joined = shlex.join(command)
    said = shlex.quote(f"loading {what} failed: {joined}")
    return f'_mpiregress_load=$({joined}) || {{ echo {said} >&2; exit 3; }}; eval "$_mpiregress_load"'


def loaded_mpicc(setup: Sequence[str], what: str, mpicc: str = "mpicc", mpi_prefix: Optional[str] = None,
                 timeout: int = 300) -> str:
    """Run a method's ``setup`` lines (module loads, ``spack load``) in a fresh bash; the ``mpicc`` they give.

    A BuildError (one sentence) when a line fails, when no ``mpicc`` is on PATH after them, or when it is
    not under ``mpi_prefix`` (the MPI the method installed or declared): the project's programs are never
    built with another MPI than the method's OSU.
    """
    script = " && ".join(f"{{ {line}; }}" for line in [LMOD_INIT, *setup, f"command -v {shlex.quote(mpicc)}"])
    try:
        proc = subprocess.run(["bash", "-c", script], stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        raise BuildError(f"loading {what} did not finish within {timeout} s") from None
    found = proc.stdout.strip().splitlines()[-1] if proc.returncode == 0 and proc.stdout.strip() else ""
    if not found:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise BuildError(f"loading {what} failed ({last}): the project's MPI programs were not built, since "
                         f"they would have taken whatever {mpicc} is on PATH")
    if mpi_prefix and not Path(found).resolve().is_relative_to(Path(mpi_prefix).resolve()):
        raise BuildError(f"after loading {what}, {mpicc} is {found}, not under the build's MPI {mpi_prefix}: "
                         f"the project's MPI programs were not built")
    return found


def build_programs(*, method: str, target: str, cflags: str, setup: Sequence[str], install_root: Path,
                   log: Path, mpicc: str = "mpicc", sources: Optional[Sequence[Path]] = None,
                   mpi_prefix: Optional[str] = None) -> dict[str, str]:
    """Build every program of ``checks/src/`` as the method built OSU; {name: binary path}.

    Each folder is copied to a scratch folder (the checkout stays clean) and built with
    ``make MPICC=... CFLAGS=... PREFIX=... install`` after the method's ``setup`` shell
    lines (module loads, EESSI init, ``spack load``), so it links the same MPI as the method's OSU and
    has the same target flags. The setup is tried first (:func:`loaded_mpicc`): a failed load stops the
    build in one sentence. The binaries go to ``<install_root>/<method>/<target>/programs/bin``.
    """

    if setup:
        loaded_mpicc(setup, f"the {method} build's environment", mpicc, mpi_prefix)
    prefix = (Path(install_root) / method / target / "programs").resolve()
    scratch = state_dir() / "build" / f"{method}-{target}-programs"
    built: dict[str, str] = {}
    for src in (program_sources() if sources is None else sources):
        work = scratch / src.name
        if work.exists():
            shutil.rmtree(work)
        shutil.copytree(src, work)
        make = shlex.join(["make", f"MPICC={mpicc}", f"CFLAGS={cflags}", f"PREFIX={prefix}", "install"])
        lines = [LMOD_INIT, *setup, make]
        env = {k: v for k, v in os.environ.items() if k not in ("MPICC", "CFLAGS", "PREFIX")}
        run_logged(["bash", "-c", " && ".join(f"{{ {line}; }}" for line in lines)], step=f"program {src.name}",
                   cwd=work, log=log, env=env)
        built[src.name] = str(prefix / "bin" / src.name)
    return built


# --- the source tarball -------------------------------------------------------


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
    """Run one build step with its output appended to ``log``; a BuildError names the step and the log.

    The step's TMPDIR is ``tmp/`` beside the log: a build killed mid-compile (a cancelled job's SIGKILL)
    leaves gcc's temporary files in the build's own folder, which the next build of it removes, not in /tmp.
    """
    log.parent.mkdir(parents=True, exist_ok=True)
    tmpdir = log.parent / "tmp"
    tmpdir.mkdir(exist_ok=True)
    env = {**(os.environ if env is None else env), "TMPDIR": str(tmpdir)}
    with open(log, "a") as handle:
        handle.write(f"\n==> [{step}] {shlex.join(cmd)}\n==> in {cwd}\n")
        handle.flush()
        try:
            proc = subprocess.run(list(cmd), cwd=cwd, env=env,
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


def _output_env(cmd: Sequence[str], extra: Mapping[str, str]) -> Optional[str]:
    """stdout+stderr of a quick query command run with ``extra`` in its environment, or None."""
    try:
        proc = subprocess.run(list(cmd), stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=30,
                              env={**os.environ, **extra})
    except (OSError, subprocess.TimeoutExpired):
        return None
    return None if proc.returncode != 0 else proc.stdout + proc.stderr


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

def file_digest(path: Path) -> str:
    """sha256 of a file's bytes ('' when it does not exist): an input of a build's hash."""
    return sha256_of(path) if Path(path).is_file() else ""


def input_hash(inputs: Mapping[str, object]) -> str:
    """One sha256 of everything a build is made from (environment text, toolchain file, tarball, target, ...).

    A manifest records it (``extra["input_hash"]``): a build whose inputs did not change is reused without
    running its tool again; ``--rebuild`` builds regardless.
    """

    return hashlib.sha256(json.dumps(inputs, sort_keys=True, default=str).encode()).hexdigest()


def reusable(manifest_dir: Path, method: str, target: str, expect: Mapping[str, object],
             binaries: Sequence[str] = BINARIES, inputs: Optional[str] = None
             ) -> tuple[Optional[manifest_mod.Manifest], str]:
    """(the existing manifest, "") if it records the same build as ``expect`` and its binaries exist.

    ``expect`` maps Manifest fields (sha256, prefix, flags, compiler, ...) to the
    values of the build about to be made; ``inputs`` (:func:`input_hash`) must equal the manifest's
    ``extra["input_hash"]`` when given; otherwise (None, why it cannot be reused).
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
    if inputs is not None and existing.extra.get("input_hash") != inputs:
        return None, f"the inputs changed since {path} was built (input hash)"
    for name in binaries:
        binary = existing.binary(name)
        if not os.access(binary, os.X_OK):
            return None, f"{binary} of the existing manifest is missing"
    for src in program_sources():
        program = existing.programs.get(src.name)
        if not program or not os.access(program, os.X_OK):
            return None, f"the existing manifest has no program {src.name} (checks/src/{src.name})"
    return existing, ""


# --- the MPI stack a build really has -------------------------------------------------------

# ucx_info -d transport names -> the toolchain's transport names (Spack's ucx variants).
_UCX_TRANSPORTS = {"rc_verbs": ("verbs", "rc"), "ud_verbs": ("verbs", "ud"), "rc_mlx5": ("verbs", "rc", "mlx5_dv"),
                   "ud_mlx5": ("verbs", "ud", "mlx5_dv"), "dc_mlx5": ("verbs", "dc", "mlx5_dv"),
                   "cma": ("cma",), "knem": ("knem",), "xpmem": ("xpmem",)}


def ucx_transports(ucx_info_d: str) -> list[str]:
    """The toolchain's transport names present in ``ucx_info -d`` output."""
    found: set[str] = set()
    for name in re.findall(r"^#\s+Transport:\s+(\S+)", ucx_info_d, re.M):
        found.update(_UCX_TRANSPORTS.get(name, ()))
    if re.search(r"^#\s+Connection manager:\s+rdmacm", ucx_info_d, re.M):
        found.add("rdmacm")
    return sorted(found)


def stack_from_ebversions(env: Mapping[str, str], toolchain: Toolchain, source: str) -> dict[str, dict[str, object]]:
    """The stack of loaded EasyBuild modules (EESSI's included): their ``EBVERSION<NAME>`` variables."""
    stack: dict[str, dict[str, object]] = {}
    for name, component in toolchain.stack.items():
        var = "EBVERSION" + str(component.get("easybuild", name)).upper().replace("-", "MIN").replace("+", "PLUS")
        if env.get(var):
            stack[name] = {"version": env[var], "from": source}
    return stack


def detect_stack(toolchain: Toolchain) -> dict[str, dict[str, object]]:
    """The stack of the MPI on PATH, as far as its own tools tell: ucx_info, pmix_info, hwloc-info, ompi_info.

    A component no tool reports is recorded with an empty version (unknown, not assumed).
    """
    stack: dict[str, dict[str, object]] = {name: {"version": "", "from": "not reported by any tool"}
                                           for name in toolchain.stack}
    version = re.search(r"[Vv]ersion:?\s*(\d+\.\d+\.\d+)", _output(["ucx_info", "-v"]) or "")
    if version and "ucx" in stack:
        stack["ucx"] = {"version": version.group(1), "transports": ucx_transports(_output(["ucx_info", "-d"]) or ""),
                        "from": "ucx_info"}
    for name, cmd in (("pmix", ["pmix_info", "--version"]), ("hwloc", ["hwloc-info", "--version"])):
        found = re.search(r"(\d+\.\d+\.\d+)", _output(cmd) or "")
        if found and name in stack:
            stack[name] = {"version": found.group(1), "from": cmd[0]}
    if "hwloc" in toolchain.variants and stack.get("hwloc", {}).get("version"):
        # hwloc names the discovery components it registers; "pci" is there only when built with PCI support.
        verbose = _output_env(["hwloc-info"], {"HWLOC_COMPONENTS_VERBOSE": "1"})
        if verbose is not None:
            stack["hwloc"]["variants"] = {"pci": "Registered discovery component `pci'" in verbose}
    parsable = _output(["ompi_info", "--parsable"]) or ""
    components = re.findall(r"^mca:(pml|pmix|btl|coll):(\w+):version:\"component", parsable, re.M)
    if components:
        stack["openmpi_components"] = {"version": "", "from": "ompi_info",
                                       "components": sorted({f"{kind}:{name}" for kind, name in components})}
    return stack


def stack_problems(stack: Mapping[str, Mapping[str, object]], toolchain: Toolchain,
                   complete: bool = False) -> list[str]:
    """What differs from the toolchain's stack, one short phrase each ("UCX 1.17.0 without verbs").

    ``complete``: ``stack`` lists the whole dependency graph (Spack's spec, EasyBuild's chain),
    so a component it lacks is missing from the build, not merely unreported.
    """
    problems = []
    for name, component in toolchain.stack.items():
        label = str(component.get("easybuild", name))
        if complete and name not in stack:
            problems.append(f"no {label}")
            continue
        got = stack.get(name) or {}
        version = str(got.get("version") or "")
        if version and version != str(component["version"]):
            problems.append(f"{label} {version} (toolchain: {component['version']})")
        if "transports" in got:
            listed = got.get("transports")
            have = {str(t) for t in listed} if isinstance(listed, list) else set()
            wanted = toolchain.transports.get(name) or {}
            missing = [t for t, want in wanted.items() if want and t not in have]
            extra = [t for t, want in wanted.items() if not want and t in have]
            if missing:
                problems.append(f"{label} {version or '?'} without {', '.join(missing)}")
            if extra:
                problems.append(f"{label} {version or '?'} with {', '.join(extra)}")
        # Beyond versions (toolchain variants and providers): as concretized (Spack) or as the
        # easyconfig builds it (EasyBuild, "built"), where the build recorded them.
        wanted = {**(toolchain.variants.get(name) or {}), **(toolchain.providers.get(name) or {})}
        built: dict[str, bool] = {}
        recorded, variants, providers = got.get("built"), got.get("variants"), got.get("providers")
        if isinstance(recorded, dict):
            built.update({str(k): bool(v) for k, v in recorded.items()})
        if isinstance(variants, dict):
            built.update({str(k): bool(v) for k, v in variants.items() if v is not None})
        if isinstance(providers, list):
            built.update({p: p in providers for p in toolchain.providers.get(name) or {}})
        wrong = [f"{'+' if want else '~'}{feature}" for feature, want in wanted.items()
                 if feature in built and built[feature] != bool(want)]
        if wrong:
            problems.append(f"{label} {version or '?'} not {' '.join(wrong)}")
    return problems


# --- what the MPI used can really do (ompi_info --parsable, ucx_info -v) ------------------------------

# The MCA frameworks that say how messages travel and how jobs start: what a manifest records.
CAPABILITY_FRAMEWORKS = ("pml", "btl", "mtl", "pmix", "ess", "plm", "ras")
# The toolchain file's MPI features (mpi.features) and the components that provide them.
FEATURE_COMPONENTS: dict[str, tuple[str, ...]] = {"ucx": ("pml:ucx",), "slurm": ("ras:slurm", "plm:slurm"),
                                                  "pmix": ("pmix:*",)}


def parse_capabilities(parsable: str, ucx_version: str = "") -> dict[str, object]:
    """What an Open MPI can do, from its ``ompi_info --parsable``: version, the components of
    CAPABILITY_FRAMEWORKS (``{"pml": ["cm", "ob1", "ucx"], "btl": [...]}``), the configure options that
    name a fabric or a scheduler, and UCX's version (``ucx_info -v``) where there is one."""
    found: dict[str, set[str]] = {}
    for kind, name in re.findall(r'^mca:(\w+):(\w+):version:"mca:', parsable, re.M):
        if kind in CAPABILITY_FRAMEWORKS:
            found.setdefault(kind, set()).add(name)
    version = re.search(r"^ompi:version:full:(\S+)", parsable, re.M)
    cli = re.search(r"^config:cli:(.*)$", parsable, re.M)
    configure = sorted(set(re.findall(r"--(?:with|without|enable|disable)-(?:ucx|libfabric|ofi|verbs|psm2?|slurm|"
                                      r"pmix|tm|lsf|sge|cuda|knem|xpmem|cma)\b", cli.group(1)))) if cli else []
    pmix = sorted(found.get("pmix", set()) - {"isolated"})
    caps: dict[str, object] = {"version": version.group(1) if version else "",
                               "components": {k: sorted(v) for k, v in sorted(found.items())},
                               "slurm": bool({"slurm"} & (found.get("ras", set()) | found.get("plm", set()))),
                               "pmix": pmix, "configure": configure}
    if ucx_version:
        caps["ucx"] = ucx_version
    return caps


def mpi_capabilities(setup: Sequence[str] = (), mpi_prefix: Optional[str] = None,
                     timeout: int = 120) -> dict[str, object]:
    """:func:`parse_capabilities` of the MPI a build really uses: ``ompi_info`` of ``mpi_prefix`` (else the
    one on PATH) after the build's ``setup`` lines (module loads, ``spack load``), not what a package
    manager's variants say of it. ``{}`` when there is no Open MPI to ask (another MPI)."""
    ompi_info = shlex.quote(str(Path(mpi_prefix) / "bin" / "ompi_info")) if mpi_prefix else "ompi_info"
    ask = [f"command -v {ompi_info}", f"{ompi_info} --parsable", "echo '@@ucx'", "{ ucx_info -v 2>/dev/null || true; }"]
    script = " && ".join([*(f"{{ {line}; }}" for line in [LMOD_INIT, *setup]), *ask])
    try:
        proc = subprocess.run(["bash", "-c", script], stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        return {}
    if proc.returncode != 0 or "@@ucx" not in proc.stdout:
        return {}
    head, _, ucx = proc.stdout.partition("@@ucx")
    used = head.strip().splitlines()[0] if head.strip() else ""
    version = re.search(r"[Vv]ersion:?\s*(\d+\.\d+\.\d+)", ucx)
    caps = parse_capabilities(head, version.group(1) if version else "")
    caps["from"] = f"{used} --parsable" + (" and ucx_info -v" if version else "")
    return caps


def capability_problems(caps: Mapping[str, object], toolchain: Toolchain) -> list[str]:
    """The toolchain's MPI features (mpi.features: ucx, slurm, pmix) the MPI used cannot provide."""
    if not caps or not isinstance(caps.get("components"), Mapping):
        return []
    components = caps["components"]
    assert isinstance(components, Mapping)
    have = {f"{kind}:{name}" for kind, names in components.items() for name in names}
    have |= {f"{kind}:*" for kind, names in components.items() if [n for n in names if n != "isolated"]}
    problems = []
    for feature in toolchain.mpi.get("features") or []:
        wanted = FEATURE_COMPONENTS.get(str(feature))
        if wanted and not any(w in have for w in wanted):
            problems.append(f"its Open MPI {caps.get('version') or ''} has no {feature} "
                            f"({' or '.join(wanted)} in ompi_info)".replace("  ", " "))
    return problems
