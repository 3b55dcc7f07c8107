#!/usr/bin/env bash
# Compare job: the statistical MR gate, each partition's results.json (from the run jobs of
# $MPIREGRESS_SYSTEM, passed as artifacts) against the accepted history in $MPIREGRESS_HISTORY_DB.
# Writes reports/compare/<system>-<partition>.{json,md}; exits with the worst verdict
# (3 infrastructure > 2 error > 1 regression > 4 skipped > 0 pass).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
: "${MPIREGRESS_SYSTEM:?}"

out="$MPIREGRESS_REPORTS_DIR/compare"
mkdir -p "$out"
shopt -s nullglob
results=("$MPIREGRESS_REPORTS_DIR/$MPIREGRESS_SYSTEM"-*/results.json)
if [ ${#results[@]} -eq 0 ]; then
    echo "compare: no results.json from the run jobs of $MPIREGRESS_SYSTEM under $MPIREGRESS_REPORTS_DIR" >&2
    exit 2
fi
rank() { case "$1" in 0) echo 0;; 4) echo 1;; 1) echo 2;; 2) echo 3;; 3) echo 4;; *) echo 3;; esac; }
worst=0
for results_json in "${results[@]}"; do
    series=$(basename "$(dirname "$results_json")")
    rc=0
    mpiregress compare --results "$results_json" --history "$MPIREGRESS_HISTORY_DB" \
        --json "$out/$series.json" --markdown "$out/$series.md" || rc=$?
    echo "compare: $series exit $rc"
    if [ "$(rank "$rc")" -gt "$(rank "$worst")" ]; then worst=$rc; fi
done
exit "$worst"
