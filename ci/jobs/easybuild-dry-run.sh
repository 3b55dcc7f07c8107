#!/usr/bin/env bash
# Lint job: EasyBuild dry run of the project's easyconfigs, resolving the whole gompi/2023b
# dependency chain offline (`eb --dry-run --robot`; nothing is downloaded or built).
# The project's easyconfigs/ come first on the robot path, EasyBuild's own after them.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"

shopt -s nullglob
easyconfigs=(easyconfigs/*.eb)
if [ ${#easyconfigs[@]} -eq 0 ]; then
    echo "easybuild-dry-run: no easyconfigs/*.eb in this checkout" >&2
    exit 2
fi
command -v eb >/dev/null || { echo "easybuild-dry-run: eb is not installed (pip install easybuild, see pyproject.toml)" >&2; exit 2; }
# EasyBuild drives Lmod through $LMOD_CMD: a non-login CI shell may not have it set yet.
if [ -z "${LMOD_CMD:-}" ]; then
    for init in /usr/share/lmod/lmod/init/bash /etc/profile.d/lmod.sh; do
        # shellcheck disable=SC1090
        if [ -f "$init" ]; then . "$init"; break; fi
    done
fi
# EasyBuild refuses to run as root unless told; CI machines and gitlab-ci-local run as root.
if [ "$(id -u)" -eq 0 ]; then
    export EASYBUILD_ALLOW_USE_AS_ROOT_AND_ACCEPT_CONSEQUENCES=1
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export EASYBUILD_PREFIX="$tmp/eb" EASYBUILD_TMPDIR="$tmp/tmp" EASYBUILD_SOURCEPATH="$tmp/sources"
out="$MPIREGRESS_REPORTS_DIR/easybuild-dry-run"
mkdir -p "$out"
for ec in "${easyconfigs[@]}"; do
    name=$(basename "$ec" .eb)
    echo "easybuild-dry-run: eb $ec --dry-run --robot"
    eb "$ec" --dry-run --robot --robot-paths="$PWD/easyconfigs:" --tmp-logdir="$tmp/logs" \
        > "$out/$name.txt" 2>&1 || { cat "$out/$name.txt" >&2; exit 2; }
    grep -E '^ \* \[' "$out/$name.txt" | tail -n 5
    echo "easybuild-dry-run: $ec resolves ($(grep -c '^ \* \[' "$out/$name.txt") easyconfigs in its chain)"
done
