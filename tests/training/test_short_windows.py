"""Training on windows shorter than the table (`--max-length L`): rows >= L of the learned table get
no gradient, so weight decay is all that moves them (a scale, exactly prod(1 - lr_t * wd)), rows < L
train; the option is refused outside 2..block_size; lpos.analysis.coverage measures it."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

import lpos.analysis.lengths
import lpos.train
from lpos import checkpoints
from lpos.analysis import coverage
from lpos.cli import main
from lpos.train import initial_model, learning_rate, train, window_shape
from test_train import corpus, corpus_file, tiny_args  # noqa: F401  (fixtures)

LIMIT = 4  # tiny_args has block_size 16: rows 4..15 never trained


@pytest.fixture(scope="module")
def short_run(tmp_path_factory, corpus_file, corpus):  # noqa: F811
    args = tiny_args(tmp_path_factory.mktemp("short"), corpus_file, steps=8, max_length=LIMIT)
    model, meta = train(args, corpus, progress=False)
    return args, model, meta


def decay_factor(args) -> float:
    """What AdamW's decoupled weight decay alone does to a row over the run: prod(1 - lr_t * wd)."""
    factor = torch.tensor(1.0, dtype=torch.float64)
    for step in range(args.steps):
        factor *= 1 - learning_rate(step, args) * args.weight_decay
    return float(factor)


def test_windows_are_shorter_and_as_many_tokens(corpus_file, corpus, tmp_path):  # noqa: F811
    args = tiny_args(tmp_path, corpus_file, max_length=LIMIT)
    assert window_shape(args) == (4 * 16 // LIMIT, LIMIT)
    x, y = lpos.train.batch(corpus.train, 3, args)
    assert x.shape == y.shape == (16, LIMIT) and x.numel() == args.batch_size * args.block_size
    assert torch.equal(x, lpos.train.batch(corpus.train, 3, args)[0])  # batch i is the same every time
    halves = [lpos.train.batch(corpus.train, 3, args, rank, 2)[0] for rank in (0, 1)]
    assert torch.equal(torch.cat(halves), x)  # two processes split the same global batch


def test_rows_past_the_window_only_decay(short_run):
    args, model, meta = short_run
    start = initial_model(dataclasses.replace(args, max_length=None)).transformer.wpe.weight.detach()
    end = model.transformer.wpe.weight.detach()
    factor = decay_factor(args)
    assert 0.99 < factor < 1  # decay is on for the table, and small over 8 steps
    torch.testing.assert_close(end[LIMIT:].double(), start[LIMIT:].double() * factor, rtol=1e-6, atol=0)
    moved = (end[:LIMIT].double() - start[:LIMIT].double() * factor).abs().amax(dim=1)
    assert (moved > 1e-4).all()  # every trained row moved beyond decay's scale, by far more than rounding
    assert meta["train_args"]["max_length"] == LIMIT
    assert meta["tokens_trained"] == args.steps * args.batch_size * args.block_size


def test_full_windows_train_every_row(corpus_file, corpus, tmp_path):  # noqa: F811
    args = tiny_args(tmp_path, corpus_file, steps=3)
    model, _ = train(args, corpus, progress=False)
    start = initial_model(args).transformer.wpe.weight.detach().double()
    moved = (model.transformer.wpe.weight.detach().double() - start * decay_factor(args)).abs().amax(dim=1)
    assert (moved > 1e-4).all()


@pytest.mark.parametrize("length", [1, 17, 0, -3])
def test_out_of_range_is_refused(tmp_path, corpus_file, length):  # noqa: F811
    with pytest.raises(ValueError, match="between 2 and the block size"):
        window_shape(tiny_args(tmp_path, corpus_file, max_length=length))


def test_cli_refuses_with_a_message(tmp_path, corpus_file, capsys):  # noqa: F811
    code = main(["train", "--scheme", "learned", "--data", str(corpus_file), "--out", str(tmp_path / "m.pt"),
                 "--steps", "1", "--block-size", "16", "--max-length", "32", "--no-progress"])
    assert code == 2
    assert "--max-length must be between 2 and the block size (16), got 32" in capsys.readouterr().err
    assert not (tmp_path / "m.pt").exists()


def test_coverage_analysis_measures_the_decay(short_run):
    args, model, meta = short_run
    assert coverage.trained_rows(meta, model) == LIMIT
    start, source = coverage.starting_table(meta, model)
    assert source.startswith("rebuilt")  # the seed rebuilds the step-0 snapshot exactly
    assert np.array_equal(start, initial_model(args).transformer.wpe.weight.detach().numpy())
    drift = coverage.row_drift(model, meta)
    untrained = drift.rows[~drift.rows.trained]
    assert list(untrained.position) == list(range(LIMIT, 16))
    assert np.allclose(untrained.norm_ratio, decay_factor(args), rtol=1e-6)
    assert (untrained.cosine > 1 - 1e-9).all()
    assert (drift.rows[drift.rows.trained].cosine < untrained.cosine.min()).all()
    reading = coverage.drift_reading(drift)
    assert reading[1].startswith(f"**Rows {LIMIT}–15**, never read in training (windows of at most {LIMIT} tokens)")
    assert "direction kept (cosine with the step-0 row: 1.000)" in reading[1]
    assert f"length shrunk to ×{decay_factor(args):.3f} of the step-0 length" in reading[1]
    assert "**Rows 0–3**, read in every training batch" in reading[0]
    only_trained = coverage.drift_summary(drift, upto=LIMIT)
    assert only_trained["untrained"] is None and only_trained["trained"]["count"] == LIMIT


def test_full_window_model_has_no_coverage_limit(corpus_file, corpus, tmp_path):  # noqa: F811
    args = tiny_args(tmp_path, corpus_file, steps=1)
    model, meta = train(args, corpus, progress=False)
    assert coverage.trained_rows(meta, model) is None and coverage.row_drift(model, meta) is None


@pytest.mark.filterwarnings("ignore:Mean of empty slice")  # positions with no in-vocabulary target
def test_loss_by_position_is_the_mean_over_windows(short_run, corpus):  # noqa: F811
    _, model, _ = short_run
    stream = corpus.val
    curve = coverage.loss_by_position(model, stream, length=16, max_windows=2)
    assert curve.shape == (16,)
    by_hand = torch.stack([lpos.analysis.lengths.token_losses(model, stream[i * 16:(i + 1) * 16 + 1]) for i in range(2)])
    assert np.allclose(curve, np.nanmean(by_hand.numpy(), axis=0), equal_nan=True)
    with pytest.raises(ValueError, match="one window needs 17"):
        coverage.loss_by_position(model, stream[:10], length=16)
    reading = coverage.position_loss_reading({"short": curve, "full": curve + 0.5}, short="short", full="full",
                                                   trained=LIMIT, windows=2)
    assert f"at positions 0–{LIMIT - 1}" in reading and "(-0.50)" in reading and "no wider there" in reading


def test_shipped_labels_say_what_the_files_are():
    from lpos.ui.models import SHIPPED_LABELS

    for name, text in SHIPPED_LABELS.items():
        if name in checkpoints.available():
            model, meta = checkpoints.load(name)
            assert text == f"{model.config.position}, trained on windows of ≤ {meta['train_args']['max_length']} tokens"


@pytest.mark.skipif("learned-32" not in checkpoints.available(),
                    reason="checkpoints/learned-32.pt is not shipped")
def test_shipped_short_window_rows_only_decayed():
    model, meta = checkpoints.load("learned-32")
    args = lpos.train.TrainArgs(**{k: tuple(v) if isinstance(v, list) else v for k, v in meta["train_args"].items()})
    drift = coverage.row_drift(model, meta)
    assert drift.trained_rows == 32 and drift.source.startswith("rebuilt")
    untrained = drift.rows[~drift.rows.trained]
    # the file holds float16 weights: decay's factor to float16's precision, and no turn at all
    assert np.allclose(untrained.norm_ratio, decay_factor(args), rtol=2e-3)
    assert (untrained.cosine > 0.99999).all()
    assert (drift.rows[drift.rows.trained].cosine < 0.9).all()


@pytest.mark.skipif("learned-32" not in checkpoints.available(), reason="checkpoints/learned-32.pt is not shipped")
def test_card_describes_the_short_window_model():
    from lpos.card import model_card

    card = model_card(rebuild_seconds=4170.0, rebuilt_models=5)
    model, meta = checkpoints.load("learned-32")
    assert f"| learned-32 | {meta['val_loss_tinystories']:.3f} | {meta['val_loss']:.3f} |" in card
    assert "## learned-32: the learned table's second limit" in card
    assert "windows of at most 32 tokens (`--max-length 32`): 128 windows of 32 tokens a step instead of 32 of 128" in card
    for line in coverage.drift_reading(coverage.row_drift(model, meta)):
        assert f"- {line}" in card
    assert ("ran learned, sinusoidal, rope, alibi, none as two one-thread lanes side by side and took 69.5 minutes"
            in card and "learned-32 trained after that measurement (its section below says how)." in card)
    assert "--scheme learned --max-length 32 --data" in card and "--out checkpoints/learned-32.pt" in card
