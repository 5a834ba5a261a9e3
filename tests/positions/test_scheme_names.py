"""STYLE.md habit 3: no code outside lpos/positions/ compares or indexes a scheme's name as a string.

Every .py file under lpos/ (lpos/positions/ left out), pages/ and app.py is parsed, and a quoted
scheme name (any of lpos.positions.SCHEMES) is a hit where it is compared (`== "rope"`, `"rope" !=`,
`case "rope":`), sits inside a literal tuple, list or set that is tested with `in` / `not in`, indexes
something (`["rope"]`), is looked up with `.get("rope", ...)`, or is a dict literal's key
(`{"rope": ...}`). Such code should ask the scheme object (its attributes and views) or iterate the
registry. Parsing, not a text grep: a sentence in a docstring or a message that quotes a name is not
code. The name "none" is also a `reduction=` / `approximate=` value: a "none" hit on a line that mentions
those is another namespace, not a scheme.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

from lpos.positions import SCHEMES

ROOT = Path(__file__).resolve().parents[2]
OTHER_NONE = re.compile(r"reduction|approximate", re.IGNORECASE)


def _name(node) -> str | None:
    return node.value if isinstance(node, ast.Constant) and node.value in SCHEMES else None


def _names_in_literal(node) -> list[str]:
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [name for element in node.elts if (name := _name(element))]
    return []


def scheme_name_uses(source: str) -> list[tuple[int, str, str]]:
    """(line, scheme name, what) of each use of a quoted scheme name as a key or in a comparison."""
    hits = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            for op, left, right in zip(node.ops, operands, operands[1:]):
                if isinstance(op, (ast.Eq, ast.NotEq, ast.Is, ast.IsNot)):
                    hits += [(node.lineno, name, "comparison") for name in (_name(left), _name(right)) if name]
                elif isinstance(op, (ast.In, ast.NotIn)):
                    hits += [(node.lineno, name, "membership") for name in _names_in_literal(right)]
        elif isinstance(node, ast.match_case) and isinstance(node.pattern, ast.MatchValue):
            if name := _name(node.pattern.value):
                hits.append((node.pattern.lineno, name, "comparison"))
        elif isinstance(node, ast.Subscript) and (name := _name(node.slice)):
            hits.append((node.lineno, name, "lookup"))
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
              and node.args and (name := _name(node.args[0]))):
            hits.append((node.lineno, name, "lookup"))
        elif isinstance(node, ast.Dict):
            hits += [(key.lineno, name, "dict key") for key in node.keys if key is not None and (name := _name(key))]
    return sorted(set(hits))


def checked_files() -> list[Path]:
    files = [p for p in sorted((ROOT / "lpos").rglob("*.py")) if (ROOT / "lpos" / "positions") not in p.parents]
    return files + sorted((ROOT / "pages").glob("*.py")) + [ROOT / "app.py"]


def hits_in(path: Path, *, root: Path = ROOT) -> list[str]:
    source = path.read_text(encoding="utf-8")
    lines = source.splitlines()
    found = []
    for line, name, what in scheme_name_uses(source):
        text = lines[line - 1].strip()
        if name == "none" and OTHER_NONE.search(text):
            continue  # a RoPE scaling method, a loss reduction, GELU's approximation: not the scheme
        found.append(f"{path.relative_to(root)}:{line}: {text}  [{what} of {name!r}]")
    return found


def test_the_detector_flags_name_comparisons_and_keys():
    flagged = {
        'if scheme == "rope": pass': "comparison",
        'ok = "alibi" != config.position': "comparison",
        'ok = name in ("learned", "sinusoidal")': "membership",
        'ok = name not in ["t5", "fire"]': "membership",
        'ok = name in {"cope"}': "membership",
        'colour = COLOURS["rope"]': "lookup",
        'colour = COLOURS.get("fire", "#000")': "lookup",
        'colours = {"learned": "#1f77b4", 1: 2}': "dict key",
        'match scheme:\n    case "none":\n        pass': "comparison",
        'ok = (scheme ==\n      "sinusoidal")': "comparison",
    }
    for code, what in flagged.items():
        assert {hit[2] for hit in scheme_name_uses(code)} == {what}, code


def test_the_detector_leaves_other_strings_alone():
    clean = [
        'scheme = params.get("scheme", "learned")',  # a default, not a lookup by name
        'model = untrained_model("rope")',
        'text = "compare == \\"rope\\" in a sentence"',
        '"""A docstring: if scheme == "rope" then ..."""',
        'ok = name in SCHEMES',
        'ok = "rope" in text',  # a substring test of a text, not a list of names
        'ok = scheme.shows("rotation")',
        'x = {"scheme": "rope"}',  # a scheme name as a value is data
        'ok = activation == "gelu"',
        'rows = table[name]',
    ]
    for code in clean:
        assert scheme_name_uses(code) == [], code


def test_other_namespaces_named_none_are_not_hits(tmp_path):
    lines = ['if reduction == "none":', '    pass', 'gelu = GELU(approximate="none")', 'if scheme == "none":', '    pass']
    path = tmp_path / "sample.py"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert hits_in(path, root=tmp_path) == ['sample.py:4: if scheme == "none":  [comparison of \'none\']']


def test_the_files_checked():
    files = {str(p.relative_to(ROOT)) for p in checked_files()}
    assert "app.py" in files and "lpos/model.py" in files and "pages/embeddings.py" in files
    assert "lpos/ui/state.py" in files and "lpos/analysis/__init__.py" in files
    assert not [f for f in files if f.startswith("lpos/positions/")]


def test_no_code_outside_the_positions_folder_compares_a_scheme_name():
    hits = [hit for path in checked_files() for hit in hits_in(path)]
    assert not hits, (f"{len(hits)} uses of a scheme's name as a string outside lpos/positions/ (ask the scheme "
                      "object or iterate the registry):\n" + "\n".join(hits))
