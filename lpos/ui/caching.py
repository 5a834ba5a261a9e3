"""Cache keys for models: a model is named in a cache key by the key the app loaded it under.

Streamlit hashes a cached function's arguments. A model holds megabytes of weights, and two
models of one key and scheme are the same model, so `st.cache_data` / `st.cache_resource` are
given `HASH_FUNCS`: a `GPT` hashes to the key and scheme it was registered under (`remember`,
called by whoever loads it: lpos.ui.models for the offered and untrained models, lpos.ui.state for
an upload, whose key carries its digest), a `LoadedModel` to its model's (without loading a shipped one) and
its label. A model nobody registered fails loudly (a programmer's error), never silently hashes its weights.
"""
from __future__ import annotations

import weakref

import streamlit as st

from lpos.model import GPT

_KEYS: weakref.WeakKeyDictionary[GPT, str] = weakref.WeakKeyDictionary()  # an upload's model goes with its session


def remember(model: GPT, key: str) -> GPT:
    """Name `model` by `key` (and its scheme) in every cache key; returns the model."""
    _KEYS[model] = f"{key}/{model.config.position}"
    return model


def model_key(model: GPT) -> str:
    """What names `model` in a cache key: "<model key>/<scheme>"."""
    try:
        return _KEYS[model]
    except KeyError:
        raise ValueError("this model was not loaded through lpos.ui.models: it has no cache key") from None


HASH_FUNCS = {GPT: model_key, "lpos.ui.models.LoadedModel": lambda loaded: (loaded.cache_key, loaded.label)}


def cache_data(**options):
    """`st.cache_data` that names models by their key (HASH_FUNCS)."""
    return st.cache_data(hash_funcs=HASH_FUNCS, **options)


def cache_resource(**options):
    """`st.cache_resource` that names models by their key (HASH_FUNCS): figures and other objects
    kept once per process and only read."""
    return st.cache_resource(hash_funcs=HASH_FUNCS, **options)
