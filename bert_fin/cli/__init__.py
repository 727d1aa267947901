"""Argument parsing for the console scripts; tools/*.py are one-line shims onto these mains."""
