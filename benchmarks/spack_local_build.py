"""A real Spack build of OSU 7.2 on the local system, end to end, for anyone to repeat by hand.

Spack is in no package registry reachable from the project's machines, so the test suite cannot
install it; this script takes a Spack checkout you have (``--spack-root``) and runs the product's
own path, ``mpiregress build --method spack --system local``: the environment written from
systems/local.yaml (the host's gcc as compiler, its OpenMPI as a non-buildable external), OSU's
tarball from the source mirror placed at Spack's layout, the manifest from the installed spec.
It prints the versions used, the time taken and the manifest's key fields.

    python benchmarks/spack_local_build.py --spack-root ~/spack-0.23.1 \\
        --source-mirror /work/osu-mirror [--sha256 HEX] [--spack-python VENV/bin/python]

``--spack-python``: a Python that imports clingo (``pip install clingo`` in a venv); Spack's own
bootstrapping is disabled (it would download). Spack's user configuration and caches go to a
temporary folder, never to ~/.spack. Exit code: the build's.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spack-root", type=Path, required=True, help="a Spack checkout (bin/spack inside)")
    parser.add_argument("--source-mirror", type=Path, default=os.environ.get("OSU_SOURCE_MIRROR"),
                        help="folder holding osu-micro-benchmarks-7.2.tar.gz (default: $OSU_SOURCE_MIRROR)")
    parser.add_argument("--sha256", default=os.environ.get("OSU_SHA256"),
                        help="accept a site tarball with this sha256 (default: $OSU_SHA256)")
    parser.add_argument("--spack-python", default=os.environ.get("SPACK_PYTHON", sys.executable),
                        help="Python that imports clingo, for Spack (default: $SPACK_PYTHON or this one)")
    parser.add_argument("--state-dir", type=Path, default=None,
                        help="mpiregress state folder for the build (default: a new temporary folder)")
    args = parser.parse_args()
    spack = args.spack_root / "bin" / "spack"
    if not os.access(spack, os.X_OK):
        print(f"spack_local_build: {spack} is not an executable Spack: pass --spack-root of a Spack checkout",
              file=sys.stderr)
        return 2
    if args.source_mirror is None:
        print("spack_local_build: pass --source-mirror DIR (or set OSU_SOURCE_MIRROR)", file=sys.stderr)
        return 2
    work = Path(tempfile.mkdtemp(prefix="mpiregress-spack-"))
    state = args.state_dir or work / "state"
    env = dict(os.environ, SPACK_PYTHON=args.spack_python, SPACK_USER_CONFIG_PATH=str(work / "user-config"),
               SPACK_USER_CACHE_PATH=str(work / "user-cache"), SPACK_DISABLE_LOCAL_CONFIG="1",
               MPIREGRESS_STATE_DIR=str(state),
               PATH=os.pathsep.join([str(spack.parent), str(Path(sys.executable).parent), os.environ["PATH"]]))
    version = subprocess.run([str(spack), "--version"], env=env, capture_output=True, text=True).stdout.strip()
    # Spack would download clingo and friends; the Python given already has clingo.
    subprocess.run([str(spack), "bootstrap", "disable"], env=env, check=True, capture_output=True)
    cmd = [sys.executable, "-m", "mpiregress", "build", "--method", "spack", "--system", "local",
           "--source-mirror", str(args.source_mirror)]
    if args.sha256:
        cmd += ["--sha256", args.sha256]
    print(f"Spack {version} at {args.spack_root}; clingo from {args.spack_python}")
    print("running: " + " ".join(cmd))
    start = time.monotonic()
    done = subprocess.run(cmd, env=env, cwd=REPO, capture_output=True, text=True)
    took = time.monotonic() - start
    sys.stderr.write(done.stderr[-4000:])
    print(f"mpiregress build --method spack: exit {done.returncode} in {took:.0f} s")
    if done.returncode != 0:
        return done.returncode
    manifest = json.loads(Path(done.stdout.strip().splitlines()[-1]).read_text())
    shown = {k: manifest[k] for k in ("method", "target", "prefix", "flags", "compiler", "mpi", "sha256",
                                      "sha256_official")}
    shown["extra"] = {k: manifest["extra"].get(k) for k in ("spack_version", "spack_hash", "spack_env",
                                                            "mpi_variants", "source_mirror", "checksum_override")}
    shown["stack"] = manifest["stack"]
    shown["notes"] = manifest["notes"]
    print(json.dumps(shown, indent=2))
    print(f"manifest: {done.stdout.strip().splitlines()[-1]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
