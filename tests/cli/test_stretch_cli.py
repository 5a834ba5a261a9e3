"""`python -m lpos extend` and `python -m lpos generate`: the numbers agree with the API, and user
mistakes are one-line errors."""
from __future__ import annotations

import json

import pytest
import torch

from lpos import checkpoints
from lpos.analysis import stretch
from lpos.analysis.generate import Sampling, continue_text
from lpos.corpus import story
from lpos.cli import main
from lpos.positions import RopeScaling
from lpos.tokenizer import encode

needs_rope = pytest.mark.skipif("rope" not in checkpoints.available(), reason="checkpoints/rope.pt is not shipped")
slow = pytest.mark.slow  # each scores the held-out stream or writes with a shipped model


@slow
@needs_rope
def test_extend_json_equals_the_api(capsys):
    assert main(["extend", "--method", "yarn", "--factor", "2", "--lengths", "256", "1024", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    model, _ = checkpoints.load("rope")
    chunks = stretch.chunks(torch.tensor(encode(story())), count=1)
    expected = stretch.chunk_losses(model, chunks, lengths=(256, 1024), rope_scaling=RopeScaling("yarn", 2.0, 128))
    assert out["losses"]["story"]["yarn"] == {str(k): v for k, v in expected.items()}
    assert set(out["losses"]["story"]) == {"as-trained", "yarn"}
    assert out["attention_factor"] == pytest.approx(RopeScaling("yarn", 2.0).attention_factor)
    assert out["predictions"]["story"] == 1024


@slow
@needs_rope
def test_extend_table(capsys):
    assert main(["extend", "--method", "pi", "--factor", "8", "--lengths", "128"]) == 0
    out = capsys.readouterr().out
    assert "under pi×8" in out and "story: change" in out and out.count("\n128 ") == 1


@pytest.mark.parametrize("args, message", [
    (["--method", "pi", "--checkpoint", "alibi"], "RoPE scaling needs a scheme that rotates queries and keys"),
    (["--lengths", "100"], "each length must divide 1024"),
    (["--factor", "0.5"], "at least 1"),
])
def test_extend_errors(capsys, args, message):
    if "alibi" in args and "alibi" not in checkpoints.available():
        pytest.skip("checkpoints/alibi.pt is not shipped")
    assert main(["extend", *args]) == 2
    assert message in capsys.readouterr().err


@needs_rope
def test_generate_is_deterministic_and_matches_the_api(capsys):
    args = ["generate", "Once upon a time", "--checkpoint", "rope", "--tokens", "30", "--seed", "5"]
    assert main(args) == 0
    first = capsys.readouterr().out
    assert main(args) == 0
    assert capsys.readouterr().out == first
    model, _ = checkpoints.load("rope")
    expected = continue_text(model, encode("Once upon a time"), max_new_tokens=30, sampling=Sampling(0.8, 40, 5))
    assert first == expected.text + "\n"


@pytest.mark.skipif("learned" not in checkpoints.available(), reason="checkpoints/learned.pt is not shipped")
def test_generate_says_where_the_learned_model_stopped(capsys):
    assert main(["generate", "Once upon a time", "--checkpoint", "learned", "--tokens", "300", "--temperature", "0"]) == 0
    captured = capsys.readouterr()
    assert len(encode(captured.out.rstrip("\n"))) <= 128
    assert "stopped after 124 new tokens: the learned table has 128 rows" in captured.err


def test_generate_errors(capsys):
    assert main(["generate", "", "--checkpoint", checkpoints.available()[0] if checkpoints.available() else "x"]) == 2
    assert "error:" in capsys.readouterr().err
