"""mpiregress: an MPI performance regression pipeline for HPC centres.

Data flows one way: toolchain -> builds -> manifests -> checks -> results -> verdict/report.
"""
__version__ = "0.1.0"

# Every section of a system file is checked when the file is read, by the subsystem that reads it.
from mpiregress import system_sections  # noqa: E402,F401
