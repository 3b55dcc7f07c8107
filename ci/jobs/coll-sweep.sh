#!/usr/bin/env bash
# Weekly collective sweep of one system/partition (schedule only): every coll/tuned algorithm of
# the toolchain's OpenMPI forced, over process counts, both distributions and 1 B..1 MiB
# (checks/config/coll_sweep.yaml, subset weekly; benchmarks/coll_cost.py estimates its cost).
# Writes reports/<system>-<partition>-sweep/ (results.json: every size a series, recorded in the
# history by the history job; no baseline judges them until the history can) and, in
# reports/<system>-<partition>-sweep/coll/, the best-algorithm maps, the default-vs-best table,
# the findings and one deployable coll/tuned rules file per distribution.
# Exit: the run's code (0, 2 error, 3 infrastructure); the analysis never fails the job.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
: "${MPIREGRESS_SYSTEM:?}" "${MPIREGRESS_PARTITION:?}" "${MPIREGRESS_METHODS:?}"

report_dir="$MPIREGRESS_REPORTS_DIR/$MPIREGRESS_SYSTEM-$MPIREGRESS_PARTITION-sweep"
extra=()
extra+=(--no-build)   # the build jobs built what this job runs; a pipeline job never builds (systems with builds: on_demand would)
code=0
mpiregress run --system "$MPIREGRESS_SYSTEM" --partition "$MPIREGRESS_PARTITION" \
    --methods "$MPIREGRESS_METHODS" --families coll-sweep --allow-missing-baselines \
    --report-dir "$report_dir" --manifest-dir "$MPIREGRESS_MANIFEST_DIR" "${extra[@]}" || code=$?
if [ -s "$report_dir/results.json" ]; then
    openmpi=$(python3 -c 'import sys, yaml; print(yaml.safe_load(open(sys.argv[1]))["mpi"]["version"])' \
              "$(dirname "${BASH_SOURCE[0]}")/../../toolchains/2023b.yaml")
    mpiregress coll analyse "$report_dir/results.json" --openmpi "$openmpi" --out "$report_dir/coll" \
        || echo "coll-sweep: no analysis (see above); the measurements are kept in $report_dir/results.json" >&2
fi
exit "$code"
