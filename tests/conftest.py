"""Shared fixtures: seeded untrained models, AppTest runs, and the real app in headless Chromium."""
from __future__ import annotations

import re
import sys
import urllib.parse
from pathlib import Path

import pytest
import torch

import lpos.positions
from lpos.pages import PAGES
# the one browser harness; CHARTS and free_port are for the tests that import them from here
from lpos.bench.browser import CHARTS, Server, Tab, check_browser, chromium, free_port, tab_of  # noqa: F401
from lpos.corpus import data_dir

ROOT = Path(__file__).resolve().parent.parent
# The tests mirror the package (tests/positions/, tests/pages/, ...), and a few share helpers across folders
# (`from test_upload import seed_bytes`): every folder of tests is importable by module name, as the flat
# tests/ was. Test file names stay unique across folders for that reason (tests/test_structure.py checks it).
sys.path[:0] = sorted(str(folder) for folder in Path(__file__).parent.iterdir()
                      if folder.is_dir() and any(folder.glob("test_*.py")))
SCHEMES = list(lpos.positions.SCHEMES)  # every registered scheme, in the registry's order
# The five schemes with a shipped trained model since the first release, for tests of those models and their
# pinned numbers; a test about every scheme reads SCHEMES.
CLASSIC_SCHEMES = ["learned", "sinusoidal", "rope", "alibi", "none"]
DATA_DIR = data_dir()  # the corpus folder: LPOS_DATA_DIR, else shared/data beside the checkout

# Two tiers. `python -m pytest` runs the fast one (the maths, model, analysis, figures, tokenizers,
# checkpoint files, CLI, structure, pinned numbers, one AppTest run per page) in minutes;
# `python -m pytest --all` adds the heavy one. A test is heavy when the deepest folder or file of tests/
# named in HEAVY that holds it gives a marker (None: fast), or when it is marked `slow` itself.
ALL_OPTION = "--all"
HEAVY = {
    "browser": "browser",  # the real app in headless Chromium
    "deploy": "deploy",  # the proxy, the container, the live class store, load runs
    "training": "training",  # training runs
    "test_tour_notebook.py": "notebook",  # examples/tour.ipynb in a Jupyter kernel
    "pages": "apptest",  # each page's AppTest runs under its schemes, models, inputs and states
    "pages/test_app_shell.py": None,  # the shell, and one AppTest run per page
    "pages/test_page_registry.py": None,  # the registry's structure
    "figures/test_export.py": "apptest",  # every page's downloads
    "tools/test_precomputed_views.py": "apptest",  # every precomputed view against the page's live one
    "test_offline.py": "apptest",  # every page with the network refused
}


def pytest_addoption(parser):
    parser.addoption(ALL_OPTION, action="store_true", default=False,
                     help="run every test: the heavy tier (marked slow: AppTest matrices, browser, deploy, "
                          "load, training, notebook, container) as well as the fast one")


def heavy_kind(path: Path) -> str | None:
    """The marker HEAVY gives the test file at `path` (its deepest entry that holds it), None for the fast tier."""
    parts = path.relative_to(Path(__file__).parent).parts
    for depth in range(len(parts), 0, -1):
        if "/".join(parts[:depth]) in HEAVY:
            return HEAVY["/".join(parts[:depth])]
    return None


# Under pytest-xdist (`-n 2`, as the README's full command runs), `--dist loadgroup` keeps each file's tests on one
# worker (a module's server and browser are started once) and every deploy test on one worker: they start and stop
# machine-wide services (the Docker engine, the proxy, Redis), so two at once could stop each other's.
SHARED_GROUP = {"deploy": "deploy"}


def pytest_configure(config):
    config.addinivalue_line("markers", "xdist_group(name): the tests pytest-xdist's loadgroup runs on one worker")


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook, which names each test's group from its markers
def pytest_collection_modifyitems(config, items):
    """Mark each heavy test with its kind and `slow`, and its xdist group; skip the slow ones unless --all is given."""
    run_all = config.getoption(ALL_OPTION)
    kinds = {kind for kind in HEAVY.values() if kind}
    for item in items:
        kind = heavy_kind(Path(item.fspath))
        item.add_marker(pytest.mark.xdist_group(SHARED_GROUP.get(kind, Path(item.fspath).name)))
        if kind is not None:
            item.add_marker(kind)
            item.add_marker("slow")
        if item.get_closest_marker("slow") and not run_all:
            named = sorted({mark.name for mark in item.iter_markers()} & kinds) or ["slow"]
            item.add_marker(pytest.mark.skip(reason=f"heavy tier ({', '.join(named)}): "
                                                    f"`python -m pytest {ALL_OPTION}` runs it"))


def seeded_model(scheme: str, **config):
    """A GPT of `scheme` and `config` drawn with seed 0, in eval mode: any size, unlike
    lpos.model.untrained_model (the app's untrained model, shipped size and seed, token table included)."""
    from lpos.model import GPT, GPTConfig

    torch.manual_seed(0)
    return GPT(GPTConfig(position=scheme, **config)).eval()


@pytest.fixture
def tiny_model():
    """A small untrained model factory: tiny_model("rope", n_layer=2)."""
    def make(scheme: str, **config):
        defaults = dict(n_layer=2, n_head=4, n_embd=32, block_size=64)
        return seeded_model(scheme, **{**defaults, **config})
    return make


@pytest.fixture(scope="session")
def small_stories(tmp_path_factory) -> Path:
    """The first 120 stories of the shared TinyStories file (about 90 kB): enough for a two-step CLI run."""
    source = DATA_DIR / "tinystories_part01.txt"
    if not source.is_file():
        pytest.skip(f"{source} is not on this machine (LPOS_DATA_DIR names the corpus folder)")
    stories = source.read_text(encoding="utf-8").split("\n<|endoftext|>\n")[:120]
    path = tmp_path_factory.mktemp("stories") / "stories.txt"
    path.write_text("\n<|endoftext|>\n".join(stories) + "\n", encoding="utf-8")
    return path


@pytest.fixture(autouse=True, scope="session")
def own_view_cache(tmp_path_factory):
    """Shared-folder models' views kept in this run's own folder (LPOS_VIEW_CACHE, the apps the tests start
    included): views another version of the code wrote to ~/.cache/lpos/views are never read back here."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("LPOS_VIEW_CACHE", str(tmp_path_factory.mktemp("views")))
        yield


@pytest.fixture(autouse=True, scope="session")
def server_navigation_mode():
    """Keep AppTest in the navigation mode of a running server (lpos.ui.harness says why)."""
    from lpos.ui.harness import server_navigation_mode

    server_navigation_mode()


def app_test(*, page: str | None = None, timeout: float = 120, state: dict | None = None, **query):
    """An AppTest of app.py, optionally opened on a page file (with session `state` set before it runs, as a
    learner's earlier choices) and with URL query values, already run."""
    from lpos.ui.harness import app_test as new_app_test

    at = new_app_test(timeout=timeout)
    for key, value in query.items():
        at.query_params[key] = value
    at.run()
    for key, value in (state or {}).items():
        at.session_state[key] = value
    if page is not None:
        at.switch_page(page).run()
    return at


def start_app(tmp_path: Path, env: dict | None = None) -> Server:
    """`streamlit run app.py` on a free loopback port, answering its health check; its log in tmp_path."""
    return Server(log=tmp_path / "streamlit.log", env=env, timeout=90)


@pytest.fixture(scope="module")
def running_app(tmp_path_factory):
    with start_app(tmp_path_factory.mktemp("app")) as app:
        yield app


@pytest.fixture(scope="module")
def browser():
    try:
        check_browser()
    except RuntimeError as error:
        pytest.fail(str(error))
    with chromium() as browser:
        yield browser


# Streamlit's frontend, opened on a page's own URL (/lesson), first probes /lesson/_stcore/health
# and host-config before it finds the server root: harmless 404s that are not the app's.
STREAMLIT_PATH_PROBE = re.compile(r"/[^/?]+/_stcore/(health|host-config)")


# The harness's waits for tests, with Playwright's millisecond timeouts: each takes a Playwright page, watched
# by the harness's Tab (lpos.bench.browser) from before it opens the app.
def new_page(browser, *, viewport: dict | None = None):
    """A page in a fresh browser context (its own session), watched by the harness."""
    return Tab(browser, viewport=viewport).page


def finished_runs(page) -> int:
    return tab_of(page).finished


def run_and_wait(page, action, *, timeout: float = 90_000) -> None:
    """Do `action()` (a click, a key press), then wait until the run it started has finished and the page is drawn."""
    tab_of(page).act(lambda: None, action, timeout=timeout / 1000)


def open_url(page, url: str, *, timeout: float = 90_000) -> None:
    """Open `url` and wait until its first run through app.py is drawn."""
    tab_of(page).open(url, timeout=timeout / 1000)


def wait_for_app(page, timeout: float = 90_000, *, also: str | None = None) -> None:
    """Wait until the page is drawn and `also` (a JavaScript function of no argument) holds, for a state reached
    by other means (prefer run_and_wait / open_url, which wait for the run an action started)."""
    tab_of(page).wait_drawn(timeout=timeout / 1000, also=also)


@pytest.fixture
def page(browser):
    """A fresh browser page (see new_page) recording JavaScript/console errors in `page.console_errors` and failed
    requests (status >= 400, Streamlit's own path probes left out) in `page.failed_requests`."""
    page = new_page(browser)
    context = page.context
    page.console_errors, page.failed_requests = [], []

    def on_console(message):
        # a failed resource is reported with its URL by on_response
        if message.type == "error" and not message.text.startswith("Failed to load resource"):
            page.console_errors.append(message.text)

    def on_response(response):
        if response.status >= 400 and not STREAMLIT_PATH_PROBE.search(response.url):
            page.failed_requests.append(f"{response.status} {response.url}")

    page.on("console", on_console)
    page.on("response", on_response)
    page.on("pageerror", lambda error: page.console_errors.append(str(error)))
    yield page
    context.close()


def model_box_text(page) -> str:
    """The model box's label and chosen option (Streamlit 1.67's selectbox is a combobox: the choice
    is its input's value, not text)."""
    box = page.locator("[data-testid='stSidebar'] [data-testid='stSelectbox']").nth(1)
    return f"{box.inner_text()}\n{box.locator('input').input_value()}"


def walk_every_page(page, model_label: str, *, timeout: float = 300_000) -> dict[str, str]:
    """From an open Embeddings page, click through every link of the navigation; on each page assert
    that it drew (a title, no exception) with `model_label` still chosen in the sidebar. Returns each
    page's title -> its main area's text."""
    links = page.locator("[data-testid='stSidebarNav'] a")
    titles = [text.strip().splitlines()[-1] for text in links.all_inner_texts()]  # the title follows the icon name
    paths = [urllib.parse.urlparse(link.get_attribute("href")).path for link in links.all()]
    assert titles == [p.title for p in PAGES], titles  # the navigation is the registry, in its order
    assert paths == [f"/{p.url_path}" for p in PAGES], paths
    texts = {}
    for number, title in enumerate(titles):
        if number:  # the Embeddings page is open already: a click on its own link starts no run
            run_and_wait(page, links.nth(number).click, timeout=timeout)
            page.wait_for_url(lambda url, path=paths[number]: urllib.parse.urlparse(url).path == path)
            wait_for_app(page, timeout=timeout)  # a run still ending on the page before can end run_and_wait's wait
        main_area = page.locator("[data-testid='stMain']")
        assert main_area.locator("h1").count() >= 1, title  # the page drew, not only the sidebar
        assert main_area.locator("[data-testid='stException']").count() == 0, (title, main_area.inner_text()[:800])
        assert model_label in model_box_text(page), title
        texts[title] = main_area.inner_text()
    return texts
