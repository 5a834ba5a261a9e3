"""First visits: every page opened first on a fresh server, and every page with a learner's
seed-size model (45M parameters) served from a shared folder.

- Cold visits: for each page a new `streamlit run app.py`, the page's URL opened straight away; the
  server's CPU seconds until the page is drawn, against the same for a bare page that imports the
  same libraries (torch, Plotly, pandas) on its own fresh server, in the same run. Goal: at most
  COLD_EXTRA_CPU_S beyond it.
- Big model: a model of the "Tiny Children Stories 30M" seed's shape (6 layers, 8 heads, width 512,
  block 1024, GPT-2 vocabulary) with random weights, saved into a temporary LPOS_CHECKPOINT_DIR. One
  server walks every page with it: time to the first content (the page title) and to the whole
  page, the server CPU each page cost, then a second student's visit of each page (a new browser
  context), and the server's peak RSS over the walk. Goals: first content within FIRST_CONTENT_S,
  whole page within BIG_PAGE_CPU_S of server CPU, a second visit within SECOND_VISIT_S, peak RSS
  at most MEMORY_LIMIT_MB.
- Every model and an upload (`--memory-walk`): a fresh server, every page opened with each
  shipped model, then the seed-size model uploaded through the sidebar's box and every page opened with
  it; the server's peak RSS over it all. Goal: at most MEMORY_LIMIT_MB.

The cold visits run twice: with the shipped models, and with MORE_MODELS (the shipped ones and copies of
them, in a copy of the app: app_with_models), so a page whose first visit grows with the number of models
shows it. `--quick` runs both sections on one page only, once, as a smoke test: nothing about the numbers is
asserted.
"""
from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

from lpos.bench.browser import Server, Tab, chromium, peak_memory
from lpos.bench.common import MEMORY_LIMIT_MB, ROOT, spread
from lpos.pages import PAGES, url_paths

COLD_EXTRA_CPU_S = 1.0
FIRST_CONTENT_S = 2.0
BIG_PAGE_CPU_S = 10.0
SECOND_VISIT_S = 1.0
BIG_MODEL = "seed-45m.pt"
SEED_SHAPE = {"n_layer": 6, "n_head": 8, "n_embd": 512, "block_size": 1024}  # "Tiny Children Stories 30M"
TINY_SHAPE = {"n_layer": 2, "n_head": 2, "n_embd": 64, "block_size": 256}  # the memory walk's smoke test
QUICK_PAGE = "lengths"  # the one page --quick visits
MORE_MODELS = 20  # the first visits again with this many shipped models (copies of them: app_with_models)

FLOOR_APP = '''import pandas  # noqa: F401
import plotly.graph_objects  # noqa: F401
import streamlit as st
import torch  # noqa: F401

st.title("A bare page")
st.write("the same libraries imported, nothing computed")
'''
FIRST_CONTENT = '[data-testid="stMain"] h1'
PAGE_ERROR = '[data-testid="stException"]'


def first_visit(browser, server: Server, url: str, *, timeout: float = 600) -> dict:
    """Open `url` in a new context: ms to the first content and to the whole page, and the server's
    CPU seconds used so far (it is fresh, or the caller subtracts); each wait at most `timeout` s."""
    tab = Tab(browser)
    try:
        before, began = tab.finished, time.perf_counter()
        tab.page.goto(url, timeout=timeout * 1000)
        tab.page.wait_for_selector(f'{FIRST_CONTENT}, {PAGE_ERROR}', timeout=timeout * 1000)  # an error ends the wait too
        first = (time.perf_counter() - began) * 1000
        drawn = tab.wait_drawn(before, began, timeout=timeout)
        return {"first_content_ms": first, "page_ms": drawn["ms"], "errors": drawn["errors"], "server_cpu_s": server.cpu_s()}
    finally:
        tab.close()


def app_with_models(folder: Path, count: int) -> Path:
    """A copy of the app (app.py, pages/, lpos/, .streamlit/) in `folder` whose checkpoints/ holds the shipped
    models and copies of them up to `count` models (`<name>-copy<k>.pt`, each with its views: the same bytes, so
    the same digest), and their cards; returns its app.py. Pages that compare every shipped model compare them all."""
    import shutil

    from lpos import checkpoints
    from lpos.checkpoints import cards

    app, ignore = folder / f"app-{count}-models", shutil.ignore_patterns("__pycache__", "*.pyc", "*.tmp")
    app.mkdir()
    shutil.copy2(ROOT / "app.py", app / "app.py")
    for part in ("pages", "lpos", ".streamlit"):
        shutil.copytree(ROOT / part, app / part, ignore=ignore)
    shipped, target = checkpoints.available(), app / "checkpoints"
    shutil.copytree(checkpoints.CHECKPOINT_DIR, target, ignore=ignore)
    for k in range(max(count - len(shipped), 0)):
        name, copy = shipped[k % len(shipped)], f"{shipped[k % len(shipped)]}-copy{k // len(shipped) + 1}"
        for suffix in (".pt", ".views.pt"):
            if (target / f"{name}{suffix}").is_file():
                shutil.copy2(target / f"{name}{suffix}", target / f"{copy}{suffix}")
    cards.write_cards(folder=target)
    return app / "app.py"


def measure_cold_visits(browser, folder: Path, *, quick: bool, models: int | None = None, progress=print) -> dict:
    """Each page on its own fresh server, and the bare page, server CPU until drawn; with `models`, the app's
    copy of app_with_models (the shipped models and copies of them, that many in all)."""
    (folder / "bare.py").write_text(FLOOR_APP)
    from lpos import checkpoints, corpus

    app = ROOT / "app.py" if models is None else app_with_models(folder, models)
    env = {"LPOS_DATA_DIR": str(corpus.data_dir())}  # the checkout's corpus, for a copy of the app too
    paths = url_paths()
    names = [QUICK_PAGE] if quick else sorted(paths)
    results = {}
    for name in ["(bare page)", *names]:
        progress(f"cold visit: {name}" + (f" ({models} models)" if models else ""))
        script = folder / "bare.py" if name == "(bare page)" else app
        server = Server(script, folder / f"cold-{len(results)}.log", env=env)
        try:
            path = "" if name == "(bare page)" else paths[name]
            results[name] = first_visit(browser, server, f"{server.url}/{path}")
        finally:
            server.stop()
    floor = results.pop("(bare page)")
    for result in results.values():
        result["extra_cpu_s"] = result["server_cpu_s"] - floor["server_cpu_s"]
    shipped = models or len(checkpoints.available())
    return {"bare": floor, "pages": results, "goal_extra_cpu_s": COLD_EXTRA_CPU_S, "models": shipped}


def seed_size_model(folder: Path, *, shape: dict | None = None) -> Path:
    """A model of the seed's shape (or `shape`) with random weights (learned positions, as GPT-2),
    saved in lpos format."""
    import torch

    from lpos import checkpoints
    from lpos.model import GPT, GPTConfig

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = GPT(GPTConfig(**(shape or SEED_SHAPE), position="learned"))
    path = folder / BIG_MODEL
    checkpoints.save(model.eval(), {"note": "random weights: the bench's seed-size model"}, path)
    return path


def measure_big_model(browser, folder: Path, *, quick: bool, progress=print, shape: dict | None = None) -> dict:
    """One server, every page with the seed-size model (or one of `shape`) from a shared folder, then
    a second student; each page's RSS after it and the peak so far say which page holds the memory."""
    shared = folder / "shared"
    shared.mkdir()
    progress("building the seed-size model (45M parameters, random weights)" if shape is None else
             f"building a model of {shape} (random weights)")
    seed_size_model(shared, shape=shape)
    env = {"LPOS_CHECKPOINT_DIR": str(shared), "LPOS_VIEW_CACHE": str(folder / "view-cache")}
    server = Server(ROOT / "app.py", folder / "big.log", env=env)
    pages = {}
    try:
        with peak_memory(server) as sampler:
            paths = url_paths()
            names = [QUICK_PAGE] if quick else sorted(paths)
            query = f"?model=dir:{BIG_MODEL}&scheme=learned"
            for name in names:
                progress(f"big model, first visit: {name}")
                cpu = server.cpu_s()
                visit = first_visit(browser, server, f"{server.url}/{paths[name]}{query}")
                visit["server_cpu_s"] -= cpu
                visit["rss_after_mb"], visit["peak_so_far_mb"] = server.rss_mb(), sampler["peak_mb"]
                pages[name] = visit
            for name in names:
                progress(f"big model, second student: {name}")
                cpu = server.cpu_s()
                again = first_visit(browser, server, f"{server.url}/{paths[name]}{query}")
                pages[name]["second_visit_ms"] = again["page_ms"]
                pages[name]["second_visit_cpu_s"] = again["server_cpu_s"] - cpu
            end = server.rss_mb()
        peak = sampler["peak_mb"]
    finally:
        server.stop()
    return {"pages": pages, "peak_rss_mb": peak, "end_rss_mb": end, "limit_mb": MEMORY_LIMIT_MB,
            "second_visit_ms": spread([p["second_visit_ms"] for p in pages.values()]),
            "goals": {"first_content_s": FIRST_CONTENT_S, "page_cpu_s": BIG_PAGE_CPU_S, "second_visit_s": SECOND_VISIT_S}}


def measure_walk_with_upload(browser, log_dir: Path, upload: Path, *, models: Sequence[str] | None = None,
                             progress=print) -> dict:
    """walk_with_upload on a fresh server of the app."""
    server = Server(ROOT / "app.py", log_dir / "walk-upload.log")
    try:
        return walk_with_upload(browser, server, upload, models=models, progress=progress)
    finally:
        server.stop()


def walk_with_upload(browser, server, upload: Path, *, models: Sequence[str] | None = None, progress=print,
                     record: dict | None = None) -> dict:
    """On `server` (a lpos.bench.browser.Server, or anything with its `url` and `rss_mb()`): every page with every
    shipped model (`models`: all by default), each page opened by its URL, then a learner's file `upload` through
    the sidebar's box and every page with it, reached through the menu as a learner does (a URL opened anew starts
    another session, without the upload). The peak memory over it all, and the memory after each stage, written
    into `record` as measured (what was measured stays there if the walk fails) and returned."""
    from lpos import checkpoints

    names = list(checkpoints.available() if models is None else models)
    record = {} if record is None else record
    record.update(models=names, upload_mb=upload.stat().st_size / 2**20, rss_after_mb={})
    stages, began = record["rss_after_mb"], time.perf_counter()
    with peak_memory(server) as sampler:
        try:
            for name in names:  # a tab per model: Playwright lets go of a long-lived tab's oldest requests
                progress(f"walk: every page with {name}")
                tab = Tab(browser)
                for path in url_paths().values():
                    tab.open(f"{server.url}/{path}?model={name}", timeout=300)
                tab.close()
            stages["every shipped model"] = server.rss_mb()
            progress(f"walk: uploading {upload.name} ({record['upload_mb']:.0f} MB)")
            tab = Tab(browser)
            tab.open(f"{server.url}/", timeout=300)
            tab.page.locator("[data-testid='stSidebar'] input[type=file]").set_input_files(str(upload))
            tab.page.get_by_text(f"Loaded {upload.name}").wait_for(timeout=600_000)
            tab.wait_drawn(timeout=300)
            stages["the upload loaded"] = server.rss_mb()
            for page in PAGES:
                progress(f"walk: {page.name} with the upload")
                tab.act(lambda: None, tab.page.get_by_role("link", name=page.title).click, timeout=300)
            stages["every page with the upload"] = server.rss_mb()
            tab.close()
        finally:
            record.update(peak_rss_mb=sampler["peak_mb"], seconds=time.perf_counter() - began)
    return record


def memory_walk(*, tiny: bool = False, progress=print) -> dict:
    """Every page with the seed-size model from a shared folder on one server, and the peak RSS; then, on a fresh
    server, every page with every shipped model and the same model uploaded (measure_walk_with_upload). `tiny`: a
    2-layer model instead, on the first walk only, a smoke test of the walk; its memory says nothing."""
    import tempfile

    with tempfile.TemporaryDirectory() as folder, chromium() as browser:
        walk = measure_big_model(browser, Path(folder), quick=False, progress=progress,
                                 shape=TINY_SHAPE if tiny else None)
        upload = None if tiny else measure_walk_with_upload(browser, Path(folder), (Path(folder) / "shared" / BIG_MODEL),
                                                            progress=progress)
    return {"big_model": {**walk, "shape": TINY_SHAPE if tiny else SEED_SHAPE},
            **({"every_model_and_upload": upload} if upload else {})}


def memory_lines(walk: dict) -> list[str]:
    """Per page: the server's RSS after it and the peak so far, in the order walked."""
    return [f"  {name:<18} RSS after {page['rss_after_mb']:,.0f} MB, peak so far {page['peak_so_far_mb']:,.0f} MB"
            for name, page in walk["pages"].items()]


def report(results: dict) -> list[str]:
    """Lines for the bench table: each page against its goals, or nothing when not measured."""
    lines = []
    for cold in (results.get("cold_visits"), results.get("cold_visits_more")):
        if not cold:
            continue
        lines += ["", f"First visit on a fresh server, {cold.get('models', '?')} shipped models (server CPU beyond a bare "
                      f"page: goal ≤ {COLD_EXTRA_CPU_S:.1f} s; bare page {cold['bare']['server_cpu_s']:.2f} s CPU, "
                      f"{cold['bare']['page_ms']:,.0f} ms)"]
        for name, page in cold["pages"].items():
            verdict = "" if page["extra_cpu_s"] <= COLD_EXTRA_CPU_S else f"  over goal by {page['extra_cpu_s'] - COLD_EXTRA_CPU_S:.2f} s"
            lines.append(f"  {name:<18} +{page['extra_cpu_s']:.2f} s CPU, drawn in {page['page_ms']:,.0f} ms{verdict}")
    big = results.get("big_model")
    if big:
        what = "Seed-size model (45M)" if big.get("shape", SEED_SHAPE) == SEED_SHAPE else f"A model of {big['shape']}"
        lines += ["", f"{what} from a shared folder: peak RSS {big['peak_rss_mb']:,.0f} MB "
                      f"({'within' if big['peak_rss_mb'] <= big['limit_mb'] else 'OVER'} the {big['limit_mb']} MB limit)"]
        for name, page in big["pages"].items():
            over = [what for what, bad in (("first content", page["first_content_ms"] > FIRST_CONTENT_S * 1000),
                                           ("CPU", page["server_cpu_s"] > BIG_PAGE_CPU_S),
                                           ("second visit", page["second_visit_ms"] > SECOND_VISIT_S * 1000)) if bad]
            lines.append(f"  {name:<18} first content {page['first_content_ms']:,.0f} ms, page {page['page_ms']:,.0f} ms "
                         f"({page['server_cpu_s']:.1f} s CPU), second student {page['second_visit_ms']:,.0f} ms"
                         + (f"  over goal: {', '.join(over)}" if over else ""))
        lines += ["  memory, page by page:", *memory_lines(big)]
    walk = results.get("every_model_and_upload")
    if walk:
        lines += ["", f"One server: every page with each of the {len(walk['models'])} shipped models, then a learner's upload "
                      f"({walk['upload_mb']:,.0f} MB) on every page: peak RSS {walk['peak_rss_mb']:,.0f} MB "
                      f"({'within' if walk['peak_rss_mb'] <= MEMORY_LIMIT_MB else 'OVER'} the {MEMORY_LIMIT_MB} MB limit)",
                  *(f"  after {stage}: {mb:,.0f} MB" for stage, mb in walk["rss_after_mb"].items())]
    return lines


def first_visit_side(*, quick: bool = False, progress=print) -> dict:
    """Both sections in their own browser and temporary folder; needs Playwright and Chromium."""
    import tempfile

    with tempfile.TemporaryDirectory() as folder, chromium() as browser:
        more = {} if quick else {"cold_visits_more": measure_cold_visits(browser, Path(folder), quick=quick,
                                                                          models=MORE_MODELS, progress=progress)}
        return {"cold_visits": measure_cold_visits(browser, Path(folder), quick=quick, progress=progress), **more,
                "big_model": measure_big_model(browser, Path(folder), quick=quick, progress=progress)}
