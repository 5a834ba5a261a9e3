"""Training: deterministic for a seed, resumable to the same weights, untouched token rows kept
bit for bit, the meta the app reads, DDP equal to one process, and the eval CLI's n/a rows."""
from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from collections import Counter

import pytest
import torch
from torch.testing import assert_close

import lpos.train
from lpos.checkpoints import load
from lpos.cli import main
from lpos.model import initial_token_table
from lpos.tokenizer import END_OF_TEXT, GPT2, encode
from lpos.corpus import load_corpus
from lpos.train import TrainArgs, learning_rate, train

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

STORIES = [
    "Mia had a red kite. Every morning she ran to the hill behind the school and let the wind take it. "
    "One day the string broke and the kite flew over the river. Mia cried, but her brother Sam ran after it.",
    "Sam found the kite in a tall tree. He climbed up slowly, one branch at a time. When he came down, "
    "his knees were green and his hands were sticky, but he was smiling. Mia hugged him and laughed.",
    "The old dog slept by the door all day. When the children came home, he lifted his head and wagged "
    "his tail. He could not run any more, but he still liked to walk to the pond in the evening.",
    "At the pond there were three ducks. The biggest duck was brave and swam close to the dog. The dog "
    "sniffed the water and sneezed. The ducks flapped their wings and made a lot of noise.",
    "Grandma baked bread on Sundays. The kitchen smelled warm and sweet. Mia and Sam sat at the table "
    "and waited. When the bread was ready, Grandma cut thick slices and gave them butter and honey.",
    "It rained for a whole week. The garden turned into mud and the paths were full of puddles. Sam put "
    "on his yellow boots and jumped in every puddle he could find until his socks were wet.",
    "The teacher brought a box of seeds to class. Each child planted one seed in a small pot and gave "
    "it water. After ten days, a tiny green leaf came out of Mia's pot. She was very proud.",
    "A little bird built a nest in the window. The children watched it carry sticks and grass. Soon "
    "there were four blue eggs in the nest, and the whole family walked quietly past the window.",
]


@pytest.fixture(scope="module")
def corpus_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("corpus") / "stories.txt"
    path.write_text(f"\n{END_OF_TEXT}\n".join(STORIES) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def corpus(corpus_file):
    return load_corpus([corpus_file], seed=1337)


def tiny_args(tmp_path, corpus_file, **changes) -> TrainArgs:
    values = dict(scheme="learned", data=(str(corpus_file),), out=str(tmp_path / "model.pt"), steps=6, batch_size=4,
                  lr=3e-3, warmup=2, n_layer=2, n_head=2, n_embd=32, block_size=16, save_every=3, eval_lengths=(8, 16, 32))
    return TrainArgs(**{**values, **changes})


def test_corpus_split(corpus):
    assert corpus.n_stories == 8 and corpus.n_val_stories == 1
    assert len(corpus.sha256) == 64
    train_text = set(corpus.train.tolist())
    assert 50256 in train_text  # stories end with the separator
    every_story = sum(len(encode(s)) + 1 for s in STORIES)
    assert len(corpus.train) + len(corpus.val) == every_story


def test_learning_rate_schedule():
    args = TrainArgs(steps=100, warmup=10, lr=1e-3, min_lr_fraction=0.1)
    assert learning_rate(0, args) == pytest.approx(1e-4)
    assert learning_rate(9, args) == pytest.approx(1e-3)
    assert learning_rate(10, args) == pytest.approx(1e-3)
    assert learning_rate(55, args) == pytest.approx(0.55e-3)  # halfway down the cosine
    assert learning_rate(100, args) == pytest.approx(1e-4)


def state(model) -> dict[str, torch.Tensor]:
    return {k: v.clone() for k, v in model.state_dict().items()}


@pytest.mark.slow
def test_a_scheme_with_a_learning_rate_scale_gets_its_own_group(tmp_path, corpus_file):
    """t5's bias table learns at 10x the rate without decay; every other weight keeps its group."""
    args = tiny_args(tmp_path, corpus_file, scheme="t5")
    model = lpos.train.initial_model(args)
    groups = lpos.train.make_optimizer(model, args).param_groups
    scaled = [g for g in groups if g["scale"] != 1.0]
    assert len(scaled) == 1 and scaled[0]["scale"] == model.scheme.learning_rate_scale == 10.0
    assert scaled[0]["params"] == [model.transformer.relative_bias.weight] and scaled[0]["weight_decay"] == 0.0
    assert sum(len(g["params"]) for g in groups) == len(list(model.parameters()))
    plain = lpos.train.make_optimizer(lpos.train.initial_model(tiny_args(tmp_path, corpus_file)), args).param_groups
    assert [g["scale"] for g in plain] == [1.0, 1.0]
    _, meta = train(dataclasses.replace(args, steps=2), progress=False)
    assert meta["scheme_learning_rate_scale"] == 10.0


def test_deterministic_for_a_seed(tmp_path, corpus_file, corpus):
    first, _ = train(tiny_args(tmp_path, corpus_file, steps=3, out=str(tmp_path / "a.pt")), corpus, progress=False)
    second, _ = train(tiny_args(tmp_path, corpus_file, steps=3, out=str(tmp_path / "b.pt")), corpus, progress=False)
    other, _ = train(tiny_args(tmp_path, corpus_file, steps=3, seed=7, out=str(tmp_path / "c.pt")), corpus, progress=False)
    for key, tensor in first.state_dict().items():
        assert torch.equal(second.state_dict()[key], tensor), key
    assert not torch.equal(other.state_dict()["transformer.h.0.attn.c_attn.weight"],
                           first.state_dict()["transformer.h.0.attn.c_attn.weight"])


class Interrupted(Exception):
    pass


@pytest.mark.slow
def test_resume_gives_the_uninterrupted_weights(tmp_path, corpus_file, corpus, monkeypatch):
    whole, _ = train(tiny_args(tmp_path, corpus_file, out=str(tmp_path / "whole.pt")), corpus, progress=False)
    expected = state(whole)

    args = tiny_args(tmp_path, corpus_file, out=str(tmp_path / "cut.pt"))
    schedule = lpos.train.learning_rate

    def crash_at_step_3(step, a):
        if step == 3:
            raise Interrupted  # the machine goes away after the snapshot at step 3
        return schedule(step, a)

    monkeypatch.setattr(lpos.train, "learning_rate", crash_at_step_3)
    with pytest.raises(Interrupted):
        train(args, corpus, progress=False)
    monkeypatch.setattr(lpos.train, "learning_rate", schedule)
    snapshot = tmp_path / "cut.pt.resume.pt"
    assert snapshot.exists() and not (tmp_path / "cut.pt").exists()
    assert torch.load(snapshot, weights_only=True)["step"] == 3

    resumed, meta = train(dataclasses.replace(args, resume=True), corpus, progress=False)
    assert meta["steps"] == 6
    for key, tensor in expected.items():
        assert torch.equal(resumed.state_dict()[key], tensor), key
    assert not snapshot.exists()  # removed once the run is done


@pytest.mark.slow
def test_a_kill_while_writing_a_snapshot_keeps_the_previous_one(tmp_path, corpus_file, corpus, monkeypatch):
    whole, _ = train(tiny_args(tmp_path, corpus_file, steps=4, save_every=1, out=str(tmp_path / "whole.pt")),
                     corpus, progress=False)
    args = tiny_args(tmp_path, corpus_file, steps=4, save_every=1, out=str(tmp_path / "cut.pt"))
    real_save = torch.save
    snapshots = []

    def dies_while_writing_the_second(payload, path):
        snapshots.append(path)
        if len(snapshots) == 2:
            with open(path, "wb") as half_written:
                half_written.write(b"PK\x03\x04")
            raise Interrupted
        real_save(payload, path)

    monkeypatch.setattr(lpos.train.torch, "save", dies_while_writing_the_second)
    with pytest.raises(Interrupted):
        train(args, corpus, progress=False)
    monkeypatch.setattr(lpos.train.torch, "save", real_save)
    assert torch.load(tmp_path / "cut.pt.resume.pt", weights_only=True)["step"] == 1  # still the good one

    resumed, _ = train(dataclasses.replace(args, resume=True), corpus, progress=False)
    for key, tensor in whole.state_dict().items():
        assert torch.equal(resumed.state_dict()[key], tensor), key


def test_untouched_rows_stay_initial(tmp_path, corpus_file, corpus):
    args = tiny_args(tmp_path, corpus_file, steps=4)
    model, _ = train(args, corpus, progress=False)
    counts = Counter(corpus.train.tolist())
    assert torch.equal(model.output_vocab, torch.tensor(sorted(counts)))
    unseen = sorted({*encode(" Zanzibar quantum"), *corpus.val.tolist()} - set(counts))
    assert len(unseen) >= 3
    seen = torch.tensor(sorted(counts))
    initial = initial_token_table(model.config)
    table = model.transformer.wte.weight.detach()
    assert torch.equal(table[unseen], initial[unseen])
    assert (table[seen] != initial[seen]).any(dim=1).all()  # every row it trained on moved

    loaded, _ = load(args.out)
    loaded_table = loaded.transformer.wte.weight
    assert torch.equal(loaded_table[unseen], initial[unseen])
    assert torch.equal(loaded_table[seen], table[seen].half().float())
    outside = torch.ones(50257, dtype=torch.bool)
    outside[seen] = False
    assert torch.equal(loaded_table[outside], initial[outside])


def test_meta(tmp_path, corpus_file, corpus):
    args = tiny_args(tmp_path, corpus_file, steps=2)
    _, meta = train(args, corpus, progress=False)
    assert meta["token_counts"] == dict(Counter(corpus.train.tolist()))
    assert meta["steps"] == 2
    assert meta["tokens_trained"] == 2 * 4 * 16
    assert meta["corpus_sha256"] == corpus.sha256
    assert meta["data_files"] == ["stories.txt"]
    assert meta["stories"] == 8 and meta["val_stories"] == 1 and meta["processes"] == 1
    assert meta["wall_seconds"] >= 0 and "CPU cores" in meta["machine"]
    by_length = meta["loss_by_length"]
    assert set(by_length) == {8, 16, 32}
    assert by_length[32] == {"loss": None, "note": "n/a: the table has 16 rows"}
    assert by_length[16]["loss"] == meta["val_loss"] and meta["val_loss"] > 0
    assert 0 <= meta["val_oov_share"] < 1
    assert meta["unigram_val_loss"] > 0
    assert meta["vocab_trained"] == len(meta["token_counts"])
    assert meta["train_args"]["eval_lengths"] == [8, 16, 32]
    assert meta["batch_token_counts"] == dict(Counter(batch_inputs(args, corpus)))
    _, loaded_meta = load(args.out)
    timeline, loaded_timeline = meta.pop("timeline"), loaded_meta.pop("timeline")
    assert loaded_meta.pop("tokenizer") is GPT2  # the default: the vocabulary is GPT-2's
    assert loaded_meta == meta
    for key, value in timeline.items():
        assert torch.equal(loaded_timeline[key], value) if isinstance(value, torch.Tensor) else loaded_timeline[key] == value


def batch_inputs(args: TrainArgs, corpus) -> list[int]:
    """Every input token of every batch the run drew, recomputed from the batch function."""
    return [t for step in range(args.steps) for t in lpos.train.batch(corpus.train, step, args)[0].flatten().tolist()]


@pytest.mark.parametrize("scheme", ["sinusoidal", "rope", "alibi", "none"])
def test_every_scheme_trains(tmp_path, corpus_file, corpus, scheme):
    model, meta = train(tiny_args(tmp_path, corpus_file, steps=2, scheme=scheme), corpus, progress=False)
    assert model.config.position == scheme
    assert meta["loss_by_length"][32]["loss"] is not None  # only learned stops at its table


def test_eval_cli_reports_past_the_table(tmp_path, corpus_file, corpus, capsys):
    args = tiny_args(tmp_path, corpus_file, steps=2)
    train(args, corpus, progress=False)
    assert main(["eval", "--checkpoint", args.out, "--data", str(corpus_file), "--lengths", "8", "32"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert any("length     8:" in line and "n/a" not in line for line in lines)
    assert any("length    32: n/a: the table has 16 rows" in line for line in lines)


def test_eval_cli_reproduces_the_card_rows(tmp_path, capsys):
    """`python -m lpos eval` recomputes exactly the losses the training run wrote into the meta (the card's rows),
    over all held-out stories and over the held-out stories of the tinystories* files."""
    tiny = tmp_path / "tinystories_a.txt"
    tiny.write_text(f"\n{END_OF_TEXT}\n".join(STORIES[:6]) + "\n", encoding="utf-8")
    other = tmp_path / "classics.txt"
    other.write_text(f"\n{END_OF_TEXT}\n".join(STORIES[6:] * 3) + "\n", encoding="utf-8")
    args = tiny_args(tmp_path, other, data=(str(other), str(tiny)), steps=3)
    _, meta = train(args, progress=False)
    capsys.readouterr()
    assert main(["eval", "--checkpoint", args.out, "--data", str(other), str(tiny), "--lengths", "8", "16", "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    for name, key in (("all held-out stories", "loss_by_length"), ("held-out TinyStories stories", "loss_by_length_tinystories")):
        for length in (8, 16):
            assert printed[name][str(length)]["loss"] == meta[key][length]["loss"]
    assert meta["val_loss_tinystories"] == meta["loss_by_length_tinystories"][16]["loss"]
    assert meta["val_tokens_tinystories"] < meta["val_tokens"] or meta["val_stories"] == 1


def cli_train_args(out, corpus_file) -> list[str]:
    return ["train", "--scheme", "rope", "--data", str(corpus_file), "--out", str(out), "--steps", "3",
            "--batch-size", "4", "--block-size", "16", "--width", "32", "--layers", "2", "--heads", "2", "--no-progress"]


@pytest.mark.slow
def test_ddp_equals_one_process(tmp_path, corpus_file):
    two = tmp_path / "two.pt"
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
               "-m", "lpos", *cli_train_args(two, corpus_file)]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    one = tmp_path / "one.pt"
    assert main(cli_train_args(one, corpus_file)) == 0

    model_two, meta_two = load(two)
    model_one, meta_one = load(one)
    assert meta_two["processes"] == 2 and meta_one["processes"] == 1
    for key, tensor in model_one.state_dict().items():
        if key in ("transformer.wte.weight", "lm_head.weight"):
            # stored as float16: a 1e-7 difference may round to the neighbouring float16 value
            assert_close(model_two.state_dict()[key], tensor, rtol=2**-10, atol=1e-5, msg=key)
        else:
            assert_close(model_two.state_dict()[key], tensor, rtol=0, atol=1e-5, msg=key)
    assert meta_two["tokens_trained"] == meta_one["tokens_trained"] == 3 * 4 * 16


def test_ranks_split_the_global_batch(corpus_file, tmp_path, corpus):
    args = tiny_args(tmp_path, corpus_file)
    for step in range(3):
        x, y = lpos.train.batch(corpus.train, step, args)
        assert x.shape == y.shape == (4, 16)
        assert torch.equal(x[:, 1:], y[:, :-1])  # targets are the next tokens
        halves = [lpos.train.batch(corpus.train, step, args, rank, 2) for rank in (0, 1)]
        assert torch.equal(torch.cat([h[0] for h in halves]), x)
        assert torch.equal(torch.cat([h[1] for h in halves]), y)
    assert not torch.equal(lpos.train.batch(corpus.train, 0, args)[0], lpos.train.batch(corpus.train, 1, args)[0])


@pytest.mark.parametrize("seed", [1337, 7])
def test_the_held_out_stream_is_the_corpus_split_encoding_only_held_out_stories(corpus_file, monkeypatch, seed):
    """corpus.held_out_stream (what pages read) equals load_corpus(...).val, and is encoded once."""
    from lpos import corpus as corpus_module

    monkeypatch.setenv("LPOS_DATA_DIR", str(corpus_file.parent))
    meta = {"data_files": [corpus_file.name], "train_args": {"seed": seed}}
    stream = corpus_module.held_out_stream(meta)
    assert torch.equal(stream, load_corpus([corpus_file], seed=seed).val)
    assert torch.equal(corpus_module.held_out_stream(meta, tokens=20), stream[:20])
    calls = []
    monkeypatch.setattr(corpus_module, "encode", lambda text: calls.append(text) or [0])
    corpus_module.held_out_stream(meta)  # kept: nothing encoded again
    assert calls == []
