"""Commands that make or measure the shipped models: train, eval, card. Every train default is
TrainArgs's own (lpos.train), never written again here."""
from __future__ import annotations

import json
from pathlib import Path

from lpos.positions import SCHEMES
from lpos.train import TrainArgs

TRAIN_DEFAULTS = TrainArgs()
CARD_PATH = Path(__file__).resolve().parent.parent.parent / "checkpoints" / "README.md"


def add_commands(commands) -> None:
    d = TRAIN_DEFAULTS
    train = commands.add_parser("train", help="train a GPT of one position scheme on story text")
    train.add_argument("--scheme", choices=SCHEMES, default=d.scheme)
    train.add_argument("--data", nargs="+", required=True, help="UTF-8 files, stories separated by <|endoftext|> lines")
    train.add_argument("--out", required=True, help="checkpoint path to write")
    budget = train.add_mutually_exclusive_group()
    budget.add_argument("--steps", type=int, help=f"optimizer steps (default {d.steps})")
    budget.add_argument("--tokens", type=int, help="tokens to train on (rounded up to whole steps)")
    train.add_argument("--batch-size", type=int, default=d.batch_size, help="global batch, in sequences")
    train.add_argument("--block-size", type=int, default=d.block_size)
    train.add_argument("--max-length", type=int, default=d.max_length, help="longest training window (default: the "
                       "block size); the same tokens a step in more, shorter windows, so learned rows from here on "
                       "never train")
    train.add_argument("--random-positions", type=int, default=d.random_positions, metavar="L",
                       help="a table of L rows, each window reading a sorted random subset of them (Ruoss et al. "
                       "2023; learned only), e.g. 1024")
    train.add_argument("--lr", type=float, default=d.lr)
    train.add_argument("--seed", type=int, default=d.seed)
    train.add_argument("--layers", type=int, default=d.n_layer)
    train.add_argument("--heads", type=int, default=d.n_head)
    train.add_argument("--width", type=int, default=d.n_embd)
    train.add_argument("--save-every", type=int, default=d.save_every, help="steps between resumable snapshots")
    train.add_argument("--resume", action="store_true", help="continue from <out>.resume.pt")
    train.add_argument("--threads", type=int, default=d.threads,
                       help="torch threads (default: torch's choice); a run is bit-identical only for the same count")
    train.add_argument("--no-progress", action="store_true")
    train.set_defaults(run=run_train)

    evaluate = commands.add_parser("eval", help="validation loss per evaluation length")
    evaluate.add_argument("--checkpoint", required=True, help="a shipped name or a path")
    evaluate.add_argument("--lengths", type=int, nargs="+", default=list(d.eval_lengths))
    evaluate.add_argument("--data", nargs="+", help="corpus files (default: those the checkpoint was trained on)")
    evaluate.add_argument("--json", action="store_true")
    evaluate.set_defaults(run=run_eval)

    card = commands.add_parser("card", help="rewrite checkpoints/README.md from the shipped checkpoints' meta")
    card.add_argument("--out", default=str(CARD_PATH))
    card.add_argument("--checkpoints", metavar="DIR", help="the folder of the checkpoints to describe (default: the "
                      "shipped checkpoints/; LPOS_CHECKPOINT_DIR is the app's shared folder and does not change it)")
    card.add_argument("--rebuild-seconds", type=float, help="measured wall time of checkpoints/rebuild.sh")
    card.add_argument("--rebuild-models", type=int, help="how many models that rebuild trained (the card's first N: "
                      "the per-scheme models in registry order, then the variants; default: every model)")
    card.set_defaults(run=run_card)

    views = commands.add_parser("precompute", help="write checkpoints/<name>.views.pt: what the pages draw from "
                                                   "each shipped model and fixed texts (lpos.precomputed)")
    views.add_argument("names", nargs="*", help="shipped names (default: every shipped checkpoint)")
    views.add_argument("--views", nargs="+", metavar="VIEW", help="only these views, added to what the files already "
                       "hold (default: every view, the files rewritten)")
    views.add_argument("--cards-only", action="store_true", help="only checkpoints/shipped.cards.pt, the shipped models' "
                       "cards without their weights (lpos.checkpoints.cards; written with the views too)")
    views.set_defaults(run=run_precompute)


def run_train(args) -> int:
    from lpos.train import train

    tokens_per_step = args.batch_size * args.block_size
    steps = args.steps or (-(-args.tokens // tokens_per_step) if args.tokens else TRAIN_DEFAULTS.steps)
    options = TrainArgs(scheme=args.scheme, data=tuple(args.data), out=args.out, steps=steps, batch_size=args.batch_size,
                        lr=args.lr, seed=args.seed, n_layer=args.layers, n_head=args.heads, n_embd=args.width,
                        block_size=args.block_size, max_length=args.max_length, random_positions=args.random_positions,
                        save_every=args.save_every,
                        resume=args.resume, threads=args.threads)
    _, meta = train(options, progress=not args.no_progress)
    if meta:
        print(f"wrote {args.out}: val loss {meta['val_loss']} after {meta['tokens_trained']:,} tokens in {meta['wall_seconds']} s")
    return 0


def eval_streams(meta: dict, data: list[str] | None) -> tuple[dict, str]:
    """The streams `eval` scores, by name, and one line saying which text that is. Without --data, the
    corpus the checkpoint was trained on when it is on this machine, else the built-in story (shipped
    with the repository, never trained on); a --data file of one story is scored whole."""
    import torch

    from lpos import settings
    from lpos.analysis.counts import listed
    from lpos.corpus import STORY_PATH, corpus_files, data_dir, load_corpus, read_stories, story, training_seed
    from lpos.tokenizer import END_OF_TEXT_ID, encode

    files = data or [str(f) for f in corpus_files(meta)]
    missing = [f for f in files if not Path(f).is_file()]
    if data and missing:
        raise ValueError(f"{missing[0]}: no such file (--data takes corpus files)")
    if not files or missing:
        why = "records no corpus" if not files else (
            f"was trained on {listed([Path(f).name for f in files])}, not found in {data_dir()} (set {settings.DATA_DIR} "
            "to the folder that holds them)")
        ids = torch.tensor(encode(story()), dtype=torch.long)
        return ({"the built-in story": ids},
                f"the checkpoint {why}: scoring the built-in story ({STORY_PATH.name}, {len(ids):,} tokens, never "
                "trained on); pass --data FILE... for another text")
    stories, _ = read_stories(files)
    if len(stories) < 2:  # one text: nothing to hold out, so score all of it
        ids = torch.tensor([t for text, _ in stories for t in encode(text) + [END_OF_TEXT_ID]][:-1], dtype=torch.long)
        return {f"all of {Path(files[0]).name}": ids}, f"scoring the whole of {', '.join(files)} ({len(ids):,} tokens)"
    corpus = load_corpus(files, seed=training_seed(meta))
    return ({"all held-out stories": corpus.val, "held-out TinyStories stories": corpus.val_tinystories},
            f"scoring the held-out stories of {', '.join(files)}")


def run_eval(args) -> int:
    from lpos import checkpoints
    from lpos.analysis import length_losses

    model, meta = checkpoints.load(args.checkpoint)
    streams, said = eval_streams(meta, args.data)
    results = {name: length_losses(model, stream, lengths=args.lengths) for name, stream in streams.items() if len(stream)}
    if args.json:
        print(json.dumps({"text": said, **results}, indent=2))
        return 0
    print(f"{args.checkpoint}: {model.config.position}; {said}")
    for name, by_length in results.items():
        print(f"{name} ({len(streams[name]):,} tokens):")
        for length, result in by_length.items():
            shown = f"{result['loss']:.4f}" if result["loss"] is not None else result["note"]
            print(f"  length {length:>5}: {shown}")
    return 0


REBUILD_LINE = "`checkpoints/rebuild.sh` ran "


def keep_rebuild_line(card: str, old: Path) -> tuple[str, bool]:
    """`card` with the old card's measured rebuild-time line when the new one has none (no
    --rebuild-seconds): a measurement is not thrown away by rewriting the card. True when kept."""
    if REBUILD_LINE in card or not old.is_file():
        return card, False
    measured = [line for line in old.read_text(encoding="utf-8").splitlines() if line.startswith(REBUILD_LINE)]
    lines = card.splitlines()
    anchor = next((i for i, line in enumerate(lines) if line.startswith("Machine: ")), None)
    if not measured or anchor is None:
        return card, False
    lines.insert(anchor + 1, measured[0])
    return "\n".join(lines) + ("\n" if card.endswith("\n") else ""), True


def run_card(args) -> int:
    from lpos.card import model_card

    card = model_card(rebuild_seconds=args.rebuild_seconds, rebuilt_models=args.rebuild_models, folder=args.checkpoints)
    card, kept = keep_rebuild_line(card, Path(args.out))
    Path(args.out).write_text(card)
    print(f"wrote {args.out}" + ("; kept its measured rebuild time (pass --rebuild-seconds to replace it)" if kept else ""))
    return 0


def run_precompute(args) -> int:
    from lpos import checkpoints
    from lpos.checkpoints import cards
    from lpos.precomputed import VIEWS, precompute

    unknown = [name for name in args.names if name not in checkpoints.available()]
    if unknown:
        raise ValueError(f"no shipped checkpoint named {', '.join(unknown)}: use {checkpoints.available()}")
    chosen = VIEWS if not args.views else tuple(view for view in VIEWS if view.name in args.views)
    if args.views and len(chosen) != len(set(args.views)):
        raise ValueError(f"unknown view in {args.views}: use {[view.name for view in VIEWS]}")
    written = [] if args.cards_only else precompute(args.names or None, views=chosen)
    for path in [*written, cards.write_cards()]:  # every shipped model's card, whichever views were asked
        print(f"wrote {path} ({path.stat().st_size / 2**20:.1f} MB)")
    return 0
