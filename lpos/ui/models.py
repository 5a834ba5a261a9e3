"""Which models the app offers, loaded once per process and shared by every session (let go of when idle
while the process holds more than LPOS_MODEL_MEMORY_MB: release_idle_models).

Names come from three places: the shipped checkpoints, the folder named by
LPOS_CHECKPOINT_DIR (offered to every user by whoever runs the app), and the session's own
upload (never shared, never in the URL). Each is a model reference's text
(lpos.checkpoints.reference: "rope", "dir:mine.pt", "upload:<name>@<digest>", "untrained"). A name
from the URL is only ever looked up in these lists; it is never used as a path.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

import streamlit as st
import torch
import torch.nn as nn

from lpos import checkpoints, resident, settings
from lpos.analysis.embeddings import TokenCounts
from lpos.analysis.scheme_views import positionless_scheme
from lpos.checkpoints import ModelRef, cards
from lpos.checkpoints.layouts import TORCH_SUFFIXES
from lpos.corpus import SHIPPED_SEED
from lpos.model import GPT, GPTConfig, untrained_model
from lpos.positions import scheme_info
from lpos.token_table import shared_initial_table
from lpos.tokenizer import GPT2, Tokenizer
from lpos.ui.caching import HASH_FUNCS, model_key, remember
from lpos.ui.collect import release_memory

UNTRAINED = str(ModelRef.untrained())
# What a shipped model is, when its name is not a scheme's: tests/training/test_short_windows.py checks each
# against the file's own train_args.
SHIPPED_LABELS = {"learned-32": "learned, trained on windows of ≤ 32 tokens"}
SHARED_DIR_ENV = settings.CHECKPOINT_DIR
IDLE_SECONDS = 30  # an offered model not asked for this long may be let go of (release_idle_models)
_LAST_USE = resident.LastUse(IDLE_SECONDS)

# Many sessions run the models at once, each on its own script thread: one torch thread per run
# keeps them from fighting over the cores (and from each holding a thread pool).
torch.set_num_threads(settings.torch_threads())  # LPOS_TORCH_THREADS


@dataclass(frozen=True)
class LoadedModel:
    """A model the app offers: `model` and `meta`, or, for a shipped or the app's untrained model made by
    `shipped` or `untrained_of`, its card until a view needs the weights (a comparing page whose views are
    precomputed never loads or builds them)."""
    key: str  # its ModelRef's text: what the URL and the model box hold
    label: str  # what the user reads
    loaded: GPT | None  # None: not loaded yet (`card` says what it is)
    loaded_meta: dict | None
    card: cards.Card | None = None

    @classmethod
    def shipped(cls, name: str) -> LoadedModel:
        """A shipped model, loaded when its `model` or `meta` is first asked for."""
        return cls(name, label(name), None, None, shipped_card(name))

    @classmethod
    def untrained_of(cls, scheme: str, shown: str | None = None) -> LoadedModel:
        """The app's untrained model of `scheme` (lpos.model.untrained_model), built when its `model` is first
        asked for; `shown` is its label when not the untrained model's own."""
        config = GPTConfig(position=scheme, init_seed=SHIPPED_SEED)
        card = cards.Card(UNTRAINED, config, {}, config.vocab_size)
        return cls(UNTRAINED, shown or label(UNTRAINED), None, None, card)

    def _weights(self) -> tuple[GPT, dict]:
        if self.loaded is not None:
            return self.loaded, self.loaded_meta
        return (untrained(self.config.position), {}) if self.ref.is_untrained else load_offered(self.key)

    @property
    def model(self) -> GPT:
        return self._weights()[0]

    @property
    def meta(self) -> dict:
        return self._weights()[1]

    @property
    def described(self) -> GPT | cards.Card:
        """What says its config, scheme and table length without loading it: the model when loaded, else its card."""
        return self.loaded if self.loaded is not None else self.card

    @property
    def summary(self) -> dict:
        """Its meta without loading it: the meta when loaded, else the card's (no per-token counts, no timeline)."""
        return self.loaded_meta if self.loaded is not None else self.card.meta

    @property
    def config(self) -> GPTConfig:
        return self.described.config

    @property
    def max_input_length(self) -> int | None:
        return self.described.max_input_length

    @property
    def cache_key(self) -> str:
        """What names the model in a cache key (lpos.ui.caching.model_key), without loading it."""
        return model_key(self.loaded) if self.loaded is not None else f"{self.key}/{self.config.position}"

    @property
    def ref(self) -> ModelRef:
        return ModelRef.parse(self.key)

    @property
    def trained(self) -> bool:
        """False for the app's untrained model and for a file that says it was trained 0 steps."""
        steps = self.summary.get("steps", self.summary.get("iter_num"))
        return not self.ref.is_untrained and not (isinstance(steps, (int, float)) and steps == 0)

    @property
    def scheme(self) -> str:
        return self.config.position

    @property
    def name(self) -> str:
        """The name its results carry: its scheme for the scheme's own shipped or untrained model, else the model's
        own (a shipped variant such as learned-rand, or "scheme (label)" for a file)."""
        if self.ref.is_untrained or self.key == self.scheme:
            return self.scheme
        return self.key if self.ref.is_shipped else f"{self.scheme} ({self.label})"

    @property
    def tokenizer(self) -> Tokenizer:
        """The tokenizer the model speaks: its file's own (meta["tokenizer"]), else GPT-2's."""
        return self.summary.get("tokenizer") or GPT2


def shared_dir_files() -> dict[str, Path]:
    folder = settings.checkpoint_dir()
    if folder is None or not folder.is_dir():
        return {}
    return {str(ModelRef.shared(p.name)): p for p in sorted(Path(folder).iterdir())
            if p.suffix.lower() in TORCH_SUFFIXES or (p / "config.json").is_file()}  # the suffixes an upload takes


def offered() -> list[str]:
    """Model keys every session may choose: shipped names, the shared folder's files, untrained."""
    return [*checkpoints.available(), *shared_dir_files(), UNTRAINED]


def label(key: str) -> str:
    """What the model box shows for a model key: its name and what it is."""
    ref = ModelRef.parse(key)
    return ref.label(SHIPPED_LABELS.get(ref.name) if ref.is_shipped else None)


def load_offered(key: str) -> tuple[GPT, dict]:
    """An offered model (a shipped name or a shared folder's file) and its meta, loaded once and shared by every
    session while it is in use (release_idle_models)."""
    _LAST_USE.used(key)
    return _loaded(key)


def release_idle_models() -> list[str]:
    """While this process holds more than LPOS_MODEL_MEMORY_MB, let go of the offered models no run has asked
    for in IDLE_SECONDS, least recently used first (lpos.resident); returns their keys. A session's upload is
    its own (st.session_state) and goes with the session, not here."""
    def release(key: str) -> None:
        _loaded.clear(key)
        release_memory()

    return resident.release_idle(_LAST_USE, release, limit_mb=settings.model_memory_mb())


@st.cache_resource(show_spinner="Loading the model…")
def _loaded(key: str) -> tuple[GPT, dict]:
    path = shared_dir_files().get(key)
    model, meta = checkpoints.load(path if path is not None else key, shared_table=True)
    if model.config.tied and model.output_vocab is not None:  # only such a model can share (GPT.share_token_table):
        # an lpos file shares as it loads (shared_table); one built in place is compared here. Never build a
        # 50,257-row starting table for one that cannot (another width, layout or seed)
        model.share_token_table(shared_initial_table(model.config.init_seed, model.config.vocab_size, model.config.n_embd))
    for name in ("token_counts", "batch_token_counts"):  # held as arrays: 1 MB less each
        if isinstance(meta.get(name), dict):
            meta[name] = TokenCounts(meta[name])
    release_memory()  # the loader's temporary tables and unpickled dicts
    return remember(model, key), meta


@st.cache_resource(show_spinner=False)
def shipped_card(name: str) -> cards.Card:
    """A shipped model's card, without its weights (lpos.checkpoints.cards): what a page comparing every shipped
    model reads of each. From the model itself, loaded, when shipped.cards.pt has no card that matches its file."""
    found = cards.card(name)
    return found if found is not None else cards.card_of(name, *load_offered(name))


@st.cache_resource(max_entries=2, show_spinner=False, hash_funcs=HASH_FUNCS)
def _untrained_weights(model: GPT) -> GPT:
    """One untrained model of `model`'s shape and vocabulary, without positions (drawn after
    torch.manual_seed(0)): the weights every untrained_like model of that shape shares, whatever
    its scheme (a scheme with no rows and nothing in attention holds only those)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        return GPT(dataclasses.replace(model.config, position=positionless_scheme())).eval()


def _scheme_weights(config: GPTConfig) -> dict[str, torch.Tensor]:
    """The weights `config`'s scheme adds (a table, a bias table, each layer's bias function), named
    where GPT registers them and started as GPT starts them (drawn after torch.manual_seed(0))."""
    scheme = scheme_info(config.position)
    parts = {f"transformer.{name}": part for name, part in scheme.model_parameters(config).items()}
    for i in range(config.n_layer):
        parts.update({f"transformer.h.{i}.attn.{name}": part for name, part in scheme.layer_parameters(config).items()})
    weights = {}
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        for prefix, part in parts.items():
            part.apply(GPT._init_weights)
            weights.update({f"{prefix}.{name}": value.detach() for name, value in part.state_dict().items()})
    return weights


@st.cache_resource(max_entries=8, show_spinner="Building untrained models of the same shape…", hash_funcs=HASH_FUNCS)
def untrained_like(model: GPT, key: str, scheme: str) -> GPT:
    """An untrained model of `model`'s (key `key`) shape and vocabulary with another scheme, for a
    model whose tokenizer the shipped models do not speak. Every scheme's model holds the same
    weight tensors (one float32 copy for all, not one each: load/llama_memory.py measures
    it), so they differ only in how they place positions and in the weights a scheme adds (a
    learned table, T5's bias table, FIRE's functions), started as GPT starts them."""
    config = dataclasses.replace(model.config, position=scheme)
    with torch.device("meta"):  # the shape only: no weights drawn to be thrown away (torch imports sympy for it)
        like = GPT(config, init_weights=False).eval()
    shared = _untrained_weights(model).state_dict()  # share, not copy
    like.load_state_dict({**shared, **_scheme_weights(config)}, assign=True)
    return remember(like, str(ModelRef.untrained_like(ModelRef.parse(key), scheme)))


@st.cache_resource(show_spinner=False)
def untrained(scheme: str) -> GPT:
    """lpos.model.untrained_model(scheme), the CLI's untrained model too, with its token table (the
    one the shipped models started from, their init_seed) held once for every untrained and shipped model."""
    model = untrained_model(scheme).eval()
    config = model.config
    table = nn.Parameter(shared_initial_table(config.init_seed, config.vocab_size, config.n_embd), requires_grad=False)
    model.transformer.wte.weight = model.lm_head.weight = table  # the same storage, not a copy
    return remember(model, UNTRAINED)
