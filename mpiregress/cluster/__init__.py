"""The local Slurm the project starts itself: namespaces, locks, node loss, Slurm host lists."""
