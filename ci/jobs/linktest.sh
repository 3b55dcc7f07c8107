#!/usr/bin/env bash
# Link matrix job: build linktest, run it over a partition or a node list, analyse it.
#
#   ci/jobs/linktest.sh              # run (submits with sbatch --wait unless already inside an allocation)
#   ci/jobs/linktest.sh --dry-run    # print the Slurm job script and exit 0
#
# Variables (pipeline variables; the weekly job sets size/time, the manual job a node list):
#   MPIREGRESS_SYSTEM, MPIREGRESS_PARTITION   where (e.g. aion / batch)
#   LINKTEST_NODES            number of nodes (default 2), ignored when LINKTEST_NODELIST is set
#   LINKTEST_NODELIST         Slurm node list to test after maintenance (e.g. aion-[0001-0064])
#   LINKTEST_RANKS_PER_NODE   ranks per node (default 1)
#   LINKTEST_TIME             time limit, minutes (default 30)
#   LINKTEST_ARGS             linktest options (default "-Z 20"; e.g. "-S" for serial mode)
#   LINKTEST_SWITCHES         optional YAML node -> switch map for the analysis
#   MPICC, CFLAGS             compiler of the toolchain being tested (default mpicc, -O2)
# Artifacts in $MPIREGRESS_REPORTS_DIR/links-<system>-<partition>/: links.bin, matrix.npz,
# heatmap.png, histogram.png, bad_links.csv, summary.txt, series.json.
# Exit: the analysis' code (0 nothing bad, 1 bad node/link, 2 bad input), 3 when Slurm failed.
set -euo pipefail
dry_run=0
[ "${1:-}" = "--dry-run" ] && dry_run=1

system=${MPIREGRESS_SYSTEM:-local}
partition=${MPIREGRESS_PARTITION:-batch}
nodes=${LINKTEST_NODES:-2}
per_node=${LINKTEST_RANKS_PER_NODE:-1}
minutes=${LINKTEST_TIME:-30}
args=${LINKTEST_ARGS:--Z 20}
checkout=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
out=${MPIREGRESS_REPORTS_DIR:-$checkout/reports}/links-$system-$partition
prefix=$out/prefix

geometry=(-N"$nodes")
[ -n "${LINKTEST_NODELIST:-}" ] && geometry=(-w "$LINKTEST_NODELIST")

job_script() {
    cat <<SCRIPT
#!/bin/bash
#SBATCH --job-name=linktest
#SBATCH --partition=$partition
#SBATCH ${geometry[*]}
#SBATCH --ntasks-per-node=$per_node
#SBATCH --exclusive
#SBATCH --time=$minutes
#SBATCH --output=$out/slurm-%j.out
srun --mpi=pmix ${geometry[*]} --ntasks-per-node=$per_node --kill-on-bad-exit=1 \\
    $prefix/bin/linktest $args -o $out/links.bin
SCRIPT
}

if [ "$dry_run" = 1 ]; then
    job_script
    exit 0
fi

source "$checkout/ci/jobs/env.sh"
mkdir -p "$out"
make -s -C "$checkout/checks/src/linktest" MPICC="${MPICC:-mpicc}" CFLAGS="${CFLAGS:--O2}" PREFIX="$prefix" install
make -s -C "$checkout/checks/src/linktest" clean
if [ -n "${SLURM_JOB_ID:-}" ]; then
    job_script | tail -n 2 | bash || { echo "linktest: the srun step failed" >&2; exit 3; }
else
    job_script > "$out/linktest.sbatch"
    sbatch --wait "$out/linktest.sbatch" || { echo "linktest: the Slurm job failed (see $out/slurm-*.out)" >&2; exit 3; }
fi
switches=()
[ -n "${LINKTEST_SWITCHES:-}" ] && switches=(--switches "$LINKTEST_SWITCHES")
focus=()
[ -n "${LINKTEST_NODELIST:-}" ] && focus=(--nodes "$(scontrol show hostnames "$LINKTEST_NODELIST" | paste -sd,)")
mpiregress links analyze "$out/links.bin" --out "$out" "${switches[@]}" "${focus[@]}" \
    --series "$out/series.json" --system "$system" --partition "$partition" --method source
