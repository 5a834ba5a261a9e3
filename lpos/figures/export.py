"""Figures to take away: a figure's numbers as a table, its download name, and the recipe that
redraws it in Python.

A Recipe is the call a page makes to get a figure, written down as data: lpos functions (an
analysis, then a figure builder) with their arguments, run in order. A step is made from the
function itself, so a renamed function fails where the page imports it, and keeps the dotted name
a learner imports it by (`public_name`). The page runs the recipe (`Recipe.run`) and prints it
(`Recipe.snippet`), so the code a learner copies is the code that drew the figure on the page.
"""
from __future__ import annotations

import base64
import importlib
import inspect
import re
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd
import plotly.graph_objects as go

FILE_PATH = "path/to/your/model.pt"
# Packages of topic modules, each of whose functions a snippet imports from its topic (lpos.analysis.sinusoids);
# the package's own re-exports are for notebooks. Elsewhere the package is the public path: lpos.checkpoints.load.
TOPIC_PACKAGES = ("lpos.analysis", "lpos.figures")


@dataclass(frozen=True)
class Ref:
    """An argument that names a value bound earlier in the snippet: "model", "meta", "tokenizer"
    (the model's), or an earlier step's target."""
    name: str


@dataclass(frozen=True)
class Step:
    target: str  # the name the snippet binds the result to
    function: str  # public_name: "lpos.analysis.sinusoids.frequency_bands"
    args: tuple = ()
    kwargs: tuple[tuple[str, object], ...] = ()


def step(target: str, function: Callable, *args, **kwargs) -> Step:
    """`target = function(*args, **kwargs)` as a Step."""
    return Step(target, public_name(function), tuple(plain(a) for a in args),
                tuple((k, plain(v)) for k, v in kwargs.items()))


def public_name(function: Callable) -> str:
    """The dotted name a learner imports `function` by: the shortest module on its module's path that holds it
    under its own name, from lpos's packages down (lpos.checkpoints.load, defined in lpos.checkpoints.reading;
    lpos.model.untrained_model, though `lpos` re-exports it) or from the topic modules of TOPIC_PACKAGES down
    (lpos.analysis.sinusoids.frequency_bands). A function no such module holds (a lambda, a nested function, a
    method) has no name to print and is refused."""
    parts, name = function.__module__.split("."), function.__qualname__
    depth = 3 if function.__module__.startswith(tuple(f"{package}." for package in TOPIC_PACKAGES)) else 2
    for end in range(min(depth, len(parts)), len(parts) + 1):
        module = ".".join(parts[:end])
        held = getattr(importlib.import_module(module), name, None)  # a test's wrapper (functools.wraps) counts as it
        if held is not None and inspect.unwrap(held) is inspect.unwrap(function):
            return f"{module}.{name}"
    raise ValueError(f"{function.__module__}.{name} cannot be imported by its name; a recipe step needs a "
                     "module-level function")


def plain(value):
    """A value as the Python literal it prints as: numpy numbers to ints and floats, lists kept."""
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return float(value)
    if isinstance(value, (list, tuple)):
        return type(value)(plain(v) for v in value)
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    return value


def function_of(dotted: str) -> Callable:
    """The function a public_name names."""
    module, name = dotted.rsplit(".", 1)
    return getattr(importlib.import_module(module), name)


@dataclass(frozen=True)
class Recipe:
    """Steps run in order; the last one's result is the figure (or, with `pick`, a list of
    figures of which it is number `pick`)."""
    steps: tuple[Step, ...]
    pick: int | None = None

    def run(self, **context) -> go.Figure:
        """The figure, computed with `context` holding what the steps' Refs name (model, meta...).
        A step whose results `context` already holds under its names (a precomputed view's, a cached
        result's) is not run, nor one whose results no step that runs reads."""
        values = dict(context)

        def value(v):
            if isinstance(v, Ref):
                return values[v.name]
            if isinstance(v, dict):
                return {k: value(item) for k, item in v.items()}
            return type(v)(value(item) for item in v) if isinstance(v, (list, tuple)) else v

        for s in self.needed(set(context)):
            result = function_of(s.function)(*(value(a) for a in s.args), **{k: value(v) for k, v in s.kwargs})
            targets = s.target.split(", ")  # "model, meta = load(...)" unpacks
            values.update(zip(targets, result) if len(targets) > 1 else [(s.target, result)])
        result = values[self.steps[-1].target]
        return result if self.pick is None else result[self.pick]

    def needed(self, given: set[str]) -> list[Step]:
        """The steps that compute what the figure needs and `given` does not name, in order."""
        wanted, run = set(self.steps[-1].target.split(", ")), []
        for s in reversed(self.steps):
            targets = set(s.target.split(", "))
            if targets & wanted and not targets <= given:
                run.append(s)
                wanted |= reads_of(s)
        return run[::-1]

    def reads(self, given: set[str]) -> set[str]:
        """The Refs the steps that still have to run (beside `given`) read and no step binds: what `run` needs."""
        return self._unbound(self.needed(given))

    def names(self) -> set[str]:
        """The Refs the steps read that no step binds: what the snippet's opening must load."""
        return self._unbound(self.steps)

    def _unbound(self, steps) -> set[str]:
        bound = {name for s in self.steps for name in s.target.split(", ")}
        return {name for s in steps for name in reads_of(s)} - bound

    def snippet(self, *, model: str | None = None, scheme: str | None = None) -> str:
        """Python that redraws the figure with lpos's public API, ending in fig.show().
        `model`: a shipped model's name, "untrained" (the app's untrained model of `scheme`), or
        None for a file of the learner's own (a path to fill in)."""
        imports = {f"from {s.function.rsplit('.', 1)[0]} import {s.function.rsplit('.', 1)[1]}" for s in self.steps}
        needs, opening = self.names(), []
        if needs & {"model", "meta", "tokenizer"}:
            if model == "untrained":
                imports.add("from lpos.model import untrained_model")
                imports.add("from lpos.tokenizer import GPT2")
                opening += [f"model, meta = untrained_model({scheme!r}), {{}}  # the app's untrained {scheme} model",
                            "tokenizer = GPT2"]
            else:
                imports.add("from lpos import checkpoints")
                opening.append(f"model, meta = checkpoints.load({model!r})" if model else
                               f"model, meta = checkpoints.load({FILE_PATH!r})  # fill in the path to your file")
                opening.append('tokenizer = meta["tokenizer"]')
        lines = sorted(imports) + [""] + opening
        for s in self.steps:
            arguments = [literal(a) for a in s.args] + [f"{k}={literal(v)}" for k, v in s.kwargs]
            lines.append(f"{s.target} = {s.function.rsplit('.', 1)[1]}({', '.join(arguments)})")
        last = self.steps[-1].target
        if self.pick is not None:
            lines.append(f"fig = {last}[{self.pick}]")
        elif last != "fig":
            lines.append(f"fig = {last}")
        lines.append("fig.show()")
        return "\n".join(lines) + "\n"


def refs(value) -> list[Ref]:
    """The Refs in an argument, a list, tuple or dict of them included."""
    if isinstance(value, Ref):
        return [value]
    items = value.values() if isinstance(value, dict) else value if isinstance(value, (list, tuple)) else ()
    return [ref for item in items for ref in refs(item)]


def reads_of(s: Step) -> set[str]:
    """The names a step's arguments read."""
    return {ref.name for value in (*s.args, *(v for _, v in s.kwargs)) for ref in refs(value)}


def literal(value) -> str:
    """An argument as Python: a Ref by its name, containers item by item, anything else by repr."""
    if isinstance(value, Ref):
        return value.name
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k!r}: {literal(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(literal(v) for v in value) + "]"
    if isinstance(value, tuple):
        return "(" + ", ".join(literal(v) for v in value) + ("," if len(value) == 1 else "") + ")"
    return repr(value)


def file_name(*words: str | None) -> str:
    """A download's name from what it shows: "lpos-similarity-position-map-rope-rope"; each word
    lower-cased, anything but letters, digits and dots turned into one hyphen."""
    parts = ["lpos"] + [re.sub(r"[^a-z0-9.]+", "-", w.lower()).strip("-") for w in words if w]
    return "-".join(p for p in parts if p)[:120]


def array_of(array) -> np.ndarray | None:
    """A trace's array (a tuple, list, numpy array, or Plotly's typed array as read from JSON: base64
    bytes of a dtype and a shape) as numpy."""
    if isinstance(array, dict) and "bdata" in array:
        flat = np.frombuffer(base64.b64decode(array["bdata"]), dtype=array["dtype"])
        shape = array.get("shape")
        return flat.reshape([int(n) for n in str(shape).split(",")]) if shape else flat
    if array is None or isinstance(array, str):
        return None
    return np.asarray(array, dtype=object)


def values(array) -> list:
    """A trace's array as a flat Python list ([] for none)."""
    found = array_of(array)
    return [] if found is None else found.ravel().tolist()


def figure_frame(fig: go.Figure) -> pd.DataFrame:
    """Every trace's numbers, one row per point (a heatmap: one row per cell): columns series, x,
    y, then z or value and text where the trace has them."""
    rows = []
    for number, trace in enumerate(fig.data, start=1):
        series = trace.name or f"trace {number}"
        z, text = array_of(getattr(trace, "z", None)), array_of(getattr(trace, "text", None))
        if z is not None and z.ndim == 2:  # a heatmap: x labels the columns, y the rows
            grid = z
            xs = values(trace.x) or list(range(grid.shape[1]))
            ys = values(trace.y) or list(range(grid.shape[0]))
            labels = text if text is not None and text.ndim == 2 else None
            for i in range(grid.shape[0]):
                for j in range(grid.shape[1]):
                    row = {"series": series, "x": xs[j], "y": ys[i], "value": grid[i, j]}
                    if labels is not None:
                        row["text"] = labels[i, j]
                    rows.append(row)
            continue
        columns = {axis: values(getattr(trace, axis, None)) for axis in ("x", "y", "z")}
        count = max(len(c) for c in columns.values())
        if not columns["x"] and count:
            columns["x"] = list(range(count))
        labels = [] if text is None else text.ravel().tolist()
        for i in range(count):
            row = {"series": series, **{axis: c[i] for axis, c in columns.items() if len(c) == count}}
            if len(labels) == count:
                row["text"] = labels[i]
            rows.append(row)
    frame = pd.DataFrame(rows)
    return frame[[c for c in ("series", "x", "y", "z", "value", "text") if c in frame.columns]]


def figure_csv(fig: go.Figure) -> str:
    return figure_frame(fig).to_csv(index=False)
