"""Model references (lpos.checkpoints.reference): one text form per kind, read back to the same
reference; any other text, hostile or not, is a ValueError and never a path."""
from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lpos.checkpoints import ModelRef
from lpos.checkpoints.reference import DIGEST_CHARS, MAX_NAME
from lpos.positions import SCHEMES

DIGEST = "0123456789ab"
EVERY_KIND = [
    ("rope", ModelRef.shipped("rope")),
    ("learned-32", ModelRef.shipped("learned-32")),
    ("dir:mine.pt", ModelRef.shared("mine.pt")),
    ("dir:llama", ModelRef.shared("llama")),  # a Hugging Face folder
    (f"upload:ckpt.pt@{DIGEST}", ModelRef.upload("ckpt.pt", DIGEST)),
    ("upload:tiny.pt", ModelRef.upload("tiny.pt")),  # as the page tests put one in the session
    ("untrained", ModelRef.untrained()),
    ("untrained-like:dir:chars.pt:alibi", ModelRef.untrained_like(ModelRef.shared("chars.pt"), "alibi")),
    (f"untrained-like:upload:a.pt@{DIGEST}:learned", ModelRef.untrained_like(ModelRef.upload("a.pt", DIGEST), "learned")),
    ("untrained-like:untrained:none", ModelRef.untrained_like(ModelRef.untrained(), "none")),
]


@pytest.mark.parametrize("text, ref", EVERY_KIND)
def test_every_kind_reads_back_to_its_text(text, ref):
    assert ModelRef.parse(text) == ref
    assert str(ref) == text
    assert hash(ModelRef.parse(text)) == hash(ref)  # frozen: usable as a cache key


@pytest.mark.parametrize("text, label", [
    ("rope", "rope (trained, shipped)"), ("dir:mine.pt", "mine.pt (shared folder)"),
    (f"upload:ckpt.pt@{DIGEST}", "ckpt.pt (your upload)"), ("upload:tiny.pt", "tiny.pt (your upload)"),
    ("upload:a@b.pt@" + DIGEST, "a@b.pt (your upload)"), ("untrained", "untrained (random init)"),
])
def test_labels_say_what_the_model_box_says(text, label):
    assert ModelRef.parse(text).label() == label


def test_what_each_kind_says_of_itself():
    shipped, shared, upload, untrained = (ModelRef.parse(t) for t in ("rope", "dir:x.pt", f"upload:x.pt@{DIGEST}", "untrained"))
    assert ModelRef.parse("learned-32").label("learned, trained on windows of ≤ 32 tokens") == \
        "learned-32 (learned, trained on windows of ≤ 32 tokens, shipped)"
    assert [r.is_shipped for r in (shipped, shared, upload, untrained)] == [True, False, False, False]
    assert [r.is_upload for r in (shipped, shared, upload, untrained)] == [False, False, True, False]
    assert [r.in_links for r in (shipped, shared, upload, untrained)] == [True, True, False, True]  # uploads never in a link
    assert upload.digest == DIGEST and upload.name == "x.pt" and shared.name == "x.pt"
    like = ModelRef.untrained_like(upload, "rope")
    assert not like.in_links and not like.is_untrained and like.shown == "untrained, shaped like x.pt"
    assert ModelRef.upload("x.pt", "f" * 64).digest == "f" * DIGEST_CHARS  # a sha256 is cut to the key's digits


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("text, ref", EVERY_KIND)
def test_cache_keys_read_back(text, ref, scheme):
    assert ModelRef.from_cache_key(ref.cache_key(scheme)) == (ref, scheme)
    assert ref.cache_key(scheme) == f"{text}/{scheme}"  # what lpos.ui.caching.remember has always built


LONG = "a" * 10_000
HOSTILE = [
    "", "dir:", "upload:", "untrained-like:", "dir:../x", "dir:..", "dir:.", "dir:a/b.pt", "dir:/etc/passwd",
    "../x", "/etc/passwd", "a/b", "rope\0", "dir:x\0.pt", LONG, f"dir:{LONG}", f"upload:{LONG}@{DIGEST}",
    "<b>bold</b>", "dir:<script>alert(1)</script>.pt", "untrained-like:rope", "untrained-like:rope:nope",
    "untrained-like::rope", "untrained-like:untrained-like:rope:alibi:none", "untrained-like:" * 100_000 + "rope:none",
]


@pytest.mark.parametrize("text", HOSTILE, ids=lambda t: repr(t[:30]))
def test_hostile_texts_are_refused(text):
    with pytest.raises(ValueError):
        ModelRef.parse(text)


@pytest.mark.parametrize("text", ["<b>x", "🙂", "modèle", "a b", "x:y", "untrained-like", "dir", "a@b",
                                  "&lt;i&gt;", "a" * MAX_NAME, "dir:🙂.pt", "dir:x:y.pt", "upload:<i>.pt"])
def test_odd_but_legal_names_read_back_as_they_are(text):
    ref = ModelRef.parse(text)
    assert str(ref) == text and "/" not in ref.name


def test_references_are_built_only_with_their_kinds_fields():
    for build in (lambda: ModelRef("shipped"), lambda: ModelRef("elsewhere", name="x"),
                  lambda: ModelRef.shipped("dir:x.pt"), lambda: ModelRef.shipped("untrained"),
                  lambda: ModelRef("untrained", name="x"), lambda: ModelRef("shared", name="x", digest=DIGEST),
                  lambda: ModelRef.upload("x", "not hex!"), lambda: ModelRef.upload(f"x@{DIGEST}"),
                  lambda: ModelRef.untrained_like(ModelRef.shipped("rope"), "nope"),
                  lambda: ModelRef.shared("a" * (MAX_NAME + 1))):
        with pytest.raises(ValueError):
            build()
    with pytest.raises(ValueError):
        ModelRef.from_cache_key("rope")  # no scheme
    with pytest.raises(ValueError):
        ModelRef.from_cache_key("rope/nope")


@given(st.text(max_size=300))
def test_any_text_either_reads_back_exactly_or_is_refused(text):
    try:
        ref = ModelRef.parse(text)
    except ValueError:
        return
    assert str(ref) == text
    assert ModelRef.parse(str(ref)) == ref
    assert all("/" not in name and name not in (".", "..") for name in (ref.name, ref.like.name if ref.like else ""))
