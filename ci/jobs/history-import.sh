#!/usr/bin/env bash
# History job (weekly schedule and merges only): record the run jobs' results of
# $MPIREGRESS_SYSTEM in the SQLite history ($MPIREGRESS_HISTORY_DB), as accepted reference
# runs. The pipeline serializes these jobs (resource_group mpiregress-history).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
: "${MPIREGRESS_SYSTEM:?}"

case "${CI_PIPELINE_SOURCE:-}" in
    schedule) kind=schedule ;;
    push) kind=merge ;;
    *) kind=manual ;;
esac
shopt -s nullglob
results=("$MPIREGRESS_REPORTS_DIR/$MPIREGRESS_SYSTEM"-*/results.json)
if [ ${#results[@]} -eq 0 ]; then
    echo "history: no results.json from the run jobs of $MPIREGRESS_SYSTEM: nothing measured to record" >&2
    exit 2
fi
mkdir -p "$(dirname "$MPIREGRESS_HISTORY_DB")"
mpiregress history import --history "$MPIREGRESS_HISTORY_DB" --kind "$kind" "${results[@]}"
