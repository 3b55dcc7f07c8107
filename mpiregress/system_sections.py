"""Who checks which section of a system file: every subsystem that reads one registers its check with
:func:`mpiregress.model.systems.section_check`, beside the code that reads it.

Importing this module (the package's root does) loads them all, so that every process that reads a
system file, whichever stage it started from (a command, a ReFrame check, a test), checks every section
of it when it is read: a bad section is one sentence naming the file and the key, not a run judged by
defaults. It stands outside the stages, like the entry point: the facts below know no judge above them.
"""
from mpiregress.builds import host_toolchain
from mpiregress.cluster import local
from mpiregress.families.links import analysis
from mpiregress.families.noise import known, placement
from mpiregress.run import options
from mpiregress.verdict import noise, power
from mpiregress.verdict.ab import sequential

OWNERS = (host_toolchain, local, analysis, known, placement, options, noise, power, sequential)
