"""The facts every stage reads: names, series, results and their readers, systems, toolchain,
topology, microarchitectures, manifests, baselines."""
