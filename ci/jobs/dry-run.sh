#!/usr/bin/env bash
# Lint job: ReFrame --dry-run of every check of one system (job scripts written, nothing
# submitted; needs no Slurm and no cluster).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
: "${MPIREGRESS_DRY_RUN_SYSTEM:?}"
mpiregress run --system "$MPIREGRESS_DRY_RUN_SYSTEM" --dry-run \
    --report-dir "$MPIREGRESS_REPORTS_DIR/dry-run-$MPIREGRESS_DRY_RUN_SYSTEM"
