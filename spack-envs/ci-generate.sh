#!/usr/bin/env bash
# `spack ci generate` for one environment, for a site that populates a build cache with a
# pipeline of its own. Fails loudly without MPIREGRESS_SPACK_BUILDCACHE: an unset variable
# would otherwise become a mirror folder under the environment and the pushes would be lost.
#   spack-envs/ci-generate.sh spack-envs/iris-broadwell OUTPUT.yml
set -euo pipefail
env_dir=${1:?usage: $0 ENV_DIR OUTPUT}
output=${2:?usage: $0 ENV_DIR OUTPUT}
case "${MPIREGRESS_SPACK_BUILDCACHE:-}" in
    /*|*://*) ;;
    *) echo "ci-generate: MPIREGRESS_SPACK_BUILDCACHE must name the build cache (an absolute path or a URL)," \
            "found '${MPIREGRESS_SPACK_BUILDCACHE:-}': there is no default" >&2
       exit 2 ;;
esac
exec spack -e "$env_dir" ci generate --output-file "$output"
