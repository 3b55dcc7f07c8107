# Sourced by every pipeline job (`before_script: source ci/jobs/env.sh`).
#
# Gives the job: a Python that has the project's pinned dependencies, the function
# `mpiregress` that runs THIS checkout's code (never an older copy installed elsewhere),
# and the project's paths pointed into the job's folder so artifacts can pick them up.
#
# Where the Python comes from, first match wins:
#   1. $MPIREGRESS_VENV (a site CI variable: a persistent venv on the clusters' shared
#      file system). Created here on first use, under a lock, when it does not exist yet.
#   2. .venv/ of the checkout (what ci/setup.sh makes on a developer or local-runner machine).
#   3. python3 on PATH, when it already imports the dependencies.
# Modules named in $MPIREGRESS_MODULES are loaded first where Lmod exists (e.g. a site's
# Python module on the clusters).
#
# Errors here exit 2 (bad setup; not worth a retry), with one sentence saying what to fix.

_mpiregress_die() { echo "ci/jobs/env.sh: $*" >&2; exit 2; }

if [ -n "${CI_PROJECT_DIR:-}" ]; then
    cd "$CI_PROJECT_DIR"
fi
MPIREGRESS_CHECKOUT=$(pwd)
export MPIREGRESS_CHECKOUT

# -- site modules (clusters): e.g. MPIREGRESS_MODULES="lang/Python/3.11.5-GCCcore-13.2.0"
if [ -n "${MPIREGRESS_MODULES:-}" ]; then
    if ! command -v module >/dev/null 2>&1; then
        for init in /etc/profile.d/lmod.sh /usr/share/lmod/lmod/init/bash; do
            # shellcheck disable=SC1090
            [ -f "$init" ] && . "$init" && break
        done
    fi
    command -v module >/dev/null 2>&1 || _mpiregress_die "MPIREGRESS_MODULES is set but this runner has no 'module' command"
    # shellcheck disable=SC2086
    module load $MPIREGRESS_MODULES || _mpiregress_die "could not load modules: $MPIREGRESS_MODULES"
fi

_mpiregress_has_deps() {
    "$1" -c 'import reframe, yaml, archspec, jinja2' >/dev/null 2>&1
}

MPIREGRESS_PYTHON=""
if [ -n "${MPIREGRESS_VENV:-}" ]; then
    if ! _mpiregress_has_deps "$MPIREGRESS_VENV/bin/python"; then
        # First job on this site (or pins changed): build the venv once, other jobs wait on the lock.
        base_python=${MPIREGRESS_BASE_PYTHON:-python3}
        mkdir -p "$(dirname "$MPIREGRESS_VENV")"
        (
            flock -w 1800 9 || _mpiregress_die "timed out waiting for the lock on $MPIREGRESS_VENV"
            if ! _mpiregress_has_deps "$MPIREGRESS_VENV/bin/python"; then
                echo "ci/jobs/env.sh: creating $MPIREGRESS_VENV with $base_python"
                "$base_python" -m venv "$MPIREGRESS_VENV"
                "$MPIREGRESS_VENV/bin/python" -m pip install -q --upgrade pip
                # The project's own pins (pyproject.toml): EasyBuild (the easybuild method, lint's
                # dry run) and the test extras lint needs (check-jsonschema).
                "$MPIREGRESS_VENV/bin/python" -m pip install -q "$MPIREGRESS_CHECKOUT[easybuild,test]"
            fi
        ) 9>"$MPIREGRESS_VENV.lock" || _mpiregress_die "could not create the venv $MPIREGRESS_VENV"
    fi
    MPIREGRESS_PYTHON="$MPIREGRESS_VENV/bin/python"
elif _mpiregress_has_deps "$MPIREGRESS_CHECKOUT/.venv/bin/python"; then
    MPIREGRESS_PYTHON="$MPIREGRESS_CHECKOUT/.venv/bin/python"
elif command -v python3 >/dev/null 2>&1 && _mpiregress_has_deps python3; then
    MPIREGRESS_PYTHON=$(command -v python3)
else
    _mpiregress_die "no Python with the project's dependencies: set the CI variable MPIREGRESS_VENV (a venv path; it is created on first use) or run ci/setup.sh on this runner"
fi
export MPIREGRESS_PYTHON
# The venv's tools (reframe, eb, check-jsonschema) first on PATH.
PATH="$(dirname "$MPIREGRESS_PYTHON"):$PATH"
export PATH
# This checkout's package wins over any installed copy (an editable install points elsewhere).
export PYTHONPATH="$MPIREGRESS_CHECKOUT${PYTHONPATH:+:$PYTHONPATH}"

mpiregress() { "$MPIREGRESS_PYTHON" -m mpiregress "$@"; }

# mpiregress_merge_results OUT FILE...: one results.json holding the records of several (the
# partitions of a system), for the per-system compare and report.
mpiregress_merge_results() {
    local out=$1; shift
    mkdir -p "$(dirname "$out")"
    "$MPIREGRESS_PYTHON" -c 'import json, sys
rows = [r for f in sys.argv[2:] for r in json.load(open(f))]
json.dump(rows, open(sys.argv[1], "w"), indent=1)
print(f"merged {len(rows)} results of {len(sys.argv) - 2} file(s) into {sys.argv[1]}")' "$out" "$@"
}

# -- the project's paths (mpiregress/paths.py), inside the job's folder unless the site says otherwise
export MPIREGRESS_MANIFEST_DIR="$MPIREGRESS_CHECKOUT/var/manifests"
export MPIREGRESS_REPORTS_DIR="$MPIREGRESS_CHECKOUT/reports"
# Install prefixes must outlive the build job (the run job executes them): the clusters set
# MPIREGRESS_INSTALL_ROOT to a per-pipeline folder on the shared file system (.gitlab-ci.yml);
# a runner that keeps the local cluster up (MPIREGRESS_LOCAL_STATE_DIR) keeps them beside it; otherwise the job folder.
if [ -z "${MPIREGRESS_INSTALL_ROOT:-}" ] && [ -n "${MPIREGRESS_LOCAL_STATE_DIR:-}" ]; then
    MPIREGRESS_INSTALL_ROOT="$MPIREGRESS_LOCAL_STATE_DIR/install/${CI_PIPELINE_ID:-manual}-${CI_COMMIT_SHORT_SHA:-0}"
fi
export MPIREGRESS_INSTALL_ROOT="${MPIREGRESS_INSTALL_ROOT:-$MPIREGRESS_CHECKOUT/var/install}"
# The history database must outlive the pipeline: a site sets MPIREGRESS_HISTORY_DB to a
# persistent file (the default below only lives as long as the job folder).
export MPIREGRESS_HISTORY_DB="${MPIREGRESS_HISTORY_DB:-$MPIREGRESS_CHECKOUT/var/history.sqlite}"
# A site whose runners share one PostgreSQL history sets MPIREGRESS_HISTORY_URL (postgresql://user@host/db,
# the password in ~/.pgpass or a masked CI variable, never in the URL on a command line): mpiregress reads
# it itself, so the jobs pass no --db then (docs/history.md).
history_db=()
if [ -z "${MPIREGRESS_HISTORY_URL:-}" ]; then
    history_db=(--db "$MPIREGRESS_HISTORY_DB")
fi
# The local system's one-host Slurm lives in <state dir>/local-cluster: a runner that keeps one
# cluster up between jobs points MPIREGRESS_LOCAL_STATE_DIR at it (short path: unix sockets).
if [ -n "${MPIREGRESS_LOCAL_STATE_DIR:-}" ]; then
    export MPIREGRESS_STATE_DIR="$MPIREGRESS_LOCAL_STATE_DIR"
fi

echo "ci/jobs/env.sh: $("$MPIREGRESS_PYTHON" --version 2>&1) at $MPIREGRESS_PYTHON; checkout $MPIREGRESS_CHECKOUT"
unset -f _mpiregress_has_deps

# -- gitlab-ci-local only (GITLAB_CI=false, --shell-isolation): it re-syncs the job's folder with the
# checkout before the after_script (ci/jobs/cancel-jobs.sh), deleting the reports and manifests the
# script wrote before they become artifacts. A job script keeps a copy beside the job's folder when it
# ends; the after_script puts it back. On a real runner (GITLAB_CI=true) nothing is copied.
MPIREGRESS_KEPT_DIR=""
if [ "${GITLAB_CI:-}" = "false" ] && [ -n "${CI_PROJECT_DIR:-}" ] && [ -n "${CI_JOB_ID:-}" ]; then
    MPIREGRESS_KEPT_DIR="$(dirname "$CI_PROJECT_DIR")/.mpiregress-kept-$(basename "$CI_PROJECT_DIR")-$CI_JOB_ID"
fi
mpiregress_keep() {
    [ -n "$MPIREGRESS_KEPT_DIR" ] || return 0
    rm -rf "$MPIREGRESS_KEPT_DIR" && mkdir -p "$MPIREGRESS_KEPT_DIR"
    local path
    for path in reports var/manifests; do
        if [ -d "$CI_PROJECT_DIR/$path" ]; then
            mkdir -p "$MPIREGRESS_KEPT_DIR/$(dirname "$path")"
            cp -a "$CI_PROJECT_DIR/$path" "$MPIREGRESS_KEPT_DIR/$path"
        fi
    done
}
mpiregress_restore_kept() {
    [ -n "$MPIREGRESS_KEPT_DIR" ] && [ -d "$MPIREGRESS_KEPT_DIR" ] || return 0
    cp -a "$MPIREGRESS_KEPT_DIR/." "$CI_PROJECT_DIR/" && rm -rf "$MPIREGRESS_KEPT_DIR"
}
# Only in the scripts of the jobs that have that after_script (not in the after_script itself).
if [ -n "$MPIREGRESS_KEPT_DIR" ]; then
    case "$(basename "$0")" in
        run.sh|ab.sh|linktest.sh|noise.sh|coll-sweep.sh|pt2pt-sweep.sh|verdict.sh) trap mpiregress_keep EXIT ;;
    esac
fi
