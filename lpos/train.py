"""Training: corpus -> token streams -> a GPT of any scheme -> an lpos checkpoint.

The corpus (lpos.corpus) is UTF-8 text in which a line `<|endoftext|>` separates stories; whole
stories are held out for validation. The softmax runs over the tokens
the training stories use (`model.output_vocab`), so rows of tokens that never occur get no
gradient at all and stay bit-identical to their initial values.

Batch i is drawn from a generator seeded by (seed, i), so a run is deterministic, `--resume`
continues with exactly the same data, and under torchrun each of N processes takes its slice of
the same global batch; gradients are averaged with all_reduce, so N processes compute the same
update as one process with the whole batch.
"""
from __future__ import annotations

import dataclasses
import math
import os
import platform
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.distributed as dist
from tqdm import tqdm

from lpos import checkpoints, snapshots
from lpos.analysis import length_losses, unigram_loss
from lpos.corpus import SHIPPED_SEED, Corpus, load_corpus
from lpos.model import GPT, GPTConfig, seeded_model
from lpos.positions import DEFAULT_SCHEME, scheme_info

EVAL_LENGTHS = (64, 128, 256, 512, 1024)


@dataclass(frozen=True)
class TrainArgs:
    scheme: str = DEFAULT_SCHEME
    data: tuple[str, ...] = ()
    out: str = "checkpoints/model.pt"
    steps: int = 1100
    batch_size: int = 32  # global batch, sequences of block_size tokens
    lr: float = 3e-3
    min_lr_fraction: float = 0.1
    warmup: int = 100
    weight_decay: float = 0.1
    # The learned table starts 10x smaller than GPT-2's N(0, 0.02): the initial noise would
    # otherwise outweigh what ~1,000 steps can write, and the trained table stays noisy.
    wpe_init_std: float = 0.002
    seed: int = SHIPPED_SEED
    n_layer: int = 4
    n_head: int = 4
    n_embd: int = 128
    block_size: int = 128
    # The longest training window (None: block_size). Shorter windows, more of them, the same tokens
    # per step: rows of the learned table at and after max_length then never receive a gradient.
    max_length: int | None = None
    # Randomized positions (Ruoss et al. 2023): a table of this many rows, each window reading a sorted
    # random subset of them (lpos.positions.learned); None: rows 0..T-1.
    random_positions: int | None = None
    save_every: int = 100
    eval_lengths: tuple[int, ...] = EVAL_LENGTHS
    resume: bool = False
    threads: int = 0  # torch threads; 0 = torch's default. Results are bit-identical only for the same count.


def window_shape(args: TrainArgs) -> tuple[int, int]:
    """(windows per global batch, tokens per window): batch_size × block_size tokens a step, in
    windows of max_length tokens when it is set."""
    length = args.block_size if args.max_length is None else args.max_length  # 0 is refused, not the default
    if not 2 <= length <= args.block_size:
        raise ValueError(f"--max-length must be between 2 and the block size ({args.block_size}), got {length}")
    if (args.batch_size * args.block_size) % length:
        raise ValueError(f"--max-length {length} must divide the {args.batch_size * args.block_size} tokens of a step")
    return args.batch_size * args.block_size // length, length


def batch(stream: torch.Tensor, step: int, args: TrainArgs, rank: int = 0, world: int = 1):
    """This process's slice of global batch `step`: inputs and next-token targets (b, T)."""
    count, length = window_shape(args)
    g = torch.Generator().manual_seed(args.seed * 1_000_003 + step)
    starts = torch.randint(0, len(stream) - length - 1, (count,), generator=g)
    per_rank = count // world
    starts = starts[rank * per_rank : (rank + 1) * per_rank]
    windows = torch.stack([stream[s : s + length + 1] for s in starts.tolist()])  # (b, T+1)
    return windows[:, :-1], windows[:, 1:]


def window_positions(step: int, args: TrainArgs, rank: int = 0, world: int = 1) -> torch.Tensor | None:
    """With random_positions L, the positions of this process's windows of batch `step` (b, T): for each
    window a sorted random subset of the table's L rows, from a generator of their own seeded by
    (seed, step), so the batches themselves are those of any other run. None without."""
    if args.random_positions is None:
        return None
    count, length = window_shape(args)
    g = torch.Generator().manual_seed((args.seed * 1_000_003 + step) * 2 + 1)
    drawn = torch.stack([torch.randperm(args.random_positions, generator=g)[:length].sort().values for _ in range(count)])
    per_rank = count // world
    return drawn[rank * per_rank : (rank + 1) * per_rank]


def learning_rate(step: int, args: TrainArgs) -> float:
    if step < args.warmup:
        return args.lr * (step + 1) / args.warmup
    progress = (step - args.warmup) / max(1, args.steps - args.warmup)
    floor = args.lr * args.min_lr_fraction
    return floor + 0.5 * (args.lr - floor) * (1 + math.cos(math.pi * progress))


def make_optimizer(model: GPT, args: TrainArgs) -> torch.optim.AdamW:
    # The token table gets no weight decay: decay would move rows that never receive a gradient,
    # and a token absent from training must keep its initial row exactly. The position table is
    # decayed like any matrix: every one of its rows is used in every batch, and decay wears down
    # the part of the initial noise that gradients do not explain. A scheme whose own weights learn at
    # another rate (`learning_rate_scale`) gets a group of its own, without decay; each group's
    # "scale" multiplies the schedule's rate (train's loop).
    scheme, scaled = model.scheme, []
    if scheme.learning_rate_scale != 1.0:
        with torch.device("meta"):  # only the names of the scheme's modules, nothing allocated
            own = set(scheme.model_parameters(model.config)) | set(scheme.layer_parameters(model.config))
        scaled = [p for n, p in model.named_parameters() if set(n.split(".")) & own]
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2 and "wte" not in n and not any(p is q for q in scaled)]
    no_decay = [p for n, p in model.named_parameters() if not any(p is q for q in decay + scaled)]
    groups = [{"params": decay, "weight_decay": args.weight_decay, "scale": 1.0},
              {"params": no_decay, "weight_decay": 0.0, "scale": 1.0}]
    if scaled:
        groups.append({"params": scaled, "weight_decay": 0.0, "scale": scheme.learning_rate_scale})
    return torch.optim.AdamW(groups, lr=args.lr, betas=(0.9, 0.95))


def initial_model(args: TrainArgs) -> GPT:
    """The model as training starts it: seeded, with the learned table drawn at wpe_init_std."""
    rows = args.random_positions or args.block_size
    config = GPTConfig(block_size=rows, n_layer=args.n_layer, n_head=args.n_head, n_embd=args.n_embd,
                       position=args.scheme, init_seed=args.seed, random_positions=args.random_positions is not None)
    return seeded_model(config, seed=args.seed, wpe_init_std=args.wpe_init_std)


@dataclass
class Run:
    """What a training run carries from step to step (and what `--resume` restores)."""
    model: GPT
    optimizer: torch.optim.AdamW
    start: int = 0  # the first step this process runs
    elapsed: float = 0.0  # seconds spent before `start` (a resumed run's earlier part)
    taken: list[dict] = dataclasses.field(default_factory=list)  # the timeline's snapshots so far
    seen: torch.Tensor | None = None  # how often each token was a batch input

    def save(self, path: Path, step: int, seconds: float) -> None:
        """The resume file after `step` steps; a kill mid-write must not spoil the last good one."""
        partial = path.with_suffix(".tmp")
        torch.save({"model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(), "step": step,
                    "elapsed": seconds, "snapshots": self.taken, "seen": self.seen}, partial)
        partial.replace(path)


def check_args(args: TrainArgs, world: int) -> None:
    """Refuse, before any work, the settings a run cannot honour."""
    windows, length = window_shape(args)
    if args.random_positions is not None:
        if not scheme_info(args.scheme).has_table:
            raise ValueError(f"--random-positions samples the rows of a table; {args.scheme} has none")
        if args.random_positions < length:
            raise ValueError(f"--random-positions {args.random_positions} must be at least the window length {length}")
    if windows % world:
        raise ValueError(f"the {windows} windows of a step must be divisible by the {world} processes")


def start_run(args: TrainArgs, counts: Counter, resume_path: Path) -> Run:
    """The seeded model (its softmax over the tokens training uses) and its optimizer, or, with
    `--resume` and a resume file, both as that file left them."""
    model = initial_model(args)
    model.output_vocab = torch.tensor(sorted(counts), dtype=torch.long)
    run = Run(model, make_optimizer(model, args), seen=torch.zeros(model.config.vocab_size, dtype=torch.long))
    if args.resume and resume_path.exists():
        state = torch.load(resume_path, map_location="cpu", weights_only=True)
        model.load_state_dict(state["model"])
        run.optimizer.load_state_dict(state["optimizer"])
        run.start, run.elapsed, run.taken, run.seen = state["step"], state["elapsed"], state["snapshots"], state["seen"]
    return run


def train_step(run: Run, x: torch.Tensor, y: torch.Tensor, step: int, args: TrainArgs, rank: int, world: int) -> torch.Tensor:
    """One optimizer step on this process's batch; gradients averaged over the processes. The loss."""
    model, optimizer = run.model, run.optimizer
    run.seen += torch.bincount(x.reshape(-1), minlength=model.config.vocab_size)
    for group in optimizer.param_groups:
        group["lr"] = learning_rate(step, args) * group["scale"]
    loss = model.vocab_loss(x, y, positions=window_positions(step, args, rank, world))
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    if world > 1:
        for p in model.parameters():
            if p.grad is not None:
                dist.all_reduce(p.grad)
                p.grad /= world
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    return loss


def train(args: TrainArgs, corpus: Corpus | None = None, *, progress: bool = True) -> tuple[GPT, dict]:
    """Train one model; returns it with its meta (and writes `args.out`). Under torchrun each process
    runs its slice of every batch; process 0 takes the snapshots and writes the files."""
    world, rank = int(os.environ.get("WORLD_SIZE", "1")), int(os.environ.get("RANK", "0"))
    if world > 1 and not dist.is_initialized():
        dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
    check_args(args, world)
    if args.threads:
        torch.set_num_threads(args.threads)
    corpus = corpus or load_corpus(list(args.data), seed=args.seed)
    counts = Counter(corpus.train.tolist())
    resume_path = Path(str(args.out) + ".resume.pt")
    resume_path.parent.mkdir(parents=True, exist_ok=True)
    run = start_run(args, counts, resume_path)
    schedule = set(snapshots.snapshot_steps(args.steps))
    probe_x, probe_y = snapshots.eval_windows(held_out_focus(corpus), args.block_size)

    bar = tqdm(range(run.start, args.steps), initial=run.start, total=args.steps, disable=not progress or rank != 0,
               unit="step", dynamic_ncols=True)
    began = time.perf_counter() - run.elapsed
    run.model.train()
    for step in bar:
        if rank == 0 and step in schedule:
            run.taken.append(snapshots.take(run.model, step, probe_x, probe_y))
        loss = train_step(run, *batch(corpus.train, step, args, rank, world), step, args, rank, world)
        if progress and rank == 0:
            tokens = (step + 1 - run.start) * args.batch_size * args.block_size
            bar.set_postfix(loss=f"{loss.item():.3f}", tok_s=f"{tokens / max(time.perf_counter() - began - run.elapsed, 1e-9):,.0f}")
        if rank == 0 and (step + 1) % args.save_every == 0 and step + 1 < args.steps:
            run.save(resume_path, step + 1, time.perf_counter() - began)
    wall = time.perf_counter() - began
    run.model.eval()
    meta = {}
    if rank == 0:
        if args.steps in schedule and (not run.taken or run.taken[-1]["step"] != args.steps):
            run.taken.append(snapshots.take(run.model, args.steps, probe_x, probe_y))
        meta = finished_meta(run, corpus, args, counts, wall=wall, world=world, eval_tokens=probe_y.numel())
        checkpoints.save(run.model, meta, args.out)
        resume_path.unlink(missing_ok=True)
    if world > 1:
        dist.barrier()
    return run.model, meta


def finished_meta(run: Run, corpus: Corpus, args: TrainArgs, counts: Counter, *, wall: float, world: int,
                  eval_tokens: int) -> dict:
    """The checkpoint's meta: the run described, its timeline and how often each token was an input."""
    meta = describe(run.model, corpus, args, counts, steps=args.steps, wall=wall, world=world)
    meta["timeline"] = snapshots.timeline(run.taken, eval_tokens=eval_tokens)
    meta["batch_token_counts"] = {int(t): int(run.seen[t]) for t in run.seen.nonzero().flatten()}
    return meta


def held_out_focus(corpus: Corpus) -> torch.Tensor:
    """The held-out TinyStories stories, or all held-out text for a corpus without them."""
    return corpus.val_tinystories if len(corpus.val_tinystories) > 1 else corpus.val


def describe(model: GPT, corpus: Corpus, args: TrainArgs, counts: Counter, *, steps: int, wall: float, world: int) -> dict:
    losses = length_losses(model, corpus.val, lengths=args.eval_lengths)
    focus = length_losses(model, held_out_focus(corpus), lengths=args.eval_lengths)
    return {
        "corpus_sha256": corpus.sha256,
        "data_files": [Path(p).name for p in args.data],
        "stories": corpus.n_stories,
        "val_stories": corpus.n_val_stories,
        "train_tokens_available": len(corpus.train),
        "val_tokens": len(corpus.val),
        "tokens_trained": steps * args.batch_size * args.block_size,
        "steps": steps,
        "wall_seconds": round(wall, 1),
        "processes": world,
        "torch_threads": torch.get_num_threads(),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPU cores, torch {torch.__version__}",
        "val_loss": losses[args.block_size]["loss"] if args.block_size in losses else None,
        "loss_by_length": losses,
        "val_tokens_tinystories": len(corpus.val_tinystories),
        "val_loss_tinystories": focus[args.block_size]["loss"] if args.block_size in focus else None,
        "loss_by_length_tinystories": focus,
        "unigram_val_loss": unigram_loss(counts, corpus.val),
        "val_oov_share": float((~torch.isin(corpus.val, model.output_vocab)).float().mean()),
        "vocab_trained": len(counts),
        "token_counts": {int(k): int(v) for k, v in counts.items()},
        "scheme_learning_rate_scale": model.scheme.learning_rate_scale,
        "train_args": {k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(args).items()},
    }
