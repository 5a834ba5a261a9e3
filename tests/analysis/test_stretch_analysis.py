"""lpos.analysis.stretch and lpos.figures.stretch on their numbers: chunked losses against a
window-by-window loop, attention logits against the model's own weights, the shift, the
wavelength table, the readings, and the figures built from them."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close

from lpos.analysis import rescaling, stretch
from lpos.analysis.lengths import token_losses
from lpos.figures.stretch import attention_profile_figure, scaled_loss_figure, wavelength_methods_figure
from lpos.positions import RESCALINGS, ROPE_METHODS, SCHEMES, RopeScaling, pair_frequencies, rope_rotate


def stream(n: int, seed: int = 0) -> torch.Tensor:
    return torch.randint(0, 50257, (n,), generator=torch.Generator().manual_seed(seed))


def test_chunks_are_spread_evenly_and_carry_their_last_target():
    text = torch.arange(10_000)
    got = stretch.chunks(text, count=4, length=1024)
    assert got.shape == (4, 1025)
    assert got[0, 0] == 0 and got[-1, -1] == 9_999  # first chunk at the start, last one at the end
    assert torch.equal(got[1], torch.arange(got[1, 0], got[1, 0] + 1025))
    assert stretch.chunks(text, length=1024).shape == (9, 1025)  # all that fit
    with pytest.raises(ValueError, match="a chunk needs 1025"):
        stretch.chunks(torch.arange(1000))


@pytest.mark.parametrize("scaling", [None, RopeScaling("ntk", 4.0, 16)])
def test_chunk_losses_equal_a_loop_over_windows(tiny_model, scaling):
    model = tiny_model("rope")
    texts = torch.stack([stream(129, seed=1), stream(129, seed=2)])
    got = stretch.chunk_losses(model, texts, lengths=(32, 128), rope_scaling=scaling)
    for length in (32, 128):
        losses = []
        for row in texts:
            for start in range(0, 128, length):
                window = row[start : start + length + 1]
                with torch.no_grad():
                    losses.append(model.vocab_loss(window[None, :-1], window[None, 1:], reduction="none",
                                                   rope_scaling=scaling)[0])
        assert got[length]["loss"] == pytest.approx(float(torch.cat(losses).mean()), abs=1e-4)
        assert got[length]["windows"] == 2 * 128 // length and got[length]["tokens"] == 256
    plain = stretch.chunk_losses(model, texts, lengths=(128,))
    assert plain[128]["loss"] == pytest.approx(float(torch.cat([token_losses(model, r) for r in texts]).mean()), abs=1e-4)


def test_the_learned_model_has_no_loss_past_its_table(tiny_model):
    got = stretch.chunk_losses(tiny_model("learned"), stream(129)[None], lengths=(64, 128))
    assert got[64]["loss"] is not None and got[128] == {"loss": None, "note": "n/a: the table has 64 rows"}


@pytest.mark.parametrize("scheme, scaling", [(s, None) for s in SCHEMES] + [("rope", RopeScaling("yarn", 8.0, 8))])
def test_attention_logits_give_the_models_own_weights(tiny_model, scheme, scaling):
    model = tiny_model(scheme)
    ids = stream(40).tolist()
    with torch.no_grad():
        _, _, attention = model(torch.tensor([ids]), return_attention=True, rope_scaling=scaling)
        profile = stretch.attention_profile(model, ids, rope_scaling=scaling)
        x = model.embed_parts(torch.tensor([ids])).total
        for layer, block in enumerate(model.transformer.h):
            scores = stretch.attention_logits(block, x, rope_scaling=scaling)
            assert_close(F.softmax(scores, dim=-1), attention[layer][0])
            rows = profile[profile["layer"] == layer]
            assert_close(torch.tensor(rows["max_logit"].to_numpy()), scores.amax(dim=(0, 2)))
            x, _ = block(x, rope_scaling=scaling)
    first = profile[profile["position"] == 0]
    assert np.allclose(first["entropy"], 0.0, atol=1e-6)  # the first token attends only to itself


def test_yarn_raises_the_logits_by_the_square_of_its_factor(tiny_model):
    """With the same frequencies, YaRN's magnitude multiplies q and k, so every logit by m²."""
    model, ids = tiny_model("rope"), stream(20).tolist()
    with torch.no_grad():
        x = model.embed_parts(torch.tensor([ids])).total
    block = model.transformer.h[0]
    yarn = RopeScaling("yarn", 4.0, 16)
    scores = stretch.attention_logits(block, x, rope_scaling=yarn)
    unscaled = stretch.attention_logits(block, x, rope_scaling=None)
    assert yarn.attention_factor == pytest.approx(0.1 * math.log(4) + 1)
    assert not torch.allclose(scores, unscaled)
    with torch.no_grad():
        C, nh = model.config.n_embd, model.config.n_head
        q, k, _ = block.attn.c_attn(block.ln_1(x)).split(C, dim=2)
        q, k = (t.view(20, nh, C // nh).transpose(0, 1) for t in (q, k))
        rotated = [rope_rotate(t, torch.arange(20), frequencies=yarn.frequencies(C // nh)) for t in (q, k)]
        plain = rotated[0] @ rotated[1].transpose(-2, -1) / math.sqrt(C // nh)
    causal = torch.ones(20, 20, dtype=torch.bool).tril()
    assert_close(scores[:, causal], yarn.attention_factor ** 2 * plain[:, causal], rtol=1e-5, atol=1e-6)


def test_offset_change(tiny_model):
    ids = stream(12).tolist()
    assert stretch.offset_change(tiny_model("alibi"), ids, offset=30) == 0.0
    assert stretch.offset_change(tiny_model("rope"), ids, offset=30) < 1e-5
    assert stretch.offset_change(tiny_model("sinusoidal"), ids, offset=30) > 1e-3
    learned = tiny_model("learned")  # 64 rows
    assert stretch.offset_change(learned, ids, offset=52) > 1e-3
    assert stretch.offset_change(learned, ids, offset=53) is None


@pytest.mark.parametrize("scheme", SCHEMES)
def test_offset_change_is_the_full_forwards_last_position(tiny_model, scheme):
    """It runs the head on the last position only; the number is that of the full forward's logits."""
    model, ids = tiny_model(scheme), stream(12).tolist()
    idx = torch.tensor([ids])
    with torch.no_grad():
        a, b = model(idx)[0][0, -1], model(idx, offset=20)[0][0, -1]  # (vocab,)
    finite = a.isfinite()
    assert stretch.offset_change(model, ids, offset=20) == pytest.approx(float((a[finite] - b[finite]).abs().max()),
                                                                         rel=1e-5, abs=1e-6)


def test_shift_sentence_counts_one_token_in_the_singular():
    assert stretch.shift_sentence([("rope", 0.0)], tokens=1, offset=64).startswith(
        "Your sentence (1 token) at offset 0 and at offset 64.")
    assert "(2 tokens)" in stretch.shift_sentence([("rope", 0.0)], tokens=2, offset=64)


def test_wavelength_frame():
    frame = rescaling.wavelength_frame(32, factor=4.0, original_length=128)
    trained = 2 * math.pi / pair_frequencies(32).numpy()
    np.testing.assert_allclose(frame["as-trained"], trained)
    np.testing.assert_allclose(frame["pi"], 4 * trained)
    np.testing.assert_allclose(frame["turns"], 128 / trained)
    assert frame["yarn_region"].tolist() == ["left alone"] + ["ramp"] * 5 + ["interpolated"] * 10
    np.testing.assert_allclose(frame["yarn"][6:], frame["pi"][6:])
    reading = rescaling.wavelength_reading(frame, original_length=128, factor=4.0)
    assert "pairs 6–15" in reading and "6 of 16 pairs complete a full turn" in reading


def loss_rows(values: dict[str, list[float]], text: str = "story") -> pd.DataFrame:
    return pd.DataFrame([{"text": text, "curve": curve, "length": length, "loss": loss, "tokens": 1024}
                         for curve, losses in values.items() for length, loss in zip(stretch.LENGTHS, losses)])


def test_loss_reading_says_which_method_helps_and_which_helps_nobody():
    frame = loss_rows({"rope": [3.0, 3.1, 3.3, 3.6], "rope + Position Interpolation ×4": [3.4, 3.4, 3.5, 3.7],
                       "rope + YaRN ×4": [3.05, 3.1, 3.2, 3.3], "alibi": [3.2, 3.2, 3.2, 3.2]})
    reading = stretch.loss_reading(frame, train_length=128, factor=4)
    assert "rope as trained **3.600**" in reading
    assert "Position Interpolation ×4: 3.700 (+0.100); helps at no length past training" in reading
    assert "costs +0.400" in reading
    assert "YaRN ×4: 3.300 (-0.300); helps at 512, 1024 tokens; at 128 tokens it costs +0.050" in reading
    assert "alibi (for reference): 3.200" in reading


def test_profile_reading_compares_within_and_past_training():
    profile = pd.DataFrame({"layer": 0, "position": np.arange(4), "max_logit": [1.0, 1.0, 3.0, 5.0],
                            "entropy": [0.0, 0.5, 1.0, 1.5]})
    reading = stretch.profile_reading({"rope": profile}, layer=0, train_length=2)
    assert reading == ("- **rope**: largest logit 1.00 within the first 2 positions, 4.00 past them (it rises); entropy "
                       "0.25 → 1.25 nats, against 0.35 → 1.24 for an even spread over the visible keys, which grows with "
                       "the position by itself: 0.10 nats more focused than even before the wall, 0.01 nats more spread "
                       "than even past it.")  # the even spread's entropy is the baseline


def test_scaled_loss_figure():
    frame = loss_rows({"rope": [3.0, 3.1, 3.3, 3.6], "rope + YaRN ×4": [3.05, 3.1, 3.2, 3.3],
                       "sinusoidal": [3.2, 3.5, None, None]})
    fig = scaled_loss_figure(frame, title="story", train_length=128)
    assert [t.name for t in fig.data] == ["rope", "rope + YaRN ×4", "sinusoidal"]
    assert list(fig.data[1].y) == [3.05, 3.1, 3.2, 3.3] and list(fig.data[2].x) == [128, 256]
    assert fig.data[1].line.color != fig.data[0].line.color and fig.data[2].line.dash == "dash"
    assert fig.layout.xaxis.type == "log" and fig.layout.shapes[0].x0 == 128


def test_wavelength_methods_figure():
    frame = rescaling.wavelength_frame(32, factor=8.0, original_length=128)
    fig = wavelength_methods_figure(frame, original_length=128, factor=8.0)
    assert [t.name for t in fig.data] == ["as trained", "Position Interpolation", "NTK-aware", "YaRN", "Llama 3 bands"]
    np.testing.assert_allclose(fig.data[1].y, frame["pi"])
    assert {s.y0 for s in fig.layout.shapes if s.type == "line"} == {128, 1024}
    assert sum(s.type == "rect" for s in fig.layout.shapes) == 3  # YaRN's three regions


def test_attention_profile_figure_smooths_and_draws_even_attention_for_entropy():
    profile = pd.DataFrame({"layer": [0] * 4 + [1] * 4, "position": list(range(4)) * 2,
                            "max_logit": [1.0, 3.0, 5.0, 7.0, 0.0, 0.0, 0.0, 0.0], "entropy": [0.0, 0.6, 1.0, 1.3] * 2})
    fig = attention_profile_figure({"rope": profile}, layer=0, measure="max_logit", train_length=2, window=2)
    assert list(fig.data[0].y) == [1.0, 2.0, 4.0, 6.0]
    fig = attention_profile_figure({"rope": profile}, layer=1, measure="entropy", train_length=2, window=1)
    assert len(fig.data) == 2
    np.testing.assert_allclose(fig.data[1].y, np.log(np.arange(4) + 1))


def test_profile_reading_gives_the_even_spread_and_whether_the_logit_rises():
    import pandas as pd  # noqa: PLC0415

    from lpos.analysis.stretch import profile_reading  # noqa: PLC0415

    positions = np.arange(256)
    frame = pd.DataFrame({"layer": 0, "position": positions, "max_logit": np.where(positions < 128, 4.80, 4.82),
                          "entropy": np.log(positions + 1.0) - 0.9})
    said = profile_reading({"none": frame}, layer=0, train_length=128)
    even_in, even_past = np.log(positions[:128] + 1.0).mean(), np.log(positions[128:] + 1.0).mean()
    assert f"against {even_in:.2f} → {even_past:.2f} for an even spread" in said
    assert "(it hardly moves)" in said and said.count("0.90 nats more focused than even") == 2


def test_shift_sentence_says_a_table_cannot_hold_a_long_text_even_at_offset_0():
    from lpos.analysis.stretch import shift_sentence  # noqa: PLC0415

    said = shift_sentence([("learned", None), ("rope", 1e-6)], tokens=140, offset=1, table_rows={"learned": 128, "rope": None})
    assert "learned cannot hold your sentence even at offset 0: learned's table has 128 rows" in said
    assert "shifted this far" not in said
    short = shift_sentence([("learned", None)], tokens=100, offset=64, table_rows={"learned": 128})
    assert "learned cannot be shifted this far" in short


@pytest.mark.parametrize("scheme,turning", [("rope", 16), ("rope-partial", 4), ("p-rope", 12), ("rnope", 16)])
def test_wavelength_frame_marks_the_pairs_that_never_turn(scheme, turning):
    frame = rescaling.wavelength_frame(32, factor=4.0, original_length=128, scheme=scheme)
    never = frame["yarn_region"] == "never turns"
    assert int((~never).sum()) == turning and frame.loc[never, "as-trained"].isna().all()
    assert frame.loc[~never, list(ROPE_METHODS)].notna().all().all()
    reading = rescaling.wavelength_reading(frame, original_length=128, factor=4.0)
    assert ("never turns" in reading) == (turning < 16)


def test_a_partial_head_is_rescaled_over_its_rotated_columns_as_transformers_does():
    frame = rescaling.wavelength_frame(32, factor=4.0, original_length=128, scheme="rope-partial")
    rotated = 2 * math.pi / pair_frequencies(8).numpy()  # the first 8 columns: frequencies over 8, not 32
    np.testing.assert_allclose(frame["as-trained"][:4], rotated)
    np.testing.assert_allclose(frame["pi"][:4], 4 * rotated)


@pytest.mark.parametrize("scheme", ["rope", "rope-partial", "p-rope"])
def test_division_shares_match_each_method(scheme):
    frame = rescaling.division_frame(32, factor=8.0, original_length=128, scheme=scheme)
    share = frame.pivot(index="method", columns="pair", values="share")
    turning = share.loc["pi"].notna()
    np.testing.assert_allclose(share.loc["pi"][turning], 1.0)  # PI divides every turning pair by the factor
    assert share.loc["ntk"][turning].iloc[0] == pytest.approx(0.0, abs=1e-9)  # NTK keeps the fastest pair
    assert share.loc["yarn"][turning].iloc[0] == pytest.approx(0.0, abs=1e-9)  # 20 turns in 128: below beta_fast, kept
    values = share.to_numpy()[:, turning.to_numpy()]
    assert ((values >= -1e-9) & (values <= 1 + 1e-9)).all()
    assert np.isnan(share.to_numpy()[:, ~turning.to_numpy()]).all()
    reading = rescaling.division_reading(frame, factor=8.0)
    assert reading.count("- **") == len(RESCALINGS)
    assert ("never turn" in reading) == (not turning.all())


def test_ntk_sentence_says_the_slowest_turning_pair_is_not_fully_divided_for_p_rope():
    assert "only the slowest is divided by the full factor" in rescaling.pairs_sentence(32, train_length=128, base=1e4)
    p_rope = rescaling.pairs_sentence(32, train_length=128, base=1e4, scheme="p-rope", layers=4)
    assert "only the slowest is divided" not in p_rope and "of which 12 turn" in p_rope
    assert "Layer 4 rotates nothing" in rescaling.pairs_sentence(32, train_length=128, base=1e4, scheme="rnope", layers=4)


def test_division_figure_draws_one_row_per_method_and_greys_pairs_that_never_turn():
    from lpos.figures.stretch import division_figure

    fig = division_figure(rescaling.division_frame(32, factor=4.0, original_length=128, scheme="p-rope"), factor=4.0)
    assert list(fig.data[0].y) == [ROPE_METHODS[m].label for m in RESCALINGS]
    assert np.isnan(np.asarray(fig.data[0].z, dtype=float)[:, 12:]).all()
    assert [s.type for s in fig.layout.shapes] == ["rect"]


def test_a_models_own_share_and_trained_rescaling_reach_the_wavelengths():
    """Pythia's rotary_pct as GPTConfig.rope_share turns a quarter of each head, as rope-partial does; a config's own
    rescaling (Llama 3.1's llama3) is what "as trained" draws, and each method replaces it."""
    quarter = rescaling.wavelength_frame(32, factor=4.0, original_length=128, share=0.25)
    partial = rescaling.wavelength_frame(32, factor=4.0, original_length=128, scheme="rope-partial")
    pd.testing.assert_frame_equal(quarter, partial)
    bands = RopeScaling("llama3", 8.0, 128)
    trained = rescaling.wavelength_frame(32, factor=4.0, original_length=128, trained_scaling=bands)
    plain = rescaling.wavelength_frame(32, factor=4.0, original_length=128)
    np.testing.assert_allclose(trained["as-trained"], 2 * np.pi / bands.frequencies(32).numpy())
    assert not np.allclose(trained["as-trained"], plain["as-trained"])
    pd.testing.assert_frame_equal(trained.drop(columns="as-trained"), plain.drop(columns="as-trained"))
    shares = rescaling.division_frame(32, factor=4.0, original_length=128, share=0.25)
    assert int(shares[shares["method"] == "pi"]["share"].notna().sum()) == 4


def test_the_pairs_sentence_reads_a_models_own_layers_without_rope():
    from lpos.model import GPTConfig  # noqa: PLC0415
    from lpos.positions import scheme_info  # noqa: PLC0415

    config = GPTConfig(n_layer=4, position="rope", nope_layers=(1,))
    said = rescaling.pairs_sentence(32, train_length=128, base=1e4, scheme=scheme_info("rope").for_config(config), layers=4)
    assert "Layer 2 rotates nothing" in said
    assert "rotates nothing" not in rescaling.pairs_sentence(32, train_length=128, base=1e4, layers=4)


def test_a_pair_left_alone_is_at_its_base_frequency_when_the_model_was_trained_rescaled():
    frame = rescaling.division_frame(32, factor=4.0, original_length=128)
    assert "left as trained" in rescaling.division_reading(frame, factor=4.0)
    scaled = rescaling.division_reading(frame, factor=4.0, trained_scaled=True)
    assert "left at its base frequency" in scaled and "left as trained" not in scaled
    waves = rescaling.wavelength_frame(32, factor=4.0, original_length=128, trained_scaling=RopeScaling("llama3", 8.0, 128))
    assert "kept at the base frequency" in rescaling.wavelength_reading(waves, original_length=128, factor=4.0,
                                                                        trained_scaled=True)
