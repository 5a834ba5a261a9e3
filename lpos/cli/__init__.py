"""`python -m lpos inspect|shuffle|generate|convert|train|eval|card|extend|probe|bench`.

One module per group of subcommands (models, training, experiments, bench), each adding its
parsers with `add_commands`; the model flags inspect, shuffle and probe share, and the one
model picker, are in lpos.cli.choosing. Heavy imports wait inside each command.
"""
from __future__ import annotations

import argparse
import sys

from lpos.cli import bench, experiments, models, training


def parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(prog="python -m lpos", description="inspect, train and measure lpos models")
    commands = root.add_subparsers(dest="command", required=True)
    for group in (models, training, experiments, bench):
        group.add_commands(commands)
    return root


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return args.run(args)
    except ValueError as e:  # user errors (bad scheme, bad file, too long) are one line, not a traceback
        print(f"error: {e}", file=sys.stderr)
        return 2


__all__ = ["main", "parser"]
