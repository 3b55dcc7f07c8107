#!/usr/bin/env bash
# after_script of every job that submits Slurm jobs (run, ab, sweeps, links, noise, verdict), on every
# system, the local shell runner included. GitLab (17+) runs it also for a cancelled or timed-out job,
# whose script may have been killed outright: the Slurm jobs a run submitted are recorded in
# <report folder>/slurm-jobs.txt the moment sbatch returns, and each carries a token naming this CI job
# (CI_JOB_ID); `mpiregress cancel` cancels, by job id, those still queued, after giving a run that is
# still ending MPIREGRESS_CANCEL_WAIT seconds (default 30) to cancel them itself, and marks the folder
# of a run killed outright "cancelled".
# gitlab-ci-local (--shell-isolation) re-syncs the job's folder with the checkout before an
# after_script, which deletes what the script wrote: env.sh kept a copy beside the folder when the
# script ended, and it is put back here first, so the artifacts still upload.
# Never fails the job: after_script's exit code does not change the job's status anyway.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
mpiregress_restore_kept
mpiregress cancel "$MPIREGRESS_REPORTS_DIR" --wait "${MPIREGRESS_CANCEL_WAIT:-30}" || true
