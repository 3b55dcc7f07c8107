"""mpiregress: an MPI performance regression pipeline for HPC centres.

Data flows one way: toolchain -> builds -> manifests -> checks -> results -> verdict/report.
"""
__version__ = "0.1.0"
