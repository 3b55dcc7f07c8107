"""Collectives: the sweep as data, OSU collective output, best-algorithm maps, coll/tuned rules files."""
