"""Numbers behind the sinusoids, similarity and RoPE & ALiBi pages, against references and properties."""
import math

import numpy as np
import pytest
import torch

from lpos.analysis import attention, similarity, sinusoids
from lpos.positions import SCHEMES, alibi_slopes, rope_rotate, sinusoidal_table


@pytest.mark.parametrize("width,base", [(8, 10000.0), (128, 10000.0), (1024, 10000.0), (64, 500.0)])
def test_wavelengths_run_from_two_pi_to_two_pi_base_to_the_width_fraction(width, base):
    frame = sinusoids.wavelength_frame(width, base=base)
    assert len(frame) == width // 2
    assert frame["wavelength"].iloc[0] == pytest.approx(2 * math.pi)
    # the last pair i = width/2 - 1 has frequency base^(-(width-2)/width)
    assert frame["wavelength"].iloc[-1] == pytest.approx(2 * math.pi * base ** ((width - 2) / width), rel=1e-9)
    np.testing.assert_allclose(np.diff(np.log(frame["wavelength"])), 2 * math.log(base) / width)  # geometric


def test_frequency_bands_are_the_table_columns():
    bands = sinusoids.frequency_bands(50, 16, pairs=[0, 3])
    table = sinusoidal_table(50, 16).numpy()
    cos3 = bands[(bands["pair"] == 3) & (bands["part"] == "cos")]
    np.testing.assert_allclose(cos3["value"], table[:, 7])
    np.testing.assert_allclose(cos3["value"], np.cos(np.arange(50) * 10000 ** (-6 / 16)), atol=1e-6)
    with pytest.raises(ValueError, match="out of range"):
        sinusoids.frequency_bands(10, 16, pairs=[8])


@pytest.mark.parametrize("width", [8, 128, 512])
def test_dot_product_of_rows_depends_only_on_distance(width):
    dots = sinusoids.offset_dot_products(width, starts=[0, 37, 1000], max_offset=300)
    curves = {start: part["dot"].to_numpy() for start, part in dots.groupby("start")}
    # row t . row t+k = sum_i sin(t w_i) sin((t+k) w_i) + cos(t w_i) cos((t+k) w_i) = sum_i cos(k w_i)
    frequencies = 10000.0 ** (-np.arange(0, width, 2) / width)  # (width/2,)
    expected = np.cos(np.arange(301)[:, None] * frequencies[None, :]).sum(axis=1)
    for curve in curves.values():  # the table is float32: error grows with t·width
        np.testing.assert_allclose(curve, expected, atol=2e-4 * width)
    assert curves[0][0] == pytest.approx(width / 2, rel=1e-6)  # |row|^2 = sum of sin^2 + cos^2 = width/2
    assert curves[0].min() < 0.5 * width / 2  # not a trivial constant


def test_block_average_keeps_small_maps_and_means_big_ones():
    small = np.arange(12.0).reshape(3, 4)
    same, r, c = sinusoids.block_average(small, max_rows=3, max_columns=4)
    assert (r, c) == (1, 1) and same is small
    big = np.arange(30.0).reshape(5, 6)
    averaged, r, c = sinusoids.block_average(big, max_rows=2, max_columns=3)
    assert (r, c) == (3, 2) and averaged.shape == (2, 3)
    assert averaged[0, 0] == pytest.approx(big[:3, :2].mean())
    assert averaged[1, 2] == pytest.approx(big[3:, 4:].mean())  # partial last block


def test_table_view_is_at_most_the_drawing_limit():
    view = sinusoids.table_view(4096, 1024)
    assert view.values.shape == (256, 256) and (view.row_block, view.column_block) == (16, 4)
    exact = sinusoids.table_view(100, 64)
    np.testing.assert_array_equal(exact.values, sinusoidal_table(100, 64).numpy())


@pytest.mark.parametrize("n,width", [(1, 4), (7, 16), (300, 32)])
def test_cosine_map_is_symmetric_with_unit_diagonal(n, width):
    rows = np.random.default_rng(n).normal(size=(n, width))
    cosine = similarity.cosine_similarity_map(rows)
    np.testing.assert_allclose(cosine, cosine.T)
    np.testing.assert_allclose(np.diag(cosine), 1.0)
    i, j = 0, n - 1
    assert cosine[i, j] == pytest.approx(rows[i] @ rows[j] / np.linalg.norm(rows[i]) / np.linalg.norm(rows[j]))


def test_large_similarity_map_is_block_averaged_to_256():
    rows = sinusoidal_table(1024, 64)
    drawn = similarity.similarity_map(rows, title="t")
    assert drawn.block == 4 and drawn.values.shape == (256, 256) and drawn.size == 1024
    full = similarity.cosine_similarity_map(rows)
    assert drawn.values[3, 5] == pytest.approx(full[12:16, 20:24].mean(), abs=1e-6)


def test_rope_kernel_matches_rotated_vectors_and_depends_on_distance():
    head_dim, length = 16, 40
    kernel = similarity.rope_kernel(length, head_dim)
    vector = torch.ones(head_dim, dtype=torch.float64)  # every pair the same length
    rotated = rope_rotate(vector.expand(length, head_dim), torch.arange(length))
    np.testing.assert_allclose(kernel, similarity.cosine_similarity_map(rotated), atol=1e-12)
    for offset in (0, 3, 17):
        diagonal = np.diagonal(kernel, offset=-offset)
        np.testing.assert_allclose(diagonal, diagonal[0], atol=1e-12)
    line = similarity.rope_kernel_by_offset(length - 1, head_dim)
    np.testing.assert_allclose(line["similarity"], kernel[:, 0], atol=1e-12)


def test_nearest_tokens_finds_the_closest_rows(tiny_model):
    model = tiny_model("learned")
    with torch.no_grad():
        model.transformer.wte.weight[500] = model.transformer.wte.weight[42] * 3  # same direction
    frame = similarity.nearest_tokens(model, 42, k=5, counts={500: 7})
    assert frame["id"].iloc[0] == 500 and frame["cosine"].iloc[0] == pytest.approx(1.0, abs=1e-5)
    assert 42 not in frame["id"].tolist() and len(frame) == 5
    assert frame["count"].tolist()[0] == 7 and frame["count"].tolist()[1] == 0
    assert np.all(np.diff(frame["cosine"]) <= 0)
    assert "count" not in similarity.nearest_tokens(model, 42, k=3)  # no counts: no column of None


def test_nearest_positions_of_a_sinusoidal_table_are_its_neighbours():
    table = sinusoidal_table(64, 64).numpy()
    frame = similarity.nearest_positions(table, 30, k=2)
    assert sorted(frame["position"]) == [29, 31] and frame["distance"].tolist() == [1, 1]


def test_pca_explains_at_most_everything_and_orders_components(tiny_model):
    rows = tiny_model("learned").transformer.wpe.weight.detach().numpy()
    projection = similarity.pca(rows, components=3)
    assert projection.coordinates.shape == (64, 3)
    assert 0 < projection.explained.sum() <= 1 + 1e-9
    assert np.all(np.diff(projection.explained) <= 0)
    centred = rows - rows.mean(axis=0)
    U, S, _ = np.linalg.svd(centred, full_matrices=False)  # reference: the SVD of the centred rows
    np.testing.assert_allclose(np.abs(projection.coordinates), np.abs(U[:, :3] * S[:3]), atol=1e-8)
    np.testing.assert_allclose(projection.explained, S[:3] ** 2 / (S**2).sum(), rtol=1e-6)
    plane = similarity.pca(rows[:, :2], components=3)  # only two columns: two components, all variance
    assert plane.coordinates.shape == (64, 2) and plane.explained.sum() == pytest.approx(1.0)
    sinus = similarity.pca(sinusoidal_table(128, 64).numpy())
    assert sinus.explained.sum() <= 1 + 1e-9


@pytest.mark.parametrize("scheme", SCHEMES)
def test_position_rows_exist_only_for_schemes_that_add_them(tiny_model, scheme):
    model = tiny_model(scheme)
    rows = similarity.position_rows(model, 100)
    if scheme == "learned":
        assert rows.shape == (64, 32)  # stops at the table's last row
    elif scheme == "sinusoidal":
        np.testing.assert_array_equal(rows, sinusoidal_table(100, 32).numpy())
    else:
        assert rows is None


@pytest.mark.parametrize("scheme", SCHEMES)
def test_attention_maps_are_the_models_own_weights(tiny_model, scheme):
    model = tiny_model(scheme, n_head=2)
    ids = [10, 20, 30, 10, 40]
    _, _, weights = model(torch.tensor([ids]), return_attention=True)
    for layer in range(2):
        maps = attention.attention_maps(model, ids, layer=layer)
        np.testing.assert_allclose(maps, weights[layer][0].detach().numpy(), atol=1e-6)
    np.testing.assert_allclose(maps.sum(-1), 1.0, atol=1e-5)
    with pytest.raises(ValueError, match="out of range"):
        attention.attention_maps(model, ids, layer=2)


def test_alibi_with_bias_is_the_models_attention_and_without_is_plain_softmax(tiny_model):
    model = tiny_model("alibi", n_head=4)
    ids = [5, 6, 7, 8, 9, 10]
    effect = attention.alibi_effect(model, ids, layer=1)
    np.testing.assert_allclose(effect.with_bias, attention.attention_maps(model, ids, layer=1), atol=1e-6)
    np.testing.assert_allclose(effect.slopes, alibi_slopes(4).numpy())
    assert effect.bias[2, 5, 1] == pytest.approx(-alibi_slopes(4)[2].item() * 4)
    assert not np.allclose(effect.with_bias, effect.without_bias)
    np.testing.assert_allclose(np.triu(effect.without_bias[0], 1), 0.0)  # still causal


@pytest.mark.parametrize("head_dim", [2, 8, 64])
def test_rope_scores_depend_only_on_offset(head_dim):
    generator = torch.Generator().manual_seed(head_dim)
    query, key = torch.randn(head_dim, generator=generator), torch.randn(head_dim, generator=generator)
    frame = attention.offset_scores(query, key, offsets=[0, 1, 5, 30], length=200)
    for offset, part in frame.groupby("offset"):
        assert len(part) == 200 - offset and (part["m"] - part["n"] == offset).all()
        assert part["score"].max() - part["score"].min() < 1e-5  # a flat line
    zero = frame[frame["offset"] == 0]["score"].iloc[0]
    assert zero == pytest.approx(float(query.double() @ key.double()))  # rotation by the same angle cancels


def test_rotating_pair_keeps_length_and_turns_by_the_pair_frequency():
    vector = torch.tensor([3.0, 4.0, 1.0, 0.0])
    frame = attention.rotating_pair(vector, pair=0, positions=5)
    np.testing.assert_allclose(np.hypot(frame["x"], frame["y"]), 5.0, atol=1e-12)
    np.testing.assert_allclose(frame["angle"], np.arange(5.0))  # pair 0 turns one radian per position
    np.testing.assert_allclose(frame["x"].iloc[1], 3 * math.cos(1) - 4 * math.sin(1))
    slow = attention.rotating_pair(vector, pair=1, positions=3)
    np.testing.assert_allclose(slow["angle"], np.arange(3) * 10000 ** (-2 / 4))
    angles = attention.rope_angle_frame(64)
    assert angles["radians"].iloc[0] == 1.0 and angles["wavelength"].iloc[0] == pytest.approx(2 * math.pi)


@pytest.mark.parametrize("scheme,turning,rotated", [("rope", 16, 32), ("rope-partial", 4, 8), ("p-rope", 12, 32)])
def test_rope_angle_frame_of_each_rotating_scheme(scheme, turning, rotated):
    angles = attention.rope_angle_frame(32, scheme=scheme)
    expected = np.zeros(16)
    expected[:turning] = 10000.0 ** (-np.arange(turning) * 2 / rotated)  # speeds over the rotated columns only
    np.testing.assert_allclose(angles["radians"], expected, rtol=1e-12)
    assert np.isinf(angles["wavelength"][turning:]).all()
    frame = attention.rotating_pair(torch.tensor([1.0, 0.0] * 16), pair=15, positions=4, scheme=scheme)
    still = turning < 16
    assert (frame["x"] == 1.0).all() == still  # a pair that never turns stays put
    assert ("never turns" in attention.rope_step_sentence(15, 32, scheme=scheme)) == still


@pytest.mark.parametrize("scheme", ["rope", "rope-partial", "p-rope", "rnope"])
def test_rotation_map_and_its_sentence_follow_the_models_own_rotation(tiny_model, scheme):
    model = tiny_model(scheme, n_layer=4, n_embd=64)
    frame = attention.rotation_map(model)
    hs = model.config.n_embd // model.config.n_head
    assert len(frame) == model.config.n_layer * hs // 2
    q = torch.randn(1, model.config.n_head, 3, hs)
    for layer, rows in frame.groupby("layer"):
        attn = model.transformer.h[layer].attn
        turned, _ = model.scheme.rotate(attn, q, q, torch.arange(3))
        moved = (turned - q).abs().amax(dim=(0, 1, 2)).reshape(hs // 2, 2).amax(-1)  # (hs/2,): 0 where a pair stays
        assert ((moved > 0).numpy() == (rows["radians"] > 0).to_numpy()).all(), (scheme, layer)
    said = attention.rotation_sentence(model)
    assert ("rotates nothing" in said) == (scheme == "rnope")
    assert ("never turn" in said) == (scheme in ("rope-partial", "p-rope"))


def test_queries_and_keys_rebuild_the_models_scores(tiny_model):
    model = tiny_model("rope")
    ids = [1, 2, 3, 4]
    q, k = attention.queries_and_keys(model, ids, layer=0, rotate=True)
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (nh, T, T)
    weights = torch.softmax(scores.masked_fill(~torch.ones(4, 4, dtype=torch.bool).tril(), float("-inf")), dim=-1)
    np.testing.assert_allclose(weights.numpy(), attention.attention_maps(model, ids, layer=0), atol=1e-6)


def test_table_caption_at_base_2_says_the_right_columns_go_round():
    from lpos.analysis.sinusoids import table_sentence  # noqa: PLC0415

    said = table_sentence(128, 128, base=2.0)
    assert "thousands" not in said and "barely" not in said
    assert "every 12.4, so from position 0 to 127 it goes round 10.2 times" in said
    assert "barely changes" in table_sentence(128, 128, base=10000.0)
    assert "mean of 16 rows by 4 columns" in table_sentence(4096, 1024) and "mean of" not in table_sentence(128, 128)
    assert "mean of 4 columns" in table_sentence(128, 1024)
    assert table_sentence(1, 8).startswith("One position, so one row.")


def test_rope_sentence_says_the_ladder_holds_at_the_base_set_and_names_the_model_base():
    from lpos.analysis.sinusoids import rope_sentence  # noqa: PLC0415

    said = rope_sentence(128, 32, base=2.0, model_bases=(10000.0,))
    assert "at the base set here, those are the wavelengths of every 4th of these 64 pairs" in said
    assert "this model's own RoPE base is 10,000, not the 2 set here" in said
    assert "own RoPE base" not in rope_sentence(128, 32, base=10000.0, model_bases=(10000.0,) * 4)
    assert "own RoPE base" not in rope_sentence(128, 32, base=2.0)


def test_rope_sentence_names_each_base_of_a_model_with_local_and_global_layers():
    """Gemma 3: local layers turn with base 10,000, the global one with 1,000,000; a partial head turns fewer pairs."""
    from lpos.analysis.sinusoids import rope_sentence  # noqa: PLC0415
    from lpos.positions import scheme_info  # noqa: PLC0415

    gemma = (10000.0, 10000.0, 10000.0, 1_000_000.0)
    said = rope_sentence(128, 32, base=10000.0, model_bases=gemma)
    assert ("this model's layers turn with 2 RoPE bases: 10,000 in layers 1, 2 and 3; 1,000,000 in layer 4; only "
            "those with base 10,000 turn at these wavelengths") in said
    assert "none with the 500 set here" in rope_sentence(128, 32, base=500.0, model_bases=gemma)
    quarter = scheme_info("rope").with_share(0.25)
    said = rope_sentence(128, 32, model_rotation=quarter)
    assert "turns only 4 of them, by base^(−2i/8) over its first 8 columns, and the rest never" in said
    assert "turns only" not in rope_sentence(128, 32, model_rotation=scheme_info("rope"))


def test_never_seen_rows_can_turn_up_by_chance():
    from lpos.analysis.similarity import search_sentence  # noqa: PLC0415
    from lpos.tokenizer import GPT2  # noqa: PLC0415

    said = search_sentence(GPT2, counted=True)
    assert "so they can turn up by chance" in said and "the tokenizer's vocabulary" in said
    assert "model's vocabulary" not in said and "by chance" not in search_sentence(GPT2, counted=False)


def test_random_neighbour_distance_is_the_mean_distance_of_any_other_row():
    for rows in (2, 20, 128):
        pairs = [abs(i - j) for i in range(rows) for j in range(rows) if i != j]
        assert similarity.random_neighbour_distance(rows) == pytest.approx(np.mean(pairs))
    # and random rows do land there, at the slider's number of rows
    generator = np.random.default_rng(0)
    measured = np.mean([similarity.mean_neighbour_distance(generator.standard_normal((20, 64))) for _ in range(20)])
    assert measured == pytest.approx(7.0, abs=0.6)


def test_neighbour_sentence_at_20_rows_names_those_rows_and_their_random_figure():
    text = similarity.neighbour_sentence(3.8, 20)
    assert "among positions 0–19" in text and "3.8 positions away" in text and "(about 7 for random rows)" in text
    assert "42" not in text and "whole table" not in text
    assert "(about 43 for random rows)" in similarity.neighbour_sentence(4.0, 128)
    assert "says nothing here" in similarity.neighbour_sentence(1.0, 2)  # two rows: one neighbour each


def test_sinusoid_sentences_are_computed_for_the_width_shown():
    """The slowest wavelength is 2π·base^((w−2)/w), not "about 2π·base": 87% of it at width 128, 10% at 8;
    pair 31 has turned 84° by position 127, not "barely started"; RoPE's 32-column heads use every 4th of
    the 128-column table's 64 wavelengths, not "the same wavelengths"."""
    import math

    from lpos.analysis.sinusoids import (bands_sentence, base_help, rope_sentence, slowest_wavelength,
                                         wavelength_frame)
    from lpos.figures.sinusoids import wavelength_figure

    for width in (8, 128):
        assert slowest_wavelength(width) == pytest.approx(float(wavelength_frame(width)["wavelength"].iloc[-1]), rel=1e-5)
    assert "54,410 positions, 87% of 2π·base" in base_help(128, base=10000.0)
    assert "6,283 positions, 10% of 2π·base" in base_help(8, base=10000.0)
    assert "from 2π to 6,283 (10% of 2π·base)" in wavelength_figure(wavelength_frame(8), base=10000.0).layout.title.text
    assert bands_sentence(128, 128, pairs=[0, 8, 16, 31]) == \
        "From position 0 to 127, pair 0 goes round 20.2 times and pair 31 turns 84°."
    assert math.degrees(127 * 10000 ** (-62 / 128)) == pytest.approx(84, abs=0.5)
    assert "every 4th of these 64 pairs" in rope_sentence(128, 32)
    assert "exactly these wavelengths" in rope_sentence(32, 32)
    assert "not this table's 20" in rope_sentence(40, 32)


def test_the_bands_sentence_of_one_position_says_nothing_turned():
    from lpos.analysis.sinusoids import bands_sentence  # noqa: PLC0415

    said = bands_sentence(1, 128, pairs=[0, 31])
    assert "From position 0 to 0" not in said and said.startswith("One position")


def test_the_angle_views_of_a_model_with_its_own_share_turn_what_the_model_turns(tiny_model):
    """A configuration's own share of rotated columns (Pythia's rotary_pct 0.25 on plain `rope`): the angles, the
    arrow and the speed sentence read the model's rotation, not the scheme's default of every column."""
    model = tiny_model("rope", n_embd=64, rope_share=0.25)
    hs, share = model.config.head_size, model.config.rope_share
    angles = attention.rope_angle_frame(hs, scheme="rope", share=share)
    q = torch.randn(1, 1, 2, hs)
    turned, _ = model.scheme.rotate(model.transformer.h[0].attn, q, q, torch.arange(2))
    moved = (turned - q)[0, 0, 1].abs().reshape(hs // 2, 2).amax(-1)  # (hs/2,): 0 where the model leaves a pair
    assert ((moved > 0).numpy() == (angles["radians"] > 0).to_numpy()).all()
    assert int((angles["radians"] > 0).sum()) == hs // 8  # a quarter of the columns, so a quarter of the pairs
    assert (attention.rope_angle_frame(hs, scheme="rope")["radians"] > 0).all()  # the scheme's own: every pair
    said = attention.rope_speed_sentence(hs, n_embd=64, base=10000.0, scheme="rope", share=share)
    assert f"over the head's {hs // 4} rotated columns" in said
    assert "never turns" in attention.rope_step_sentence(hs // 2 - 1, hs, scheme="rope", share=share)


def test_the_rope_kernel_of_a_quarter_share_keeps_three_quarters_of_its_pairs_still():
    whole = similarity.rope_kernel_by_offset(200, 32, scheme="rope")["similarity"].to_numpy()
    quarter = similarity.rope_kernel_by_offset(200, 32, scheme="rope", share=0.25)["similarity"].to_numpy()
    eight = similarity.rope_kernel_by_offset(200, 8, scheme="rope")["similarity"].to_numpy()  # the 4 pairs that turn
    np.testing.assert_allclose(quarter, 0.75 + 0.25 * eight, rtol=1e-12)  # 12 of 16 pairs never turn: each adds 1
    assert quarter.min() > whole.min()
    assert "ωᵢ = 0 for the last 12, which never turn" in similarity.frequencies_said(32, base=10000.0, share=0.25)


def test_the_kernel_sentence_says_which_layers_base_it_draws():
    from lpos.analysis.similarity import rope_kernel_map_sentence  # noqa: PLC0415

    one = rope_kernel_map_sentence(label="RoPE", head_dim=32, base=10000.0, layer_bases=(10000.0,) * 4)
    assert "(base 10,000, this model's;" in one
    gemma = rope_kernel_map_sentence(label="RoPE", head_dim=16, base=10000.0,
                                     layer_bases=(10000.0, 10000.0, 10000.0, 1_000_000.0))
    assert ("(base 10,000, layer 1's: this model's layers turn with 2 RoPE bases, 10,000 in layers 1, 2 and 3; "
            "1,000,000 in layer 4;") in gemma
