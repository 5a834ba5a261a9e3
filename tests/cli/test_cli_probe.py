"""`python -m lpos probe`: per-layer probe scores, the head table and the streaming test, as text or JSON."""
from __future__ import annotations

import json

from lpos.cli import main


def test_probe_json_has_every_stream_target_and_head(capsys):
    assert main(["probe", "--scheme", "alibi", "--stream", "8", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["scheme"] == "alibi" and "the built-in story" in result["text"]
    assert len(result["probes"]) == 2 * 5  # input + 4 blocks, two targets
    assert {p["target"] for p in result["probes"]} == {"absolute position", "tokens since sentence end"}
    assert len(result["heads"]) == 16 and {"mean distance", "first token share", "behaviour"} <= set(result["heads"][0])
    assert result["stream"]["window"] == 8 and result["stream"]["streamed"] == 8 + 1 + 512
    assert result["stream"]["tokens"] <= 512  # predictions compared past the window, out-of-vocabulary targets left out
    # ALiBi's steepest head (head 1: heads count from 1, as layers do) looks closer than its gentlest, even untrained
    layer1 = {h["head"]: h["mean distance"] for h in result["heads"] if h["layer"] == 1}
    assert sorted(layer1) == [1, 2, 3, 4] and layer1[1] < layer1[4]


def test_probe_text_prints_the_table_and_refuses_a_window_past_the_learned_rows(capsys):
    assert main(["probe", "--scheme", "none"]) == 0
    out = capsys.readouterr().out
    assert "after block 4" in out and "ridge probes fitted on" in out and "16 heads" in out
    assert main(["probe", "--scheme", "learned", "--stream", "126"]) == 2
    assert "the learned table has 128" in capsys.readouterr().err
