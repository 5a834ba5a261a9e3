"""Randomized positions for the learned table (Ruoss et al. 2023; lpos/positions/learned.py): at
evaluation a fixed sorted subset of the table's rows, a prefix offset reading the tail of a longer
draw, no cache continuation; in training a new sorted subset per window, the same for the same step;
and the CLI that trains one (refused for a scheme without a table)."""
from __future__ import annotations

import subprocess
import sys

import pytest
import torch
from conftest import ROOT
from torch.testing import assert_close

from lpos.checkpoints import load
from lpos.kv_cache import KVCache
from lpos.model import GPT, GPTConfig
from lpos.train import TrainArgs, window_positions

ROWS = 1024


def randomized(**config) -> GPT:
    torch.manual_seed(0)
    return GPT(GPTConfig(position="learned", random_positions=True, block_size=ROWS, n_layer=1, n_head=2,
                         n_embd=16, vocab_size=96, **config)).eval()


def positions(model: GPT, T: int, offset: int = 0) -> torch.Tensor:
    return model.scheme.input_positions(model.config, T, offset)


def ids(T: int, seed: int = 0) -> torch.Tensor:
    return torch.randint(0, 96, (1, T), generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("T", [1, 2, 17, 128, 700, ROWS])
def test_evaluation_positions_are_a_fixed_sorted_subset(T):
    model = randomized()
    drawn = positions(model, T)
    assert drawn.shape == (T,) and drawn.dtype == torch.long
    assert (drawn.diff() > 0).all(), "sorted and distinct"
    assert 0 <= int(drawn.min()) and int(drawn.max()) < ROWS
    assert torch.equal(drawn, positions(model, T)) and torch.equal(drawn, positions(randomized(), T))
    if T == ROWS:
        assert torch.equal(drawn, torch.arange(ROWS))  # every row, in order
    if 128 <= T < ROWS:
        assert not torch.equal(drawn, torch.arange(T)), "not the plain rows 0..T-1"
        assert int(drawn.max()) > T  # spread over the table, not packed at its start


def test_the_model_reads_its_table_at_those_positions():
    model = randomized()
    x = ids(50)
    parts = model.embed_parts(x)
    assert_close(parts.position, model.transformer.wpe.weight[positions(model, 50)], rtol=0, atol=0)
    plain = GPT(GPTConfig(position="learned", block_size=ROWS, n_layer=1, n_head=2, n_embd=16, vocab_size=96))
    plain.load_state_dict(model.state_dict())
    assert_close(plain.embed_parts(x).position, model.transformer.wpe.weight[:50], rtol=0, atol=0)


def test_another_position_seed_draws_other_positions():
    assert not torch.equal(positions(randomized(), 64), positions(randomized(position_seed=1), 64))


@pytest.mark.parametrize("offset, T", [(1, 10), (100, 28), (500, 524), (1023, 1)])
def test_an_offset_reads_the_tail_of_the_longer_draw(offset, T):
    model = randomized()
    tail = positions(model, T, offset)
    assert torch.equal(tail, positions(model, offset + T)[offset:])
    x = ids(T, seed=3)
    assert_close(model.embed_parts(x, offset=offset).position, model.transformer.wpe.weight[tail], rtol=0, atol=0)
    with torch.no_grad():
        logits, _ = model(x, offset=offset)
    assert logits.shape == (1, T, 96) and torch.isfinite(logits).all()


def test_1024_tokens_are_read_and_1025_refused():
    model = randomized()
    assert model.max_input_length == ROWS
    with torch.no_grad():
        logits, _ = model(ids(ROWS))
    assert logits.shape == (1, ROWS, 96)
    with pytest.raises(ValueError, match="1024 rows; this sequence has 1025 tokens"):
        model(ids(ROWS + 1))
    with pytest.raises(ValueError, match="needs 1025 rows"):
        model(ids(25), offset=1000)


def test_a_cache_cannot_continue_it():
    model = randomized()
    assert model.caches_positions is False
    cache = KVCache(model.config.n_layer)
    with torch.no_grad():
        model(ids(8), cache=cache)  # the first chunk fills the cache
        with pytest.raises(ValueError, match="a cache cannot continue it"):
            model(ids(1, seed=1), cache=cache)
    plain = GPT(GPTConfig(position="learned", n_layer=1, n_head=2, n_embd=16, vocab_size=96))
    assert plain.caches_positions is True


def train_args(**changes) -> TrainArgs:
    return TrainArgs(**{**dict(random_positions=256, block_size=128, batch_size=4, seed=7), **changes})


def test_training_windows_draw_sorted_positions_of_their_own():
    args = train_args()
    drawn = window_positions(3, args)
    assert drawn.shape == (4, 128) and drawn.dtype == torch.long
    assert (drawn.diff(dim=1) > 0).all() and int(drawn.min()) >= 0 and int(drawn.max()) < 256
    assert len({tuple(row.tolist()) for row in drawn}) == 4, "each window its own subset"
    assert torch.equal(drawn, window_positions(3, args)), "the same step draws the same positions"
    assert not torch.equal(drawn, window_positions(4, args))
    assert not torch.equal(drawn, window_positions(3, train_args(seed=8)))
    halves = [window_positions(3, args, rank, 2) for rank in (0, 1)]  # two processes split the same draw
    assert torch.equal(torch.cat(halves), drawn)
    shorter = window_positions(3, train_args(max_length=32))  # 16 windows of 32 tokens
    assert shorter.shape == (16, 32) and (shorter.diff(dim=1) > 0).all()
    assert window_positions(3, train_args(random_positions=None)) is None


def test_over_many_steps_every_row_is_drawn():
    args = train_args()
    seen = torch.cat([window_positions(step, args).flatten() for step in range(10)]).unique()
    assert torch.equal(seen, torch.arange(256))


def train_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lpos", "train", "--steps", "2", "--threads", "1", "--batch-size", "2",
                           "--no-progress", *args], cwd=ROOT, capture_output=True, text=True, timeout=120)


@pytest.mark.slow
def test_the_cli_trains_a_randomized_table(small_stories, tmp_path):
    out = tmp_path / "rand.pt"
    done = train_cli("--scheme", "learned", "--random-positions", "256", "--data", str(small_stories),
                     "--out", str(out))
    assert done.returncode == 0, done.stderr[-2000:]
    model, meta = load(out)
    assert model.config.position == "learned" and model.config.random_positions
    assert model.config.block_size == 256 and model.transformer.wpe.weight.shape == (256, 128)
    assert meta["steps"] == 2
    assert model.max_input_length == 256 and not model.caches_positions


def test_the_cli_refuses_random_positions_without_a_table(small_stories, tmp_path):
    done = train_cli("--scheme", "rope", "--random-positions", "256", "--data", str(small_stories),
                     "--out", str(tmp_path / "rope.pt"))
    assert done.returncode == 2, done.stderr[-2000:]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert lines[0] == "error: --random-positions samples the rows of a table; rope has none"
    assert not (tmp_path / "rope.pt").exists()
