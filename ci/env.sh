# Source me: puts the project's venv first on PATH (after ci/setup.sh ran).
_mpiregress_repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export PATH="$_mpiregress_repo/.venv/bin:$PATH"
unset _mpiregress_repo
