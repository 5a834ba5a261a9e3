"""Figures to take away: every chart downloads as a named SVG, its numbers as CSV, and
the Python a page shows beside a figure redraws that very figure in a fresh process."""
import io
import json
import subprocess
import sys

import numpy as np
import pandas as pd
import plotly.io as pio
import pytest
import torch
from conftest import ROOT, app_test

from lpos import checkpoints, precomputed
from lpos.pages import PAGES as REGISTERED
from lpos.pages import page_named
from lpos.analysis import attention, biases, heads, probes, similarity, streaming, stretch, timeline
from lpos.analysis.sinusoids import frequency_bands
from lpos.figures.export import Recipe, Ref, array_of, figure_csv, figure_frame, file_name, step
from lpos.figures.sinusoids import band_figure

# Each registered page once, on its view (a model that draws its central figures: lpos.pages), then more cases
# of some pages: Similarity with RoPE's kernel, the other schemes in attention, Inside's tabs, the Lesson's steps.
MORE = {
    "similarity-rope": ("similarity", dict(scheme="rope", model="rope")),
    "attention-alibi": ("attention", dict(scheme="alibi", model="alibi")),
    "attention-cope": ("attention", dict(scheme="cope", model="untrained")),
    "inside-heads": ("inside", dict(scheme="learned", model="untrained")),
    "inside-sink": ("inside", dict(scheme="learned", model="untrained")),
    **{f"lesson-{n}": ("lesson", dict(scheme="learned", model="untrained" if n == 7 else "learned", step=str(n)))
       for n in (3, 4, 6, 7, 8, 10)},
}
PAGES = {**{page.name: (page.file, page.view_query()) for page in REGISTERED},
         **{case: (page_named(name).file, query) for case, (name, query) in MORE.items()}}
# Widgets a case sets once the page is open, by key: Inside's second and third tabs. The sink case opens every
# scheme's gain at a window of 16 tokens, where its snippet streams the eight models in a few seconds, not the
# half minute of the default 64 (any window is the same recipe).
STATE = {"inside-heads": {"inside_tab": "Head portraits"},
         "inside-sink": {"inside_tab": "The sink, tested", "inside_window": 16, "inside_every_scheme": True}}
# Every case shows the Python of its figures: a page draws its central figures from a Recipe. (Lesson steps 5 and 9
# print Sinusoids' and Length extrapolation's recipes, run here on those pages; step 1 draws token chips, no chart.)
# Inside's cases are on the untrained models: their probes and portraits load no checkpoint but the trained panel's.
ON_OPEN = {case: page_named(MORE[case][0] if case in MORE else case).charts_on_open for case in PAGES}
WITH_CODE = [case for case in PAGES if ON_OPEN[case]]
# Figures whose numbers an analysis rounds, by download name: a last-bit difference in a fresh process may move
# the last digit kept, so they are compared to that digit (chunk_losses keeps 4 decimals).
ROUNDED = {"lpos-stretch-loss": 1e-4}


def walk(node):
    """The elements under an AppTest node, in the order the page drew them."""
    children = getattr(node, "children", None)
    if children is None:
        yield node
        return
    for child in children.values():
        yield from walk(child)


def charts_and_snippets(at) -> list[tuple[dict, dict, str | None]]:
    """(spec, config, the Python shown beside it or None) for every chart, in page order."""
    found = []
    for element in walk(at.main):
        kind = getattr(element, "type", "")
        if kind == "plotly_chart":
            found.append([json.loads(element.proto.spec), json.loads(element.proto.config), None])
        elif kind == "code" and element.language == "python" and found:
            found[-1][2] = element.value
    return [tuple(f) for f in found]


@pytest.fixture(scope="module")
def pages() -> dict:
    opened = {}
    for case, (page, query) in PAGES.items():
        at = app_test(page=page, **query)
        for key, value in STATE.get(case, {}).items():
            at.session_state[key] = value
            at.run()
        assert not at.exception, (page, at.exception)
        opened[case] = charts_and_snippets(at)
    return opened


@pytest.mark.parametrize("page", list(PAGES))
def test_every_chart_downloads_a_named_svg(pages, page):
    found = pages[page]
    if not ON_OPEN[page]:  # a page whose charts come from the learner's own work draws none, not an empty one
        assert not found, f"{page} drew a chart before there was anything to draw"
        return
    assert found, f"{page} drew no chart"
    names = [config["toImageButtonOptions"]["filename"] for _, config, _ in found]
    assert all(config["toImageButtonOptions"]["format"] == "svg" for _, config, _ in found)
    assert all(name.startswith("lpos-") for name in names)
    assert len(set(names)) == len(names), f"{page}: {names}"


def test_file_names_say_what_they_show():
    assert file_name("similarity-position-map", "rope", "rope") == "lpos-similarity-position-map-rope-rope"
    assert file_name("stretch-loss-The dog bit", "rope", "upload:mine") == "lpos-stretch-loss-the-dog-bit-rope-upload-mine"


def traces_equal(drawn, shown, where: str = "data", *, atol: float = 1e-6) -> None:
    """The same traces: equal values, numbers to a float32's last bits (a fresh process may run the
    model's matrix products on other threads than the app), or to `atol` where an analysis rounds."""
    if isinstance(drawn, dict) and "bdata" in drawn:
        np.testing.assert_allclose(array_of(drawn).astype(float), array_of(shown).astype(float), rtol=1e-5, atol=atol,
                                   err_msg=where)
    elif isinstance(drawn, dict):
        assert isinstance(shown, dict) and drawn.keys() == shown.keys(), where
        for key in drawn:
            traces_equal(drawn[key], shown[key], f"{where}.{key}", atol=atol)
    elif isinstance(drawn, list) and drawn and not isinstance(drawn[0], str):
        assert isinstance(shown, list) and len(drawn) == len(shown), where
        for number, (a, b) in enumerate(zip(drawn, shown)):
            traces_equal(a, b, f"{where}[{number}]", atol=atol)
    elif isinstance(drawn, float):
        assert drawn == pytest.approx(shown, rel=1e-5, abs=atol), where
    else:
        assert drawn == shown, where


def test_snippets_redraw_the_pages_figures(pages, tmp_path):
    """Every snippet a covered page shows, run in one fresh process with fig.show writing the figure's JSON."""
    shown = [(spec, config["toImageButtonOptions"]["filename"], code) for page in WITH_CODE
             for spec, config, code in pages[page] if code is not None]
    assert {page for page in WITH_CODE if any(code for _, _, code in pages[page])} == set(WITH_CODE)
    # one torch thread, as the app runs (lpos.settings.torch_threads): on 2 busy cores two threads each ran the
    # Inside snippets several times slower
    runner = ["import torch", "torch.set_num_threads(1)", "import plotly.graph_objects as go", "OUT = None",
              "go.Figure.show = lambda self, *a, **k: open(OUT, 'w').write(self.to_json())"]
    for number, (*_, code) in enumerate(shown):
        runner += [f"OUT = {str(tmp_path / f'{number}.json')!r}", f"exec(compile({code!r}, 'snippet {number}', 'exec'), {{}})"]
    # Stretching's loss snippet scores nine models at four lengths: about a minute of the whole run on 2 cores
    subprocess.run([sys.executable, "-c", "\n".join(runner)], cwd=ROOT, check=True, timeout=600)
    for number, (spec, name, _) in enumerate(shown):
        drawn = json.loads((tmp_path / f"{number}.json").read_text())
        atol = next((a for prefix, a in ROUNDED.items() if name.startswith(prefix)), 1e-6)
        traces_equal(drawn["data"], spec["data"], name, atol=atol)


@pytest.mark.parametrize("page", list(PAGES))
def test_every_csv_holds_the_figures_numbers(pages, page):
    """The CSV read back with pandas: trace by trace, its rows hold the trace's y (a heatmap: its z, row by row)."""
    for spec, config, _ in pages[page]:
        frame = pd.read_csv(io.StringIO(figure_csv(pio.from_json(json.dumps(spec)))))
        assert list(frame.columns[:2]) == ["series", "x"], config
        start = 0
        for trace in spec["data"]:
            z = array_of(trace.get("z"))
            numbers, column = (z.ravel(), "value") if z is not None and z.ndim == 2 else (array_of(trace.get("y")), "y")
            if numbers is None or not len(numbers):
                continue
            rows = frame.iloc[start:start + len(numbers)]
            start += len(numbers)
            if pd.api.types.is_numeric_dtype(rows[column]):
                expected = pd.to_numeric(pd.Series(numbers), errors="coerce").to_numpy(dtype=float)
                np.testing.assert_allclose(rows[column].to_numpy(dtype=float), expected, rtol=1e-6, equal_nan=True)
        assert start <= len(frame)


def test_a_recipe_runs_what_it_prints(tiny_model):
    recipe = Recipe((step("bands", frequency_bands, 16, 8, pairs=[0, 1], base=100.0),
                     step("fig", band_figure, Ref("bands"))))
    fig = recipe.run()
    namespace = {}
    exec(recipe.snippet().replace("fig.show()", ""), namespace)
    assert namespace["fig"].to_json() == fig.to_json()
    frame = figure_frame(fig)
    assert len(frame) == sum(len(trace.x) for trace in fig.data)
    own_file = Recipe((step("rows", similarity.position_rows, Ref("model"), 8),)).snippet()
    assert "checkpoints.load('path/to/your/model.pt')" in own_file


@pytest.mark.skipif("learned" not in checkpoints.available(), reason="checkpoints/learned.pt is not shipped")
def test_recipes_read_the_texts_the_precomputed_views_are_keyed_by():
    """A page binds a precomputed view into a recipe (lpos.ui.export.run_recipe) only if the recipe's own steps
    read the very text the view was computed on: Stretching's chunks and window, Inside's story, held-out
    stories and stream."""
    model, meta = checkpoints.load("learned")
    assert torch.equal(stretch.story_chunk(), precomputed.stretch_chunks(precomputed.STRETCH_STORY, {}))
    held_out = precomputed.stretch_chunks(precomputed.STRETCH_HELD_OUT, meta)  # None without the corpus
    assert held_out is None and stretch.held_out_chunks(meta) is None or torch.equal(stretch.held_out_chunks(meta), held_out)
    assert stretch.story_window() == precomputed.profile_ids()
    parts = next(iter(precomputed.inside_texts(meta).values()))  # the page's first choice: the story (and held-out)
    read = {precomputed.INSIDE_STORY: probes.story_ids(), precomputed.INSIDE_HELD_OUT: probes.held_out_ids(meta)}
    assert [tuple(read[name]) for name, _ in parts] == [ids for _, ids in parts]
    texts = {name: list(ids) for name, ids in parts}
    assert streaming.streamed_ids(model, texts, window=124) == precomputed.stream_ids(model, parts, window=124)


def test_the_recipes_small_steps_are_the_pages_numbers(tiny_model):
    """The steps added for recipes hand on what the pages computed in place: one head's query and key, the bias as
    lines, one head's distance profile of every model, the band at two snapshots."""
    model, ids = tiny_model("rope", n_layer=2), [5, 9, 2, 7]
    query, key = attention.query_and_key(model, ids, layer=1, head=1, position=3)
    q, k = attention.queries_and_keys(model, ids, layer=1, rotate=False)  # (nh, T, hs)
    torch.testing.assert_close((query, key), (q[1, 3], k[1, 3]), rtol=0, atol=0)
    alibi = tiny_model("alibi", n_layer=1)
    np.testing.assert_array_equal(biases.bias_lines(alibi, layer=0, query=6, max_distance=4),
                                  biases.bias_at(alibi, layer=0, query=6, max_distance=4).numpy())
    portraits = {"rope": heads.head_portraits(model, probes.probe_text({"text": list(range(64))}, model=model, window=16))}
    profiles = heads.distance_profiles(portraits, layer=1, head=1)
    np.testing.assert_array_equal(profiles["rope"], portraits["rope"].profiles[1, 1])
    assert heads.distance_profiles(portraits, layer=2, head=0) == {}  # a model with fewer layers is left out
    band = pd.DataFrame({"step": [0, 0, 10, 10], "distance": [1, 2, 1, 2], "cosine": [0.1, 0.2, 0.8, 0.7]})
    bands = timeline.bands_at(band, [0, 10])
    assert list(bands) == ["step 0", "step 10"] and bands["step 10"]["cosine"].tolist() == [0.8, 0.7]
