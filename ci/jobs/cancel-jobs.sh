#!/usr/bin/env bash
# after_script of every job that submits Slurm jobs (run, ab, sweep, links, noise). GitLab (17+) runs
# it also for a cancelled or timed-out job, whose script may have been killed outright: the Slurm
# jobs a run submitted are recorded in <report folder>/slurm-jobs.txt as they appear in the queue,
# and `mpiregress cancel` cancels, by job id, those still queued under the run's token, after giving
# a run that is still ending MPIREGRESS_CANCEL_WAIT seconds (default 30) to cancel them itself.
# Never fails the job: after_script's exit code does not change the job's status anyway.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
mpiregress cancel "$MPIREGRESS_REPORTS_DIR" --wait "${MPIREGRESS_CANCEL_WAIT:-30}" || true
