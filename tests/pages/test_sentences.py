"""Issue 25: computed sentences, each tested on a case where its old fixed wording was wrong.

Every sentence here is a function of numbers (lpos.analysis); the tests build the case the issue
found (the Similarity slider at 20 rows, a token three times, ALiBi at step 0, a sentence without a
full stop, the later part of a text being harder) and check the words against the numbers.
"""
from __future__ import annotations

import json
import re

import numpy as np
import pytest

from lpos import checkpoints
from lpos.analysis import embeddings as embedding_analysis
from lpos.analysis import lengths, similarity, shuffle, timeline
from lpos.analysis.heads import head_sentence
from lpos.tokenizer import encode

shipped = pytest.mark.skipif(not {"alibi", "learned", "none"} <= set(checkpoints.available()),
                             reason="the shipped checkpoints are not installed")


def load(name: str):
    return checkpoints.load(name)


def test_random_neighbour_distance_is_the_mean_distance_of_any_other_row():
    for rows in (2, 20, 128):
        pairs = [abs(i - j) for i in range(rows) for j in range(rows) if i != j]
        assert similarity.random_neighbour_distance(rows) == pytest.approx(np.mean(pairs))
    # and random rows do land there (the old text said "about 42" whatever the slider)
    generator = np.random.default_rng(0)
    measured = np.mean([similarity.mean_neighbour_distance(generator.standard_normal((20, 64))) for _ in range(20)])
    assert measured == pytest.approx(7.0, abs=0.6)


def test_neighbour_sentence_at_20_rows_names_those_rows_and_their_random_figure():
    text = similarity.neighbour_sentence(3.8, 20)
    assert "among positions 0–19" in text and "3.8 positions away" in text and "(about 7 for random rows)" in text
    assert "42" not in text and "whole table" not in text
    assert "(about 43 for random rows)" in similarity.neighbour_sentence(4.0, 128)
    assert "says nothing here" in similarity.neighbour_sentence(1.0, 2)  # two rows: one neighbour each (issue 37)


def test_repeat_sentence_counts_a_token_three_times(tiny_model):
    model = tiny_model("learned")
    ids = encode(" the dog and the cat and the man")
    view = embedding_analysis.embedding_view(model, ids)
    the = [r for r in embedding_analysis.repeated_tokens(view) if r.token == "␣the"][0]
    assert the.occurrences == 3
    text = embedding_analysis.repeat_sentence(the)
    assert "occurs three times" in text and "twice" not in text and "at its first two, positions 0 and 3," in text
    two = [r for r in embedding_analysis.repeated_tokens(view) if r.token == "␣and"][0]
    assert "occurs twice; at positions 2 and 5" in embedding_analysis.repeat_sentence(two)


@pytest.mark.parametrize("text", ["The dog bit the man", "The dog bit the man."])
def test_order_blind_sentence_names_the_pair_drawn_with_its_shared_last_token(tiny_model, text):
    model = tiny_model("none")
    ids = encode(text)
    result = shuffle.shuffle_experiment(model, ids, shuffled=shuffle.shuffle_earlier(ids, seed=0))
    said = shuffle.order_blind_sentence(result)
    last = "␣man" if text.endswith("man") else "."
    assert f"(both end in “{last}”)" in said and f"“{text}”" in said
    assert result.order_blind and "cannot tell the two orders apart" in said
    moved = float(re.search(r"moved by at most ([0-9.e+-]+)", said).group(1))
    assert moved == pytest.approx(result.attention_change, rel=0.05) and moved < 1e-5
    # the old notice's pair ends in different tokens: the first layer does see a difference there
    swapped = shuffle.shuffle_experiment(model, encode("The dog bit the man"), shuffled=None)
    assert swapped.shuffled[-1] == encode("The dog bit the man")[-1]


def test_order_blind_sentence_says_so_when_the_first_layer_moves(tiny_model):
    model = tiny_model("learned")
    ids = encode("The dog bit the man.")
    result = shuffle.shuffle_experiment(model, ids)
    assert not result.order_blind and "tells the two orders apart" in shuffle.order_blind_sentence(result)


@shipped
def test_attention_sentence_at_step_0_is_read_from_the_snapshot():
    alibi = timeline.timeline_of(load("alibi")[1])
    said = timeline.attention_sentence(alibi, 0)  # ALiBi's bias is there before any update
    assert said.startswith("At step 0 the heads do not spread their weight evenly")
    assert "3.5, " in said and "puts at most 0.215 on one key" in said  # head 0 looks back 3.5 of 12.5
    learned = timeline.timeline_of(load("learned")[1])
    assert timeline.attention_sentence(learned, 0).startswith("At step 0 every head spreads its weight nearly evenly")
    assert "do not spread" in timeline.attention_sentence(learned, len(learned) - 1)


@shipped
def test_head_sentence_shares_add_up_to_100_percent_on_the_default_sentence():
    from lpos.analysis.attention import attention_maps  # noqa: PLC0415

    model = load("learned")[0]
    weights = attention_maps(model, encode("The dog bit the man"), layer=0)
    for head in range(model.config.n_head):
        said = head_sentence(np.asarray(weights), layer=1, head=head)
        shares = [int(p) for p in re.findall(r"(\d+)% ", said)]
        assert len(shares) == 4 and abs(sum(shares) - 100) <= 2, said  # rounding of four shares


def test_curve_reading_compares_the_same_tokens_not_two_parts_of_the_text():
    # a text whose later part is harder: the full-context loss climbs, but so do fresh windows
    losses = np.r_[np.full(128, 3.9), np.full(200, 4.3)].astype(np.float32)
    curve = lengths.LossCurve(losses=losses, rolling=losses, window=32, text_tokens=329, wall=None)
    baseline = np.r_[np.full(128, 3.9), np.full(200, 4.35)].astype(np.float32)
    said = lengths.curve_reading(curve, train_length=128, baseline=baseline)
    assert "**4.30**" in said and "**4.35**" in said and "changes their loss by **-0.05**" in said
    assert "+0.40" not in said  # the old reading: later tokens against earlier ones
    assert "not a measure of extrapolation" in lengths.curve_reading(curve, train_length=128)


# The story's reading against its baseline is tested in tests/pages/test_truth_pass3.py (issue 37: a sliding window).


def test_wall_sentence_counts_the_tokens_kept():
    curve = lengths.LossCurve(losses=np.ones(128, np.float32), rolling=np.ones(128, np.float32), window=32,
                              text_tokens=1024, wall=128)
    assert "the last 895 of the 1,024 tokens read here cannot be scored" in lengths.curve_reading(curve, train_length=128)


def test_eval_scores_the_built_in_story_when_the_corpus_is_not_here():
    from lpos.cli.training import eval_streams  # noqa: PLC0415
    from lpos.corpus import story  # noqa: PLC0415

    for meta in ({}, {"data_files": ["no-such-corpus-file.txt"]}):
        streams, said = eval_streams(meta, None)
        assert list(streams) == ["the built-in story"] and streams["the built-in story"].tolist() == encode(story())
        assert "scoring the built-in story (story.txt" in said
    assert "no-such-corpus-file.txt, which is not on this machine" in eval_streams({"data_files": ["no-such-corpus-file.txt"]}, None)[1]


def test_eval_scores_a_one_story_file_whole_and_names_a_missing_one(tmp_path):
    from lpos.cli.training import eval_streams  # noqa: PLC0415

    one = tmp_path / "one.txt"
    one.write_text("Once upon a time there was a dog. The dog bit the man.\n", encoding="utf-8")
    streams, said = eval_streams({}, [str(one)])
    assert list(streams) == ["all of one.txt"] and len(streams["all of one.txt"]) == len(encode(one.read_text().strip("\n")))
    assert "scoring the whole of" in said
    with pytest.raises(ValueError, match="missing.txt: no such file"):
        eval_streams({}, [str(tmp_path / "missing.txt")])


def test_a_missing_checkpoint_file_is_called_a_missing_file():
    with pytest.raises(checkpoints.CheckpointError, match=r"^model\.pt: no such file or folder"):
        checkpoints.load("model.pt")
    with pytest.raises(checkpoints.CheckpointError, match="no checkpoint named 'alibii'"):
        checkpoints.load("alibii")


def test_card_keeps_the_measured_rebuild_line(tmp_path):
    from lpos.cli.training import keep_rebuild_line  # noqa: PLC0415

    old = tmp_path / "README.md"
    old.write_text("x\nMachine: a\n`checkpoints/rebuild.sh` ran the five ... took 69.5 minutes of wall time.\n")
    card, kept = keep_rebuild_line("# card\nMachine: b\n\n## Rebuild\n", old)
    assert kept and card.splitlines()[2].endswith("took 69.5 minutes of wall time.")
    fresh = "Machine: b\n`checkpoints/rebuild.sh` ran learned ... took 70.0 minutes\n"
    assert keep_rebuild_line(fresh, old) == (fresh, False)  # a new measurement replaces the old one


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


@shipped
def test_timeline_reading_for_a_model_without_a_table_says_no_band_formed():
    """The map of rope/alibi/none is of what the first block adds: its cosine at distance 1 stays near 0.1
    (0.08 to 0.17 at the last step), so the reading must not suggest a learned table's band."""
    for name, verdict in (("alibi", "only a faint tilt"), ("none", "only a faint tilt")):
        found = timeline.timeline_of(load(name)[1])
        band = timeline.band_over_time(found)
        near = band[band.distance == 1].set_index("step").cosine
        said = timeline.timeline_reading(found)[-1]
        assert f"to {near.iloc[-1]:.2f} at step {found.steps[-1]}" in said and verdict in said, said
        assert near.iloc[-1] < 0.2 and f"between {near.min():.2f} and {near.max():.2f}" in said
    learned = timeline.timeline_of(load("learned")[1])
    assert "no learned table" not in " ".join(timeline.timeline_reading(learned))


def test_first_block_reading_names_a_band_from_step_0():
    """A fixed sinusoid table gives a band before any update: the reading says it was there at step 0."""
    from types import SimpleNamespace  # noqa: PLC0415

    positions = np.arange(32)[:, None] * np.exp(-np.arange(8) / 2)[None, :]
    rows = np.concatenate([np.sin(positions), np.cos(positions)], axis=1)  # (32, 16) smooth in position
    noise = np.random.default_rng(0).standard_normal((32, 16))
    fixed = SimpleNamespace(steps=[0, 10], position_rows=np.stack([rows, rows]))
    assert "already at step 0, before any update" in timeline.first_block_reading(fixed)
    random = SimpleNamespace(steps=[0, 10], position_rows=np.stack([noise, noise]))
    assert "No band" in timeline.first_block_reading(random)


def test_first_block_reading_never_prints_minus_zero():
    """The shipped fire model's neighbouring cosine at step 0 is a hair below zero: the reading printed "-0.00"."""
    found = timeline.timeline_of(checkpoints.load("fire")[1])
    said = timeline.first_block_reading(found)
    assert "goes from 0.00 at step 0" in said and "-0.00" not in said


def test_worst_curve_sentence_says_how_far_the_steepest_curve_is_from_the_unigram_baseline():
    """Step 9 said models "fall apart"; the steepest shipped curve (sinusoidal, +1.01 at 8×) is still 1.86 nats
    better than the unigram baseline. The sentence states that, and says so too when a curve does reach it."""
    def card(*losses):
        return {length: {"loss": loss} if loss is not None else {"loss": None, "note": "n/a: the table has 128 rows"}
                for length, loss in zip((64, 128, 256, 512, 1024), losses)}

    tables = {"sinusoidal": card(3.1878, 3.1428, 3.4894, 3.893, 4.1496), "alibi": card(3.07, 3.0005, 2.97, 2.96, 2.9588),
              "learned": card(3.14, 3.09, None, None, None)}
    said = lengths.worst_curve_sentence(tables, train_length=128, unigram=6.0132)
    assert "**sinusoidal**, is **+1.01** nats at 1024 tokens (8× the training length of 128)" in said
    assert "still **1.86** nats better than the unigram baseline (6.01" in said and "not fallen apart" in said
    assert "**learned** cannot run that far at all" in said
    tables["sinusoidal"][1024]["loss"] = 6.5
    assert "no better than the unigram baseline" in lengths.worst_curve_sentence(tables, train_length=128, unigram=6.0)
    flat = {"alibi": tables["alibi"]}
    assert lengths.worst_curve_sentence(flat, train_length=128, unigram=6.0).startswith("No curve climbs")


@shipped
def test_lesson_step_9_reads_the_curves_it_draws_whatever_the_sidebar_model():
    from conftest import app_test  # noqa: PLC0415
    from lpos.lesson import STEPS  # noqa: PLC0415

    assert "fall apart" not in STEPS[8].text + STEPS[8].notice
    for model in ("learned", "learned-32"):  # learned-32 trained on 32-token windows: left out of the curves
        at = app_test(page="pages/lesson.py", model=model, scheme="learned", step="9", timeout=300)
        assert not at.exception, at.exception
        text = " ".join(m.value for m in at.markdown)
        assert "The steepest curve, **sinusoidal**, is **+1.01** nats at 1024 tokens" in text
        assert "still **1.86** nats better than the unigram baseline" in text
        assert "**learned-32** (trained on 32-token windows) is left out" in text
        drawn = {trace["name"].split(":")[0] for trace in json.loads(at.get("plotly_chart")[0].proto.spec)["data"]}
        assert "learned-32" not in drawn and {"sinusoidal", "alibi", "learned"} <= drawn


def test_order_blindness_tables_say_yes_or_no_never_true_or_false():
    """One wording for a learner: the layer-1 table said yes/no while the whole-model table said True/False."""
    from conftest import app_test  # noqa: PLC0415

    at = app_test(page="pages/shuffle.py", timeout=300)
    assert not at.exception, at.exception
    tables = [t.value for t in at.table]
    shown = {column: set(map(str, frame[column])) for frame in tables for column in frame.columns
             if column in ("same top-1", "order-blind at layer 1")}
    assert set(shown) == {"same top-1", "order-blind at layer 1"}
    assert all(values <= {"yes", "no"} for values in shown.values()), shown


@shipped
def test_lesson_caption_names_the_steps_that_do_not_draw_the_sentence():
    """The caption said every step's figure is on the sidebar sentence; steps 4, 5, 8 and 9 are not. Each step's
    view is run on two sentences: a step the caption counts as the sentence's must change, the others must not."""
    from lpos.ui import lesson  # noqa: PLC0415
    from lpos.ui.models import LoadedModel, label, load_offered  # noqa: PLC0415

    def loaded(name):  # through the app's loader, which names the model in every cache key
        model, meta = load_offered(name)
        return LoadedModel(name, label(name), model, meta)

    sidebar = loaded("learned")
    one, two = encode("The dog bit the man and the dog ran."), encode("A cat sat on the mat by a cat!")
    same_end = encode("A cat sat on the mat by a cat.")  # ends like `one`

    def spec(step, ids):
        fig, _ = lesson.STEP_VIEWS[step - 1](sidebar, loaded(lesson.STEPS[step - 1].scheme or "learned"), ids)
        return fig if isinstance(fig, str) else fig.to_json()

    for step in range(1, len(lesson.STEPS) + 1):
        assert (spec(step, one) != spec(step, two)) == (step in lesson.SENTENCE_STEPS), step
        if step in lesson.SENTENCE_STEPS:
            assert (spec(step, one) == spec(step, same_end)) == (step in lesson.LAST_TOKEN_STEPS), step
    assert "(step 6 on its last token only) except in steps 4, 5, 7, 8 and 9" in lesson.lesson_caption()
