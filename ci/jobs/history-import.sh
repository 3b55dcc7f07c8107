#!/usr/bin/env bash
# History job (weekly schedule and merges only): record the results of $MPIREGRESS_SYSTEM's
# partitions in the history ($MPIREGRESS_HISTORY_URL's PostgreSQL server, else the SQLite file
# $MPIREGRESS_HISTORY_DB) as accepted reference runs (kind schedule or merge), one run per partition.
# Re-importing the same file is a no-op; a server that cannot be reached is exit 3 (GitLab retries the
# job), and the results stay in the run jobs' artifacts for that retry.
# The pipeline runs one such job at a time (resource_group mpiregress-history).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
: "${MPIREGRESS_SYSTEM:?}"

case "${CI_PIPELINE_SOURCE:-}" in
    schedule) kind=schedule ;;
    push) kind=merge ;;
    *) kind=manual ;;
esac
shopt -s nullglob
results=("$MPIREGRESS_REPORTS_DIR/$MPIREGRESS_SYSTEM"-*/results.json
         # The weekly link matrix's per-node and per-link series, and the noise series per node and layout.
         "$MPIREGRESS_REPORTS_DIR/links-$MPIREGRESS_SYSTEM"-*/results.json
         "$MPIREGRESS_REPORTS_DIR/noise-$MPIREGRESS_SYSTEM"-*/results.json)
if [ ${#results[@]} -eq 0 ]; then
    echo "history: no results.json from the run jobs of $MPIREGRESS_SYSTEM: nothing measured to record" >&2
    exit 2
fi
[ -n "${MPIREGRESS_HISTORY_URL:-}" ] || mkdir -p "$(dirname "$MPIREGRESS_HISTORY_DB")"
mpiregress history import "${history_db[@]}" --kind "$kind" "${results[@]}"
