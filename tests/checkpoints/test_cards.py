"""The shipped models' cards (lpos.checkpoints.cards): each says what loading its model says, a card that no
longer matches its checkpoint is not used, and a page comparing every shipped model reads cards, not weights."""
from __future__ import annotations

import shutil

import pytest

from lpos import checkpoints
from lpos.analysis.lengths import output_count
from lpos.checkpoints import cards
from lpos.checkpoints import reading

SHIPPED = checkpoints.available()


@pytest.mark.parametrize("name", SHIPPED)
def test_the_shipped_card_says_what_the_model_says(name):
    found = cards.card(name)
    assert found is not None, f"checkpoints/{cards.FILE} has no card that matches {name}.pt: python -m lpos precompute --cards-only"
    model, meta = checkpoints.load(name)
    assert found.config == model.config
    assert found.max_input_length == model.max_input_length and found.caches_positions == model.caches_positions
    assert found.output_count == output_count(model)
    assert set(found.meta) == set(meta) - set(cards.LEFT_OUT)
    assert all(found.meta[key] == meta[key] for key in found.meta if key != "tokenizer")
    assert found.meta["tokenizer"].name == meta["tokenizer"].name


def test_a_card_that_no_longer_matches_its_checkpoint_is_not_used(tmp_path):
    for name in ("rope", "alibi"):
        shutil.copy(checkpoints.CHECKPOINT_DIR / f"{name}.pt", tmp_path / f"{name}.pt")
    entries = cards.write_cards(["rope", "alibi"], folder=tmp_path)
    assert entries == tmp_path / cards.FILE
    assert cards.card("rope", folder=tmp_path).config.position == "rope"
    shutil.copy(checkpoints.CHECKPOINT_DIR / "sinusoidal.pt", tmp_path / "rope.pt")  # rope.pt retrained, say
    assert cards.card("rope", folder=tmp_path) is None  # the caller loads the model itself
    assert cards.card("alibi", folder=tmp_path).config.position == "alibi"
    assert cards.card("t5", folder=tmp_path) is None  # no checkpoint, no card


# page, the sidebar's scheme and model -> the checkpoints its first run may read: the sidebar's, and those whose
# weights a view needs
FIRST_RUN_READS = {
    "lengths": ("learned", {"learned.pt", "learned-32.pt"}),  # the short-window model it compares
    "shuffle": ("rope", {"rope.pt"}),
    "inside": ("rope", {"rope.pt"}),
    "stretch": ("rope", {"rope.pt"}),
}


@pytest.mark.parametrize("page", FIRST_RUN_READS)
def test_a_page_comparing_every_shipped_model_reads_their_cards_not_their_weights(monkeypatch, page):
    """A comparing page's first run loads only the models it draws with; every other shipped model's results come
    from its card and precomputed views, however many models are shipped."""
    import streamlit as st

    from conftest import app_test

    st.cache_resource.clear()  # every model loaded again here, whatever this worker's tests loaded before
    read = []
    loads = reading.read_payload
    monkeypatch.setattr(reading, "read_payload", lambda path, **kw: read.append(path.name) or loads(path, **kw))
    scheme, expected = FIRST_RUN_READS[page]
    at = app_test(page=f"pages/{page}.py", scheme=scheme, model=scheme)
    assert not at.exception
    assert len(SHIPPED) > 10 and set(read) == expected, read
