#!/usr/bin/env bash
# Build job: one method for one system/partition; writes var/manifests/<method>-<target>.json.
#   MPIREGRESS_METHOD, MPIREGRESS_SYSTEM, MPIREGRESS_PARTITION come from .gitlab-ci.yml.
#   OSU_SOURCE_MIRROR / OSU_SHA256 (CI variables) are read by `mpiregress build` itself.
# Exit codes are mpiregress's: 4 = method not available on this machine (Spack, EESSI),
# which the pipeline shows as an allowed failure, never as a pass.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
: "${MPIREGRESS_METHOD:?}" "${MPIREGRESS_SYSTEM:?}" "${MPIREGRESS_PARTITION:?}"

# The target comes from systems/$MPIREGRESS_SYSTEM.yaml (a partition without one, like the
# local one-host Slurm's, builds for this host's archspec target).
jobs=${MPIREGRESS_BUILD_JOBS:-${SLURM_CPUS_PER_TASK:-2}}
mpiregress build --method "$MPIREGRESS_METHOD" --system "$MPIREGRESS_SYSTEM" --partition "$MPIREGRESS_PARTITION" \
    --jobs "$jobs"

# The default branch's builds are the A of later toolchain MRs' A/B runs: keep their manifests in
# the system's manifest store (systems/<name>.yaml ab.manifest_store), keyed by branch. The install
# prefixes they name stay where this build put them (MPIREGRESS_INSTALL_ROOT, per pipeline).
if [ -n "${CI_COMMIT_BRANCH:-}" ] && [ "$CI_COMMIT_BRANCH" = "${CI_DEFAULT_BRANCH:-}" ]; then
    "$MPIREGRESS_PYTHON" -m mpiregress.run.ab.sides keep "$MPIREGRESS_SYSTEM" "$MPIREGRESS_PARTITION" \
        "$CI_COMMIT_BRANCH" "$MPIREGRESS_MANIFEST_DIR" "$MPIREGRESS_METHOD"
fi
