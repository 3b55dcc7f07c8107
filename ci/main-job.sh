#!/usr/bin/env bash
# The main job, locally: install what is needed, then run the point-to-point checks on a
# one-host Slurm that the project starts itself, and end with the HTML report of the run
# (judged against the history and baselines) and its path. OSU's tarball comes from the
# official download or from $OSU_SOURCE_MIRROR (a folder holding osu-micro-benchmarks-7.2.tar.gz).
# Exit code: the run's (0 pass, 1 regression, 2 error, 3 infrastructure, 4 nothing ran, 5 needs a look, 6 cancelled).
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bash "$repo/ci/setup.sh"
# The venv first on PATH: the easybuild method runs its `eb` (systems/local.yaml methods).
source "$repo/ci/env.sh"
mpiregress="$repo/.venv/bin/mpiregress"

# Where the run writes: its --report-dir if given, else the run's default.
report_dir="${MPIREGRESS_REPORTS_DIR:-$repo/reports}/local"
previous=""
for arg in "$@"; do
  case "$arg" in
    --report-dir=*) report_dir="${arg#--report-dir=}" ;;
    *) [ "$previous" = "--report-dir" ] && report_dir="$arg" ;;
  esac
  previous="$arg"
done

# The previous main job's page is this job's to remove (the run refuses a folder holding an html/ that no
# run wrote, and a failed run must not leave an earlier run's page behind); anything else in there stays,
# and the run then says so and refuses.
html_dir="$report_dir/html"
if [ -d "$html_dir" ] && [ ! -L "$html_dir" ]; then
  rm -f "$html_dir/report.html" "$html_dir/summary.md" "$html_dir/junit.xml"
  rmdir "$html_dir" 2>/dev/null || true
fi
started="$(mktemp)"
trap 'rm -f "$started"' EXIT

code=0
"$mpiregress" run --system local "$@" || code=$?

# Only this run's results: a run refused or failed before measuring leaves none of its own.
if [ -s "$report_dir/results.json" ] && [ "$report_dir/results.json" -nt "$started" ]; then
  report_code=0
  # One measurement per series here (no --repeat): the report judges it as the run did, one sample
  # against the baselines band, instead of asking for the MR gate's three.
  # --event run: the page shows the same verdict as the run (its baselines gate), not the history gate's.
  "$mpiregress" report "$report_dir/results.json" --out-dir "$html_dir" --min-samples 1 --event run || report_code=$?
  if [ "$report_code" -eq 0 ]; then
    echo "HTML report: $html_dir/report.html"
  else
    echo "main job: the HTML report could not be written (exit $report_code); the run's summary is $report_dir/summary.md" >&2
    [ "$code" -eq 0 ] && code=$report_code
  fi
else
  echo "main job: no HTML report: the run wrote no results; it says why in $report_dir/summary.md" >&2
fi
exit "$code"
