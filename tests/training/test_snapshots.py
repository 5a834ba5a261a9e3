"""Training snapshots: the schedule, the sizes, and that they are the model's own numbers
(step 0 is the initial model, the last step is the saved model), and the timeline analysis."""
from __future__ import annotations

import io
import math

import numpy as np
import pytest
import torch

from lpos import checkpoints, snapshots
from lpos.analysis.similarity import cosine_by_distance, mean_neighbour_distance
from lpos.analysis.timeline import band_over_time, neighbours_at, table_structure, timeline_of, timeline_reading
from lpos.train import initial_model, train
from test_train import corpus, corpus_file, tiny_args  # noqa: F401  (fixtures)


def test_schedule_is_log_spaced():
    steps = snapshots.snapshot_steps(1100)
    assert len(steps) == 16 and steps[:2] == [0, 25] and steps[-1] == 1100
    ratios = [b / a for a, b in zip(steps[1:], steps[2:])]
    assert max(ratios) / min(ratios) < 1.1  # even on a log scale, up to rounding
    assert snapshots.snapshot_steps(10) == [0, 10]
    assert snapshots.snapshot_steps(30)[0] == 0 and snapshots.snapshot_steps(30)[-1] == 30


def test_probe_words_are_single_tokens():
    assert len(snapshots.probe_ids()) == len(snapshots.PROBE_WORDS) == 40


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory, corpus_file, corpus):  # noqa: F811
    args = tiny_args(tmp_path_factory.mktemp("run"), corpus_file, steps=30)
    model, meta = train(args, corpus, progress=False)
    return args, model, meta


def test_step_zero_is_the_initial_model(tiny_run, corpus):  # noqa: F811
    args, _, meta = tiny_run
    start = initial_model(args)
    start.output_vocab = torch.tensor(sorted(set(corpus.train.tolist())))
    x, y = snapshots.eval_windows(corpus.val, args.block_size)
    expected = snapshots.take(start, 0, x, y)
    timeline = meta["timeline"]
    assert timeline["steps"][0] == 0
    assert torch.equal(timeline["position_rows"][0], start.transformer.wpe.weight.detach().half())
    assert torch.equal(timeline["attention"][0], expected["attention"])
    assert torch.equal(timeline["neighbours"][0], expected["neighbours"])
    assert timeline["val_loss"][0] == expected["val_loss"]
    assert float(start.transformer.wpe.weight.detach().std()) == pytest.approx(args.wpe_init_std, rel=0.1)


def test_last_step_is_the_saved_model(tiny_run):
    args, model, meta = tiny_run
    loaded, _ = checkpoints.load(args.out)
    timeline = meta["timeline"]
    assert timeline["steps"] == snapshots.snapshot_steps(args.steps)
    assert torch.equal(timeline["position_rows"][-1], loaded.transformer.wpe.weight.detach().half())
    ids, _ = snapshots.nearest(loaded, snapshots.probe_ids())
    # token rows are stored as float16, so a near-tie may swap; the first neighbours agree
    assert (timeline["neighbours"][-1][:, 0] == ids[:, 0]).float().mean() > 0.9
    assert timeline["val_loss"][-1] < timeline["val_loss"][0]


def test_snapshots_survive_a_resume(tmp_path, corpus_file, corpus, monkeypatch):  # noqa: F811
    whole = train(tiny_args(tmp_path / "a", corpus_file, steps=30, save_every=10), corpus, progress=False)[1]["timeline"]
    args = tiny_args(tmp_path / "b", corpus_file, steps=30, save_every=10)
    original = snapshots.take
    calls = []

    def stop_after_step_25(model, step, x, y):
        calls.append(step)
        if step == 26:
            raise KeyboardInterrupt
        return original(model, step, x, y)

    monkeypatch.setattr(snapshots, "take", stop_after_step_25)
    with pytest.raises(KeyboardInterrupt):
        train(args, corpus, progress=False)
    monkeypatch.setattr(snapshots, "take", original)
    resumed = train(dataclasses_replace(args, resume=True), corpus, progress=False)[1]["timeline"]
    assert resumed["steps"] == whole["steps"]
    for key in ("position_rows", "attention", "neighbours"):
        assert torch.equal(resumed[key], whole[key]), key


def dataclasses_replace(args, **changes):
    import dataclasses

    return dataclasses.replace(args, **changes)


def test_timeline_of_reads_the_meta(tiny_run):
    _, _, meta = tiny_run
    timeline = timeline_of(meta)
    assert len(timeline) == len(meta["timeline"]["steps"])
    assert timeline.position_kind == "table"
    frame = neighbours_at(timeline, "cat", len(timeline) - 1)
    assert list(frame["rank"]) == list(range(1, snapshots.NEIGHBOURS + 1))
    assert (np.diff(frame["cosine"]) <= 1e-3).all()  # best first
    band = band_over_time(timeline)
    assert set(band.step) == set(timeline.steps)
    assert any("Validation loss falls" in line for line in timeline_reading(timeline))
    assert timeline_of({}) is None and timeline_of({"timeline": None}) is None


def test_band_and_neighbour_distance_on_known_tables():
    t = torch.arange(64, dtype=torch.float64)
    smooth = torch.stack([torch.cos(t / 40), torch.sin(t / 40)], dim=1)  # rows turn slowly with position
    band = cosine_by_distance(smooth).set_index("distance")["cosine"]
    assert band[1] == pytest.approx(math.cos(1 / 40)) and band[32] == pytest.approx(math.cos(32 / 40))
    assert mean_neighbour_distance(smooth, k=2) < 1.6  # the two nearest rows are the two neighbours
    random = torch.randn(64, 256, generator=torch.Generator().manual_seed(0))
    assert mean_neighbour_distance(random) > 15  # anywhere: ~n/3 on average
    structure = table_structure(smooth)
    assert structure["cosine_at_1"] == pytest.approx(round(math.cos(1 / 40), 3))


@pytest.mark.parametrize("name", checkpoints.available())
def test_shipped_timelines_fit_and_end_at_the_model(name):
    model, meta = checkpoints.load(name)
    timeline = meta["timeline"]
    buffer = io.BytesIO()
    torch.save(timeline, buffer)
    assert buffer.tell() < 1024 * 1024
    assert timeline["steps"] == snapshots.snapshot_steps(meta["steps"])
    if model.scheme.has_table:  # the rows a window reads: the whole table, or a randomized table's evaluation rows
        rows = timeline["position_rows"][-1]
        positions = model.scheme.input_positions(model.config, len(rows), 0)
        assert torch.equal(rows, model.transformer.wpe.weight.detach()[positions].half())
    if "bias" in timeline:  # a learned bias: its last snapshot is the saved model's first-layer bias
        queries = timeline["bias_queries"]
        bias = model.scheme.bias(model.transformer.h[0].attn, 0, model.config.block_size, model.config.block_size)
        assert torch.equal(timeline["bias"][-1], bias[:, queries].half())
    first = meta["timeline"]["val_loss"]
    assert first[-1] < first[0] - 4  # from about ln(11,678) = 9.4 nats at step 0 to near the card's loss


def test_shipped_learned_table_is_organised():
    """The card's table goals, measured again: nearby rows alike, far rows not, neighbours close by."""
    model, _ = checkpoints.load("learned")
    structure = table_structure(model.transformer.wpe.weight.detach())
    assert structure["neighbour_distance"] <= 10
    assert structure["cosine_at_1"] >= 0.5 and structure["cosine_at_1"] - structure["cosine_at_64"] >= 0.5


@pytest.mark.parametrize("scheme", ["t5", "fire"])
def test_a_learned_bias_is_kept_and_read_back(tmp_path, corpus_file, corpus, scheme):  # noqa: F811
    """t5 and fire keep the first layer's bias rows at each snapshot; the page's frame reads them by distance."""
    from lpos.analysis.timeline import bias_over_distance, bias_reading

    args = tiny_args(tmp_path, corpus_file, scheme=scheme, block_size=32, eval_lengths=(16, 32))
    model, meta = train(args, corpus, progress=False)
    line = timeline_of(meta)
    assert line.bias_queries == [15] and line.bias.shape == (len(line.steps), 2, 1, 32)  # queries inside the block
    frame = bias_over_distance(line, len(line) - 1)
    bias = model.scheme.bias(model.transformer.h[0].attn, 0, 32, 32)[:, 15].detach().half().float().numpy()  # (nh, S)
    for head in range(2):
        part = frame[frame["head"] == head].sort_values("distance")
        assert part["distance"].tolist() == list(range(16))
        np.testing.assert_array_equal(part["bias"].to_numpy(), bias[head, 15::-1])  # distance d is key 15 - d
    reading = bias_reading(line, len(line) - 1)
    assert f"at step {line.steps[-1]}" in reading and "differ" not in reading  # one kept query: no comparison


def test_no_bias_snapshot_without_a_learned_bias():
    assert snapshots.bias_rows(initial_model(tiny_args_plain("alibi"))) is None
    assert snapshots.bias_rows(initial_model(tiny_args_plain("rope"))) is None


def tiny_args_plain(scheme):
    from lpos.train import TrainArgs
    return TrainArgs(scheme=scheme, n_layer=1, n_head=2, n_embd=16, block_size=16)


def test_a_randomized_table_says_which_rows_the_timeline_keeps():
    from lpos.analysis.timeline import evaluation_rows_sentence
    from lpos.train import TrainArgs

    sampled = initial_model(TrainArgs(scheme="learned", random_positions=64, n_layer=1, n_head=2, n_embd=16, block_size=16))
    positions = sampled.scheme.input_positions(sampled.config, 16, 0)
    said = evaluation_rows_sentence(sampled, 16)
    assert "table has 64 rows" in said and f"…, {int(positions[-1])})" in said
    assert said.count(", ") >= 3 and str(int(positions[1])) in said
    assert evaluation_rows_sentence(initial_model(tiny_args_plain("learned")), 16) is None
