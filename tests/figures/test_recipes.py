"""Recipes name their functions themselves (lpos.figures.export.step): a renamed function fails at import or
here, and the dotted name a snippet prints is the public path that imports that very function."""
import ast
import functools
import importlib

import pytest
from conftest import ROOT

from lpos import checkpoints
from lpos.analysis.embeddings import embedding_view
from lpos.figures.export import Recipe, Ref, function_of, public_name, step
from lpos.figures.sinusoids import band_figure
from lpos.model import untrained_model


def test_a_step_prints_the_path_a_learner_imports():
    """A step keeps its function's public name: a package's where the function is an implementation module's, a
    topic module's where lpos.analysis or lpos.figures re-export it too. A function with no such name is refused."""
    assert public_name(checkpoints.load) == "lpos.checkpoints.load"  # defined in lpos.checkpoints.reading
    assert public_name(untrained_model) == "lpos.model.untrained_model"  # `lpos` re-exports it
    assert public_name(embedding_view) == "lpos.analysis.embeddings.embedding_view"  # so does lpos.analysis
    assert step("fig", band_figure, Ref("bands")).function == "lpos.figures.sinusoids.band_figure"
    assert "from lpos.figures.sinusoids import band_figure\n" in Recipe((step("fig", band_figure, 1),)).snippet()
    with pytest.raises(ValueError, match="module-level function"):
        step("fig", lambda: None)


def recipe_steps() -> list[tuple[str, ast.expr, bool, object]]:
    """Every step(target, function, ...) call under lpos/: where it is, its function as written, whether its module
    binds that name (not so for one the enclosing function binds: a parameter, a choice between functions), and
    what it names there (None for nothing)."""
    found = []
    for path in sorted((ROOT / "lpos").rglob("*.py")):
        calls = [node for node in ast.walk(ast.parse(path.read_text())) if isinstance(node, ast.Call)
                 and isinstance(node.func, ast.Name) and node.func.id == "step"]
        if not calls:
            continue
        module = vars(importlib.import_module(".".join(path.relative_to(ROOT).with_suffix("").parts)))
        for call in calls:
            where, written = f"{path.relative_to(ROOT)}:{call.lineno}", call.args[1]
            root, *attributes = ast.unparse(written).split(".")
            named = functools.reduce(lambda value, name: getattr(value, name, None), attributes, module.get(root))
            found.append((where, written, root in module, named))
    return found


def test_every_recipe_step_names_a_function_a_learner_can_import():
    """A recipe names its functions themselves, never as text, so a renamed function fails here (or at import),
    not when a learner opens "Data and code"; and each one's printed dotted name imports that very function."""
    found = recipe_steps()
    assert len(found) > 50
    written = [(where, ast.unparse(function)) for where, function, *_ in found
               if not isinstance(function, (ast.Name, ast.Attribute))]
    assert not written, f"a step names its function as text or an expression: {written}"
    missing = [(where, ast.unparse(function)) for where, function, bound, named in found if bound and named is None]
    assert not missing, f"a step names a function its module does not hold: {missing}"
    named = [(where, function) for where, _, bound, function in found if bound]
    assert len(named) > 0.9 * len(found)
    for where, function in named:
        assert function_of(public_name(function)) is function, where
