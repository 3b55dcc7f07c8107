"""The conductor of a run: ReFrame launch and reports, check base, run folder, step watch, cancel."""
