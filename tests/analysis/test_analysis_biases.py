"""Numbers behind the attention page's bias and count sections: each bias scheme's bias against
distance (T5 against its table, ALiBi against its slopes, FIRE against its own pieces), the bias's
effect on the weights, and CoPE's counts (what the scheme adds, monotone, bounded, what they follow)."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F

from lpos.positions import NO_POSITIONS
from lpos.analysis import attention, biases, counts
from lpos.analysis.heads import head_statistics
from lpos.corpus import story
from lpos.positions import alibi_slopes, schemes_with
from lpos.positions.t5 import relative_bucket
from lpos.tokenizer import GPT2

SENTENCE = "The dog saw the cat. It ran away! Then it slept."


def tokens_of(text: str) -> tuple[list[int], list[str]]:
    ids = GPT2.encode(text)
    return ids, GPT2.token_strings(ids)


@pytest.fixture
def random_bias(tiny_model):
    """A bias model whose weights are no longer near zero: the differences to measure are large."""
    def make(scheme: str, **config):
        model = tiny_model(scheme, **config)
        torch.manual_seed(1)
        with torch.no_grad():
            for parameter in model.parameters():
                parameter.add_(torch.randn_like(parameter))
        return model
    return make


def test_t5_bias_is_its_table_looked_up_by_bucket_in_every_layer(random_bias):
    model = random_bias("t5", n_layer=3)
    table = model.transformer.relative_bias.weight.detach()  # (buckets, nh)
    distances = torch.arange(biases.MAX_DISTANCE + 1)
    expected = table[relative_bucket(distances, num_buckets=model.config.num_buckets,
                                     max_distance=model.config.max_distance)].T  # (nh, D + 1)
    for layer in range(3):
        curves = biases.bias_curves(model, layer=layer)
        for head in range(model.config.n_head):
            torch.testing.assert_close(torch.tensor(curves.head_curve(head).to_numpy()), expected[head], rtol=0, atol=1e-6)
        assert curves.same_in_every_layer and not curves.depends_on_query and not curves.is_alibi
        assert curves.same_line == (biases.QUERY_POSITIONS,)
    assert curves.parameters == model.config.num_buckets * model.config.n_head
    buckets = relative_bucket(distances)
    assert curves.changes(0) == len(buckets.unique()) - 1 == 31  # a new value with each new bucket
    assert curves.last_change(0) == int((buckets == buckets.max()).nonzero()[0])  # where the last bucket starts
    short = curves.frame[curves.frame["query"] == 16]
    assert short["distance"].max() == 16  # a query at 16 reaches back 16 tokens


def test_alibi_bias_is_its_lines():
    from lpos.model import untrained_model

    model = untrained_model("alibi")
    curves = biases.bias_curves(model, layer=2)
    slopes = alibi_slopes(model.config.n_head)
    for head in range(model.config.n_head):
        np.testing.assert_allclose(curves.head_curve(head).to_numpy(), -slopes[head].item() * np.arange(257), rtol=1e-6)
        alibi = curves.alibi[curves.alibi["head"] == head]["bias"].to_numpy()
        np.testing.assert_allclose(alibi, -slopes[head].item() * np.arange(257), rtol=1e-6)
    assert curves.is_alibi and curves.same_in_every_layer and curves.parameters == 0 and not curves.depends_on_query


def test_fire_bias_depends_on_the_query_past_its_threshold_and_on_the_layer(random_bias):
    model = random_bias("fire", n_layer=2)
    curves = biases.bias_curves(model, layer=1)
    assert curves.depends_on_query and not curves.same_in_every_layer
    fire = model.transformer.h[1].attn.fire
    for query in biases.QUERY_POSITIONS:
        reach = min(query, biases.MAX_DISTANCE)
        d = torch.arange(reach + 1).float()
        with torch.no_grad():  # f_θ(ψ(d) / ψ(max(L, i + 1))), from the function's own pieces
            expected = fire.curve(fire.psi(d) / fire.psi(torch.maximum(fire.threshold, torch.tensor(query + 1.0)))).T
        got = curves.frame[curves.frame["query"] == query].sort_values(["head", "distance"])["bias"].to_numpy()
        np.testing.assert_allclose(got.reshape(expected.shape), expected.numpy(), rtol=1e-5, atol=1e-6)
    frame = curves.frame.set_index(["query", "head", "distance"])["bias"]
    short = frame.loc[16]
    np.testing.assert_allclose(frame.loc[64].loc[short.index], short, atol=1e-6)  # below L the normaliser is constant


@pytest.mark.parametrize("scheme", ["rope", "cope", "learned", "none"])
def test_schemes_without_a_bias_are_refused(tiny_model, scheme):
    assert scheme not in schemes_with("bias")
    with pytest.raises(ValueError, match="adds no bias"):
        biases.bias_curves(tiny_model(scheme), layer=0)


@pytest.mark.parametrize("scheme", schemes_with("bias"))
def test_bias_effect_is_the_model_s_attention_with_and_without_its_bias(random_bias, scheme):
    model = random_bias(scheme)
    ids, _ = tokens_of(SENTENCE)
    effect = biases.bias_effect(model, ids, layer=1)
    np.testing.assert_allclose(effect.with_bias, attention.attention_maps(model, ids, layer=1), atol=1e-6)
    q, k = attention.queries_and_keys(model, ids, layer=1, rotate=True)
    plain = F.softmax(model.transformer.h[1].attn.scores(q[None], k[None], scheme=NO_POSITIONS)[0], dim=-1)
    np.testing.assert_allclose(effect.without_bias, plain.numpy(), atol=1e-6)
    assert np.all(np.triu(effect.bias, k=1) == 0)  # nothing above the diagonal
    T = len(ids)
    distance = (torch.arange(T)[:, None] - torch.arange(T)[None, :]).clamp(min=0)
    if scheme == "t5":
        table = model.transformer.relative_bias.weight.detach()
        expected = table[relative_bucket(distance)].permute(2, 0, 1).tril()
        np.testing.assert_allclose(effect.bias, expected.numpy(), atol=1e-6)
    with_bias, without_bias = biases.look_back(effect)
    stats = head_statistics(torch.from_numpy(effect.with_bias[None]))["mean distance"].numpy()
    np.testing.assert_allclose(with_bias, stats, rtol=1e-6)
    assert without_bias.shape == (model.config.n_head,)
    assert biases.look_back(biases.bias_effect(model, ids[:1], layer=0)) is None


# ---------------------------------------------------------------- CoPE's counts


@pytest.fixture
def cope_model(tiny_model):
    model = tiny_model("cope", n_layer=2, n_head=4, n_embd=32)
    torch.manual_seed(2)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(0.5 * torch.randn_like(parameter))  # gates far from 0.5: counts that differ by head
    return model


def test_counts_are_what_the_scheme_adds_its_term_with(cope_model):
    """With count rows e[n] = n·u the scheme's term is linear in the count: term = p · (q·u)."""
    ids, _ = tokens_of(SENTENCE)
    attn = cope_model.transformer.h[1].attn
    u = torch.randn(attn.cope.rows.shape[1])
    with torch.no_grad():
        attn.cope.rows.copy_(torch.arange(len(attn.cope.rows)).float()[:, None] * u)
    p = counts.count_matrix(cope_model, ids, layer=1)  # (nh, T, T)
    q, k = attention.queries_and_keys(cope_model, ids, layer=1, rotate=True)
    term = attn.scores(q[None], k[None])[0] - attn.scores(q[None], k[None], scheme=NO_POSITIONS)[0]  # (nh, T, T)
    causal = torch.ones(len(ids), len(ids), dtype=torch.bool).tril()
    expected = p * (q @ u)[:, :, None]  # (nh, T, T)
    torch.testing.assert_close(term[:, causal], expected[:, causal], rtol=1e-4, atol=1e-4)
    assert torch.all(p[:, ~causal] == 0)  # a masked key's gate is 0


@pytest.mark.parametrize("length", [12, 300])
def test_counts_grow_as_the_key_moves_back_and_stay_in_the_table(cope_model, length):
    ids = GPT2.encode(story())[:length]
    found = counts.contextual_counts(cope_model, ids, layer=0)
    npos = cope_model.config.npos_max
    assert found.from_last.shape == found.running.shape == (4, length)
    assert np.all(np.diff(found.from_last, axis=1) <= 1e-6)  # key moving back (to the left): the count never falls
    assert found.from_last.min() >= 0 and found.from_last.max() <= npos - 1
    assert found.running.min() >= 0 and found.running.max() <= npos - 1
    if length > 2 * npos:
        assert found.from_last.max() == npos - 1  # a long text's first keys reach the table's last row


def test_word_starts_and_sentence_ends():
    _, tokens = tokens_of("The dog's well-known trick. Cats run!")
    assert tokens == ["The", " dog", "'s", " well", "-", "known", " trick", ".", " Cats", " run", "!"]
    assert counts.word_starts(tokens).tolist() == [True, True, False, True, False, False, True, False, True, True, False]
    assert counts.sentence_ends(tokens).tolist() == [False] * 7 + [True, False, False, True]
    back = counts.units_back(tokens)
    assert back["tokens"].tolist() == list(range(11, 0, -1))
    assert back["words"][0] == 6 and back["sentences"][0] == 2 and back["sentences"][-1] == 1
    so_far = counts.units_so_far(tokens)
    assert so_far["tokens"][-1] == 11 and so_far["words"][-1] == 6 and so_far["sentences"].tolist()[7] == 1


def test_a_count_that_follows_words_correlates_best_with_words():
    _, tokens = tokens_of("The dog's well-known trick. Cats run! A big, old tree fell.")
    back = counts.units_back(tokens)
    fake = np.stack([back["tokens"] * 0.9, back["words"], back["sentences"] * 2.0, np.zeros(len(tokens))])  # (4, T)
    rows = counts.correlation_rows([fake], [tokens])
    assert rows.loc[0, "tokens"] == pytest.approx(1.0) and rows.loc[1, "words"] == pytest.approx(1.0)
    assert rows.loc[2, "sentences"] == pytest.approx(1.0) and np.isnan(rows.loc[3, "tokens"])
    assert rows.loc[1, "words"] > rows.loc[1, "tokens"]
    assert rows["per token"].tolist() == pytest.approx([0.9, back["words"][0] / len(tokens),
                                                         2 * back["sentences"][0] / len(tokens), 0.0])
    summary = counts.CountSummary(table=rows.assign(text="story"), window=128, windows=1)
    sentence = counts.count_sentence(summary)
    assert "head 1 follows tokens best (r = 1.00)" in sentence and "head 2 follows words best (r = 1.00)" in sentence
    assert "head 4 cannot be compared" in sentence and "count 0.90, " in sentence


def test_count_table_on_the_sentence_and_the_story(cope_model):
    sentence, story_text = tokens_of(SENTENCE), tokens_of(story())
    summary = counts.count_table(cope_model, layer=1, sentence=sentence, story=story_text)
    assert summary.window == 128 and summary.windows == len(story_text[0]) // 128
    table = summary.table
    assert list(table.columns) == ["text", "head", "per token", "tokens", "words", "sentences"]
    assert table["text"].tolist() == ["sentence"] * 4 + ["story"] * 4
    assert table[list(counts.UNITS)].abs().max().max() <= 1.0 + 1e-9
    found = counts.contextual_counts(cope_model, sentence[0], layer=1)
    mine = table[table["text"] == "sentence"]
    np.testing.assert_allclose(mine["per token"], found.from_last[:, 0] / len(sentence[0]), rtol=1e-6)
    r = counts.correlation(found.from_last[2], counts.units_back(sentence[1])["words"])
    assert mine["words"].iloc[2] == pytest.approx(r)

def test_schemes_without_counts_are_refused(tiny_model):
    with pytest.raises(ValueError, match="counts no contextual positions"):
        counts.contextual_counts(tiny_model("t5"), [1, 2, 3], layer=0)


def test_the_bias_sentence_gives_both_ends_of_a_range_at_one_precision():
    import numpy as np

    from lpos.analysis.scheme_views import bias_sentence

    curves = {"ALiBi": np.array([[0.0, -5.0, -11.0], [0.0, -3.1, -6.2734]])}  # farthest minus distance 0: -11, -6.27
    assert bias_sentence(curves) == "ALiBi: from distance 0 to 2, its 2 heads' bias changes by -11.00 to -6.27."
