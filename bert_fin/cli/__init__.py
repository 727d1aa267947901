"""Argument parsing for the console scripts; tools/*.py are one-line shims onto these mains."""
import argparse


class HelpFormatter(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
  """The module docstring as written, and "(default: ...)" after every option's help text."""
