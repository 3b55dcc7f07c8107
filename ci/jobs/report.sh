#!/usr/bin/env bash
# Report job: report.html (plots), summary.md and junit.xml for one system, from its
# partitions' results (run jobs' artifacts) and the history, into reports/report-<system>/
# (exposed in the MR; the JUnit feeds the MR's test widget). Runs after a failed run too:
# the report shows everything that did run. It does not gate (run and compare do).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
: "${MPIREGRESS_SYSTEM:?}"

out="$MPIREGRESS_REPORTS_DIR/report-$MPIREGRESS_SYSTEM"
mkdir -p "$out"
shopt -s nullglob
results=("$MPIREGRESS_REPORTS_DIR/$MPIREGRESS_SYSTEM"-*/results.json)
# The weekly link matrix: its series join the results, its heatmaps and bad-links CSVs the page.
links=("$MPIREGRESS_REPORTS_DIR/links-$MPIREGRESS_SYSTEM"-*/)
for folder in "${links[@]}"; do
    [ -f "$folder/results.json" ] && results+=("$folder/results.json")
    if [ -d "$folder/links" ]; then mkdir -p "$out/links" && cp -r "$folder/links/." "$out/links/"; fi
done
if [ ${#results[@]} -eq 0 ]; then
    msg="no results.json reached the report of $MPIREGRESS_SYSTEM: its run jobs failed before measuring (see their logs)"
    echo "report: $msg" >&2
    printf '# MPI regression: %s\n\n%s.\n' "$MPIREGRESS_SYSTEM" "$msg" > "$out/summary.md"
    exit 2
fi
mpiregress_merge_results "$out/results.json" "${results[@]}"
mpiregress report "$out/results.json" --db "$MPIREGRESS_HISTORY_DB" --out-dir "$out"
