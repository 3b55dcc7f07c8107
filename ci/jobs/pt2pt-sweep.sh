#!/usr/bin/env bash
# Weekly point-to-point size sweep of one system/partition (schedule only): osu_latency and osu_bw
# over 1 B..4 MiB (checks/config/pt2pt_sweep.yaml) per placement and build method, every size a
# series. Writes reports/<system>-<partition>-pt2pt-sweep/ (results.json, recorded in the history by
# the history job and drawn by the weekly report: latency and bandwidth against size, the sizes that
# moved marked). No baseline judges these series: the history does, once it has runs.
# Exit: the run's code (0, 2 error, 3 infrastructure).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
: "${MPIREGRESS_SYSTEM:?}" "${MPIREGRESS_PARTITION:?}" "${MPIREGRESS_METHODS:?}"

report_dir="$MPIREGRESS_REPORTS_DIR/$MPIREGRESS_SYSTEM-$MPIREGRESS_PARTITION-pt2pt-sweep"
extra=()
extra+=(--no-build)   # the build jobs built what this job runs; a pipeline job never builds (systems with builds: on_demand would)
exec mpiregress run --system "$MPIREGRESS_SYSTEM" --partition "$MPIREGRESS_PARTITION" \
    --methods "$MPIREGRESS_METHODS" --families pt2pt-sweep --allow-missing-baselines \
    --report-dir "$report_dir" --manifest-dir "$MPIREGRESS_MANIFEST_DIR" "${extra[@]}"
