"""The page registry (lpos.pages) is the only list of pages: every page file is registered once, the docs'
page tables follow it, and no other file keeps a list of pages by hand."""
from __future__ import annotations

import re
import subprocess

import pytest
from conftest import ROOT

from lpos.pages import GROUPS, PAGES, Control, default_page, page_named, url_paths

# What names a page in a file: its script, a URL path of it (current or old) in quotes, its title in quotes.
FILES = {f"pages/{page.name}.py": page.name for page in PAGES}
PATHS = {f"/{path}": page.name for page in PAGES for path in (page.name, *page.old_paths)}
TITLES = {page.title: page.name for page in PAGES}
QUOTED = re.compile(r"""["']([^"'\n]{1,80})["']""")
WINDOW = 3  # lines: three pages named within three lines is a list
LIST_LENGTH = 3


def pages_named(line: str) -> set[str]:
    """The registered pages a line names by file, quoted URL path or quoted title."""
    named = {name for file, name in FILES.items() if file in line}
    for text in QUOTED.findall(line):
        bare = text.split("?")[0]
        named |= {name for key, name in ((bare, PATHS.get(bare)), (text, TITLES.get(text))) if name}
    return named


def hand_kept_lists(text: str) -> list[tuple[int, set[str]]]:
    """(line number, pages) wherever LIST_LENGTH pages are named within WINDOW lines."""
    lines = [pages_named(line) for line in text.splitlines()]
    found = []
    for number in range(len(lines)):
        named = set().union(*lines[number:number + WINDOW])
        if len(named) >= LIST_LENGTH and lines[number]:
            found.append((number + 1, named))
    return found


def test_every_page_file_is_registered_once():
    assert sorted(FILES) == sorted(f"pages/{path.name}" for path in (ROOT / "pages").glob("*.py"))
    assert len({page.name for page in PAGES}) == len(PAGES) and len(set(TITLES)) == len(PAGES)
    assert all(re.fullmatch(r"[a-z][a-z0-9_]*", page.name) for page in PAGES)  # a file name and a URL path
    assert all(page.group in GROUPS for page in PAGES)
    assert [page.name for page in PAGES if page.default] == [default_page().name] == [PAGES[0].name]
    old = [path for page in PAGES for path in page.old_paths]
    assert len(set(old)) == len(old) and not set(old) & set(FILES.values()), old  # an old path leads to one page
    assert url_paths()[default_page().name] == "" and all(url_paths()[p.name] == p.name for p in PAGES if not p.default)


def test_the_controls_the_bench_uses_are_said_in_full():
    for page in PAGES:
        control = page.control
        if control is not None:
            assert isinstance(control, Control) and control.kind in ("slider", "button", "select", "radio"), page.name
            assert bool(control.options) == (control.kind in ("select", "radio")), page.name
            assert "scheme=" in control.query and "model=" in control.query, page.name
        assert set(page.view_query()) >= {"scheme", "model"}, page.name


def test_an_unknown_page_name_says_which_exist():
    assert page_named("attention").file == "pages/attention.py"
    with pytest.raises(ValueError, match="unknown page 'rope_alibi'; choose one of"):
        page_named("rope_alibi")


def first_table(text: str, heading: str) -> str:
    """The first Markdown table under `heading`, as it stands in the text."""
    section = text.split(f"\n{heading}\n", 1)[1]
    return re.search(r"(?m)^\|.*\|\n(?:^\|.*\|\n?)+", section).group(0)


def table_rows(text: str, heading: str) -> list[list[str]]:
    """The cells of the first Markdown table under `heading`, header and rule left out."""
    rows = first_table(text, heading).strip().splitlines()[2:]
    return [[cell.strip() for cell in row.strip("|").split(" | ")] for row in rows]


def test_the_readme_lists_every_page_by_its_title_in_the_menu_s_order():
    rows = table_rows((ROOT / "README.md").read_text(encoding="utf-8"), "## The pages")
    assert [row[0] for row in rows] == [page.title for page in PAGES]


def test_the_architecture_topics_are_the_pages_in_the_menu_s_order():
    rows = table_rows((ROOT / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8"), "## Topics")
    assert [row[0] for row in rows] == [page.name for page in PAGES]


def test_the_finder_sees_a_list_of_pages():
    assert hand_kept_lists('PAGES = ["pages/embeddings.py", "pages/lesson.py",\n         "pages/sinusoids.py"]')
    assert hand_kept_lists('OTHER = [("Sinusoids", "/sinusoids"), ("Inside the model", "/inside"),\n'
                           '         ("Order blindness (shuffle)", "/order_blindness")]')
    assert not hand_kept_lists('at = app_test(page="pages/lengths.py")\nat.switch_page("pages/inside.py")')


def test_no_list_of_pages_outside_the_registry():
    """A list of pages kept by hand (page files, URL paths or titles, three within three lines) anywhere in the
    repository but lpos/pages.py and the two tables checked above fails: iterate lpos.pages.PAGES instead."""
    tracked = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                             capture_output=True, text=True, check=True).stdout.split()
    allowed = {"lpos/pages.py", "tests/pages/test_page_registry.py"}
    found = {}
    for name in tracked:
        path = ROOT / name
        if name in allowed or path.suffix not in (".py", ".md", ".sh", ".toml", ".yaml", ".cfg", ".ipynb") \
                or not path.is_file():
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        if name == "README.md":  # its page table is checked against the registry
            text = text.replace(first_table(text, "## The pages"), "")
        lists = hand_kept_lists(text)
        if lists:
            found[name] = lists[0]
    assert found == {}, f"pages listed by hand (line, pages): {found}; iterate lpos.pages.PAGES"


def test_only_app_py_builds_the_navigation():
    tracked = subprocess.run(["git", "grep", "-l", "-e", "st.navigation(", "-e", "st.Page(", "--", "*.py"], cwd=ROOT,
                             capture_output=True, text=True).stdout.split()
    assert [name for name in tracked if name not in ("app.py", "tests/pages/test_page_registry.py")] == []
