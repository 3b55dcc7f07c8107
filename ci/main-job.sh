#!/usr/bin/env bash
# The main job, locally: install what is needed, then run the point-to-point checks on a
# one-host Slurm that the project starts itself. OSU's tarball comes from the official
# download or from $OSU_SOURCE_MIRROR (a folder holding osu-micro-benchmarks-7.2.tar.gz).
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bash "$repo/ci/setup.sh"
exec "$repo/.venv/bin/mpiregress" run --system local "$@"
