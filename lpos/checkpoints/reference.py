"""Which model the app means: a model reference, and its one text form (the URL's `model=`, the
model box, the session, the cache keys).

    shipped         "rope", "learned-32"            checkpoints/<name>.pt (lpos.checkpoints.available)
    shared          "dir:mine.pt"                   a file or folder in the folder LPOS_CHECKPOINT_DIR names
    upload          "upload:ckpt.pt@0123456789ab"   one browser session's upload: its file name, a digest of its bytes
    untrained       "untrained"                     the untrained model of the sidebar's scheme
    untrained-like  "untrained-like:<ref>:<scheme>" an untrained model of <ref>'s shape and vocabulary, with <scheme>

`ModelRef.parse(text)` reads a text form and `str(ref)` writes it: `parse(str(ref)) == ref`, and any
other text is a ValueError. A name is a file's name, never a path (no "/", not "." or "..", no NUL,
at most 255 characters), so a name from a URL cannot reach outside the folder it is looked up in.
Nothing here opens a file or knows which names exist: lpos.ui.models offers the names, and a name
that parses is still only used once it is found in those lists. The caches name a model by its
reference and scheme, "<ref>/<scheme>" (`cache_key`, `from_cache_key`).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from lpos.positions import check_scheme

SHIPPED, SHARED, UPLOAD, UNTRAINED, UNTRAINED_LIKE = "shipped", "shared", "upload", "untrained", "untrained-like"
KINDS = (SHIPPED, SHARED, UPLOAD, UNTRAINED, UNTRAINED_LIKE)
PREFIXES = {SHARED: "dir:", UPLOAD: "upload:", UNTRAINED_LIKE: "untrained-like:"}
DIGEST_CHARS = 12  # of an upload's sha256: enough to keep two sessions' files of one name apart
MAX_NAME = 255  # a file name's longest on the file systems the app runs on
_DIGEST = re.compile(rf"[0-9a-f]{{{DIGEST_CHARS}}}")


def check_name(name: str) -> str:
    """`name` when it is a file's name (never a path); ValueError otherwise."""
    if not isinstance(name, str) or not name or name in (".", "..") or "/" in name or "\0" in name:
        raise ValueError(f"not a model file's name: {str(name)[:40]!r}")
    if len(name) > MAX_NAME:
        raise ValueError(f"a model file's name has at most {MAX_NAME} characters; this one has {len(name):,}")
    return name


def _kind_is(kind: str) -> property:
    """A property of ModelRef: whether the reference is of `kind`."""
    return property(lambda ref: ref.kind == kind, doc=f"Whether this is a reference of kind {kind!r}.")


@dataclass(frozen=True)
class ModelRef:
    """One model the app can show. Build it with the constructors below (or `parse`), not by hand."""

    kind: str
    name: str = ""  # shipped, shared, upload: the file's name as the user reads it
    digest: str = ""  # upload: DIGEST_CHARS hex digits of its bytes ("" when not known)
    scheme: str = ""  # untrained-like: the scheme it is built with
    like: ModelRef | None = None  # untrained-like: the model whose shape and vocabulary it has

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown kind of model {self.kind!r}; kinds are {KINDS}")
        named = self.kind in (SHIPPED, SHARED, UPLOAD)
        if named:
            check_name(self.name)
        if (self.name and not named) or (self.digest and self.kind != UPLOAD) or \
                ((self.scheme or self.like) and self.kind != UNTRAINED_LIKE):
            raise ValueError(f"a {self.kind} model reference has only the fields its kind names")
        if self.kind == SHIPPED and (self.name == UNTRAINED or self.name.startswith(tuple(PREFIXES.values()))):
            raise ValueError(f"a shipped model cannot be named {self.name[:40]!r}: that text names another kind")
        if self.kind == UPLOAD and (self.digest and not _DIGEST.fullmatch(self.digest)
                                    or not self.digest and _split_digest(self.name)[1]):
            raise ValueError(f"an upload's digest is {DIGEST_CHARS} hex digits after its name's last '@'")
        if self.kind == UNTRAINED_LIKE:
            check_scheme(self.scheme)
            if not isinstance(self.like, ModelRef) or self.like.kind == UNTRAINED_LIKE:
                raise ValueError("an untrained-like model names the model it is shaped like (not another untrained-like)")

    # ------------------------------------------------------------ constructors

    @classmethod
    def shipped(cls, name: str) -> ModelRef:
        return cls(SHIPPED, name=name)

    @classmethod
    def shared(cls, name: str) -> ModelRef:
        return cls(SHARED, name=name)

    @classmethod
    def upload(cls, name: str, digest: str = "") -> ModelRef:
        return cls(UPLOAD, name=name, digest=digest[:DIGEST_CHARS])

    @classmethod
    def untrained(cls) -> ModelRef:
        return cls(UNTRAINED)

    @classmethod
    def untrained_like(cls, like: ModelRef, scheme: str) -> ModelRef:
        return cls(UNTRAINED_LIKE, scheme=scheme, like=like)

    @classmethod
    def parse(cls, text: str) -> ModelRef:
        """The reference a text form names; ValueError for any text that is not one."""
        if not isinstance(text, str) or not text:
            raise ValueError("an empty text names no model")
        if text == UNTRAINED:
            return cls.untrained()
        if text.startswith(PREFIXES[SHARED]):
            return cls.shared(text.removeprefix(PREFIXES[SHARED]))
        if text.startswith(PREFIXES[UPLOAD]):
            name, digest = _split_digest(text.removeprefix(PREFIXES[UPLOAD]))
            return cls.upload(name, digest)
        if text.startswith(PREFIXES[UNTRAINED_LIKE]):
            like, _, scheme = text.removeprefix(PREFIXES[UNTRAINED_LIKE]).rpartition(":")  # a scheme has no ":"
            if like.startswith(PREFIXES[UNTRAINED_LIKE]):  # refused before reading it: no depth to recurse into
                raise ValueError("an untrained-like model is shaped like a model, not another untrained-like one")
            return cls.untrained_like(cls.parse(like), scheme)
        return cls.shipped(text)

    # ------------------------------------------------------------ what it says

    def __str__(self) -> str:
        if self.kind == SHIPPED:
            return self.name
        if self.kind == UNTRAINED:
            return UNTRAINED
        if self.kind == UPLOAD:
            return f"{PREFIXES[UPLOAD]}{self.name}" + (f"@{self.digest}" if self.digest else "")
        if self.kind == SHARED:
            return f"{PREFIXES[SHARED]}{self.name}"
        return f"{PREFIXES[UNTRAINED_LIKE]}{self.like}:{self.scheme}"

    is_shipped = _kind_is(SHIPPED)
    is_shared = _kind_is(SHARED)
    is_upload = _kind_is(UPLOAD)
    # the app's untrained model (not a file that says it trained 0 steps, nor an untrained-like one)
    is_untrained = _kind_is(UNTRAINED)

    @property
    def in_links(self) -> bool:
        """Whether a copied link may name it: an upload is one browser's own, and never goes into a URL."""
        return self.kind in (SHIPPED, SHARED, UNTRAINED)

    @property
    def shown(self) -> str:
        """The model's name as a sentence gives it: the file's name, "untrained", "untrained, shaped like x.pt"."""
        if self.kind == UNTRAINED_LIKE:
            return f"untrained, shaped like {self.like.shown}"
        return self.name or UNTRAINED

    def label(self, description: str | None = None) -> str:
        """What the model box shows: the name and what it is; `description` says what a shipped
        model is when it is not just "trained" ("learned, trained on windows of ≤ 32 tokens")."""
        if self.kind == SHIPPED:
            return f"{self.name} ({description or 'trained'}, shipped)"
        if self.kind == SHARED:
            return f"{self.name} (shared folder)"
        if self.kind == UPLOAD:
            return f"{self.name} (your upload)"
        return "untrained (random init)" if self.kind == UNTRAINED else "untrained, the same shape and vocabulary"

    def cache_key(self, scheme: str) -> str:
        """What names a model of this reference and scheme in a cache key: "<ref>/<scheme>"."""
        return f"{self}/{check_scheme(scheme)}"

    @classmethod
    def from_cache_key(cls, text: str) -> tuple[ModelRef, str]:
        """The reference and scheme of a `cache_key`; ValueError for any other text."""
        ref, slash, scheme = text.rpartition("/")  # a name has no "/"
        if not slash:
            raise ValueError(f"not a model's cache key: {text[:40]!r}")
        return cls.parse(ref), check_scheme(scheme)


def _split_digest(rest: str) -> tuple[str, str]:
    """An upload's "<name>@<digest>" as (name, digest); (rest, "") when it ends in no digest."""
    name, at, digest = rest.rpartition("@")
    return (name, digest) if at and name and _DIGEST.fullmatch(digest) else (rest, "")
