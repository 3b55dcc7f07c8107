#!/usr/bin/env bash
# Proposal job (weekly schedule, after the verdict and history jobs): the baseline proposal of
# $MPIREGRESS_SYSTEM from the history this schedule just recorded, pushed to the branch
# mpiregress/baselines-<system> with its one merge request opened or updated (the evidence per
# series: value proposed, runs used, toolchain, held-back series and why; docs/gitlab.md).
# Without MPIREGRESS_GITLAB_TOKEN, outside GitLab, or when GitLab refuses: one sentence, exit 0.
# Artifacts: reports/proposal-<system>/ (proposal.diff, evidence.json, merge-request.md).
# Exit: 0, or 2 for an input error (no history file, a baselines file that does not load).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
: "${MPIREGRESS_SYSTEM:?}"

out="$MPIREGRESS_REPORTS_DIR/proposal-$MPIREGRESS_SYSTEM"
mkdir -p "$out"
mpiregress baseline propose --system "$MPIREGRESS_SYSTEM" "${history_db[@]}" --merge-request \
    --evidence "$out/evidence.json" --description "$out/merge-request.md" > "$out/proposal.diff"
