"""`python -m lpos lab`: train a tiny model of one scheme on one lab task and test it past its window
(lpos.lab); the defaults are LabArgs' own, never written again here."""
from __future__ import annotations

import json
from pathlib import Path

from lpos.lab.tasks import TASK_NAMES
from lpos.lab.training import PRESETS, LabArgs
from lpos.positions import SCHEMES

LAB_DEFAULTS = LabArgs()


def add_commands(commands) -> None:
    d = LAB_DEFAULTS
    lab = commands.add_parser("lab", help="train a tiny model on a lab task (copy, ...) and test it past its window")
    lab.add_argument("--task", choices=TASK_NAMES, default=d.task)
    lab.add_argument("--scheme", choices=SCHEMES, default=d.scheme)
    lab.add_argument("--window", type=int, default=d.window, help="training window, in tokens")
    lab.add_argument("--preset", choices=sorted(PRESETS), default=d.preset,
                     help="; ".join(f"{p.name}: {p.description}" for p in PRESETS.values()))
    lab.add_argument("--steps", type=int, default=d.steps)
    lab.add_argument("--seed", type=int, default=d.seed)
    lab.add_argument("--threads", type=int, help="torch threads (default: torch's choice; the app's workers use 1)")
    lab.add_argument("--text", metavar="FILE", help="the text task's UTF-8 text, at most 1 MB (default: the built-in story)")
    lab.add_argument("--out", help="write the run as an lpos checkpoint here")
    lab.add_argument("--json", action="store_true", help="print the run as JSON")
    lab.set_defaults(run=run_lab)


def run_lab(args) -> int:
    import torch

    from lpos import lab

    if args.threads:
        torch.set_num_threads(args.threads)
    text = lab.read_text(Path(args.text).read_bytes(), name=Path(args.text).name) if args.text else None
    run = LabArgs(task=args.task, scheme=args.scheme, window=args.window, preset=args.preset, steps=args.steps,
                  seed=args.seed, text=text, text_source=Path(args.text).name if args.text else LAB_DEFAULTS.text_source)
    model, meta = lab.train(run)
    if args.out:
        lab.save(model, meta, args.out)
    found = lab.summary(meta)
    if args.json:
        print(json.dumps(found))
        return 0
    print(f"{found['scheme']} on {found['task']}, window {found['window']}: {found['steps']:,} steps in "
          f"{found['seconds']:.1f} s" + (f" ({found['stopped']})" if found["stopped"] else ""))
    for length, accuracy in found["accuracy_by_length"].items():
        print(f"  {length:>5} tokens: " + ("cannot read that far" if accuracy is None else f"{accuracy:.1%}"))
    return 0
