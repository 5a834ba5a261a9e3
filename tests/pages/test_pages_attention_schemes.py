"""AppTest runs of the attention page ("Positions in attention") for every registered scheme: each
scheme's sections come from its views, the numbers drawn are the analysis's, and a scheme that acts
elsewhere is said in one line."""
import numpy as np
import pytest
import torch

from conftest import app_test
from lpos import checkpoints
from lpos.analysis import biases
from lpos.model import untrained_model
from lpos.positions import REGISTRY, SCHEMES
from lpos.positions.t5 import relative_bucket
from test_pages_positions import array, charts, messages

PAGE = "pages/attention.py"
TEXT = "The dog saw the cat. It ran away! Then it slept."


def expected_charts(scheme, config) -> set[str]:
    """The figures a scheme's own sections draw, from what the scheme says it shows."""
    keys = {"ra_attention"}
    if scheme.shows("rotation"):
        keys |= {"ra_rotation_map", "ra_arrow", "ra_angles", "ra_flat"}
    if scheme.shows("bias"):
        keys |= {"ra_bias_curves"} | ({"ra_slopes", "ra_bias", "ra_tilt", "ra_tilt_plain"}
                                      if not scheme.parameter_count(config) else
                                      {"ra_own_bias", "ra_own_tilt", "ra_own_tilt_plain"})
    if scheme.shows("contextual"):
        keys |= {"ra_counts", "ra_count_lines"}
    return keys


def captions(at) -> str:
    return " ".join(c.value for c in at.caption)


def count_tables(at) -> list:
    return [d.value for d in at.dataframe if "sentences" in d.value.columns]


@pytest.mark.parametrize("name", SCHEMES)
def test_every_scheme_gets_its_own_sections(name):
    scheme = REGISTRY[name]
    for model in ["untrained"] + ([name] if name in checkpoints.available() else []):
        at = app_test(page=PAGE, scheme=name, model=model, text=TEXT)
        assert not at.exception, (name, model, [e.message for e in at.exception])
        drawn = set(charts(at))
        config = untrained_model(name).config
        assert drawn == expected_charts(scheme, config), (name, model, sorted(drawn))
        headers = [h.value for h in at.header]
        assert (f"{scheme.label} in this model" in " ".join(headers)) == scheme.in_attention, headers
        assert ("does not act inside attention" in messages(at)) == (not scheme.in_attention)
        if not scheme.in_attention:
            assert f"it {scheme.acts}" in messages(at)
        assert bool(count_tables(at)) == scheme.shows("contextual")
        assert "Positions in attention" in [t.value for t in at.title]


def test_a_scheme_outside_attention_still_gets_the_alibi_comparison():
    at = app_test(page=PAGE, scheme="learned", model="untrained", text=TEXT)
    at.session_state["ra_alibi_open"] = True
    at.run()
    assert {"ra_slopes", "ra_bias"} <= set(charts(at)) and "ra_bias_curves" not in charts(at)
    assert "does not act inside attention: it adds a trained row per position" in messages(at)


def test_t5_page_draws_its_table_by_bucket_and_says_it_is_shared():
    at = app_test(page=PAGE, scheme="t5", model="untrained", text=TEXT)
    figure = charts(at)["ra_bias_curves"]
    model = untrained_model("t5")
    table = model.transformer.relative_bias.weight.detach().numpy()  # (buckets, nh)
    buckets = relative_bucket(torch.arange(biases.MAX_DISTANCE + 1)).numpy()
    own = [t for t in figure["data"] if t["name"] == "T5 bias"]
    assert len(own) == model.config.n_head
    for head, trace in enumerate(own):
        np.testing.assert_allclose(array(trace["y"]), table[buckets, head], atol=1e-6)
    shown = captions(at)
    assert "learned numbers serve every layer: the bias is the same in each layer" in shown
    assert "changes value 31 times over distances 0–256, the last time at distance 113" in shown
    assert "queries at 16, 64, 127 and 512 get the same line" in shown


def test_fire_page_follows_the_layer_box():
    at = app_test(page=PAGE, scheme="fire", model="untrained", text=TEXT)
    assert "layer 1" in charts(at)["ra_bias_curves"]["layout"]["title"]["text"]
    assert "Each layer has a bias of its own" in captions(at)
    at.selectbox(key="ra_layer_4").set_value(2).run()
    assert not at.exception
    assert "layer 3" in charts(at)["ra_bias_curves"]["layout"]["title"]["text"]


def test_cope_page_counts_never_decrease_backwards_and_are_measured():
    at = app_test(page=PAGE, scheme="cope", model="untrained", text=TEXT)
    heat = charts(at)["ra_counts"]["data"][0]
    z = array(heat["z"])
    assert z.shape == (4, 14)  # 4 heads × 14 tokens
    assert np.all(np.diff(z, axis=1) <= 1e-6) and z.min() >= 0 and z.max() <= 127
    (table,) = count_tables(at)
    assert table["text"].tolist() == ["sentence"] * 4 + ["story"] * 4
    shown = captions(at)
    assert "On the built-in story (10 windows of 128 tokens, each read alone)" in shown
    for row in table[table["text"] == "story"].itertuples():
        assert f"{row.tokens:.2f}" in shown  # every r in the sentence is the table's
    assert "Counts stop at 127" in shown and "Untrained: the gates have not learned" in shown


@pytest.mark.parametrize("name", ["t5", "fire", "cope"])
def test_a_shared_folder_model_of_another_size(tiny_model, tmp_path, monkeypatch, name):
    """48 wide, 6 heads, 3 layers, said trained: nothing assumes 4 heads, 4 layers or an untrained model."""
    from lpos.checkpoints import save

    save(tiny_model(name, n_embd=48, n_head=6, n_layer=3), {"steps": 10}, tmp_path / f"odd-{name}.pt")
    monkeypatch.setenv("LPOS_CHECKPOINT_DIR", str(tmp_path))  # one file name per scheme: the app keeps models by name
    at = app_test(page=PAGE, scheme=name, model=f"dir:odd-{name}.pt", text=TEXT)
    assert not at.exception, [e.message for e in at.exception]
    assert list(at.selectbox(key="ra_layer_3").options) == ["1", "2", "3"]
    drawn = charts(at)
    if REGISTRY[name].shows("bias"):
        titles = [a["text"] for a in drawn["ra_bias_curves"]["layout"]["annotations"]]
        assert titles == [f"head {h}" for h in range(1, 7)]
        assert "Untrained" not in captions(at)
    else:
        assert array(drawn["ra_counts"]["data"][0]["z"]).shape == (6, 14)
        assert len(count_tables(at)[0]) == 12


def test_switching_the_scheme_in_the_sidebar_redraws_its_sections():
    """One session, the scheme box switched through every scheme (the way a learner does), both
    "what X would do" boxes opened: the page follows each scheme's views."""
    at = app_test(page=PAGE, scheme=SCHEMES[0], model="untrained", text=TEXT)
    for name in SCHEMES:
        at.session_state["ra_rope_open"] = at.session_state["ra_alibi_open"] = True  # AppTest keeps no expander state
        at.selectbox(key="scheme").set_value(name).run()
        assert not at.exception, (name, [e.message for e in at.exception])
        scheme = REGISTRY[name]
        drawn = set(charts(at))
        assert expected_charts(scheme, untrained_model(name).config) <= drawn, (name, sorted(drawn))
        assert "ra_flat" in drawn and "ra_slopes" in drawn  # RoPE and ALiBi: the model's own, or tried on it
