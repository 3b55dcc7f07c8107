#!/usr/bin/env bash
# The test suite: install what is needed, check the package with ruff, mypy and import-linter (pinned in
# pyproject.toml, configured there), then run every test (unit, integration with the real
# local Slurm, ReFrame, EasyBuild dry-runs, gitlab-ci-local) with pytest.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bash "$repo/ci/setup.sh"
cd "$repo"
source ci/env.sh
.venv/bin/ruff check mpiregress
.venv/bin/mypy
# The stages import down the flow only (pyproject.toml [tool.importlinter]); a broken contract names the import.
.venv/bin/lint-imports --no-cache
# The slowest tests in the record: where the time goes when CI runs slower than a workstation.
exec .venv/bin/python -m pytest -ra --durations=15 "$@"
