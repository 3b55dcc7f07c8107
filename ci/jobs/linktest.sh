#!/usr/bin/env bash
# Link matrix job: the ReFrame check checks/linktest.py over a partition (weekly) or a node list
# (manual, after maintenance), with the linktest program of the build job's manifest.
#
#   ci/jobs/linktest.sh              # mpiregress run --families links (ReFrame submits the job)
#   ci/jobs/linktest.sh --dry-run    # write and print the Slurm job script, submit nothing
#
# Variables (pipeline variables; the weekly job sets size/time, the manual job a node list):
#   MPIREGRESS_SYSTEM, MPIREGRESS_PARTITION   where (e.g. aion / batch)
#   LINKTEST_NODES            number of nodes (default: every idle node of the partition)
#   LINKTEST_NODELIST         Slurm node list to test after maintenance (e.g. aion-[0001-0064])
#   LINKTEST_RANKS_PER_NODE   ranks per node (default: the partition's, systems/<name>.yaml, else 1)
#   LINKTEST_TIME             time limit, minutes (default 60)
#   LINKTEST_ARGS             linktest options (default "-Z 20"; e.g. "-S" for serial mode)
#   LINKTEST_SWITCHES         optional YAML node -> switch map for the analysis
#   LINKTEST_RATIO            a pair is slow at this many times worse than typical (default: the partition's, else 2)
#   LINKTEST_METHOD           which build's linktest (default source)
#   LINKTEST_REPORT_DIR       where the reports go (default reports/links-<system>-<partition>)
# Writes reports/links-<system>-<partition>/: results.json (per-node and per-link series, a bad
# node or link as a fail naming it), summary.md, junit.xml, and links/<system>-<partition>-<method>/
# with links.bin, matrix.npz, heatmap.png, histogram.png, bad_links.csv, summary.txt.
# Exit: mpiregress run's (0 nothing bad, 1 bad node or link, 2 bad input, 3 Slurm failed).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
: "${MPIREGRESS_SYSTEM:?}" "${MPIREGRESS_PARTITION:?}"

report_dir="${LINKTEST_REPORT_DIR:-$MPIREGRESS_REPORTS_DIR/links-$MPIREGRESS_SYSTEM-$MPIREGRESS_PARTITION}"
options=(--system "$MPIREGRESS_SYSTEM" --partition "$MPIREGRESS_PARTITION" --families links
         --methods "${LINKTEST_METHOD:-source}" --report-dir "$report_dir" --manifest-dir "$MPIREGRESS_MANIFEST_DIR")
setvar() { if [ -n "$2" ]; then options+=(--setvar "LinktestCheck.$1=$2"); fi; }
setvar nodes "${LINKTEST_NODES:-}"
setvar nodelist "${LINKTEST_NODELIST:-}"
setvar ranks_per_node "${LINKTEST_RANKS_PER_NODE:-}"
setvar linktest_args "${LINKTEST_ARGS:-}"
setvar switches "${LINKTEST_SWITCHES:-}"
setvar ratio "${LINKTEST_RATIO:-}"
setvar time_limit "${LINKTEST_TIME:+${LINKTEST_TIME}m}"
# The build stage built the programs: a missing build is an error here, never a private build.
options+=(--no-build)   # the build jobs built what this job runs (see run.sh)

if [ "${1:-}" = "--dry-run" ]; then
    mpiregress run "${options[@]}" --dry-run
    find "$report_dir/reframe/stage" -name rfm_job.sh -exec sh -c 'echo "# $1"; cat "$1"' _ {} \;
    exit 0
fi
mpiregress run "${options[@]}"
