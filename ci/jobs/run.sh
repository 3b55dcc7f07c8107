#!/usr/bin/env bash
# Run job: the OSU checks of one system/partition with the manifests the build jobs passed on.
# Writes reports/<system>-<partition>/ (reframe-report.json, junit.xml, results.json,
# summary.md, perflogs/). A measurement job: exit 0 when it measured (the verdict job judges), 2 error,
# 3 infrastructure, 4 nothing measured.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
: "${MPIREGRESS_SYSTEM:?}" "${MPIREGRESS_PARTITION:?}" "${MPIREGRESS_METHODS:?}"

report_dir="$MPIREGRESS_REPORTS_DIR/$MPIREGRESS_SYSTEM-$MPIREGRESS_PARTITION"
extra=()
# The build stage built the binaries: measure exactly those (a missing build is an error here,
# not a reason for the run job to build one of its own).
extra+=(--no-build)   # the build jobs built what this job runs; a pipeline job never builds (systems with builds: on_demand would)
# shellcheck disable=SC2086
mpiregress run --system "$MPIREGRESS_SYSTEM" --partition "$MPIREGRESS_PARTITION" \
    --methods "$MPIREGRESS_METHODS" --report-dir "$report_dir" \
    --manifest-dir "$MPIREGRESS_MANIFEST_DIR" --measure-only "${extra[@]}" ${MPIREGRESS_RUN_ARGS:-}
