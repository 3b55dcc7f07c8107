#!/usr/bin/env bash
# Noise job (weekly schedule, and the probe before a benchmark run): build fwq with the job's
# MPI, run it in every layout the partition's topology offers (all cores, one core per socket
# left free, SMT siblings left free), analyse each run. Writes reports/noise-<system>-<partition>/
# <layout>/{summary.txt,cores.tsv,spectrum.png,records.json}. Exit: 0 done, 2 bad input or a
# failed run, 4 a layout the nodes cannot offer is only reported (never fails the job).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
: "${MPIREGRESS_SYSTEM:?}" "${MPIREGRESS_PARTITION:?}"
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
out="${MPIREGRESS_REPORTS_DIR:-reports}/noise-$MPIREGRESS_SYSTEM-$MPIREGRESS_PARTITION"
iterations=${MPIREGRESS_FWQ_ITERATIONS:-300000}
mkdir -p "$out/build"
cp "$repo"/checks/src/fwq/{fwq.c,fwq_format.h,Makefile} "$out/build/"
make -s -C "$out/build" MPICC="${MPICC:-mpicc}" CFLAGS="${CFLAGS:--O2}" PREFIX="$out/prefix" install
fwq="$out/prefix/bin/fwq"

topology="$repo/checks/topology/$MPIREGRESS_SYSTEM-$MPIREGRESS_PARTITION/processor.json"
cd "$out"
if [ -f "$topology" ]; then
  # One srun line per layout, derived from the partition's topology (a comment when unavailable).
  mpiregress noise layouts --topology "$topology" --fwq "$fwq" --iterations "$iterations" > layouts.txt
else
  # The local system: its two Slurm nodes share this host's cores; one rank per core on node1.
  echo "srun --mpi=pmix -N1 -w node1 -n2 --cpu-bind=map_cpu:0,1 $fwq -n $iterations -o fwq-all_cores.fwq" > layouts.txt
fi
status=0
while read -r line; do
  case "$line" in
    "#"*) echo "$line"; continue ;;
  esac
  layout=$(sed -n 's/.*-o fwq-\([a-z_]*\)\.fwq.*/\1/p' <<< "$line")
  echo "noise: $layout: $line"
  # shellcheck disable=SC2086
  if ! $line; then echo "noise: $layout: the FWQ run failed; its file, if any, is still analysed"; status=2; fi
  [ -f "fwq-$layout.fwq" ] || continue
  mpiregress noise analyze "fwq-$layout.fwq" --out "$layout" --layout "$layout" \
      --system "$MPIREGRESS_SYSTEM" --partition "$MPIREGRESS_PARTITION" || status=$?
done < layouts.txt
exit "$status"
