"""The scheme registry (lpos.positions): every module in the folder declares one scheme, found in a
fixed order; each says what it is (label, colour, hint, explanation, where it acts) and which views
apply to it; an unknown name is a ValueError with the house message; DESIGN.md's names import."""
from __future__ import annotations

import importlib
import pkgutil
import re

import pytest

import lpos.positions
from lpos.model import GPTConfig
from lpos.positions import DEFAULT_SCHEME, REGISTRY, SCHEMES, VIEWS, PositionScheme, scheme_info, schemes_with

ORDER = ("learned", "sinusoidal", "rope", "alibi", "none", "t5", "fire", "cope", "rope-partial", "p-rope", "rnope")
SHARED_MODULES = {"base", "maths"}  # the folder's modules that are not schemes


def scheme_modules() -> list[str]:
    return [m.name for m in pkgutil.iter_modules(lpos.positions.__path__)
            if m.name not in SHARED_MODULES and not m.name.startswith("_")]


def test_schemes_in_their_order():
    assert SCHEMES == ORDER
    assert tuple(REGISTRY) == ORDER
    assert DEFAULT_SCHEME == "learned"


def test_every_scheme_module_defines_its_scheme():
    modules = scheme_modules()
    assert sorted(modules) == sorted(name.replace("-", "_") for name in ORDER)  # one module per scheme, named after it
    for module in modules:
        scheme = importlib.import_module(f"lpos.positions.{module}").SCHEME
        assert isinstance(scheme, PositionScheme), module
        name = module.replace("_", "-")
        assert scheme.name == name
        assert REGISTRY[name] is scheme and scheme_info(name) is scheme


@pytest.mark.parametrize("name", ["nope", "Rope", "", "absolute"])
def test_unknown_name_is_a_value_error_with_the_house_message(name):
    expected = f"unknown position scheme {name!r}; choose one of {sorted(SCHEMES)}"
    with pytest.raises(ValueError) as error:
        scheme_info(name)
    assert str(error.value) == expected
    with pytest.raises(ValueError) as error:
        GPTConfig(position=name)
    assert str(error.value) == expected


def test_the_message_lists_every_scheme():
    with pytest.raises(ValueError, match=re.escape(
            "choose one of ['alibi', 'cope', 'fire', 'learned', 'none', 'p-rope', 'rnope', 'rope', 'rope-partial', "
            "'sinusoidal', 't5']")):
        scheme_info("nope")


@pytest.mark.parametrize("name", ORDER)
def test_each_scheme_says_what_it_is(name):
    scheme = scheme_info(name)
    for field in ("label", "colour", "hint", "explanation", "acts"):
        value = getattr(scheme, field)
        assert isinstance(value, str) and value.strip(), (name, field)
    assert re.fullmatch(r"#[0-9a-fA-F]{6}", scheme.colour), scheme.colour
    assert len(scheme.explanation.split()) >= 15, scheme.explanation  # a paragraph, not a label
    assert scheme.views <= set(VIEWS), scheme.views - set(VIEWS)
    assert all(scheme.shows(view) == (view in scheme.views) for view in VIEWS)
    if scheme.paper is not None:
        assert scheme.paper.title and scheme.paper.authors and scheme.paper.url.startswith("https://")


def test_colours_and_labels_are_distinct():
    colours = [scheme_info(s).colour.lower() for s in SCHEMES]
    labels = [scheme_info(s).label for s in SCHEMES]
    assert len(set(colours)) == len(colours), colours
    assert len(set(labels)) == len(labels), labels


def test_an_unknown_view_is_refused():
    with pytest.raises(ValueError, match="unknown view 'bogus'"):
        scheme_info("rope").shows("bogus")


def test_schemes_with_each_view():
    assert schemes_with("rows") == ("learned", "sinusoidal")
    assert schemes_with("table") == ("learned",)
    assert schemes_with("sinusoids") == ("sinusoidal",)
    assert schemes_with("rotation") == ("rope", "rope-partial", "p-rope", "rnope")
    assert schemes_with("bias") == ("alibi", "t5", "fire")
    assert schemes_with("contextual") == ("cope",)


def test_what_each_scheme_does_matches_its_views():
    for name in SCHEMES:
        scheme = scheme_info(name)
        assert scheme.adds_rows == scheme.shows("rows"), name
        assert scheme.has_table == scheme.shows("table"), name
        acts_inside = scheme.shows("rotation") or scheme.shows("bias") or scheme.shows("contextual")
        assert scheme.in_attention == acts_inside, name
    assert [s for s in SCHEMES if scheme_info(s).in_attention] == ["rope", "alibi", "t5", "fire", "cope", "rope-partial", "p-rope",
                                                                           "rnope"]
    assert [s for s in SCHEMES if scheme_info(s).max_length(GPTConfig(position=s)) is not None] == ["learned"]


def test_design_public_names_import():
    from lpos.positions import (  # noqa: F401  (DESIGN.md's public API)
        SCHEMES as _schemes,
        RopeScaling,
        alibi_slopes,
        rope_attention_factor,
        rope_frequencies,
        rope_rotate,
        sinusoidal_table,
    )

    for function in (alibi_slopes, rope_attention_factor, rope_frequencies, rope_rotate, sinusoidal_table):
        assert callable(function)
    assert RopeScaling("pi", 2.0).factor == 2.0
    assert _schemes is SCHEMES
