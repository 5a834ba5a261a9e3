"""Figure builders of the attention page's bias and count sections: the data they draw."""
import numpy as np
import pytest
import torch

from lpos.analysis import biases, counts
from lpos.figures.biases import bias_curves_figure
from lpos.figures.counts import count_heatmap, running_count_figure
from lpos.positions import alibi_slopes
from lpos.tokenizer import GPT2


@pytest.fixture
def bias_model(tiny_model):
    def make(scheme: str, **config):
        model = tiny_model(scheme, **config)
        torch.manual_seed(1)
        with torch.no_grad():
            for name, parameter in model.named_parameters():
                if "threshold" not in name:  # FIRE's L stays at 128
                    parameter.add_(torch.randn_like(parameter))
        return model
    return make


def lines(fig, name_part: str) -> list:
    return [t for t in fig.data if name_part in t.name]


def test_t5_panels_one_line_per_head_beside_alibi(bias_model):
    model = bias_model("t5", n_head=6, n_embd=48)
    curves = biases.bias_curves(model, layer=0)
    fig = bias_curves_figure(curves, label="T5 bias", colour="#9467bd")
    own, alibi = lines(fig, "T5 bias"), lines(fig, "ALiBi")
    assert len(own) == len(alibi) == 6  # one panel per head, each with the model's line and ALiBi's
    for head, (trace, dashed) in enumerate(zip(own, alibi)):
        np.testing.assert_allclose(trace.y, curves.head_curve(head).to_numpy())
        np.testing.assert_allclose(dashed.y, -alibi_slopes(6)[head].item() * np.arange(257), rtol=1e-6)
        assert trace.line.shape == "hv" and dashed.line.dash == "dash"
    assert [a.text for a in fig.layout.annotations] == [f"head {h}" for h in range(1, 7)]  # heads count from 1
    assert fig.layout.xaxis.range == (0, biases.MAX_DISTANCE) and fig.layout.xaxis5.range == (0, biases.MAX_DISTANCE)
    low, high = fig.layout.yaxis.range
    assert low <= curves.frame["bias"].min() and high >= curves.frame["bias"].max()
    assert "the same in every layer" in fig.layout.title.text
    assert sum(t.showlegend for t in fig.data) == 2  # one legend entry per kind of line


def test_fire_panels_draw_one_line_per_query_position(bias_model):
    model = bias_model("fire")
    curves = biases.bias_curves(model, layer=1)
    fig = bias_curves_figure(curves, label="FIRE", colour="#e377c2")
    assert curves.same_line == ((16, 64, 127), (512,))  # below L = 128 the normaliser is ψ(L) for every query
    below, far = lines(fig, "queries at 16, 64 and 127"), lines(fig, "query at 512")
    assert len(below) == len(far) == 4  # one of each per head
    assert below[0].x[-1] == 127 and far[0].x[-1] == biases.MAX_DISTANCE  # each reaches back to its farthest query
    part = curves.frame[(curves.frame["head"] == 3) & (curves.frame["query"] == 512)]
    np.testing.assert_allclose(far[3].y, part["bias"])
    assert "layer 2" in fig.layout.title.text


def test_alibi_panels_have_no_second_alibi_line():
    from lpos.model import untrained_model

    curves = biases.bias_curves(untrained_model("alibi"), layer=0)
    fig = bias_curves_figure(curves, label="ALiBi", colour="#d62728")
    assert len(fig.data) == 4 and not lines(fig, "fixed")
    assert fig.layout.yaxis.range[0] < -alibi_slopes(4)[0].item() * 256  # the steepest line fits: it is the model's


def test_count_figures_draw_the_counts(tiny_model):
    model = tiny_model("cope")
    ids = GPT2.encode("The dog saw the cat. It ran!")
    tokens = GPT2.token_strings(ids)
    found = counts.contextual_counts(model, ids, layer=1)
    heat = count_heatmap(found, tokens=tokens)
    np.testing.assert_allclose(np.asarray(heat.data[0].z), found.from_last)
    assert list(heat.data[0].y) == ["head 1", "head 2", "head 3", "head 4"] and len(heat.data[0].x) == len(ids)
    assert "“!”" in heat.layout.title.text and "layer 2" in heat.layout.title.text
    references = counts.units_so_far(tokens)
    running = running_count_figure(found, tokens=tokens, references=references)
    assert [t.name for t in running.data] == ["head 1", "head 2", "head 3", "head 4", "tokens so far", "words so far",
                                              "sentences so far"]
    np.testing.assert_allclose(running.data[2].y, found.running[2])
    np.testing.assert_allclose(running.data[5].y, references["words"])
