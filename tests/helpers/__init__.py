"""Helpers shared by the test modules (not fixtures: plain functions)."""
