"""The package's shape, read from its source with `ast` (nothing is imported or run).

- No import cycle among lpos modules. Every import counts, at module level or inside a function:
  `import lpos.x.y`, `from lpos.x import y`, `from . import y`, `from ..x import y`. A package
  `lpos.x` stands for its `__init__.py`; `from lpos.x import y` where y is a submodule imports
  `lpos.x.y` (and not `lpos.x`'s other names).
- No layer imports a tool: the CLI (`lpos.cli`, `lpos.__main__`), training (`lpos.train`), the model
  card (`lpos.card`) and the bench (`lpos.bench`) use the layers and each other; nothing else imports them.
- Streamlit is imported only under `lpos/ui/` (app.py and pages/ sit outside the package).
- No module is over MAX_LINES lines (docs/ARCHITECTURE.md: one concept per module, ~300 lines at most).
- Analysis asks the model for its attention steps; it never re-writes a projection, a rotation,
  a mask or the score scaling (docs/ARCHITECTURE.md: one implementation of each piece of maths).
"""
from __future__ import annotations

import ast
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "lpos"
MAX_LINES = 350
TOOLS = ("lpos.cli", "lpos.__main__", "lpos.train", "lpos.card", "lpos.bench")
STREAMLIT_HOME = "lpos.ui"
ATTENTION_FREE = ("analysis",)  # folders of lpos whose code must leave attention to the model


@dataclass(frozen=True)
class Import:
    module: str  # the importing module, dotted
    target: str  # the lpos module or outside package imported, dotted
    line: int


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@cache
def modules() -> dict[str, Path]:
    """Every module of the package, dotted name -> file (a package is its __init__.py)."""
    return {module_name(path): path for path in sorted(PACKAGE.rglob("*.py")) if "assets" not in path.parts}


@cache
def tree(name: str) -> ast.Module:
    path = modules()[name]
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def is_package(name: str) -> bool:
    return modules()[name].name == "__init__.py"


def is_under(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def absolute_base(name: str, node: ast.ImportFrom) -> str:
    """The module a `from ... import` reads from, relative forms resolved against `name`."""
    if not node.level:
        return node.module or ""
    package = name.split(".") if is_package(name) else name.split(".")[:-1]
    base = package[: len(package) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


@cache
def imports(name: str) -> tuple[Import, ...]:
    """Everything `name` imports, anywhere in its source: lpos modules resolved as the module docstring
    says, outside packages by their full dotted name."""
    found = []
    for node in ast.walk(tree(name)):
        if isinstance(node, ast.Import):
            found += [Import(name, alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = absolute_base(name, node)
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                found.append(Import(name, submodule if submodule in modules() else base, node.lineno))
    return tuple(found)


def lpos_imports(name: str) -> list[Import]:
    """The imports of lpos modules, each mapped to the module file it runs (lpos.x.y.Name -> lpos.x.y)."""
    known = []
    for found in imports(name):
        target = found.target
        while target and target not in modules() and is_under(target, "lpos"):
            target = target.rpartition(".")[0]  # `import lpos.x.y` where y is not a module (rare, but safe)
        if target in modules():
            known.append(Import(found.module, target, found.line))
    return known


def import_graph() -> dict[str, set[str]]:
    return {name: {found.target for found in lpos_imports(name)} for name in modules()}


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's components, iteratively; only those that hold a cycle (two modules or more, or a self-import)."""
    index, low, on_stack, stack, components, counter = {}, {}, set(), [], [], [0]

    def visit(start: str) -> None:
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter[0]
        counter[0] += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter[0]
                    counter[0] += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1 or node in graph[node]:
                    components.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return components


def shortest_cycle(graph: dict[str, set[str]], start: str, within: set[str]) -> list[str]:
    """The shortest path start -> ... -> start inside one component (breadth first)."""
    previous, frontier = {}, [start]
    while frontier:
        following = []
        for node in frontier:
            for child in sorted(graph[node] & within):
                if child == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(previous[path[-1]])
                    return [start, *reversed(path[:-1]), start] if node != start else [start, start]
                if child not in previous:
                    previous[child] = node
                    following.append(child)
        frontier = following
    raise AssertionError(f"{start} is in a component without a cycle through it")


def where(found: Import) -> str:
    return f"{modules()[found.module].relative_to(ROOT)}:{found.line}"


def edge_lines(a: str, b: str) -> str:
    return ", ".join(dict.fromkeys(where(found) for found in lpos_imports(a) if found.target == b))


def test_every_module_parses():
    assert "lpos" in modules() and "lpos.model" in modules()
    for name in modules():
        tree(name)


def test_no_import_cycles():
    graph = import_graph()
    report = []
    for component in strongly_connected(graph):
        members = set(component)
        cycle = shortest_cycle(graph, component[0], members)
        lines = [f"{a} -> {b}  ({edge_lines(a, b)})" for a, b in zip(cycle, cycle[1:])]
        others = [f"{a} -> {b}  ({edge_lines(a, b)})" for a in component for b in sorted(graph[a] & members)
                  if (a, b) not in set(zip(cycle, cycle[1:]))]
        report.append(f"cycle among {len(component)} modules ({', '.join(component)}):\n    " + "\n    ".join(lines)
                      + ("\n  other imports inside it:\n    " + "\n    ".join(others) if others else ""))
    assert not report, "import cycles:\n" + "\n".join(report)


def test_no_layer_imports_a_tool():
    wrong = list(dict.fromkeys(f"{where(found)}: {found.module} imports {found.target}"
                               for name in modules() if not any(is_under(name, tool) for tool in TOOLS)
                               for found in lpos_imports(name) if any(is_under(found.target, tool) for tool in TOOLS)))
    assert not wrong, f"layers importing a tool ({', '.join(TOOLS)}):\n" + "\n".join(wrong)


def test_streamlit_only_in_ui():
    wrong = list(dict.fromkeys(f"{where(found)}: {found.module} imports {found.target}"
                               for name in modules() if not is_under(name, STREAMLIT_HOME)
                               for found in imports(name) if is_under(found.target, "streamlit")))
    assert not wrong, f"streamlit imported outside {STREAMLIT_HOME}:\n" + "\n".join(wrong)


def test_modules_are_short():
    lengths = {name: len(path.read_text(encoding="utf-8").splitlines()) for name, path in modules().items()}
    wrong = [f"{modules()[name].relative_to(ROOT)}: {n} lines" for name, n in sorted(lengths.items(), key=lambda x: -x[1])
             if n > MAX_LINES]
    assert not wrong, f"modules over {MAX_LINES} lines:\n" + "\n".join(wrong)


# ---------------------------------------------------------------- attention stays in the model


def called_name(call: ast.Call) -> str:
    """`rope_rotate` for rope_rotate(...), positions.rope_rotate(...) and x.rope_rotate(...)."""
    function = call.func
    return function.attr if isinstance(function, ast.Attribute) else function.id if isinstance(function, ast.Name) else ""


def is_minus_infinity(node: ast.AST) -> bool:
    text = ast.unparse(node).replace(" ", "")
    return "-inf" in text or "-math.inf" in text or "-torch.inf" in text or "-np.inf" in text or "-float('inf')" in text


def has_matmul(node: ast.AST) -> bool:
    return any((isinstance(n, ast.BinOp) and isinstance(n.op, ast.MatMult))
               or (isinstance(n, ast.Call) and called_name(n) in ("matmul", "bmm", "einsum")) for n in ast.walk(node))


# (what it catches, why it is not analysis's to write)
REWRITES = {
    "causal mask": "a tril/triu mask or masked_fill(..., -inf): the model's attention hides later keys",
    "rope_rotate": "rotating queries or keys: the model's attention rotates them",
    "alibi_bias": "adding ALiBi's bias to scores: the model's attention adds it",
    "c_attn": "reading the q/k/v projection: ask the model for its queries, keys and values",
    "score scaling": "(q @ k) / sqrt(...): the model scales its own scores",
    "scaled_dot_product_attention": "a second attention implementation",
}
# sites that match a pattern but are not attention: (module, function) -> why
NOT_ATTENTION = {
    # These call the one rotation and the one bias (lpos.positions) on values they show, not on a
    # model's queries and keys: alibi_effect draws the bias matrix beside the model's own scores.
    ("lpos.analysis.attention", "alibi_effect"): "draws ALiBi's bias matrix; the scores come from attn.scores",
    ("lpos.analysis.attention", "rotating_pair"): "rotates a standalone teaching vector with positions.rope_rotate",
    ("lpos.analysis.attention", "offset_scores"): "rotates standalone teaching vectors with positions.rope_rotate",
    ("lpos.analysis.generate", "choose"): "top-k sampling cuts next-token logits to -inf, not attention scores",
}


def attention_rewrites(name: str) -> list[tuple[str, int, str, str]]:
    """(pattern, line, enclosing function, source) for each site in module `name` matching REWRITES."""
    found = []

    def walk(node: ast.AST, function: str) -> None:
        for child in ast.iter_child_nodes(node):
            inner = child.name if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else function
            pattern = None
            if isinstance(child, ast.Call):
                called = called_name(child)
                if called in ("tril", "triu") or (called == "masked_fill" and any(map(is_minus_infinity, child.args[1:]))):
                    pattern = "causal mask"
                elif called in ("rope_rotate", "alibi_bias", "scaled_dot_product_attention"):
                    pattern = called
            elif isinstance(child, ast.Attribute) and child.attr == "c_attn":  # a call too: block.attn.c_attn(x)
                pattern = "c_attn"
            elif (isinstance(child, ast.BinOp) and isinstance(child.op, ast.Div) and isinstance(child.right, ast.Call)
                  and called_name(child.right) in ("sqrt", "rsqrt") and has_matmul(child.left)):
                pattern = "score scaling"
            if pattern and (name, function) not in NOT_ATTENTION:
                found.append((pattern, child.lineno, function, ast.unparse(child)[:100]))
            walk(child, inner)

    walk(tree(name), "<module>")
    return found


def test_analysis_leaves_attention_to_the_model():
    scanned = [name for name in modules() if any(is_under(name, f"lpos.{folder}") for folder in ATTENTION_FREE)]
    assert scanned, f"no module under {ATTENTION_FREE}"
    wrong = [f"{modules()[name].relative_to(ROOT)}:{line} in {function}(): {pattern} ({REWRITES[pattern]}): {source}"
             for name in scanned for pattern, line, function, source in sorted(attention_rewrites(name), key=lambda f: f[1])]
    assert not wrong, "analysis re-writes attention steps:\n" + "\n".join(wrong)


# What vulture cannot see being used: attributes and methods that Streamlit, pickle and plotly.py use by name.
CALLED_BY_NAME = {"uses_pages_directory", "find_class", "persistent_load",
                  "_validate"}  # plotly.py reads a figure's _validate (lpos.figures.common.subplots sets it)


def test_no_dead_code():
    """No function, class or method that nothing calls (vulture at 60%: tests count as callers, so the
    public API a test uses stays), apart from what a library calls by name."""
    vulture = pytest.importorskip("vulture")
    found = vulture.Vulture()
    found.scavenge([str(ROOT / "lpos"), str(ROOT / "pages"), str(ROOT / "app.py"), str(ROOT / "tests"),
                    str(ROOT / "load")])  # the load scripts call the harness too (theirs is a script's code, not checked)
    dead = [f"{item.filename.relative_to(ROOT)}:{item.first_lineno} {item.typ} {item.name}"
            for item in found.get_unused_code(min_confidence=60)
            if item.typ in ("function", "method", "class", "attribute", "property") and item.name not in CALLED_BY_NAME
            and item.filename.relative_to(ROOT).parts[0] not in ("tests", "load")]
    assert dead == []


MAX_PAGE_FUNCTION_LINES = 40


def test_pages_wire_in_short_functions():
    """A page reads state, calls the ui layer and draws: no function of pages/ passes 40 lines (the maths and
    the computed sentences live in lpos)."""
    long = [f"{path.name}:{node.name} {node.end_lineno - node.lineno + 1} lines"
            for path in sorted((ROOT / "pages").glob("*.py"))
            for node in ast.walk(ast.parse(path.read_text())) if isinstance(node, ast.FunctionDef)
            and node.end_lineno - node.lineno + 1 > MAX_PAGE_FUNCTION_LINES]
    assert long == []


MAX_PAGE_LINES = 120


def test_pages_are_short():
    """A page is wiring: at most 120 lines."""
    long = [f"{path.name}: {n} lines" for path in sorted((ROOT / "pages").glob("*.py"))
            if (n := len(path.read_text().splitlines())) > MAX_PAGE_LINES]
    assert long == []


TEST_FOLDERS = {"positions", "model", "checkpoints", "tokenizer", "analysis", "figures", "pages", "browser",
                "training", "cli", "tools", "deploy", "lab"}


def test_the_tests_mirror_the_package():
    """Tests sit in folders named after the part of lpos they test (docs/ARCHITECTURE.md), and no two test files
    share a name: tests import helpers from one another by module name (tests/conftest.py)."""
    tests = ROOT / "tests"
    folders = {path.parent.name for path in tests.rglob("test_*.py") if path.parent != tests}
    assert folders == TEST_FOLDERS
    names = [path.name for path in tests.rglob("test_*.py")]
    assert sorted(names) == sorted(set(names))
