#!/usr/bin/env bash
# Run job: the OSU checks of one system/partition with the manifests the build jobs passed on.
# Writes reports/<system>-<partition>/ (reframe-report.json, junit.xml, results.json,
# summary.md, perflogs/). Exit code = verdict: 0 pass, 1 regression, 2 error, 3 infrastructure.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
: "${MPIREGRESS_SYSTEM:?}" "${MPIREGRESS_PARTITION:?}" "${MPIREGRESS_METHODS:?}"

report_dir="$MPIREGRESS_REPORTS_DIR/$MPIREGRESS_SYSTEM-$MPIREGRESS_PARTITION"
extra=()
# The build stage built the binaries: measure exactly those (a missing build is an error here,
# not a reason for the run job to build one of its own).
if [ "$MPIREGRESS_SYSTEM" = local ]; then extra+=(--no-build); fi
# shellcheck disable=SC2086
mpiregress run --system "$MPIREGRESS_SYSTEM" --partition "$MPIREGRESS_PARTITION" \
    --methods "$MPIREGRESS_METHODS" --report-dir "$report_dir" \
    --manifest-dir "$MPIREGRESS_MANIFEST_DIR" "${extra[@]}" ${MPIREGRESS_RUN_ARGS:-}
