"""The Inside the model analyses: probes, head statistics and the streaming sink test, on planted
signals, hand-built attention and plain forwards."""
from __future__ import annotations

import math
import re

import numpy as np
import pandas as pd
import pytest
import torch

from conftest import SCHEMES
from lpos import checkpoints
from lpos.analysis import heads, probes, streaming
from lpos.analysis.lengths import token_losses
from lpos.corpus import story
from lpos.tokenizer import encode, token_strings


def interleaved_split(n_windows: int, length: int) -> torch.Tensor:
    return torch.tensor([(0, 0, 1, 2)[i % 4] for i in range(n_windows)]).repeat_interleave(length)


def test_probe_recovers_position_written_linearly_into_the_hidden_states():
    generator = torch.Generator().manual_seed(0)
    n, L, C = 16, 32, 24
    position = torch.arange(L).double().repeat(n)  # (n L,)
    direction = torch.randn(C, generator=generator, dtype=torch.double)
    features = position[:, None] * direction + 0.01 * torch.randn(n * L, C, generator=generator, dtype=torch.double)
    score = probes.fit_probe(features, position, interleaved_split(n, L))
    assert score["r2"] > 0.999
    assert score["mae"] < 0.1
    assert score["scored"] == 4 * L and score["fitted"] == 12 * L


def test_probe_finds_nothing_in_random_states_on_held_out_windows():
    generator = torch.Generator().manual_seed(1)
    n, L, C = 32, 64, 32
    position = torch.arange(L).double().repeat(n)
    features = torch.randn(n * L, C, generator=generator, dtype=torch.double)
    score = probes.fit_probe(features, position, interleaved_split(n, L))
    assert abs(score["r2"]) < 0.03
    assert score["mae"] == pytest.approx(L / 4, rel=0.05)  # predicting the mean of 0..L-1 misses by L/4 on average


def test_ridge_with_a_tiny_penalty_is_least_squares():
    generator = torch.Generator().manual_seed(2)
    X = torch.randn(200, 5, generator=generator, dtype=torch.double)
    y = X @ torch.tensor([1.0, -2.0, 0.5, 0.0, 3.0], dtype=torch.double) + 7.0
    weights, bias = probes.ridge(X, y, penalty=1e-12)
    reference = torch.linalg.lstsq(torch.cat([X, torch.ones(200, 1, dtype=torch.double)], 1), y[:, None]).solution[:, 0]
    torch.testing.assert_close(torch.cat([weights, bias[None]]), reference)


def test_sentence_distance_counts_tokens_since_the_last_end_inside_the_window():
    ids = encode("The cat sat. It ran away! Then")
    windows = torch.tensor([ids])
    strings = token_strings(ids)
    expected, last = [], None
    for i, s in enumerate(strings):
        expected.append(math.nan if last is None else i - last)
        if any(end in s for end in probes.SENTENCE_ENDS):
            last = i
    got = probes.sentence_distance(windows)[0].tolist()
    assert [x if not math.isnan(x) else "nan" for x in got] == [x if not math.isnan(x) else "nan" for x in expected]
    assert math.isnan(got[0]) and got[strings.index(".") + 1] == 1


def test_probe_text_interleaves_fit_penalty_and_score_windows(tiny_model):
    model = tiny_model("rope")  # block size 64: windows of 64
    text = probes.probe_text({"a": list(range(100, 100 + 64 * 7 + 10)), "b": list(range(64 * 2))}, model=model)
    assert text.windows.shape == (9, 64)
    assert text.split.tolist() == [0, 0, 1, 2, 0, 0, 1, 2, 0]
    with pytest.raises(ValueError, match="at least 4 windows"):
        probes.probe_text({"short": list(range(200))}, model=model)


def test_probe_text_refuses_ids_past_the_vocabulary(tiny_model):
    model = tiny_model("none", vocab_size=500)
    with pytest.raises(ValueError, match="vocabulary has 500"):
        probes.probe_text({"a": list(range(400, 400 + 64 * 4))}, model=model)


@pytest.mark.parametrize("scheme", SCHEMES)
def test_residual_streams_end_where_the_model_ends(tiny_model, scheme):
    model = tiny_model(scheme)
    idx = torch.randint(0, 1000, (3, 40), generator=torch.Generator().manual_seed(3))
    streams, attention = probes.residual_streams(model, idx, keep_attention=True, batch_size=2)
    hidden, weights = model.hidden_states(idx)
    assert len(streams) == model.config.n_layer + 1 and streams[0].shape == (3, 40, 32)
    torch.testing.assert_close(model.transformer.ln_f(streams[-1]), hidden)
    torch.testing.assert_close(streams[0], model.embed_parts(idx).total)
    for mine, theirs in zip(attention, weights):
        torch.testing.assert_close(mine, theirs)


def test_position_probes_on_a_model_give_one_row_per_stream_and_target(tiny_model):
    frames = {}
    for scheme in ("learned", "none"):
        model = tiny_model(scheme)
        frames[scheme] = frame = probes.position_probes(model, probes.probe_text({"story": encode(story())}, model=model))
        assert len(frame) == 2 * (model.config.n_layer + 1)
        assert set(frame.target) == {"absolute position", "tokens since sentence end"}
        assert frame["r2"].between(-1, 1).all() and (frame["penalty"].isin(probes.PENALTIES)).all()

    def at_input(scheme: str) -> float:
        frame = frames[scheme]
        return frame[(frame.target == "absolute position") & (frame.stream == 0)]["r2"].iloc[0]

    # token rows alone say nothing about position; a random row per position says something
    assert abs(at_input("none")) < 0.05
    assert at_input("learned") > at_input("none") + 0.1


def probe_frame(absolute: list[float], relative: list[float]) -> pd.DataFrame:
    names = probes.stream_names(len(absolute) - 1)
    rows = [{"stream": i, "stream name": names[i], "target": t, "r2": v}
            for t, values in (("absolute position", absolute), ("tokens since sentence end", relative))
            for i, v in enumerate(values)]
    return pd.DataFrame(rows)


def test_probe_reading_states_what_the_numbers_show():
    trained = {"learned": probe_frame([0.9, 0.9, 0.5], [0.1, 0.3, 0.5]), "none": probe_frame([0.0, 0.4, 0.6], [0.1, 0.2, 0.4]),
               "rope": probe_frame([0.0, -0.02, 0.03], [0.1, 0.2, 0.3])}
    untrained = {"learned": probe_frame([0.5, 0.5, 0.5], [0.0, 0.0, 0.1]), "none": probe_frame([0.0, 0.0, 0.01], [0.0, 0.0, 0.0])}
    text = "\n".join(probes.probe_reading(trained, untrained))
    assert "R² at the input: learned 0.90" in text
    assert "at their best layer: none 0.60" in text
    assert "finds R² 0.60 at its best layer, against at most 0.01" in text
    assert "fades by the last block in learned (down from its best by learned 0.40)" in text
    assert "grows with depth" in text and "untrained models reach at most 0.10." in text
    assert "not something training added" not in text
    fresh_high = {**untrained, "rope": probe_frame([0.0, 0.0, 0.0], [0.1, 0.3, 0.6])}  # above every trained 0.3-0.5
    said = "\n".join(probes.probe_reading(trained, fresh_high))
    assert ("untrained models reach at most 0.60, as much as a trained model here: an untrained stack already "
            "carries that much, so this is not something training added.") in said
    flat = probe_frame([0.0, 0.0, 0.0], [0.1, 0.2, 0.3])
    listed = "\n".join(probes.probe_reading({**trained, "alibi": flat, "t5": flat}, untrained))
    assert "rope, alibi and t5 never hold absolute position" in listed  # a list, not "rope and alibi and t5"
    assert "rope never holds absolute position linearly at any layer (best R² 0.03): RoPE acts inside attention" in text
    # the "write position" sentence names only the models that do (not rope 0.00 and alibi 0.00)
    assert "the blocks of none write position into the stream; at their best layer: none 0.60." in text


def test_probe_reading_says_no_linear_signal_when_the_strongest_penalty_always_wins():
    rope = probe_frame([0.0, 0.0, 0.0], [0.1, 0.2, 0.3]).assign(penalty=probes.PENALTIES[-1])
    trained = {"learned": probe_frame([0.9, 0.9, 0.9], [0.1, 0.3, 0.5]).assign(penalty=1e-3), "rope": rope}
    untrained = {"learned": probe_frame([0.5, 0.5, 0.5], [0.0, 0.0, 0.1])}
    text = "\n".join(probes.probe_reading(trained, untrained))
    assert "rope never holds absolute position" in text
    assert "from 1e-06 to 1e+02 times the mean eigenvalue, picked the strongest at every layer" in text
    assert "no linear position signal" in text and "write position" not in text
    rope.loc[0, "penalty"] = 1.0  # one layer found a weaker penalty better: no such claim
    assert "no linear position signal" not in "\n".join(probes.probe_reading(trained, untrained))


def previous_token_attention(T: int) -> torch.Tensor:
    weights = torch.zeros(1, 1, T, T)
    weights[0, 0, 0, 0] = 1.0
    weights[0, 0, torch.arange(1, T), torch.arange(T - 1)] = 1.0
    return weights


def uniform_attention(T: int) -> torch.Tensor:
    causal = torch.ones(T, T).tril()
    return (causal / causal.sum(-1, keepdim=True))[None, None]


def test_pure_previous_token_head_has_share_one_at_distance_one():
    stats = heads.head_statistics(previous_token_attention(16))
    assert stats["previous token share"].item() == 1.0
    assert stats["mean distance"].item() == 1.0
    assert stats["self share"].item() == 0.0
    assert stats["first token share"].item() == pytest.approx(1 / 15)  # query 1's previous token is the first
    profile = heads.distance_profile(previous_token_attention(16), max_distance=20)[0]
    assert profile[1] == 1.0 and profile[0] == 0.0 and profile[2:16].abs().max() == 0.0 and profile[16:].isnan().all()


@pytest.mark.parametrize("T", [8, 128])
def test_uniform_head_has_a_known_mean_distance(T):
    stats = heads.head_statistics(uniform_attention(T))
    assert stats["mean distance"].item() == pytest.approx(T / 4)  # mean over q = 1..T-1 of q / 2
    assert stats["first token share"].item() == pytest.approx(heads.uniform_first_share(T))
    assert stats["self share"].item() == pytest.approx(heads.uniform_first_share(T))
    assert stats["previous token share"].item() == pytest.approx(heads.uniform_first_share(T))


def test_behaviour_names_the_favoured_token_else_the_reach():
    row = dict(zip(["mean distance", "previous token share", "first token share", "self share"], [1.0, 0.9, 0.05, 0.0]))
    assert heads.behaviour(pd.Series(row), window=128) == "previous token"
    assert heads.behaviour(pd.Series({**row, "previous token share": 0.1, "first token share": 0.6}), window=128) \
        == "first token (sink)"
    assert heads.behaviour(pd.Series({**row, "previous token share": 0.2}), window=128) == "local"
    assert heads.behaviour(pd.Series({**row, "previous token share": 0.2, "mean distance": 30}), window=128) == "broad"


def test_head_portraits_match_the_statistics_of_the_model_attention(tiny_model):
    model = tiny_model("alibi")
    text = probes.probe_text({"story": encode(story())}, model=model)
    portraits = heads.head_portraits(model, text, batch_size=3)
    with torch.no_grad():
        _, _, attention = model(text.windows, return_attention=True)
    expected = heads.head_statistics(attention[1])
    layer2 = portraits.table[portraits.table.layer == 2]
    np.testing.assert_allclose(layer2["mean distance"], expected["mean distance"].numpy(), rtol=1e-5)
    np.testing.assert_allclose(layer2["first token share"], expected["first token share"].numpy(), rtol=1e-5)
    assert portraits.profiles.shape == (2, 4, heads.MAX_DISTANCE + 1)
    assert portraits.queries == len(text.windows) * 63
    assert portraits.table["head"].tolist() == [1, 2, 3, 4] * 2  # heads count from 1, as layers do
    # ALiBi's steepest head (head 1) looks closer than its gentlest in layer 1, even untrained
    layer1 = portraits.table[portraits.table.layer == 1].set_index("head")["mean distance"]
    assert layer1[1] < layer1[4]


def portraits_of(table: pd.DataFrame, *, layers: int, heads_per_layer: int) -> heads.HeadPortraits:
    """Head portraits of a 128-token window from rows of measures, each head's behaviour read from them."""
    table["behaviour"] = table.apply(heads.behaviour, axis=1, window=128)
    return heads.HeadPortraits(table=table, profiles=np.zeros((layers, heads_per_layer, 129)), queries=127, window=128)


def test_sink_heads_are_named_with_their_share():
    table = pd.DataFrame([{"layer": 1, "head": 1, "mean distance": 20.0, "previous token share": 0.1,
                           "first token share": 0.62, "self share": 0.1},
                          {"layer": 1, "head": 2, "mean distance": 1.0, "previous token share": 0.9,
                           "first token share": 0.01, "self share": 0.0}])
    portraits = portraits_of(table, layers=1, heads_per_layer=2)
    assert heads.sink_heads(portraits)["head"].tolist() == [1]
    text = " ".join(heads.heads_reading(portraits, scheme="x"))
    assert "1 first token (sink), 1 previous token" in text
    assert "layer 1 head 1 (0.62)" in text and "layer 1 head 2 (0.90 of its attention one token back)" in text


@pytest.mark.parametrize("scheme", SCHEMES)
def test_streaming_with_a_window_as_long_as_the_text_is_the_full_forward(tiny_model, scheme):
    model = tiny_model(scheme)
    ids = encode(story())[:40]
    full = token_losses(model, torch.tensor(ids)).numpy()
    for sink in (0, 4):
        np.testing.assert_allclose(streaming.streaming_losses(model, ids, window=40, sink=sink), full, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(streaming.streaming_losses(model, ids, window=60, sink=sink), full, rtol=1e-5, atol=1e-5)


def test_streaming_reruns_each_window_from_position_zero(tiny_model):
    model = tiny_model("learned")
    ids = encode(story())[:60]
    alone = streaming.streaming_losses(model, ids, window=8, batch_size=5)
    kept = streaming.streaming_losses(model, ids, window=8, sink=4, batch_size=5)
    t = 30  # predicting token 31 from tokens 23..30, and from 0..3 + 23..30
    by_hand = token_losses(model, torch.tensor(ids[23:32]))[-1]
    by_hand_kept = token_losses(model, torch.tensor(ids[:4] + ids[23:32]))[-1]
    assert alone[t] == pytest.approx(float(by_hand), abs=1e-5)
    assert kept[t] == pytest.approx(float(by_hand_kept), abs=1e-5)
    partial = token_losses(model, torch.tensor(ids[:2] + ids[2:11]))[-1]  # window starts at 2: only tokens 0, 1 kept
    assert kept[9] == pytest.approx(float(partial), abs=1e-5)


def test_streaming_refuses_a_window_past_the_learned_rows(tiny_model):
    with pytest.raises(ValueError, match="at most 60"):
        streaming.streaming_losses(tiny_model("learned"), list(range(100)), window=62, sink=4)
    with pytest.raises(ValueError, match="at least two tokens"):
        streaming.streaming_losses(tiny_model("rope"), [5], window=8)


def test_sink_summary_and_reading_count_only_clear_gains():
    rng = np.random.default_rng(0)
    alone = 5 + rng.normal(0, 0.1, 300)
    helped = streaming.SinkTest(window=10, sink=4, alone=alone, with_sink=alone - 0.2)
    unchanged = streaming.SinkTest(window=10, sink=4, alone=alone, with_sink=alone + rng.normal(0, 0.1, 300))
    summaries = {"rope": streaming.sink_summary(helped), "none": streaming.sink_summary(unchanged)}
    assert summaries["rope"]["tokens"] == 290 and summaries["rope"]["gain"] == pytest.approx(0.2)
    assert streaming.sink_verdict(summaries["rope"]) == "helps"
    assert streaming.sink_verdict(summaries["none"]) == "no clear change"
    text = " ".join(streaming.sink_reading(summaries, window=10))
    assert "helps only **rope**, by 0.200 nats per token" in text
    summaries["alibi"] = streaming.sink_summary(streaming.SinkTest(window=10, sink=4, alone=alone, with_sink=alone - 0.3))
    assert "helps rope and alibi; most of all **alibi**, by 0.300" in " ".join(streaming.sink_reading(summaries, window=10))


def test_a_tie_in_the_sink_gain_is_said_as_a_tie():
    alone = 5 + np.random.default_rng(0).normal(0, 0.1, 300)
    gained = lambda gain: streaming.sink_summary(  # noqa: E731
        streaming.SinkTest(window=10, sink=4, alone=alone, with_sink=alone - gain))
    summaries = {"rope": gained(0.008), "t5": gained(0.008), "fire": gained(0.008), "alibi": gained(0.004)}
    text = " ".join(streaming.sink_reading(summaries, window=10))
    assert "most of all **rope**, **t5** and **fire**, tied at 0.008 nats per token each" in text, text
    assert "most of all **rope**, by" not in text


def test_the_noise_sentence_names_both_bands():
    said = streaming.noise_sentence(11)
    assert f"a band of {streaming.NOISE_ERRORS} standard errors " in said and "one of 3" not in said


def test_streamed_tokens_shrink_for_large_models_only():
    from types import SimpleNamespace

    from lpos.model import GPTConfig

    shipped = SimpleNamespace(config=GPTConfig(position="rope"))  # only the config is read
    assert streaming.streamed_tokens(shipped, window=64) == 64 + 1 + streaming.SCORED
    big = SimpleNamespace(config=GPTConfig(position="learned", block_size=1024, n_embd=512, n_layer=8, n_head=8))
    assert streaming.streamed_tokens(big, window=64) == 64 + 1 + streaming.MIN_SCORED


def test_head_sentence_reads_a_previous_token_head():
    from lpos.analysis.heads import head_sentence

    T = 5
    weights = np.zeros((1, T, T), dtype=np.float32)
    weights[0, 0, 0] = 1.0
    weights[0, np.arange(1, T), np.arange(T - 1)] = 1.0  # every query reads the token before it
    text = head_sentence(weights, layer=1, head=0)
    # query 1's previous token is the first token: counted once, as "first", so the shares add up to 100%
    assert "0% of its weight on the token itself, 25% on the first token, 75% on the token just before" in text
    assert "0% further back" in text and "looks back 1.0 tokens" in text
    assert "(1.2 for an even spread)" in text  # mean of q/2 for q = 1..4


def _probe_frame(absolute: list[float], relative: list[float], window: int = 128):
    import pandas as pd  # noqa: PLC0415

    from lpos.analysis import probes  # noqa: PLC0415

    names = probes.stream_names(len(absolute) - 1)
    return pd.DataFrame([{"stream": i, "stream name": names[i], "target": t, "r2": v, "window": window}
                         for t, values in (("absolute position", absolute), ("tokens since sentence end", relative))
                         for i, v in enumerate(values)])


def test_probe_reading_names_a_table_model_found_only_partly_and_its_untrained_rows():
    from lpos.analysis import probes  # noqa: PLC0415

    name = "learned · learned-32"
    trained = {"learned": _probe_frame([0.98, 0.9, 0.9], [0.1, 0.3, 0.5]),
               name: _probe_frame([0.23, 0.3, 0.25], [0.1, 0.2, 0.4])}
    untrained = {"learned": _probe_frame([0.5, 0.5, 0.5], [0.0, 0.0, 0.1])}
    text = "\n".join(probes.probe_reading(trained, untrained, limits={name: 32}))
    assert f"In {name} a read-out finds position at the input only partly (R² 0.23); at its best layer 0.30" in text
    assert "rows it adds at positions 32–127 never trained" in text


def test_probe_reading_says_down_and_one_value_when_the_relative_probe_falls():
    from lpos.analysis import probes  # noqa: PLC0415

    trained = {"upload": _probe_frame([0.0, 0.1, 0.2], [-0.23, -0.3, -0.31])}
    untrained = {"learned": _probe_frame([0.5, 0.5, 0.5], [0.0, 0.0, 0.1])}
    text = "\n".join(probes.probe_reading(trained, untrained))
    assert "falls with depth: R² after the last block upload -0.31, down from -0.23 at the input" in text
    assert "up from" not in text and "–" not in text.split("falls with depth")[1]


def test_heads_reading_says_why_a_strong_previous_token_head_counts_as_broad():
    table = pd.DataFrame([{"layer": 2, "head": 3, "mean distance": 12.0, "previous token share": 0.36,
                           "first token share": 0.05, "self share": 0.1},
                          {"layer": 1, "head": 1, "mean distance": 30.0, "previous token share": 0.1,
                           "first token share": 0.05, "self share": 0.1}])
    portraits = portraits_of(table, layers=2, heads_per_layer=1)
    text = " ".join(heads.heads_reading(portraits, scheme="rope"))
    assert "2 broad (a head is named after a token only when at least 40% of its attention goes there" in text
    assert "layer 2 head 3 (0.36 of its attention one token back, under the 40% that would name it, so it counts as broad)" in text


def test_one_token_plurals_and_the_sink_sign():
    from lpos.analysis import streaming  # noqa: PLC0415
    from lpos.figures.sinusoids import block_note  # noqa: PLC0415

    assert block_note(1, 4) == " (each cell averages 1 position × 4 columns)"
    summary = {"alone": 3.0, "with sink": 3.1, "gain": -0.1, "error": 0.01, "noise": 0.02, "tokens": 100}
    lines = streaming.sink_reading({"rope": summary}, window=8)
    assert "(-0.100" not in lines[0] and "+0.100 nats per token" in lines[0]
    assert lines[-1].startswith("The signed number in each line is the change in loss") and "plus that the loss rises" in lines[-1]


@pytest.mark.skipif("learned" not in checkpoints.available(), reason="the shipped learned model is not installed")
def test_head_sentence_shares_add_up_to_100_percent_on_the_default_sentence():
    from lpos.analysis.attention import attention_maps  # noqa: PLC0415

    model = checkpoints.load("learned")[0]
    weights = attention_maps(model, encode("The dog bit the man"), layer=0)
    for head in range(model.config.n_head):
        said = heads.head_sentence(np.asarray(weights), layer=1, head=head)
        shares = [int(p) for p in re.findall(r"(\d+)% ", said)]
        assert len(shares) == 4 and abs(sum(shares) - 100) <= 2, said  # rounding of four shares


def sink_test_with_gain(gain: float, spread: float, *, window: int = 64, scored: int = 497) -> streaming.SinkTest:
    """A SinkTest whose per-token differences past the window have exactly this mean and standard deviation."""
    rng = np.random.default_rng(0)
    noise = rng.normal(size=scored)
    difference = gain + spread * (noise - noise.mean()) / noise.std(ddof=1)
    alone = 4 + rng.normal(0, 0.5, window + scored)
    kept = alone.copy()
    kept[window:] -= difference
    return streaming.SinkTest(window=window, sink=4, alone=alone, with_sink=kept)


def test_a_gain_inside_its_noise_band_is_within_noise():
    """The shipped rope model at W = 64: 0.012 nats per token, standard error 0.005 over 497 predictions.
    Two standard errors (0.010) would call it a help; it is inside the noise band of three (0.015)."""
    summary = streaming.sink_summary(sink_test_with_gain(0.0122, 0.0050 * np.sqrt(497)))
    assert abs(summary["gain"] - 0.0122) < 1e-12
    assert 2 * summary["error"] < summary["gain"] < summary["noise"] == streaming.NOISE_ERRORS * summary["error"]
    assert streaming.sink_verdict(summary) == "no clear change"
    text = " ".join(streaming.sink_reading({"rope": summary, "alibi": streaming.sink_summary(
        sink_test_with_gain(0.0038, 0.0036 * np.sqrt(497)))}, window=64))
    assert "helps only" not in text
    assert "the gain nearest to leaving its band, rope's 0.012 nats per token, is within noise (± 0.015)" in text
    assert "**rope**: " in text and "noise band ± 0.015 over 497 predictions): **no clear change** (within noise)" in text


def test_a_gain_beyond_its_noise_band_says_the_band():
    summary = streaming.sink_summary(sink_test_with_gain(0.05, 0.0050 * np.sqrt(497)))
    assert streaming.sink_verdict(summary) == "helps"
    assert ("helps only **rope**, by 0.050 nats per token, beyond its noise band of ± 0.015"
            in " ".join(streaming.sink_reading({"rope": summary}, window=64)))


def test_no_gain_at_all_is_said_so():
    text = " ".join(streaming.sink_reading({"rope": streaming.sink_summary(sink_test_with_gain(-0.01, 0.3))}, window=8))
    assert "no scheme gains at all" in text and "within noise" not in text.split("Keeping")[1]
