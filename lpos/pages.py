"""The app's pages, each declared once: what app.py's navigation, the bench, the load scripts and the
every-page tests iterate (as `lpos.positions` finds the schemes). No Streamlit here.

A page's name is its file (`pages/<name>.py`), its URL path (`/<name>`; the default page is served
at the root, and `/<name>` takes a learner there) and its topic's modules (`lpos/ui/<name>.py`, ...
where it has them). Its title is what the menu and the page's heading say. A path a page was served
at before stays in `old_paths`: a link someone copied still opens the page.

To add a page: write `pages/<name>.py` and its topic modules, then one `Page(...)` below.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import parse_qsl

ROOT = Path(__file__).resolve().parent.parent
GROUPS = ("Start here", "What each scheme is", "Experiments")  # the menu's sections, in order


@dataclass(frozen=True)
class Control:
    """A page's own control, the first a learner reaches, as the bench uses it (lpos.bench.interactions):
    `kind` is "slider" (one key press, right then left), "button" (a click), "select" (the next of
    `options` in the box labelled `label`) or "radio" (the next of `options`). `query` opens the view
    the control acts on."""

    what: str  # as the bench's table says it
    kind: str
    label: str
    query: str
    options: tuple[str, ...] = ()


@dataclass(frozen=True)
class Page:
    name: str  # pages/<name>.py, served at /<name>
    title: str
    icon: str  # a Material icon, ":material/<icon>:"
    group: str  # one of GROUPS
    view: str = "scheme=learned&model=learned"  # a query whose view draws the page's central figures
    control: Control | None = None  # the page's own control, timed by the bench
    default: bool = False  # served at the app's root URL
    old_paths: tuple[str, ...] = field(default=())  # URL paths it was served at before: they lead here
    charts_on_open: bool = True  # its view draws charts from the start (the Lab's come once a run has trained)

    @property
    def file(self) -> str:
        """The page's script, relative to the repository root (what st.Page and AppTest.switch_page take)."""
        return f"pages/{self.name}.py"

    @property
    def url_path(self) -> str:
        """The path its URL has after the app's address: "" for the default page, else its name."""
        return "" if self.default else self.name

    def view_query(self) -> dict[str, str]:
        """`view` as URL query values."""
        return dict(parse_qsl(self.view))


PAGES: tuple[Page, ...] = (
    Page("embeddings", "Embeddings: token + position", ":material/view_module:", "Start here", default=True),
    Page("lesson", "Lesson: the story of positions", ":material/school:", "Start here",
         view="scheme=learned&model=learned&step=2",
         control=Control("Next button", "button", "Next", "scheme=learned&model=learned&step=1")),
    Page("sinusoids", "Sinusoids", ":material/waves:", "What each scheme is", view="scheme=sinusoidal&model=sinusoidal",
         control=Control("Width slider, one step", "slider", "Width", "scheme=sinusoidal&model=sinusoidal")),
    Page("similarity", "Similarity and neighbours", ":material/explore:", "What each scheme is",
         control=Control("Positions slider, one step", "slider", "Positions",
                         "scheme=learned&model=learned&positions=64")),  # mid-range: 128 is its end
    Page("attention", "Positions in attention", ":material/rotate_right:", "What each scheme is",
         view="scheme=rope&model=rope", old_paths=("rope_alibi",),
         control=Control("Head box, another head", "select", "Head", "scheme=rope&model=rope", ("head 2", "head 1"))),
    Page("shuffle", "Order blindness (shuffle)", ":material/shuffle:", "Experiments",
         view="scheme=rope&model=untrained", old_paths=("order_blindness",),
         control=Control("Shuffle button", "button", "Shuffle earlier tokens", "scheme=learned&model=learned")),
    Page("lengths", "Length extrapolation", ":material/straighten:", "Experiments", old_paths=("extrapolation",),
         control=Control("Text radio: the story or your own text", "radio", "Text", "scheme=sinusoidal&model=sinusoidal",
                         ("Your own text", "The built-in story"))),
    Page("inside", "Inside the model", ":material/neurology:", "Experiments", view="scheme=learned&model=untrained"),
    Page("stretch", "Stretching the context", ":material/open_in_full:", "Experiments", view="scheme=rope&model=rope"),
    Page("timeline", "Training timeline", ":material/history:", "Experiments"),
    Page("lab", "Lab: train your own", ":material/science:", "Experiments", charts_on_open=False),
)


def page_named(name: str) -> Page:
    """The registered page of that name; an unknown name is a ValueError that lists the pages."""
    for page in PAGES:
        if page.name == name:
            return page
    raise ValueError(f"unknown page {name!r}; choose one of {sorted(p.name for p in PAGES)}")


def url_paths() -> dict[str, str]:
    """{name: URL path} of every page, in the menu's order (the default page's path is "")."""
    return {page.name: page.url_path for page in PAGES}


def default_page() -> Page:
    """The page served at the app's root URL."""
    return next(page for page in PAGES if page.default)
