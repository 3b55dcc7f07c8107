#!/usr/bin/env bash
# Verdict job: the pipeline's one verdict for one system (mpiregress verdict). Reads every run job's
# results.json and every A/B job's folder (artifacts), judges them by the gating rules of this
# pipeline's event (mpiregress/verdict/gating.yaml: toolchain MR -> paired A/B; schedule and merges
# -> history gate, confirmed by a re-measurement in a fresh allocation), and writes report.html,
# summary.md, junit.xml and verdict.json into reports/report-<system>/ (exposed in the MR; the JUnit
# feeds the MR's test widget). Exit code = the verdict: 0 pass, 5 needs a look (allowed failure:
# passed with warnings), 1 regression, 2 error, 3 infrastructure, 4 nothing measured.
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
ab=()
for folder in "$MPIREGRESS_REPORTS_DIR/ab-$MPIREGRESS_SYSTEM"-*/; do
    [ -f "$folder/ab-samples.json" ] && ab+=(--ab "$folder")
done
if [ ${#results[@]} -eq 0 ] && [ ${#ab[@]} -gt 0 ]; then
    # A toolchain MR: run:* did not run, the A/B job's B side is the MR's measurement (mpiregress verdict
    # reads it from each --ab folder's results.json).
    printf '[]\n' > "$out/run-results.json"
    results=("$out/run-results.json")
fi
if [ ${#results[@]} -eq 0 ]; then
    msg="no results.json reached the verdict of $MPIREGRESS_SYSTEM: its run jobs failed before measuring (see their logs)"
    echo "verdict: $msg" >&2
    printf '# MPI regression: %s\n\n%s.\n' "$MPIREGRESS_SYSTEM" "$msg" > "$out/summary.md"
    exit 2
fi
extra=()
# The schedule and merges confirm a history regression in a fresh allocation before it fails.
case "${CI_PIPELINE_SOURCE:-}" in schedule|push) extra+=(--confirm) ;; esac
mpiregress verdict "${results[@]}" "${ab[@]}" "${history_db[@]}" --out-dir "$out" "${extra[@]}"
