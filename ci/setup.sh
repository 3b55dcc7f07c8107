#!/usr/bin/env bash
# Install everything the project needs on a fresh Debian 12 machine, idempotently:
# system packages (Slurm, munge, OpenMPI, hwloc, Lmod), a Python venv with the pinned
# dependencies, and gitlab-ci-local. Safe to run again; quick when nothing is missing.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"

# rsync: gitlab-ci-local's --shell-isolation copies each job's checkout with it.
# iproute2 (ip, tc): the local cluster's nodes live in network namespaces (nsenter/unshare: util-linux).
# libpq5: psycopg's libpq (the PostgreSQL history); postgresql: the real server the history tests start.
apt_packages=(slurm-wlm munge openmpi-bin libopenmpi-dev hwloc lmod build-essential git rsync iproute2 util-linux
              libpq5 postgresql)
missing=()
for pkg in "${apt_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing system packages: ${missing[*]}"
  sudo_cmd=""; [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  # Another apt or dpkg (unattended-upgrades, a second setup) may hold the package locks: wait, bounded.
  apt_lock_wait=${MPIREGRESS_APT_LOCK_WAIT:-600}
  bash ci/apt-wait.sh
  $sudo_cmd apt-get -o DPkg::Lock::Timeout="$apt_lock_wait" update -qq
  bash ci/apt-wait.sh
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get -o DPkg::Lock::Timeout="$apt_lock_wait" install -y -qq \
    --no-install-recommends "${missing[@]}" >/dev/null
fi

python=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv"
  "$python" -m venv .venv
fi
stamp=.venv/.mpiregress-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  echo "setup: installing Python dependencies (pinned in pyproject.toml)"
  .venv/bin/python -m pip install -q --upgrade pip
  # easybuild: the local system builds OSU with real EasyBuild too (systems/local.yaml methods).
  .venv/bin/python -m pip install -q -e ".[easybuild,test]"
  touch "$stamp"
fi

if [ -x ci/install-gitlab-ci-local.sh ]; then
  bash ci/install-gitlab-ci-local.sh
fi
