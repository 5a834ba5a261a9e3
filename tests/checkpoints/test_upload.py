"""Bring your own model: lpos / nanoGPT / seed-trainer / state_dict / Hugging Face uploads, the
head-count choice, what the sidebar says was read, the session they belong to, the shared folder.

The file builders here (nanogpt_bytes, seed_bytes, hf_files, lpos_bytes, FakeUpload) are also
used by test_hostile.py and test_browser_upload.py.
"""
from __future__ import annotations

import io
import json
import re
import subprocess
import sys
import tempfile
import tomllib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import ROOT, app_test, seeded_model
from streamlit.runtime.memory_uploaded_file_manager import MemoryUploadedFileManager
from streamlit.runtime.uploaded_file_manager import UploadedFileRec
from test_checkpoints import SeedConfig, importable_from_trainer_module

from lpos.corpus import story
from lpos.checkpoints import CheckpointError, uploads
from lpos.checkpoints.reading import load
from lpos.model import GPT, GPTConfig
from lpos.pages import PAGES
from lpos.tokenizer import GPT2, encode
from lpos.ui import upload
from lpos.ui.models import label, offered, shared_dir_files

NANOGPT_VOCAB = 50304  # nanoGPT pads GPT-2's 50257 up to a multiple of 64
SENTENCE_IDS = encode("The dog bit the man")


@dataclass
class FakeUpload:
    """Stands in for st.file_uploader's UploadedFile: a name, a size and the bytes."""

    name: str
    data: bytes

    @property
    def size(self) -> int:
        return len(self.data)

    def getvalue(self) -> bytes:
        return self.data


def nanogpt_bytes(*, n_embd: int = 64, n_layer: int = 2, n_head: int = 4, block_size: int = 256, seed: int = 0):
    """A nanoGPT `ckpt.pt` as train.py writes it (compiled-model key prefix, padded vocabulary,
    optimizer state), and the model whose weights it holds."""
    model = seeded_model("learned", n_embd=n_embd, n_layer=n_layer, n_head=n_head, block_size=block_size,
                            init_seed=seed)
    state = {k: v.clone() for k, v in model.state_dict().items()}
    padded = torch.cat([state["transformer.wte.weight"], torch.zeros(NANOGPT_VOCAB - 50257, n_embd)])
    state["transformer.wte.weight"] = state["lm_head.weight"] = padded
    payload = {
        "model": {f"_orig_mod.{k}": v for k, v in state.items()},
        "optimizer": {"state": {}, "param_groups": [{"lr": 6e-4, "betas": (0.9, 0.95), "params": [0, 1]}]},
        "model_args": dict(n_layer=n_layer, n_head=n_head, n_embd=n_embd, block_size=block_size, bias=True,
                           vocab_size=NANOGPT_VOCAB, dropout=0.0),
        "iter_num": 250,
        "best_val_loss": torch.tensor(3.25),
        "config": {"dataset": "shakespeare_char", "batch_size": 12},
    }
    buffer = io.BytesIO()
    torch.save(payload, buffer)
    return buffer.getvalue(), model


def seed_bytes(*, n_layer: int = 6, n_head: int = 8, n_embd: int = 512, block_size: int = 1024, seed: int = 0,
               config: bool = True, adam: bool = False) -> tuple[bytes, object]:
    """What the Tiny Children Stories trainer saves (blocks named ln1/ln2, its own GPTConfig object
    pickled from src.model.gpt, iter_num, loss; Adam's state with adam=True), at its real size by
    default (45M parameters, 181 MB; 540 MB with Adam's state), and the model whose weights it
    holds. config=False: a bare state_dict of the same weights, which does not say its head count."""
    model = seeded_model("learned", n_embd=n_embd, n_layer=n_layer, n_head=n_head, block_size=block_size,
                            init_seed=seed)
    state = {k.replace(".ln_1.", ".ln1.").replace(".ln_2.", ".ln2."): v for k, v in model.state_dict().items()}
    buffer = io.BytesIO()
    if config:
        payload = {"model": state, "iter_num": 20000, "loss": 2.31,
                   "config": SeedConfig(block_size=block_size, n_layer=n_layer, n_head=n_head, n_embd=n_embd)}
        if adam:
            moments = {i: {"step": torch.tensor(20000.0), "exp_avg": torch.randn_like(p) * 1e-3,
                           "exp_avg_sq": torch.rand_like(p) * 1e-6} for i, p in enumerate(model.parameters())}
            payload["optimizer"] = {"state": moments, "param_groups": [{"lr": 3e-4, "params": list(moments)}]}
        with importable_from_trainer_module(SeedConfig):
            torch.save(payload, buffer)
    else:
        torch.save(state, buffer)
    return buffer.getvalue(), model


def hf_files(*, n_embd: int = 32, n_layer: int = 2, n_head: int = 4, n_positions: int = 64):
    """config.json and model.safetensors bytes in Hugging Face GPT-2 layout (Conv1D weights stored
    (in, out), causal-mask buffers included), and the lpos model they should load as."""
    from safetensors.torch import save

    model = seeded_model("learned", n_embd=n_embd, n_layer=n_layer, n_head=n_head, block_size=n_positions,
                            activation="gelu_tanh")
    conv1d = ("attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight")
    weights = {}
    for key, tensor in model.state_dict().items():
        if key == "lm_head.weight":
            continue
        key = key.removeprefix("transformer.")
        weights[key] = (tensor.T if key.endswith(conv1d) else tensor).contiguous()
    for layer in range(n_layer):
        weights[f"h.{layer}.attn.bias"] = torch.ones(1, 1, n_positions, n_positions).tril()
    config = {"model_type": "gpt2", "vocab_size": 50257, "n_positions": n_positions, "n_embd": n_embd,
              "n_layer": n_layer, "n_head": n_head, "activation_function": "gelu_new"}
    return json.dumps(config).encode(), save(weights), model


def lpos_bytes(model, meta: dict) -> bytes:
    from lpos.checkpoints import save

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "model.pt"
        save(model, meta, path)
        return path.read_bytes()


def logits(model, ids=SENTENCE_IDS) -> torch.Tensor:
    with torch.no_grad():
        return model(torch.tensor([ids]))[0][0]


# --- the function the sidebar calls ---------------------------------------------------------------


def test_nanogpt_checkpoint_loads_with_its_weights(monkeypatch, tmp_path):
    data, source = nanogpt_bytes()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # its own: another worker's uploads come and go in /tmp
    result = upload.load_upload([FakeUpload("ckpt.pt", data)])
    assert result.key.startswith("upload:ckpt.pt@") and result.name == "ckpt.pt"
    config = result.model.config
    assert (config.position, config.n_layer, config.n_embd, config.block_size, config.vocab_size) == ("learned", 2, 64, 256, 50257)
    torch.testing.assert_close(result.model.transformer.wte.weight, source.transformer.wte.weight)
    torch.testing.assert_close(logits(result.model), logits(source))
    assert result.meta.pop("tokenizer") is GPT2  # the default: the vocabulary is GPT-2's
    assert result.meta == {"source": "nanoGPT ckpt.pt; _orig_mod. prefixes removed", "iter_num": 250,
                           "best_val_loss": pytest.approx(3.25),
                           "ignored": ["optimizer", "config", "token rows 50,257-50,303 (padding, never a token)"]}
    assert not list(tmp_path.glob("lpos-upload-*"))  # the temporary copy is gone


def test_hugging_face_pair_loads_with_the_same_outputs():
    config, weights, source = hf_files()
    result = upload.load_upload([FakeUpload("model.safetensors", weights), FakeUpload("config.json", config)])
    assert result.key.startswith("upload:model.safetensors@")
    assert result.model.config.activation == "gelu_tanh" and result.model.config.block_size == 64
    torch.testing.assert_close(logits(result.model), logits(source))


def test_lpos_file_keeps_its_scheme_and_meta():
    model = seeded_model("rope", n_layer=2, n_head=4, n_embd=32)
    meta = {"val_loss": 4.5, "token_counts": {464: 12, 3290: 3}, "machine": "laptop"}
    result = upload.load_upload([FakeUpload("my rope.pt", lpos_bytes(model, meta))])
    assert result.model.config.position == "rope"
    assert result.name == "my_rope.pt"
    assert result.meta == {"val_loss": 4.5, "token_counts": {464: 12, 3290: 3}, "machine": "laptop", "tokenizer": GPT2}
    torch.testing.assert_close(logits(result.model), logits(model))


def weights_mapped_from_a_file(model) -> list[bool]:
    """For each parameter of `model`: whether its values lie in a private mapping of a file (not a heap copy)."""
    from lpos.checkpoints.payload import _file_backed

    spans = [(p.data_ptr(), p.data_ptr() + p.numel() * p.element_size()) for p in model.parameters()]
    return [_file_backed(start // 4096 * 4096, -(-end // 4096) * 4096) for start, end in spans]


@pytest.mark.parametrize("kind", ["lpos", "nanogpt", "seed with Adam's state"])
def test_an_uploads_float32_weights_stay_its_copys_mapped_pages_not_a_second_copy(monkeypatch, tmp_path, kind):
    """The upload's temporary copy is the model's weights (reading.load's `mapped`): while its bytes are still in
    Streamlit's box, the weights are not held a second time in the heap; the kernel can drop them and read them again
    from disk. A file that holds much more than its weights (a trainer's with Adam's two moments) is copied out
    instead, so its whole file is not kept on disk. Either way the outputs are those of the same file copied into
    memory, and the temporary folder is gone."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    if kind == "lpos":
        source = seeded_model("rope", n_layer=2, n_head=4, n_embd=64)
        data = lpos_bytes(source, {"val_loss": 4.5})
    elif kind == "nanogpt":
        data, source = nanogpt_bytes()
    else:
        data, source = seed_bytes(n_layer=2, n_head=4, n_embd=64, block_size=64, adam=True)
    result = upload.load_upload([FakeUpload("model.pt", data)])
    mapped = weights_mapped_from_a_file(result.model)
    if kind == "seed with Adam's state":
        assert not any(mapped), mapped
    else:
        assert all(mapped[1:]), mapped  # every block's and norm's weights (the first, a rebuilt table, may be fresh)
    (tmp_path / "copy.pt").write_bytes(data)
    copied, _ = load(tmp_path / "copy.pt")  # the shared folder's way: copied into memory
    assert not any(weights_mapped_from_a_file(copied))
    torch.testing.assert_close(logits(result.model), logits(copied), atol=0, rtol=0)
    torch.testing.assert_close(logits(result.model), logits(source))
    assert not list(tmp_path.glob("lpos-upload-*"))


def test_reading_an_upload_allocates_nothing_the_size_of_its_file(monkeypatch, tmp_path):
    """While a file is read, the box still holds its bytes: reading it must not copy them (joining the name to the
    bytes for the key's digest would be a second copy: a 172 MB upload would take 345 MB for a moment). Python's own
    allocations are traced; the weights, mapped from the temporary copy, are not allocated at all."""
    import hashlib
    import tracemalloc

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    data = lpos_bytes(seeded_model("learned", n_layer=1, n_head=2, n_embd=64), {})
    tracemalloc.start()
    try:
        result = upload.load_upload([FakeUpload("model.pt", data)])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(data) > 12 * 2**20 and peak < len(data) / 4, (len(data), peak)
    assert result.key == f"upload:model.pt@{hashlib.sha256(b'model.pt' + bytes(1) + data).hexdigest()[:12]}"  # the same key


def test_key_follows_the_bytes_not_only_the_name():
    first, _ = nanogpt_bytes(seed=0)
    second, _ = nanogpt_bytes(seed=1)
    assert first != second
    key = lambda data: upload.load_upload([FakeUpload("ckpt.pt", data)]).key  # noqa: E731
    assert key(first) == key(first)
    assert key(first) != key(second)  # two sessions' "ckpt.pt" never share a cache entry
    assert label(key(first)) == "ckpt.pt (your upload)"


@dataclass
class Unread:
    name: str
    size: int

    def getvalue(self) -> bytes:
        raise AssertionError("an upload over the cap must be refused before it is read")


def test_size_cap_is_named_and_checked_before_reading(monkeypatch):
    monkeypatch.setenv("LPOS_MAX_UPLOAD_MB", "1")
    with pytest.raises(CheckpointError, match=r"The upload is 3 MB; the limit is 1 MB per model\."):
        upload.load_upload([Unread("ckpt.pt", 3 * 2**20)])
    monkeypatch.setenv("LPOS_MAX_UPLOAD_MB", "600")
    with pytest.raises(CheckpointError, match=r"The upload is 601 MB; the limit is 600 MB per model\."):
        upload.load_upload([Unread("config.json", 2**20), Unread("model.safetensors", 600 * 2**20)])
    monkeypatch.delenv("LPOS_MAX_UPLOAD_MB")
    with pytest.raises(CheckpointError, match=r"The upload is 1,025 MB; the limit is 1 GB per model\."):
        upload.load_upload([Unread("ckpt.pt", 1025 * 2**20)])


def test_cap_is_consistent_with_streamlit_config(monkeypatch):
    monkeypatch.delenv("LPOS_MAX_UPLOAD_MB", raising=False)
    settings = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())
    # Streamlit's box prints its limit in whole GB above 512 MB: 1,024 MB is the cap it states truly ("1GB per file")
    assert settings["server"]["maxUploadSize"] == upload.DEFAULT_CAP_MB == 1024
    assert uploads.shown_mb(1024) == "1 GB" and uploads.shown_mb(50) == "50 MB"
    monkeypatch.setattr(upload.st, "get_option", lambda name: settings["server"]["maxUploadSize"])
    assert upload.cap_mb() == 1024
    monkeypatch.setenv("LPOS_MAX_UPLOAD_MB", "50")
    assert upload.cap_mb() == 50  # the app's cap may be lower than Streamlit's...
    monkeypatch.setenv("LPOS_MAX_UPLOAD_MB", "5000")
    assert upload.cap_mb() == 1024  # ...never higher: the browser would refuse the file first


@pytest.mark.parametrize("name, expected", [
    ("../../etc/passwd", "passwd"),
    ("C:\\Users\\me\\ckpt.pt", "ckpt.pt"),
    ("<img src=x onerror=alert(1)>.pt", "_img_src_x_onerror_alert_1__.pt"),
    (".hidden.pt", "hidden.pt"),
    ("", "upload"),
])
def test_file_names_are_reduced_to_safe_names(name, expected):
    assert uploads.safe_name(name) == expected


@pytest.mark.parametrize("names, message", [
    (["notes.txt"], "Upload one .pt file"),
    (["a.pt", "b.pt"], "Upload one .pt file"),
    (["config.json"], "needs model.safetensors or pytorch_model.bin too"),
    (["config.json", "model.safetensors", "pytorch_model.bin"], "Upload one .pt file"),
    (["model.safetensors"], "needs config.json too"),
])
def test_unusable_file_sets_get_one_sentence(names, message):
    with pytest.raises(CheckpointError, match=message) as error:
        upload.load_upload([FakeUpload(n, b"x") for n in names])
    assert str(error.value).count(". ") <= 1 and "\n" not in str(error.value)


@dataclass
class InBox:
    name: str
    file_id: str


def test_only_files_just_added_are_loaded():
    ckpt, evil = InBox("ckpt.pt", "1"), InBox("evil.pt", "2")
    assert upload.files_to_load([ckpt], set()) == [ckpt]
    assert upload.files_to_load([ckpt, evil], {"1"}) == [evil]  # the box keeps ckpt.pt; evil.pt is new
    assert upload.files_to_load([ckpt], {"1", "2"}) == []  # a file was removed
    config, weights, newer = InBox("config.json", "3"), InBox("model.safetensors", "4"), InBox("config.json", "5")
    assert upload.files_to_load([ckpt, config], {"1"}) == [config]
    assert upload.files_to_load([ckpt, config, weights], {"1", "3"}) == [config, weights]  # its partner too
    assert upload.files_to_load([config, weights, newer], {"3", "4"}) == [newer, weights]  # the latest copy
    assert upload.files_to_load([ckpt, evil], set()) == [ckpt, evil]  # two at once: load_upload refuses


def test_hostile_meta_is_reduced_to_what_pages_can_read():
    meta = {"val_loss": float("nan"), "steps": True, "tokens_trained": 1000, "token_counts": {"a": "b"},
            "loss_by_length": {"64": {"loss": "3.5"}, "128": {"loss": None, "note": "n/a"}},
            "machine": ["not", "text"], "evil": object()}
    assert uploads.clean_meta(meta) == {
        "tokens_trained": 1000,
        "loss_by_length": {64: {"loss": 3.5, "note": ""}, 128: {"loss": None, "note": "n/a"}},
    }


# --- the sidebar, through AppTest -----------------------------------------------------------------


def unescaped(markdown: str) -> str:
    """What a caption written through lpos.ui.guards.literal shows."""
    return re.sub(r"\\(.)", r"\1", markdown)


def model_box(at):
    return at.selectbox(key="model")


def upload_through_sidebar(at, files):
    at.sidebar.get("file_uploader")[0].set_value(files)
    return at.run()


def test_sidebar_upload_selects_the_model_and_a_bad_file_keeps_it():
    data, source = nanogpt_bytes()
    at = app_test(text="The dog bit the man", scheme="rope")
    assert at.selectbox(key="scheme").value == "rope"
    upload_through_sidebar(at, ("ckpt.pt", data, "application/octet-stream"))
    assert not at.exception
    key = model_box(at).value
    assert key.startswith("upload:ckpt.pt@")
    assert "ckpt.pt (your upload)" in model_box(at).options
    assert at.selectbox(key="scheme").value == "learned"  # the upload's own scheme
    assert at.success[0].value.startswith("Loaded ckpt.pt. Only you can see it")
    assert [unescaped(c.value) for c in at.sidebar.caption][1:-1] == [  # the last: the scheme's hint
        "read as: nanoGPT ckpt.pt; _orig_mod. prefixes removed",
        "2 layers, 4 heads, width 64, 256 position rows, vocabulary 50,257, head tied to the token table, 3.3M parameters",
        "ignored: optimizer, config, token rows 50,257-50,303 (padding, never a token)"]
    model, meta = at.session_state["uploads"][key]
    torch.testing.assert_close(logits(model), logits(source))
    assert "model" not in at.query_params  # an upload never goes into a shareable link

    upload_through_sidebar(at, ("evil.pt", b"PK\x03\x04 truncated", "application/octet-stream"))
    assert not at.exception
    assert [e.value for e in at.error] == [
        "evil.pt is not a PyTorch checkpoint (not a zip archive, or truncated). The model in use has not changed."]
    assert model_box(at).value == key  # still the good upload

    fresh = app_test()  # another browser session
    assert not any(option.endswith("(your upload)") for option in fresh.selectbox(key="model").options)
    assert "uploads" not in fresh.session_state


def test_hugging_face_pair_through_the_sidebar():
    config, weights, _ = hf_files()
    at = app_test()
    upload_through_sidebar(at, [("config.json", config, "application/json")])
    assert not at.exception
    assert any("needs model.safetensors or pytorch_model.bin too" in i.value for i in at.info)
    assert not model_box(at).value.startswith("upload:")
    upload_through_sidebar(at, [("config.json", config, "application/json"),
                                ("model.safetensors", weights, "application/octet-stream")])
    assert not at.exception
    assert model_box(at).value.startswith("upload:model.safetensors@")


def test_seed_trainer_file_through_the_sidebar():
    data, source = seed_bytes(n_layer=2, n_head=4, n_embd=32, block_size=64)
    at = app_test(text="The dog bit the man")
    upload_through_sidebar(at, ("best_model.pt", data, "application/octet-stream"))
    assert not at.exception and not at.error
    model, meta = at.session_state["uploads"][model_box(at).value]
    torch.testing.assert_close(logits(model), logits(source))
    captions = [unescaped(c.value) for c in at.sidebar.caption]
    assert "read as: trainer dict (weights in 'model', config from a src.model.gpt.GPTConfig object); blocks named ln1/ln2" in captions
    assert meta.pop("tokenizer") is GPT2  # the default: the vocabulary is GPT-2's
    assert meta == {"source": "trainer dict (weights in 'model', config from a src.model.gpt.GPTConfig object); "
                              "blocks named ln1/ln2", "iter_num": 20000, "loss": 2.31, "ignored": []}


def test_a_file_without_its_head_count_offers_the_choice():
    data, source = seed_bytes(n_layer=2, n_head=4, n_embd=32, block_size=64, config=False)
    at = app_test(text="The dog bit the man")
    before = model_box(at).value
    upload_through_sidebar(at, ("model.pt", data, "application/octet-stream"))
    assert not at.exception and not at.error
    assert at.sidebar.info[0].value == ("model.pt does not say how many attention heads it has: give n_head, one of 1, 2, 4, 8, "
                                        "16, 32 (the numbers that divide its width, 32). Choose it below; the model in use has "
                                        "not changed.")
    assert model_box(at).value == before
    heads = at.selectbox(key="upload_heads")
    assert heads.options == ["1", "2", "4", "8", "16", "32"] and heads.value is None
    heads.set_value(4).run()
    assert not at.exception and not at.error and "upload_pending" not in at.session_state
    key = model_box(at).value
    assert key.startswith("upload:model.pt@")
    model, meta = at.session_state["uploads"][key]
    assert model.config.n_head == 4 and meta["source"] == "bare state_dict; blocks named ln1/ln2"
    torch.testing.assert_close(logits(model), logits(source))
    assert not at.get("selectbox") or all(box.key != "upload_heads" for box in at.selectbox)


def test_the_same_bytes_with_another_head_count_are_another_model():
    data, _ = seed_bytes(n_layer=1, n_head=4, n_embd=32, block_size=16, config=False)
    four = upload.load_upload([FakeUpload("model.pt", data)], n_head=4)
    two = upload.load_upload([FakeUpload("model.pt", data)], n_head=2)
    assert four.key != two.key  # caches keyed by model never mix them
    assert float((logits(four.model) - logits(two.model)).abs().max()) > 1e-4


def test_gpt2_pytorch_model_bin_with_its_config_json():
    config, _, source = hf_files()
    conv1d = ("attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight")
    weights = {k.removeprefix("transformer."): (v.T if k.endswith(conv1d) else v).contiguous()
               for k, v in source.state_dict().items() if k != "lm_head.weight"}  # GPT2Model's keys
    buffer = io.BytesIO()
    torch.save(weights, buffer)
    result = upload.load_upload([FakeUpload("pytorch_model.bin", buffer.getvalue()), FakeUpload("config.json", config)])
    assert result.key.startswith("upload:pytorch_model.bin@")
    assert result.meta["source"] == ("Hugging Face GPT-2 folder (config.json + pytorch_model.bin); GPT2Model keys, "
                                     "Conv1D weights transposed")
    torch.testing.assert_close(logits(result.model), logits(source))


class BoxFile(io.BytesIO):
    """What the box holds: Streamlit's UploadedFile is a BytesIO with a name, a size and a file_id."""

    def __init__(self, name: str, data: bytes, *, file_id: str):
        super().__init__(data)
        self.name, self.file_id = name, file_id

    @property
    def size(self) -> int:
        return len(self.getvalue())  # 0 once the box's copy is dropped


def test_streamlit_copy_of_the_bytes_is_dropped_once_read(monkeypatch):
    """The box would keep a checkpoint's bytes beside its model for the whole session: once a file
    is read (loaded or refused) they are dropped; a file waiting for its head count keeps them."""
    manager = MemoryUploadedFileManager("/upload")
    monkeypatch.setattr(upload, "get_script_run_ctx", lambda: type("Ctx", (), {"uploaded_file_mgr": manager, "session_id": "s"}))
    monkeypatch.setattr(upload.st, "session_state", {})
    kept = lambda file_id: manager.get_files("s", [file_id]) != []  # noqa: E731
    files = {"good": nanogpt_bytes(n_embd=32, block_size=16)[0], "bad": b"PK\x03\x04 truncated",
             "heads": seed_bytes(n_layer=1, n_head=4, n_embd=32, block_size=16, config=False)[0]}
    box = {file_id: BoxFile("m.pt", data, file_id=file_id) for file_id, data in files.items()}
    for file_id, data in files.items():
        manager.add_file("s", UploadedFileRec(file_id=file_id, name="m.pt", type="application/octet-stream", data=data))
        upload._load([box[file_id]])
    assert not kept("good") and not kept("bad") and kept("heads")
    assert box["good"].getvalue() == box["bad"].getvalue() == b"" and box["heads"].getvalue() == files["heads"]
    assert upload.st.session_state["upload_pending"] == ["heads"]
    config, weights = BoxFile("config.json", b"{}", file_id="c"), BoxFile("model.safetensors", b"", file_id="w")
    upload._forget_bytes([weights])  # loaded with an earlier config.json
    assert upload.files_to_load([weights, config], {"w"}) == [config]  # so a new config.json alone is incomplete


@pytest.mark.slow
@pytest.mark.parametrize("size, text", [
    ({}, "The cat sat on the mat and the cat slept"),
    # the model learners build first: the Tiny Children Stories trainer's file at its real size (6
    # layers, 8 heads, width 512, block 1024: 45M parameters), on a text longer than its table:
    # each page offers the first 1,024 tokens
    ("seed", story()[:4000]),  # 1,066 tokens
], ids=["small", "seed-width512-block1024"])
def test_every_page_works_with_an_upload(size, text):
    data, _ = seed_bytes() if size == "seed" else nanogpt_bytes(**size)
    at = app_test(text=text)
    upload_through_sidebar(at, ("ckpt.pt", data, "application/octet-stream"))
    assert "uploads" in at.session_state, [e.value for e in at.error]
    cut = []
    for declared in PAGES:
        at.switch_page(declared.file).run()
        if any(toggle.key == "truncate_learned" for toggle in at.toggle):
            at.toggle(key="truncate_learned").set_value(True).run()
            assert "1024 rows" in at.warning[0].value
            cut.append(declared.name)
        assert not at.exception, (declared.name, [e.value for e in at.exception])
        assert at.title and at.title[0].value, declared.name  # the page drew, not only the sidebar
        # (AppTest drops the sidebar from its tree after switch_page; the selection is still there)
        assert at.session_state["selection"].model.label == "ckpt.pt (your upload)", declared.name
    assert bool(cut) == (len(encode(text)) > 1024), cut  # the long text met the table's end on the token-level pages


# --- a tokenizer that is not the model's -----------------------------------------------------------


def story_character_model(*, steps: int = 40) -> tuple[bytes, list[str]]:
    """A nanoGPT ckpt.pt of a one-layer character model trained a few steps on the built-in story, and its
    characters in id order (what its meta.pkl holds)."""
    import math

    text = story()
    characters = sorted(set(text))
    data = torch.tensor([characters.index(c) for c in text])
    config = dict(n_layer=1, n_head=2, n_embd=32, block_size=32, vocab_size=len(characters))
    model = seeded_model("learned", **config).train()
    optimiser = torch.optim.AdamW(model.parameters(), lr=1e-2)
    for _ in range(steps):
        starts = torch.randint(0, len(data) - 33, (16,))
        x = torch.stack([data[s : s + 32] for s in starts])  # (16, 32)
        y = torch.stack([data[s + 1 : s + 33] for s in starts])  # (16, 32)
        _, loss = model(x, y)[:2]
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
    assert loss.item() < math.log(len(characters)) - 0.5  # it learned the story's characters
    buffer = io.BytesIO()
    torch.save({"model": model.state_dict(), "iter_num": steps, "model_args": {**config, "bias": True, "dropout": 0.0}},
               buffer)
    return buffer.getvalue(), characters


def meta_pkl(characters: list[str]) -> bytes:
    import pickle

    return pickle.dumps({"vocab_size": len(characters), "itos": dict(enumerate(characters)),
                         "stoi": {c: i for i, c in enumerate(characters)}})


def test_a_tokenizer_of_the_right_size_and_the_wrong_content_is_said_on_loading():
    data, characters = story_character_model()
    # the same characters, other ids: it loads without complaint. Reversed, the story's first 33 characters score
    # about 1.5 nats above the doubt's threshold; a shift by 7 scored 0.004 under it on one processor, over on another
    shifted = characters[::-1]
    at = app_test(text="The dog")
    upload_through_sidebar(at, [("ckpt.pt", data, "application/octet-stream"),
                                ("meta.pkl", meta_pkl(shifted), "application/octet-stream")])
    assert not at.exception and not at.error
    key = model_box(at).value
    assert key.startswith("upload:ckpt.pt@")
    said = at.session_state["upload_doubts"][key]
    loss = float(re.search(r"mean loss on the first 33 tokens of the built-in story, ([0-9.]+), is worse than "
                           rf"guessing evenly over its {len(characters)} tokens", said).group(1))
    assert loss > np.log(len(characters)) and "probably not the one it was trained with" in said
    assert at.sidebar.warning[0].value.startswith("Loaded ckpt.pt.") and said in at.sidebar.warning[0].value
    assert said in [w.value for w in at.main.warning]  # on the page itself, every page while it is chosen

    right = app_test(text="The dog")
    upload_through_sidebar(right, [("ckpt.pt", data, "application/octet-stream"),
                                   ("meta.pkl", meta_pkl(characters), "application/octet-stream")])
    assert not right.exception and right.success[0].value.startswith("Loaded ckpt.pt.")
    assert right.session_state["upload_doubts"][model_box(right).value] == "" and not right.warning


def test_taking_the_refused_tokenizer_out_of_the_box_keeps_saying_the_model_waits(monkeypatch):
    monkeypatch.setattr(upload.st, "session_state", {})
    data, _ = character_checkpoint("".join(chr(c) for c in range(32, 97)))  # 65 characters
    _, wrong = character_checkpoint("".join(chr(c) for c in range(32, 112)))  # 80: more than its rows
    model, refused = BoxFile("ckpt.pt", data, file_id="m"), BoxFile("meta.pkl", wrong, file_id="w")
    upload.st.session_state["upload"] = [model, refused]
    upload._on_upload()
    assert upload.st.session_state["upload_message"][0] == "error"
    upload.st.session_state["upload"] = [model]  # the wrong meta.pkl taken out
    upload._on_upload()
    kind, message = upload.st.session_state["upload_message"]
    assert kind == "info" and message.startswith("ckpt.pt is kept: add the tokenizer it was trained with")
    assert model.getvalue() == data  # its bytes still wait


# --- LPOS_CHECKPOINT_DIR: a folder offered to every user ------------------------------------------


@pytest.fixture
def shared_folder(tmp_path, monkeypatch):
    data, _ = nanogpt_bytes(n_embd=32, block_size=64)
    (tmp_path / "small-gpt.pt").write_bytes(data)
    (tmp_path / "damaged.pt").write_bytes(data[: len(data) // 2])
    (tmp_path / "course.PTH").write_bytes(data)  # a course's model.pth, in any case: offered like an upload
    (tmp_path / "notes.txt").write_text("not a model")
    config, weights, _ = hf_files()
    (tmp_path / "hf-gpt2").mkdir()
    (tmp_path / "hf-gpt2" / "config.json").write_bytes(config)
    (tmp_path / "hf-gpt2" / "model.safetensors").write_bytes(weights)
    monkeypatch.setenv("LPOS_CHECKPOINT_DIR", str(tmp_path))
    return tmp_path


def test_shared_folder_offers_its_models_by_name(shared_folder):
    assert sorted(shared_dir_files()) == ["dir:course.PTH", "dir:damaged.pt", "dir:hf-gpt2", "dir:small-gpt.pt"]
    assert {"dir:small-gpt.pt", "dir:hf-gpt2", "untrained"} <= set(offered())
    assert label("dir:small-gpt.pt") == "small-gpt.pt (shared folder)"


def test_shared_folder_models_in_the_app(shared_folder):
    at = app_test(model="dir:small-gpt.pt")
    assert not at.exception and not at.warning
    assert model_box(at).value == "dir:small-gpt.pt" and at.selectbox(key="scheme").value == "learned"
    assert "small-gpt.pt (shared folder)" in model_box(at).options

    model_box(at).set_value("dir:damaged.pt").run()
    assert not at.exception
    assert any("damaged.pt (shared folder) could not be loaded" in w.value for w in at.warning)
    assert model_box(at).value != "dir:damaged.pt"


@pytest.mark.parametrize("value", ["../../etc/passwd", "dir:../small-gpt.pt", f"dir:{'x' * 100_000}",
                                   "/etc/passwd", "upload:ckpt.pt@0123456789ab"])
def test_model_names_from_the_url_are_never_paths(shared_folder, value):
    at = app_test(model=value)
    assert not at.exception
    assert model_box(at).value in ("learned", "untrained")
    assert any("Unknown model" in w.value for w in at.warning)


def test_reading_an_upload_needs_no_streamlit():
    """lpos.checkpoints.uploads is the box's reading half: importable and usable without Streamlit."""
    code = ("import sys; from lpos.checkpoints import uploads; "
            "assert uploads.safe_name('../a b.pt') == 'a_b.pt'; assert 'streamlit' not in sys.modules")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


def character_checkpoint(characters: str) -> tuple[bytes, bytes]:
    """A nanoGPT ckpt.pt of a one-layer model over `characters` and its meta.pkl."""
    import pickle  # noqa: PLC0415

    torch.manual_seed(0)
    model = GPT(GPTConfig(n_embd=32, n_layer=1, n_head=2, block_size=32, vocab_size=len(characters)))
    buffer = io.BytesIO()
    torch.save({"model": model.state_dict(), "iter_num": 100,
                "model_args": dict(n_layer=1, n_head=2, n_embd=32, block_size=32, bias=True,
                                   vocab_size=len(characters), dropout=0.0)}, buffer)
    meta = {"vocab_size": len(characters), "itos": dict(enumerate(characters)),
            "stoi": {c: i for i, c in enumerate(characters)}}
    return buffer.getvalue(), pickle.dumps(meta)


def test_a_wrong_tokenizer_is_refused_and_the_model_waits_for_the_right_one():
    import streamlit as st  # noqa: PLC0415

    right = "".join(chr(c) for c in range(32, 97))  # 65 characters
    data, meta = character_checkpoint(right)
    _, wrong_meta = character_checkpoint("".join(chr(c) for c in range(32, 112)))  # 80: more than the rows
    model, wrong = BoxFile("ckpt.pt", data, file_id="m"), BoxFile("meta.pkl", wrong_meta, file_id="w")
    for key in list(st.session_state):
        del st.session_state[key]
    upload._load([model, wrong])
    kind, message = st.session_state["upload_message"][:2]
    assert kind == "error" and "ckpt.pt is kept: add the tokenizer it was trained with" in message
    assert st.session_state["upload_needs_tokenizer"] == ["m"] and model.size and not wrong.size
    good = BoxFile("meta.pkl", meta, file_id="r")
    st.session_state.update(upload=[model, good], upload_seen={"m", "w"})
    upload._on_upload()
    assert st.session_state["upload_message"][0] == "success", st.session_state["upload_message"]
    assert st.session_state["model"].startswith("upload:ckpt.pt@")
