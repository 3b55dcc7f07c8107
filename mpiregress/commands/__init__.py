"""Subcommands of the mpiregress CLI; each module defines ``register(subparsers)``.

A module registers the command of its own name; the few commands that live in a module of
another name are listed here, so that one command imports only its own module (a benchmark job
calls ``guard`` and ``node-target`` on every node, and importing every command costs seconds).
"""

MODULE_OF_COMMAND = {"node-target": "guard", "step-watch": "step_watch"}
