"""Subcommands of the mpiregress CLI; each module defines ``register(subparsers)``."""
