"""Charts updated in place (lpos.ui.plotly_react, LPOS_PLOTLY_REACT=1) in headless Chromium: a new sentence
redraws the Embeddings heatmaps in the div already on the page, and each chart keeps what st.plotly_chart
gives: hover labels, zoom, the camera button's named SVG, its column's full width on a phone."""
from __future__ import annotations

import re

import pytest

from conftest import open_url, run_and_wait, start_app

pytestmark = [pytest.mark.browser, pytest.mark.slow]
FIRST_RUN = 300_000  # ms: a cold server's first page on a busy two-core machine
IN_PLACE = ".lpos-plotly"  # a chart updated in place: its div
SENTENCE = "The dog saw the cat and the man"  # 8 tokens; the app's default sentence has 5
# the div's figure, as Plotly holds it: the token rows' labels, and the x axis's range (zoom changes it)
DRAWN = "div => ({labels: div.data[0].y, range: div._fullLayout.xaxis.range, node: div.lposNode})"


@pytest.fixture(scope="module")
def app_in_place(tmp_path_factory):
    app = start_app(tmp_path_factory.mktemp("app"), env={"LPOS_PLOTLY_REACT": "1"})
    yield app
    app.process.terminate()
    app.process.wait(timeout=20)


def test_a_new_sentence_redraws_the_same_div(app_in_place, page):
    fetched = []  # plotly.js: once per page, whatever the number of charts and runs
    page.on("request", lambda request: request.url.endswith("/plotly.min.js") and fetched.append(request.url))
    open_url(page, f"{app_in_place.url}/?scheme=learned&model=learned", timeout=FIRST_RUN)
    charts = page.locator(IN_PLACE)
    assert charts.count() == 3 and page.locator("[data-testid='stPlotlyChart']").count() == 0
    token_rows = charts.first.element_handle()
    token_rows.evaluate("div => { div.lposNode = 'the first one' }")  # a mark that only this DOM node carries
    before, digest = token_rows.evaluate(DRAWN), token_rows.get_attribute("data-drawn")
    assert len(before["labels"]) == 5

    sentence = page.locator("[data-testid='stSidebar'] textarea")
    sentence.fill(SENTENCE)
    run_and_wait(page, lambda: sentence.press("Control+Enter"), timeout=FIRST_RUN)
    # the new figure's digest is drawn (SETTLED waits for no chart drawing; this names which figure)
    page.wait_for_function("([div, old]) => div.dataset.drawn && div.dataset.drawn !== old", arg=[token_rows, digest])
    after = token_rows.evaluate(DRAWN)
    assert token_rows.evaluate("div => div.isConnected") and after["node"] == "the first one"
    assert charts.first.evaluate("(div, old) => div === old", token_rows)  # the page's first chart is that div
    assert len(after["labels"]) == 8 and after["labels"] != before["labels"]
    assert charts.count() == 3 and len(fetched) == 1, fetched
    assert page.console_errors == [] and page.failed_requests == []


def test_hover_zoom_and_the_named_svg(app_in_place, page):
    open_url(page, f"{app_in_place.url}/?scheme=learned&model=learned", timeout=FIRST_RUN)
    chart = page.locator(IN_PLACE).first
    box = chart.locator(".nsewdrag").bounding_box()
    hover = chart.locator(".hoverlayer .hovertext")
    for nudge in range(3):  # a hover needs a mouse *move* over a drawn cell
        page.mouse.move(box["x"] + box["width"] / 2 + nudge * 3, box["y"] + box["height"] / 2)
    hover.first.wait_for(timeout=10_000)  # Plotly draws the label on the mouse event, not on a server run
    assert re.search(r"token rows.*dimension \d+.*value -?\d\.\d{4}", hover.first.text_content())

    div = chart.element_handle()
    full = div.evaluate(DRAWN)["range"]
    page.mouse.move(box["x"] + box["width"] * 0.3, box["y"] + box["height"] * 0.3)
    page.mouse.down()
    page.mouse.move(box["x"] + box["width"] * 0.5, box["y"] + box["height"] * 0.6, steps=5)
    page.mouse.up()
    page.wait_for_function("([div, full]) => div._fullLayout.xaxis.range[1] - div._fullLayout.xaxis.range[0] "
                           "< (full[1] - full[0]) / 2", arg=[div, full])  # Plotly zooms on mouse up

    chart.hover()  # Plotly shows its modebar on hover
    button = chart.locator(".modebar-btn[data-title^='Download plot']")
    assert button.count() == 1
    with page.expect_download(timeout=60_000) as caught:
        button.click()
    assert caught.value.suggested_filename == "lpos-embeddings-token-rows-learned-learned.svg"
    with open(caught.value.path(), encoding="utf-8") as file:
        svg = file.read()
    assert svg.lstrip().startswith("<svg") and "<image" in svg  # the heatmap's raster travels with the file
    assert page.console_errors == [] and page.failed_requests == []


def test_a_chart_fills_its_column_on_a_phone(app_in_place, page):
    page.set_viewport_size({"width": 400, "height": 900})
    open_url(page, f"{app_in_place.url}/?scheme=learned&model=learned", timeout=FIRST_RUN)
    widths = page.locator(IN_PLACE).evaluate_all("""charts => charts.map(div => [  // stacked: each as wide as its column
      Number(div.querySelector('.main-svg').getAttribute('width')),
      div.closest('[data-testid="stColumn"]').getBoundingClientRect().width])""")
    assert len(widths) == 3 and all(abs(drawn - column) <= 1 for drawn, column in widths), widths
    assert all(column > 300 for _, column in widths), widths  # stacked, not three abreast


def test_a_pages_own_control_redraws_the_same_div(app_in_place, page):
    """Sinusoids' length slider, one key press: the table's figure changes and is drawn into the div already there."""
    open_url(page, f"{app_in_place.url}/sinusoids?scheme=sinusoidal&model=sinusoidal", timeout=FIRST_RUN)
    assert page.locator("[data-testid='stPlotlyChart']").count() == 0  # every chart of the page is in place
    table = page.locator(f".st-key-sin_table {IN_PLACE}").element_handle()
    table.evaluate("div => { div.lposNode = 'the table' }")
    rows = "div => div.data[0].z.shape ?? div.data[0].z.length"  # Plotly may hold the z values typed
    before, digest = table.evaluate(rows), table.get_attribute("data-drawn")
    thumb = page.locator("[data-testid='stSlider']").filter(has_text="Length (positions)").get_by_role("slider")
    thumb.focus()
    run_and_wait(page, lambda: thumb.press("ArrowRight"), timeout=FIRST_RUN)
    page.wait_for_function("([div, old]) => div.dataset.drawn && div.dataset.drawn !== old", arg=[table, digest])
    assert table.evaluate("div => div.isConnected && div.lposNode") == "the table"
    assert table.evaluate(rows) != before
    assert page.console_errors == [] and page.failed_requests == []


def test_an_animation_keeps_its_frames_and_plays(app_in_place, page):
    """The Training timeline's whole run in the browser: its frames reach the div, and Play moves the step."""
    open_url(page, f"{app_in_place.url}/timeline?scheme=learned&model=learned", timeout=FIRST_RUN)
    run_and_wait(page, page.get_by_text("Play the whole run in the browser").click, timeout=FIRST_RUN)
    chart = page.locator(f".st-key-timeline_animation {IN_PLACE}")
    assert chart.evaluate("div => div._transitionData._frames.length") > 1
    step = "div => div.layout.sliders[0].active ?? 0"  # the slider's step (unset: the first)
    assert chart.evaluate(step) == 0
    chart.locator(".updatemenu-button").first.click()  # Play
    page.wait_for_function(f"div => ({step})(div) > 0", arg=chart.element_handle(), timeout=30_000)
    assert page.console_errors == [] and page.failed_requests == []


# The component's module, loaded again in the page, draws a chart into a div of its own and is told the chart is gone
# (what Streamlit does when a learner leaves the page) at each of these ms after the draw began (-1: at once); then a
# drawn chart is resized and told so while the resize's redraw runs. Returns, for each, whether the div was purged.
REMOVED_WHILE_BUSY = """async ([source, figure]) => {
  const render = (await import(URL.createObjectURL(new Blob([source], {type: "text/javascript"})))).default;
  const wait = (ms) => new Promise((r) => setTimeout(r, ms));
  const cases = [[-1, false], [0, false], [5, false], [20, false], [80, false], [400, true], [420, true]];
  const divs = [];
  for (const [[delay, resize], i] of cases.map((c, i) => [c, i])) {
    const parent = document.createElement("div");
    parent.style.width = "600px";
    document.querySelector('[data-testid="stMain"]').appendChild(parent);
    const done = render({data: {key: `removed-${i}`, digest: `d${i}`, figure, plotly: "", config: {}}, parentElement: parent});
    divs.push(parent.firstElementChild);
    if (delay >= 0) await wait(delay);
    if (resize) { parent.style.width = "400px"; await wait(120); }  // Plotly's resize redraws 100 ms after it is asked
    done();
    parent.remove();
  }
  await wait(1500);
  return divs.map((div) => div._fullLayout === undefined && div.data === undefined);
}"""


def test_a_chart_removed_while_it_draws_is_purged_once_plotly_is_done(app_in_place, page):
    """A chart removed while Plotly still draws or resizes it (a learner leaving a page as it redraws): no error,
    and the div purged all the same."""
    from lpos.ui.plotly_react import SCRIPT

    thrown = []
    page.on("pageerror", lambda error: thrown.append(str(error)))
    open_url(page, f"{app_in_place.url}/?scheme=learned&model=learned", timeout=FIRST_RUN)
    figure = page.locator(IN_PLACE).first.evaluate(  # titles on both axes: Plotly redraws to fit their margins
        """div => JSON.stringify({data: div.data, layout: {title: {text: "removed"}, xaxis: {title: {text: "dimension"}},
                                                         yaxis: {title: {text: "token rows"}}}})""")
    purged = page.evaluate(REMOVED_WHILE_BUSY, [SCRIPT.read_text(encoding="utf-8"), figure])
    assert purged == [True] * 7, purged
    assert thrown == [] and page.console_errors == [], (thrown, page.console_errors)
