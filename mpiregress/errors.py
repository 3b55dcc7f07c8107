"""Exit codes and the exceptions that carry them.

The pipeline gates on these codes: GitLab retries only INFRASTRUCTURE, never
REGRESSION (a performance failure must not be retried into a pass).
"""
from __future__ import annotations

OK = 0
REGRESSION = 1       # a measured value drifted past its band
ERROR = 2            # bad input, crashed rank, failed sanity, missing manifest/baseline
INFRASTRUCTURE = 3   # Slurm down, tool not available on this machine: worth a retry
SKIPPED = 4          # nothing could run here (e.g. Spack/EESSI absent); never a pass
NEEDS_A_LOOK = 5     # findings that do not gate (GitLab: allow_failure exit_codes, passed with warnings)
CANCELLED = 6        # stopped by SIGTERM, SIGINT or SIGHUP (a cancelled or timed-out CI job, Ctrl-C):
                     # its ReFrame and Slurm jobs were stopped, nothing was judged; never retried


class MpiRegressError(Exception):
    """An error with a one-sentence message for the user and an exit code."""

    exit_code = ERROR


class InputError(MpiRegressError):
    """A file the user gave (baselines, manifest, toolchain, report) is missing or malformed."""


class InfrastructureError(MpiRegressError):
    """Something outside the project is down or missing (Slurm, munge, network)."""

    exit_code = INFRASTRUCTURE


class NotAvailableError(MpiRegressError):
    """A build method or tool cannot run on this machine (no Spack, no /cvmfs)."""

    exit_code = SKIPPED
