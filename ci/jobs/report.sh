#!/usr/bin/env bash
# Report job: HTML (with plots) + Markdown + JUnit for one system, from the run jobs' results
# and the compare verdicts (artifacts), into reports/report-<system>/ (exposed in the MR).
# Runs after a failed run too: the report shows everything that did run.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
: "${MPIREGRESS_SYSTEM:?}"

shopt -s nullglob
results=("$MPIREGRESS_REPORTS_DIR/$MPIREGRESS_SYSTEM"-*/results.json)
compare=("$MPIREGRESS_REPORTS_DIR"/compare/"$MPIREGRESS_SYSTEM"-*.json)
out="$MPIREGRESS_REPORTS_DIR/report-$MPIREGRESS_SYSTEM"
mkdir -p "$out"
args=()
for f in "${results[@]}"; do args+=(--results "$f"); done
for f in "${compare[@]}"; do args+=(--compare "$f"); done
if [ ${#results[@]} -eq 0 ]; then
    echo "report: no results.json reached this job (the run jobs failed before measuring); the report says so" >&2
fi
mpiregress report "${args[@]}" --history "$MPIREGRESS_HISTORY_DB" --output "$out" \
    --title "MPI regression $MPIREGRESS_SYSTEM, pipeline ${CI_PIPELINE_ID:-local} (${CI_COMMIT_SHORT_SHA:-})"
