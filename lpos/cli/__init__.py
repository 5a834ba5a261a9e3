"""`python -m lpos inspect|shuffle|generate|convert|train|eval|card|extend|probe|lab|bench`.

One module per group of subcommands (models, training, experiments, bench), each adding its
parsers with `add_commands`; the model flags inspect, shuffle and probe share, and the one
model picker, are in lpos.cli.choosing. Heavy imports wait inside each command.
"""
from __future__ import annotations

import argparse
import sys

from lpos.cli import bench, experiments, lab, models, training


def parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(prog="python -m lpos", description="inspect, train and measure lpos models")
    commands = root.add_subparsers(dest="command", required=True)
    for group in (models, training, experiments, lab, bench):
        group.add_commands(commands)
    return root


def command_list(root: argparse.ArgumentParser) -> str:
    """Every command with its one-line help, as `python -m lpos` alone prints them."""
    commands = next(a for a in root._actions if isinstance(a, argparse._SubParsersAction))
    named = [(choice.dest, choice.help) for choice in commands._choices_actions]
    width = max(len(name) for name, _ in named)
    return "\n".join([f"usage: {root.prog} COMMAND ...  ({root.prog} COMMAND -h: its options)", "", "commands:",
                      *(f"  {name:<{width}}  {help}" for name, help in named)])


def main(argv: list[str] | None = None) -> int:
    root = parser()
    if not (sys.argv[1:] if argv is None else argv):
        print(command_list(root))
        return 2
    args = root.parse_args(argv)
    try:
        return args.run(args)
    except ValueError as e:  # user errors (bad scheme, bad file, too long) are one line, not a traceback
        print(f"error: {e}", file=sys.stderr)
        return 2


__all__ = ["main", "parser"]
