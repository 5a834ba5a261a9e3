"""The flags that choose a model, shared by inspect, shuffle and probe, and the one model picker.

As the app opens: --checkpoint (its own scheme wins over --scheme), else the scheme's shipped
trained model, else (--untrained, or none shipped) the scheme's untrained model, the very one
the app shows (lpos.model.untrained_model).
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass

from lpos import vocab
from lpos.positions import DEFAULT_SCHEME, SCHEMES

CHECKPOINT_HELP = "a shipped name, a file of any layout lpos reads, or a Hugging Face folder"
TOKENIZER_HELP = f"the model's tokenizer, when it is not GPT-2's and the file does not carry it: {vocab.DESCRIBED}"


def model_flags() -> argparse.ArgumentParser:
    """A parent parser: --scheme, --checkpoint, --n-head, --json."""
    flags = argparse.ArgumentParser(add_help=False)
    flags.add_argument("--scheme", choices=SCHEMES, help="default learned; a checkpoint's own scheme wins")
    flags.add_argument("--checkpoint", help=CHECKPOINT_HELP)
    flags.add_argument("--n-head", type=int, help="the head count, for a file that does not say it")
    flags.add_argument("--tokenizer", help=TOKENIZER_HELP)
    flags.add_argument("--json", action="store_true")
    return flags


@dataclass(frozen=True)
class Chosen:
    model: object  # lpos.model.GPT, in eval mode
    meta: dict  # the checkpoint's meta ({} for an untrained model)
    line: str  # which model this is, for stderr

    @property
    def tokenizer(self):
        """The Tokenizer the model speaks (lpos.tokenizer.GPT2 unless its file says otherwise)."""
        from lpos.tokenizer import GPT2

        return self.meta.get("tokenizer") or GPT2


def load_checkpoint(name: str, *, n_head: int | None = None, tokenizer: str | None = None):
    """checkpoints.load, with a head-count or tokenizer question put as the flag that answers it."""
    from lpos import checkpoints

    try:
        return checkpoints.load(name, n_head=n_head, tokenizer=tokenizer)
    except checkpoints.NeedsHeadCount as e:
        raise ValueError(f"{e}; pass it as --n-head N") from None
    except checkpoints.NeedsTokenizer as e:
        raise ValueError(f"{e}; pass it as --tokenizer FILE") from None


def chosen_model(args: argparse.Namespace) -> Chosen:
    """The model the flags name (see the module docstring); `args.untrained` skips the shipped one."""
    from lpos import checkpoints
    from lpos.model import untrained_model

    scheme = args.scheme or DEFAULT_SCHEME
    if args.checkpoint:
        model, meta = load_checkpoint(args.checkpoint, n_head=args.n_head, tokenizer=args.tokenizer)
        if args.scheme is not None and model.config.position != args.scheme:
            print(f"note: {args.checkpoint} uses the {model.config.position!r} scheme", file=sys.stderr)
        return Chosen(model, meta, f"model: {args.checkpoint} (read as: {meta.get('source', 'lpos checkpoint')})")
    if not args.untrained and scheme in checkpoints.available():
        model, meta = checkpoints.load(scheme)
        return Chosen(model, meta, f"model: {scheme} (trained, shipped; --untrained for the random one)")
    note = "" if args.untrained else f" (no trained {scheme} model is shipped)"
    return Chosen(untrained_model(scheme).eval(), {}, f"model: untrained {scheme} (random init, as the app's){note}")
