"""Running a toolchain MR's A/B: which builds are A and B, and the order of their samples."""
