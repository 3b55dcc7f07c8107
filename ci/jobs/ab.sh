#!/usr/bin/env bash
# A/B job of a toolchain MR, one system/partition: B = this pipeline's builds (the build jobs'
# manifests), A = the target branch's builds of the same methods and targets (the system's
# manifest store, else built at the merge base; mpiregress/run/ab/sides.py). One Slurm job per series
# runs A and B alternately on the same nodes. Writes reports/ab-<system>-<partition>/ (summary.md
# and junit.xml and report.html with the A/B section, ab-samples.json with every sample).
# A measurement job: exit 0 when it measured (verdict:<system> judges the pairs), 2 error (mismatched A and B included),
# 3 infrastructure (a lost node; what was measured is kept).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
: "${MPIREGRESS_SYSTEM:?}" "${MPIREGRESS_PARTITION:?}" "${MPIREGRESS_METHODS:?}"

report_dir="$MPIREGRESS_REPORTS_DIR/ab-$MPIREGRESS_SYSTEM-$MPIREGRESS_PARTITION"
branch="${CI_MERGE_REQUEST_TARGET_BRANCH_NAME:-${CI_DEFAULT_BRANCH:-main}}"
# A built at the merge base needs the target branch in this clone (GIT_DEPTH 0 keeps history).
if ! git rev-parse --verify --quiet "origin/$branch" >/dev/null; then
    git fetch --quiet origin "$branch:refs/remotes/origin/$branch" ||
        echo "ab: origin/$branch is not in this clone; A comes from the manifest store or not at all" >&2
fi
extra=()
# B is exactly what the build stage built; a missing B build is an error, never built here.
extra+=(--no-build)   # the build jobs built what this job runs; a pipeline job never builds (systems with builds: on_demand would)
# shellcheck disable=SC2086
mpiregress run --system "$MPIREGRESS_SYSTEM" --partition "$MPIREGRESS_PARTITION" \
    --methods "$MPIREGRESS_METHODS" --report-dir "$report_dir" \
    --manifest-dir "$MPIREGRESS_MANIFEST_DIR" --ab-against auto --ab-branch "$branch" --measure-only \
    "${extra[@]}" ${MPIREGRESS_AB_ARGS:-}
