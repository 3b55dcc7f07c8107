#!/usr/bin/env bash
# Noise job (weekly schedule): the FWQ placement experiments of one system/partition through
# the noise family of checks (checks/fwq.py): one node, one rank per core, in every layout the
# partition's topology offers (all cores; one core per socket left free; SMT siblings left free),
# with the fwq program of the build the build job made. Writes reports/noise-<system>-<partition>/
# (results.json: efficiency and largest detour per node and layout, recorded by the history job;
# noise/<system>-<partition>/<layout>/{summary.txt,cores.tsv,spectrum.png}).
# Exit: the run's code (0, 2 error, 3 infrastructure); a layout the nodes cannot offer is a skip.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
: "${MPIREGRESS_SYSTEM:?}" "${MPIREGRESS_PARTITION:?}" "${MPIREGRESS_METHODS:?}"

report_dir="$MPIREGRESS_REPORTS_DIR/noise-$MPIREGRESS_SYSTEM-$MPIREGRESS_PARTITION"
extra=()
extra+=(--no-build)   # the build jobs built what this job runs; a pipeline job never builds (systems with builds: on_demand would)
# Node noise has no baselines file: its series are judged by their own history (the gate).
mpiregress run --system "$MPIREGRESS_SYSTEM" --partition "$MPIREGRESS_PARTITION" \
    --methods "$MPIREGRESS_METHODS" --families noise --allow-missing-baselines \
    --report-dir "$report_dir" --manifest-dir "$MPIREGRESS_MANIFEST_DIR" "${extra[@]}"
