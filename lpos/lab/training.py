"""The lab's training run: a tiny GPT of any registered scheme on one task, with progress, caps and snapshots.

`train(args)` builds the model (the task's vocabulary, a block of `window` positions), trains it with AdamW on
the task's scored tokens, reports progress at most every `PROGRESS_SECONDS` (loss, accuracy, the scheme's
picture), keeps the Training timeline's snapshots, and stops at its last step, when asked (`should_stop`), or
at a cap (steps, wall seconds, memory), saying which. The model goes out with the meta an lpos checkpoint
carries: its tokenizer, its timeline and `meta["lab"]` (the run: task, window, accuracy by length, curve).
"""
from __future__ import annotations

import functools
import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

import torch

from lpos import snapshots
from lpos.lab.measure import Picture, accuracy_by_length, evaluation_batch, loss_and_accuracy, scheme_picture
from lpos.lab.tasks import LETTERS, PAD, TASKS, TEXT, check_task
from lpos.lab.text import TextTask
from lpos.model import GPT, GPTConfig, seeded_model
from lpos.positions import DEFAULT_SCHEME, SCHEMES, check_scheme
from lpos.resident import memory_mb
from lpos.tokenizer import GPT2
from lpos.vocab.characters import CharacterTokenizer

PROGRESS_SECONDS = 0.5  # the longest wait between two progress reports
MEMORY_CHECK_STEPS = 25  # steps between two reads of the process's memory
WARMUP = 50
WPE_INIT_STD = 0.002  # the learned table starts small, as the shipped models' (lpos.train)


@dataclass(frozen=True)
class Preset:
    name: str
    n_layer: int
    n_head: int
    n_embd: int
    batch_size: int
    lr: float
    description: str


PRESETS = {preset.name: preset for preset in (
    Preset("tiny", 2, 4, 64, 32, 3e-3, "2 layers, 4 heads, width 64: trains in seconds"),
    Preset("shipped", 4, 4, 128, 32, 3e-3, "4 layers, 4 heads, width 128: the shipped models' size"),
)}


@dataclass(frozen=True)
class LabArgs:
    task: str = "copy"
    scheme: str = DEFAULT_SCHEME
    window: int = 32  # the training window, in tokens
    preset: str = "tiny"
    steps: int = 2000  # copy at window 32, tiny: rope was at 84% at its window after 1,500 steps
    seed: int = 0
    text: str | None = None  # the text task's text; None: the built-in story
    text_source: str = "the built-in story"  # what the page calls that text

    def __post_init__(self) -> None:
        check_task(self.task)
        check_scheme(self.scheme)
        if self.preset not in PRESETS:
            raise ValueError(f"unknown lab size {self.preset!r}; choose one of {sorted(PRESETS)}")
        if not 8 <= self.window <= 256:
            raise ValueError(f"the window must be between 8 and 256 tokens, got {self.window}")
        if self.steps < 1:
            raise ValueError(f"steps must be 1 or more, got {self.steps}")

    @property
    def name(self) -> str:
        """What the sidebar and the download call the run: lab-<scheme>-<task>-<window>."""
        return f"lab-{self.scheme}-{self.task}-{self.window}"

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Caps:
    """Where a run is stopped whatever it asked: steps, wall seconds, and the memory (MB) the run takes: what its
    process holds beyond what it held when the run began (a worker of its own, or the CLI, or any process that
    already holds other models)."""
    max_steps: int = 5000
    max_seconds: float = 300.0
    max_memory_mb: int = 2048


@dataclass
class Progress:
    step: int
    steps: int
    seconds: float
    curve: list[dict] = field(default_factory=list)  # {"step", "loss", "accuracy", "seconds"} per report
    picture: Picture | None = None


def make_task(args: LabArgs):
    if args.task != TEXT:
        return TASKS[args.task]
    return TextTask.built_in() if args.text is None else TextTask(args.text, args.text_source)


def build_model(args: LabArgs, task) -> tuple[GPT, object]:
    """The seeded model of the run and the tokenizer it speaks."""
    preset = PRESETS[args.preset]
    text = isinstance(task, TextTask)
    tokenizer = GPT2 if text else CharacterTokenizer(list(task.characters), source=f"the lab's {task.name} task")
    config = GPTConfig(vocab_size=tokenizer.vocab_size, block_size=args.window, n_layer=preset.n_layer,
                       n_head=preset.n_head, n_embd=preset.n_embd, position=args.scheme, init_seed=args.seed)
    with torch.random.fork_rng(devices=[]):
        model = seeded_model(config, seed=args.seed, wpe_init_std=WPE_INIT_STD)
    if text:
        model.output_vocab = task.vocabulary()  # sorted: the softmax runs over the text's tokens only
    return model, tokenizer


@functools.lru_cache(maxsize=64)
def twins(scheme: str, preset: str, window: int) -> tuple[str, ...]:
    """The other schemes whose lab model of this size and window computes exactly what `scheme`'s does (the same
    seeded weights give the same scores on a sample): a run of either gives the same numbers. The vocabulary
    plays no part, so the copy task's stands for every task's."""
    task = TASKS["copy"]
    sample = task.batch(1, min(window, 16), torch.Generator().manual_seed(0)).x

    def scores(name: str) -> tuple[torch.Tensor, dict]:
        model, _ = build_model(LabArgs(scheme=name, window=window, preset=preset), task)
        with torch.no_grad():
            return model.eval()(sample)[0], {k: v.shape for k, v in model.state_dict().items()}

    own, shapes = scores(scheme)
    return tuple(other for other in SCHEMES if other != scheme
                 and (theirs := scores(other))[1] == shapes and torch.equal(theirs[0], own))


def optimizer_for(model: GPT, lr: float) -> torch.optim.AdamW:
    """AdamW without weight decay; a scheme whose own weights learn at another rate (`learning_rate_scale`)
    gets them in a group of their own, whose "scale" multiplies the schedule's rate."""
    scheme, config = model.scheme, model.config
    with torch.device("meta"):  # only the names of the scheme's modules
        own = set(scheme.model_parameters(config)) | set(scheme.layer_parameters(config))
    scaled = [p for n, p in model.named_parameters() if scheme.learning_rate_scale != 1.0 and set(n.split(".")) & own]
    rest = [p for p in model.parameters() if not any(p is q for q in scaled)]
    groups = [{"params": rest, "scale": 1.0}] + ([{"params": scaled, "scale": scheme.learning_rate_scale}] if scaled else [])
    return torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.95), weight_decay=0.0)


def learning_rate(step: int, steps: int, lr: float) -> float:
    """Linear warmup, then a cosine down to a tenth."""
    if step < WARMUP:
        return lr * (step + 1) / WARMUP
    progress = (step - WARMUP) / max(1, steps - WARMUP)
    return lr * (0.1 + 0.45 * (1 + math.cos(math.pi * progress)))


def probe_of(task) -> snapshots.Probe:
    """The timeline's probe for a task: a sample written in its characters, its letters as the probe words."""
    if isinstance(task, TextTask):
        return snapshots.STORY_PROBE
    sample = task.example()
    repeated = next(c for c in sample if sample.count(c) > 1)
    tokenizer = CharacterTokenizer(list(task.characters), source=f"the lab's {task.name} task")
    words = tuple(c for c in task.characters if c != PAD and (c in LETTERS or c in sample))
    return snapshots.Probe(sample, repeated, words, tokenizer)


def train(args: LabArgs, *, caps: Caps = Caps(), on_progress: Callable[[Progress], None] | None = None,
          should_stop: Callable[[], bool] | None = None) -> tuple[GPT, dict]:
    """Train one lab model; returns it with its checkpoint meta (meta["lab"] describes the run)."""
    task = make_task(args)
    model, tokenizer = build_model(args, task)
    preset, steps = PRESETS[args.preset], min(args.steps, caps.max_steps)
    stopped = f"stopped at the cap of {caps.max_steps:,} steps" if args.steps > caps.max_steps else None
    optimizer = optimizer_for(model, preset.lr)
    probe, schedule = probe_of(task), set(snapshots.snapshot_steps(steps))
    held = evaluation_batch(task, args.window)
    sample = held.x[:1]
    g = torch.Generator().manual_seed(args.seed)
    taken, curve, window_sums = [], [], [0.0, 0.0, 0]
    held_before = memory_mb()
    began = last_report = time.perf_counter()
    model.train()
    step = 0
    for step in range(steps):
        if step in schedule:
            taken.append(snapshots.take(model, step, held.x, held.y, probe=probe))
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(step, steps, preset.lr) * group["scale"]
        loss, right = loss_and_accuracy(model, task.batch(preset.batch_size, args.window, g))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        window_sums = [window_sums[0] + loss.item(), window_sums[1] + right, window_sums[2] + 1]
        now = time.perf_counter()
        reason = stop_reason(now - began, step, caps, should_stop, held_before=held_before)
        if now - last_report >= PROGRESS_SECONDS or step == steps - 1 or reason:
            curve.append({"step": step + 1, "loss": round(window_sums[0] / window_sums[2], 4),
                          "accuracy": round(window_sums[1] / window_sums[2], 4), "seconds": round(now - began, 2)})
            window_sums, last_report = [0.0, 0.0, 0], now
            if on_progress is not None:
                on_progress(Progress(step + 1, steps, now - began, list(curve), scheme_picture(model, sample)))
        if reason:
            stopped = reason
            break
    done = step + 1
    wall = time.perf_counter() - began
    model.eval()
    taken.append(snapshots.take(model, done, held.x, held.y, probe=probe))
    meta = {
        "tokenizer": tokenizer, "steps": done, "wall_seconds": round(wall, 2),
        "tokens_trained": done * preset.batch_size * args.window,
        "timeline": snapshots.timeline(taken, eval_tokens=held.y.numel(), probe=probe),
        "train_args": {"block_size": args.window, "max_length": args.window, "seed": args.seed,
                       "wpe_init_std": WPE_INIT_STD, "steps": done, "batch_size": preset.batch_size},
        "lab": {**{k: v for k, v in args.as_dict().items() if k != "text"}, "steps_done": done,
                "seconds": round(wall, 2), "stopped": stopped, "curve": curve,
                "accuracy_by_length": accuracy_by_length(model, task, args.window)},
    }
    return model, meta


def stop_reason(seconds: float, step: int, caps: Caps, should_stop: Callable[[], bool] | None, *,
                held_before: float = 0.0) -> str | None:
    """Why the run stops after this step, or None to go on (`held_before`: the process's MB when the run began)."""
    if should_stop is not None and should_stop():
        return f"stopped by the learner after {_steps(step + 1)}"
    if seconds > caps.max_seconds:
        return f"stopped at the cap of {caps.max_seconds:,.0f} seconds, after {_steps(step + 1)}"
    if step % MEMORY_CHECK_STEPS == 0 and (taken := memory_mb() - held_before) > caps.max_memory_mb:
        return (f"stopped at the memory cap of {caps.max_memory_mb:,} MB ({taken:,.0f} MB taken by the run), "
                f"after {_steps(step + 1)}")
    return None


def _steps(count: int) -> str:
    return f"{count:,} step{'s' if count != 1 else ''}"
