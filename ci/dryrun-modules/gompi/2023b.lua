-- Empty placeholder: lets `mpiregress run --dry-run` write the clusters' job scripts (with their
-- `module load` lines) on a machine without the clusters' module tree. Appended to MODULEPATH only
-- by --dry-run, so a real module of the same name always wins. Never used to run anything.
whatis("dry-run placeholder; not the real module")
