"""Modules built for their shapes only: on PyTorch's meta device, with their initialisation skipped.

An initialisation (`normal_`, `uniform_`, …) run on a meta tensor goes through PyTorch's Python
reference of the op, whose first call imports `torch._dynamo` with sympy and the inductor: about
2.5 s of CPU and 800 modules, which a cold server paid on its first page only to count a file's
parameters. On the meta device there are no values to initialise, so skipping those calls changes
nothing but the cost.
"""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch.overrides import TorchFunctionMode


class SkipMetaInit(TorchFunctionMode):
    """In-place calls (a name ending in one underscore) on a meta tensor return the tensor untouched."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        target = args[0] if args else kwargs.get("tensor")  # torch.nn.init passes its tensor by name
        if name.endswith("_") and not name.endswith("__") and isinstance(target, torch.Tensor) and target.is_meta:
            return target
        return func(*args, **kwargs)


@contextmanager
def shapes_only() -> Iterator[None]:
    """Build modules on the meta device without initialising them (nothing allocated, nothing drawn)."""
    with torch.device("meta"), SkipMetaInit():
        yield
