"""The app shell through AppTest from app.py: every page runs, the sidebar is shared, the URL holds the view."""
import functools

import pytest
from conftest import ROOT, SCHEMES, app_test

import lpos.pages
from lpos import checkpoints

PAGES = [declared.file for declared in lpos.pages.PAGES]  # every registered page's file, in the menu's order


def page(name: str) -> str:
    """The file of the registered page of that name."""
    return lpos.pages.page_named(name).file


SENTENCE = "The dog saw the cat and the man"


def shown(at) -> dict:
    """What the sidebar holds and what the URL says."""
    assert at.sidebar.children, ("no sidebar: the page ran without app.py (Streamlit runs the files of a folder "
                                 "named pages/ beside the entry script on their own)")
    return {
        "sidebar": tuple(widget(key=key).value for widget, key in
                         ((at.text_area, "sentence"), (at.selectbox, "scheme"), (at.selectbox, "model"))),
        "url": {key: at.query_params[key][0] if isinstance(at.query_params[key], list) else at.query_params[key]
                for key in ("text", "scheme", "model") if key in at.query_params},
    }


def trained_or_untrained(scheme: str) -> str:
    return scheme if scheme in checkpoints.available() else "untrained"


def test_every_registered_page_exists():
    assert sorted(PAGES) == sorted(f"pages/{p.name}" for p in (ROOT / "pages").glob("*.py"))  # each file, once
    assert PAGES[0].endswith("embeddings.py")
    assert all((ROOT / page).is_file() for page in PAGES)


@pytest.mark.slow
@pytest.mark.parametrize("trained", [False, True], ids=["untrained", "trained"])
@pytest.mark.parametrize("scheme", SCHEMES)
def test_every_page_runs_with_every_scheme_and_model(scheme, trained):
    if trained and scheme not in checkpoints.available():
        pytest.skip(f"checkpoints/{scheme}.pt is not there yet")
    model = scheme if trained else "untrained"
    at = app_test(scheme=scheme, model=model)
    at.text_area(key="sentence").set_value(SENTENCE).run()
    for path in PAGES:
        at.switch_page(path).run()
        assert not at.exception, f"{path} with {scheme}/{model}: {[e.value for e in at.exception]}"
        assert at.main.title or at.main.header, (path, scheme, model)  # the page drew, not only the sidebar
        assert shown(at)["sidebar"] == (SENTENCE, scheme, model), path


@pytest.mark.parametrize("name", [declared.name for declared in lpos.pages.PAGES])
def test_each_page_draws_the_view_it_declares(name):
    """One AppTest run per registered page, on the view its registry entry names: no exception, a heading."""
    declared = lpos.pages.page_named(name)
    at = app_test(page=declared.file, timeout=300, **declared.view_query())
    assert not at.exception, (name, [e.message for e in at.exception])
    assert at.main.title or at.main.header, name  # the page drew, not only the sidebar


def test_url_opens_exactly_that_view_and_switching_pages_keeps_it():
    model = trained_or_untrained("rope")
    at = app_test(text="The cat sat", scheme="rope", model=model)
    assert not at.exception and not at.warning
    expected = {"sidebar": ("The cat sat", "rope", model),
                "url": {"text": "The cat sat", "scheme": "rope", "model": model}}
    assert shown(at) == expected
    at.switch_page(page("sinusoids")).run()
    assert shown(at) == expected
    at.switch_page(page("embeddings")).run()
    assert shown(at) == expected


def test_url_opens_on_any_page():
    at = app_test(page=page("similarity"), text="A red ball", scheme="sinusoidal", model="untrained")
    assert shown(at)["sidebar"] == ("A red ball", "sinusoidal", "untrained")


def test_a_sidebar_change_on_one_page_holds_on_every_page_and_in_the_url():
    at = app_test(model="untrained")
    at.text_area(key="sentence").set_value("Once upon a time").run()
    at.selectbox(key="scheme").set_value("alibi").run()
    at.switch_page(page("sinusoids")).run()
    assert shown(at) == {"sidebar": ("Once upon a time", "alibi", "untrained"),
                         "url": {"text": "Once upon a time", "scheme": "alibi", "model": "untrained"}}


def test_unknown_scheme_and_a_path_as_model_fall_back_with_a_notice(monkeypatch):
    opened = []
    real_load = checkpoints.load
    @functools.wraps(real_load)  # recipes name it as the function it stands for
    def load(name, *args, **kw):
        opened.append(str(name))
        return real_load(name, *args, **kw)

    monkeypatch.setattr(checkpoints, "load", load)
    at = app_test(text="A cat", scheme="<b>quantum</b>", model="../../etc/passwd")
    assert not at.exception
    warnings = [w.value for w in at.warning]
    assert any(w.startswith("Unknown position scheme '<b>quantum</b>'") and "showing 'learned'" in w for w in warnings)
    assert any(w.startswith("Unknown model '../../etc/passwd'") for w in warnings)
    default = trained_or_untrained("learned")
    assert shown(at) == {"sidebar": ("A cat", "learned", default),
                         "url": {"text": "A cat", "scheme": "learned", "model": default}}
    assert not any("passwd" in name for name in opened)


def test_unknown_model_keeps_a_known_scheme():
    at = app_test(scheme="none", model="C:\\Windows\\win.ini")
    assert any("Unknown model" in w.value for w in at.warning)
    assert shown(at)["sidebar"][1:] == ("none", trained_or_untrained("none"))


@pytest.mark.skipif("learned" not in checkpoints.available(), reason="needs the shipped learned checkpoint")
def test_scheme_and_model_follow_each_other():
    at = app_test()
    assert shown(at)["sidebar"][1:] == ("learned", "learned")
    at.selectbox(key="scheme").set_value("rope").run()  # a trained learned model cannot do rope
    assert shown(at)["sidebar"][1:] == ("rope", trained_or_untrained("rope"))
    at.selectbox(key="model").set_value("untrained").run()  # untrained takes any scheme
    assert shown(at)["sidebar"][1:] == ("rope", "untrained")
    at.selectbox(key="model").set_value("learned").run()  # a trained model brings its own scheme
    assert shown(at)["sidebar"][1:] == ("learned", "learned")
    assert not at.exception


@pytest.mark.skipif("learned" not in checkpoints.available(), reason="needs the shipped learned checkpoint")
def test_a_link_whose_model_and_scheme_disagree_shows_the_model_scheme():
    at = app_test(scheme="rope", model="learned")
    assert any("uses the 'learned' scheme" in w.value for w in at.warning)
    assert shown(at)["sidebar"][1:] == ("learned", "learned")


def test_full_collections_run_at_most_once_a_period(monkeypatch):
    """Streamlit's collection after every run is off (95 ms a run, docs/RELIABILITY.md); app.py asks
    for one at the start of every run and gets it at most once a period."""
    import time
    import tomllib

    from lpos.ui import collect

    config = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())
    assert config["runner"]["postScriptGC"] is False
    assert "ui.collect_garbage()" in (ROOT / "app.py").read_text()
    monkeypatch.setattr(collect, "FULL_COLLECTION_SECONDS", 3600)
    monkeypatch.setattr(collect, "_last", time.monotonic() - 3601)
    assert collect.collect_garbage() is True
    assert collect.collect_garbage() is False  # the next one waits an hour


def test_scheme_box_holds_the_name_and_the_hint_is_shown_whole():
    from conftest import app_test  # noqa: PLC0415
    from lpos.positions import HINTS  # noqa: PLC0415

    at = app_test(scheme="cope", model="untrained")
    assert at.selectbox(key="scheme").format_func("learned") == "learned"  # no hint cut to "a trained table of posi"
    assert HINTS["cope"] in [c.value for c in at.sidebar.caption]
