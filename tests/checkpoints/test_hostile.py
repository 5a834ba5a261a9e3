"""Hostile files, URLs and text: each is refused or shown as text, with a message, and nothing runs.

Files go through the same function the sidebar's upload box calls (lpos.ui.upload.load_upload),
and the worst of them through the upload box itself (AppTest).
"""
from __future__ import annotations

import collections
import dataclasses
import inspect
import io
import json
import os
import pickle
import random
import re
import struct
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import torch
from conftest import ROOT, app_test
from test_checkpoints import TRAINER_MODULE, importable_from_trainer_module, random_gpt2_weights, seed_trainer_payload
from test_figures_embeddings import read_chips, unsafe_markup
from test_upload import FakeUpload, hf_files, lpos_bytes, nanogpt_bytes

from lpos.checkpoints import CheckpointError
from lpos.ui import upload


def refused(files: list[tuple[str, bytes]]) -> str:
    """The one-sentence message a set of files is refused with."""
    with pytest.raises(CheckpointError) as error:
        upload.load_upload([FakeUpload(name, data) for name, data in files])
    message = str(error.value)
    assert message and "\n" not in message and "Traceback" not in message
    return message


# --- files that would run code -------------------------------------------------------------------


class RunsCode:
    """Unpickling this calls subprocess.call(["touch", marker]): the proof that code ran."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return subprocess.call, (["touch", str(self.marker)],)


def test_torch_file_with_code_is_refused_and_nothing_runs(tmp_path):
    marker = tmp_path / "pwned"
    data, _ = nanogpt_bytes(n_embd=32, block_size=64)
    payload = torch.load(io.BytesIO(data), weights_only=True)
    payload["iter_num"] = RunsCode(marker)
    buffer = io.BytesIO()
    torch.save(payload, buffer)
    message = refused([("ckpt.pt", buffer.getvalue())])
    assert message == "ckpt.pt contains Python objects other than tensors; lpos refuses to unpickle them"
    assert not marker.exists()


def test_plain_pickle_with_code_is_refused_unread(tmp_path):
    marker = tmp_path / "pwned"
    message = refused([("model.pt", pickle.dumps({"model": RunsCode(marker)}))])
    assert "not a PyTorch checkpoint" in message
    assert not marker.exists()


def test_code_through_the_upload_box_runs_nothing(tmp_path):
    marker = tmp_path / "pwned"
    buffer = io.BytesIO()
    torch.save({"format": "lpos", "version": 1, "config": RunsCode(marker)}, buffer)
    at = app_test()
    before = at.selectbox(key="model").value
    at.sidebar.get("file_uploader")[0].set_value(("evil.pt", buffer.getvalue(), "application/octet-stream"))
    at.run()
    assert not at.exception
    assert [e.value for e in at.error] == ["evil.pt contains Python objects other than tensors; lpos refuses to "
                                           "unpickle them. The model in use has not changed."]
    assert at.selectbox(key="model").value == before
    assert not marker.exists()
    assert "uploads" not in at.session_state


# --- a trainer's config object that would run code ----------------------------------------------


class SystemConfig:
    """A config whose pickle is os.system(command)."""

    def __init__(self, command: str):
        self.command = command

    def __reduce__(self):
        return os.system, (self.command,)


class EvalConfig(SystemConfig):
    """A config whose pickle is builtins.eval of Python that runs a command."""

    def __reduce__(self):
        return eval, (f"__import__('os').system({self.command!r})",)


@pytest.mark.parametrize("config_class", [SystemConfig, EvalConfig])
def test_seed_trainer_file_whose_config_runs_code_is_refused(tmp_path, config_class):
    marker = tmp_path / "pwned"
    payload = seed_trainer_payload(random_gpt2_weights(n_positions=8), n_head=2, block_size=8)
    payload["config"] = config_class(f"touch {marker}")
    buffer = io.BytesIO()
    torch.save(payload, buffer)
    message = refused([("best_model.pt", buffer.getvalue())])
    assert message == "best_model.pt contains Python objects other than tensors; lpos refuses to unpickle them"
    assert not marker.exists()
    torch.load(io.BytesIO(buffer.getvalue()), weights_only=False)  # the file really is hostile: a careless load runs it
    assert marker.exists()


@dataclasses.dataclass
class GPTConfig:
    """The trainer's config class with a __setstate__ that runs a command: loading the file with
    the trainer's module importable would run it. lpos never imports that module."""

    n_layer: int = 2
    n_head: int = 2
    n_embd: int = 16
    block_size: int = 8
    marker: str = ""

    def __setstate__(self, state):
        subprocess.call(["touch", state["marker"]])
        self.__dict__.update(state)


def test_seed_trainer_config_class_never_runs(tmp_path):
    marker = tmp_path / "pwned"
    payload = seed_trainer_payload(random_gpt2_weights(n_positions=8), n_head=2, block_size=8,
                                   config=GPTConfig(marker=str(marker)))
    buffer = io.BytesIO()
    with importable_from_trainer_module(GPTConfig):
        torch.save(payload, buffer)
    result = upload.load_upload([FakeUpload("best_model.pt", buffer.getvalue())])  # read through the stand-in
    assert (result.model.config.n_layer, result.model.config.n_head, result.model.config.block_size) == (2, 2, 8)
    assert not marker.exists() and TRAINER_MODULE not in sys.modules
    with importable_from_trainer_module(GPTConfig):  # a careless load, with the trainer's code at hand, runs it
        torch.load(io.BytesIO(buffer.getvalue()), weights_only=False)
    assert marker.exists()


# --- damaged files -------------------------------------------------------------------------------


@pytest.mark.parametrize("fraction", [0.0, 0.01, 0.5, 0.999])
def test_truncated_file_is_refused(fraction):
    data, _ = nanogpt_bytes(n_embd=32, block_size=64)
    message = refused([("ckpt.pt", data[: int(len(data) * fraction)])])
    assert message == "ckpt.pt is not a PyTorch checkpoint (not a zip archive, or truncated)"


def test_file_with_a_damaged_middle_is_refused():
    data, _ = nanogpt_bytes(n_embd=32, block_size=64)
    archive = zipfile.ZipFile(io.BytesIO(data))
    pickled = next(i for i in archive.infolist() if i.filename.endswith("data.pkl"))
    start = pickled.header_offset + 30 + len(pickled.filename) + len(pickled.extra)
    damaged = data[:start] + b"\xff" * 64 + data[start + 64:]  # overwrite the pickle's first bytes
    assert refused([("ckpt.pt", damaged)]) == "ckpt.pt could not be read (UnpicklingError): the file is damaged"


def test_wrong_shapes_are_named():
    data, _ = nanogpt_bytes(n_embd=32, block_size=64)
    payload = torch.load(io.BytesIO(data), weights_only=True)
    payload["model"]["_orig_mod.transformer.h.1.attn.c_attn.weight"] = torch.zeros(96, 16)
    buffer = io.BytesIO()
    torch.save(payload, buffer)
    assert refused([("ckpt.pt", buffer.getvalue())]) == (
        "ckpt.pt: transformer.h.1.attn.c_attn.weight has shape (96, 16), expected (96, 32)")


def test_missing_weights_are_named():
    data, _ = nanogpt_bytes(n_embd=32, block_size=64)
    payload = torch.load(io.BytesIO(data), weights_only=True)
    del payload["model"]["_orig_mod.transformer.ln_f.weight"]
    buffer = io.BytesIO()
    torch.save(payload, buffer)
    assert "missing ['transformer.ln_f.weight']" in refused([("ckpt.pt", buffer.getvalue())])


@pytest.mark.parametrize("ids, message", [
    (torch.tensor([-1, 5]), "token rows of the wrong shape"),  # a negative id would wrap to the last row
    (torch.tensor([5, 50257]), "token rows of the wrong shape"),
    (torch.tensor([1.0, 2.0]), "token rows of the wrong shape"),
])
def test_lpos_token_rows_out_of_range(tiny_model, ids, message):
    data = lpos_bytes(tiny_model("none"), {})
    payload = torch.load(io.BytesIO(data), weights_only=True)
    payload["state_dict"]["transformer.wte.ids"] = ids
    payload["state_dict"]["transformer.wte.rows"] = torch.zeros(2, 32, dtype=torch.float16)
    buffer = io.BytesIO()
    torch.save(payload, buffer)
    assert message in refused([("model.pt", buffer.getvalue())])


@pytest.mark.parametrize("change, message", [
    (dict(n_head=0), "n_head is '0', not a positive whole number"),
    (dict(n_layer=-3), "n_layer is '-3', not a positive whole number"),
    (dict(n_embd="32"), "n_embd is '32', not a positive whole number"),
    (dict(n_layer=None), "n_layer is 'None', not a positive whole number"),
    (dict(n_head=5), "unsupported configuration: n_embd (32) must be divisible by n_head (5)"),
    (dict(vocab_size=float("inf")), "unsupported configuration"),
    (dict(vocab_size=1000), "has a vocabulary of 1,000 rows, not GPT-2's 50,257 tokens, so it needs its own tokenizer"),
    (dict(dropout="lots"), "unsupported configuration"),
])
def test_hostile_nanogpt_configurations(change, message):
    data, _ = nanogpt_bytes(n_embd=32, block_size=64)
    payload = torch.load(io.BytesIO(data), weights_only=True)
    payload["model_args"].update(change)
    buffer = io.BytesIO()
    torch.save(payload, buffer)
    assert message in refused([("ckpt.pt", buffer.getvalue())])


@pytest.mark.parametrize("payload, message", [
    ({"format": "lpos", "version": 1, "config": [1, 2], "state_dict": {}}, "config is not a dictionary"),
    ({"format": "lpos", "version": 1, "config": dict(vocab_size=50257, n_layer=1, n_head=1, n_embd=8),
      "state_dict": "weights"},
     "state_dict is not a dictionary"),
    ({"format": "lpos", "version": 99}, "lpos format version 99; this lpos reads 1"),
    ({"model": {}, "model_args": "n_layer=2"}, "model_args is not a dictionary"),
    ({"model": [], "model_args": dict(vocab_size=50304, n_layer=1, n_head=1, n_embd=8, block_size=8)},
     "model is not a dictionary"),
    ({"model": {}, "model_args": {}}, "has no token table (a 2-D transformer.wte.weight)"),
    ({"weights": torch.zeros(3)}, "has no token table (a 2-D transformer.wte.weight)"),
    ({"transformer.wte.weight": torch.zeros(50257)}, "has no token table (a 2-D transformer.wte.weight)"),
    ({"iter_num": 3, "loss": 2.5}, "in none of the layouts lpos reads (an lpos checkpoint, llama2.c ckpt.pt, "),
    ([torch.zeros(3)], "does not hold a checkpoint dictionary"),
])
def test_wrong_structures_are_refused(payload, message):
    buffer = io.BytesIO()
    torch.save(payload, buffer)
    assert message in refused([("model.pt", buffer.getvalue())])


# --- files that ask for more memory than the cap -------------------------------------------------


def test_huge_declared_model_is_refused_before_anything_is_built():
    data, _ = nanogpt_bytes(n_embd=32, block_size=64)
    payload = torch.load(io.BytesIO(data), weights_only=True)
    payload["model_args"].update(n_embd=2**20, n_head=2**10, n_layer=1000)  # petabytes of weights
    buffer = io.BytesIO()
    torch.save(payload, buffer)
    message = refused([("ckpt.pt", buffer.getvalue())])
    assert re.fullmatch(r"ckpt\.pt declares a model of [\d,]+ million parameters \([\d,]+ MB in memory\), "
                        r"over the 1024 MB limit", message), message


class _Storage:
    def __init__(self, numel: int):
        self.numel = numel


class _Tensor:
    """Pickles as torch's own tensor rebuild call, with whatever size it is told to claim."""

    def __init__(self, storage: _Storage, size: tuple, stride: tuple):
        self.args = (storage, 0, size, stride, False, collections.OrderedDict())

    def __reduce__(self):
        return torch._utils._rebuild_tensor_v2, self.args


class _TorchPickler(pickle.Pickler):
    def persistent_id(self, obj):
        if isinstance(obj, _Storage):  # torch.save's storage reference: ("storage", type, key, location, numel)
            return "storage", torch.FloatStorage, "0", "cpu", obj.numel
        return None


def declared_tensor_file(numel: int, size: tuple) -> bytes:
    """A torch file whose one tensor claims `size` over a storage of `numel` floats, but holds 16 bytes."""
    template = io.BytesIO()
    torch.save({"x": torch.zeros(4)}, template)
    source = zipfile.ZipFile(io.BytesIO(template.getvalue()))
    pickled = io.BytesIO()
    stride = tuple(int(torch.tensor(size[i + 1:]).prod()) for i in range(len(size)))
    _TorchPickler(pickled, protocol=2).dump({"model_args": {}, "model": {"x": _Tensor(_Storage(numel), size, stride)}})
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        for info in source.infolist():
            archive.writestr(info, pickled.getvalue() if info.filename.endswith("data.pkl") else source.read(info))
    return out.getvalue()


@pytest.mark.parametrize("numel, size", [(10**12, (10**6, 10**6)), (4, (10**6, 10**6))])
def test_huge_declared_tensor_is_refused(numel, size):
    assert refused([("ckpt.pt", declared_tensor_file(numel, size))]) == (
        "ckpt.pt could not be read (RuntimeError): the file is damaged")


def test_zip_bomb_is_refused_unread(monkeypatch):
    monkeypatch.setenv("LPOS_MAX_UPLOAD_MB", "2")
    template = io.BytesIO()
    torch.save({"model_args": {}, "model": {}}, template)
    source = zipfile.ZipFile(template)
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for info in source.infolist():
            archive.writestr(info.filename, source.read(info))
        archive.writestr("archive/data/bomb", b"\0" * (64 * 2**20))  # 64 MB of zeros in ~64 kB
    assert len(out.getvalue()) < 2 * 2**20
    assert re.fullmatch(r"ckpt\.pt unpacks to \d+ MB, over the 2 MB limit", refused([("ckpt.pt", out.getvalue())]))


def test_forged_declared_size_is_refused():
    """A central directory that claims 10 GB for a 16-byte entry: refused by the declaration alone."""
    data, _ = nanogpt_bytes(n_embd=32, block_size=64)
    archive = zipfile.ZipFile(io.BytesIO(data))
    entry = archive.infolist()[-1]
    directory = [m.start() for m in re.finditer(rb"PK\x01\x02", data)][-1]  # the last central entry
    assert data[directory + 46: directory + 46 + len(entry.filename)] == entry.filename.encode()
    forged = data[:directory + 24] + struct.pack("<I", 0xFFFFFFF0) + data[directory + 28:]  # uncompressed size
    assert re.fullmatch(r"ckpt\.pt unpacks to \d+ MB, over the 1024 MB limit", refused([("ckpt.pt", forged)]))


def test_hugging_face_header_declaring_a_huge_tensor():
    config, _, _ = hf_files()
    header = json.dumps({"wte.weight": {"dtype": "F32", "shape": [10**6, 10**6], "data_offsets": [0, 4 * 10**12]}})
    weights = struct.pack("<Q", len(header)) + header.encode() + b"\0" * 16
    assert "could not be read" in refused([("config.json", config), ("model.safetensors", weights)])
    huge_header = struct.pack("<Q", 2**62) + b"{}"
    assert "could not be read" in refused([("config.json", config), ("model.safetensors", huge_header)])


@pytest.mark.parametrize("config, message", [
    (b"[1, 2, 3]", "config.json does not hold a JSON object"),
    (b"{not json", "could not be read (JSONDecodeError)"),
    (json.dumps({"model_type": "bert"}).encode(), "model_type 'bert' is not supported"),
    (json.dumps({"model_type": "gpt2", "n_layer": 2, "n_head": 4, "n_embd": None}).encode(), "n_embd is 'None'"),
    (json.dumps({"model_type": "gpt2", "n_head": 4, "n_embd": 64}).encode(), "has shape"),  # the tensors are 32 wide
    (b" " * (2 * 2**20), "config.json is over 1024 kB"),
])
def test_hostile_hugging_face_configs(config, message):
    _, weights, _ = hf_files()
    assert message in refused([("config.json", config), ("model.safetensors", weights)])


# --- hostile URLs and text -----------------------------------------------------------------------

HOSTILE_TEXT = 'Hi <script>alert("x")</script> and <img src=x onerror=alert(1)> & <b>bold</b>'


@pytest.mark.parametrize("query, notice", [
    (dict(scheme="../../etc/passwd"), "Unknown position scheme '../../etc/passwd'"),
    (dict(scheme="x" * 100_000), "Unknown position scheme 'xxxx"),
    (dict(model="x" * 100_000), "Unknown model 'xxxx"),
    (dict(model="/etc/passwd"), "Unknown model '/etc/passwd'"),
    (dict(text="a" * 100_000), "cut to its first 20,000 characters"),
    (dict(text="<script>" * 12_500), "cut to its first 20,000 characters"),
])
def test_hostile_url_values_become_notices(query, notice):
    at = app_test(**query)
    assert not at.exception
    assert [w.value for w in at.warning if notice in w.value], [w.value for w in at.warning]
    assert all(len(w.value) < 300 for w in at.warning)  # a huge value is never echoed whole


FIGURE_MARKUP = re.compile(r"</?(br|b|i|em|sup|sub|extra)\s*/?>")  # the tags figure builders write themselves


def figure_strings(figure_json: str | dict) -> list[str]:
    """Every string in a Plotly figure's JSON: titles, labels, text, hover text, templates."""
    found, stack = [], [json.loads(figure_json) if isinstance(figure_json, str) else figure_json]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            found.append(item)
        elif isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return found


def raw_markup(figure_json: str | dict) -> list[str]:
    """Strings with a '<' that is not one of the figure's own tags: user text Plotly would render."""
    return [text for text in figure_strings(figure_json) if "<" in FIGURE_MARKUP.sub("", text)]


def test_html_in_the_sentence_is_shown_as_text():
    at = app_test(text=HOSTILE_TEXT)
    assert not at.exception
    specs = [chart.proto.spec for chart in at.get("plotly_chart")]
    assert specs
    for spec in specs:
        assert raw_markup(spec) == []
    assert any("&lt;" in text for text in figure_strings(specs[0]))  # the '<' tokens, escaped
    (chips,) = [element.proto.body for element in at.get("html")]  # the token chips, plain HTML
    assert "<script" not in chips and "<img" not in chips and "<b>" not in chips
    drawn = read_chips(chips)
    assert unsafe_markup(drawn) == []
    assert [c.text for c in drawn.chips][:5] == ["Hi", "␣<", "script", ">", "alert"]  # the characters themselves
    tokens = list(at.dataframe[0].value["token"])
    assert "␣<" in tokens and "</" in tokens  # a table shows the characters themselves
    assert not any("&lt;" in t for t in tokens)


# The only st.html calls: the token chips, whose builder escapes every piece of token text
# (tests/figures/test_figures_embeddings.py reads hostile tokens back from it); st.html sanitises as well.
CHIPS_HTML_CALLS = {"pages/embeddings.py": "st.html(chips)", "pages/lesson.py": "st.html(shown.figure)",
                    # the teacher's cookie: a script of a checked code and secret only (test below)
                    "lpos/ui/teacher_cookie.py": "st.html(script(want, age), unsafe_allow_javascript=True)"}


def test_no_unsafe_html_anywhere():
    """Token text is user-controlled: no page may switch off Streamlit's HTML escaping, except for
    the lesson's presenter CSS, a constant that takes no input, and the token chips' st.html."""
    from lpos.ui.lesson import presenter_css

    sources = [*ROOT.glob("*.py"), *ROOT.glob("pages/*.py"), *ROOT.glob("lpos/**/*.py")]
    offenders = [f"{p.relative_to(ROOT)}: {line.strip()}" for p in sources for line in p.read_text().splitlines()
                 if re.search(r"unsafe_allow_html\s*=\s*True", line)
                 and not re.fullmatch(r"st\.markdown\(lesson\.presenter_css\(\), unsafe_allow_html=True\).*", line.strip())]
    assert offenders == []
    assert not inspect.signature(presenter_css).parameters  # nothing a user types can reach it
    assert presenter_css().startswith("<style>") and presenter_css().endswith("</style>")
    assert not [p for p in sources if "components.html" in p.read_text()]
    html_calls = [(str(p.relative_to(ROOT)), line.split("#")[0].strip()) for p in sources
                  for line in p.read_text().splitlines() if "st.html(" in line]
    assert sorted(html_calls) == sorted(CHIPS_HTML_CALLS.items())
    from lpos.ui.teacher_cookie import script
    assert script("K7QMX4TR.abc_-9", 60).count("'") == 2  # a checked value: nothing can close the string
    for hostile in ("K7QMX4TR.x'; alert(1); '", "</script><script>alert(1)", "K7QMX4TR.a b", "K7QMX4TR"):
        with pytest.raises(ValueError):
            script(hostile, 60)
    # what they draw is token_chips_html's escaped HTML, from the Embeddings topic's one view
    assert "embeddings.token_chips(" in (ROOT / "pages/embeddings.py").read_text()
    assert "return token_chips_html(embedding_view(" in (ROOT / "lpos/ui/embeddings.py").read_text()


# A live class (lpos.classroom, lpos.ui.live_class): a code in a link is a guess until the store knows it.
@pytest.mark.parametrize("value, notice", [
    ("A" * 100_000, "is not a class code"),
    ("lpos:class:*", "is not a class code"),  # never a Redis key pattern
    ("K7QM-X4TR\nFLUSHALL", "is not a class code"),
    ("<script>alert(1)</script>", "is not a class code"),
    ("ZZZZZZZZ", "No class has the code ZZZZ-ZZZZ"),
])
def test_hostile_class_codes_become_notices(value, notice):
    at = app_test(**{"class": value})
    assert not at.exception
    assert [w.value for w in at.warning if notice in w.value], [w.value for w in at.warning]
    assert all(len(w.value) < 300 and not re.search(r"(?<!\\)<", w.value) for w in at.warning)  # "<" escaped
    assert "class" not in at.query_params and not at.session_state["live_following"]


def test_a_class_code_never_names_another_redis_key():
    from lpos.classroom import ClassEnded
    from lpos.class_store import RedisStore

    store = RedisStore("redis://127.0.0.1:1/0")  # never reached: the code is refused first
    for code in ("*", "lpos:class:*", "K7QMX4TR*", "k7qmx4tr"):
        with pytest.raises(ClassEnded):
            store.follow(code, "student")


# llama2.c's model.bin: raw bytes, every size checked against the header and the file before a weight is read.
def _llama2c_header(dim=32, hidden=48, layers=2, heads=4, kv_heads=4, vocab=64, seq_len=64, *, version=0) -> bytes:
    sizes = struct.pack("<7i", dim, hidden, layers, heads, kv_heads, vocab, seq_len)
    if version == 0:
        return sizes
    return (struct.pack("<Ii", 0x616B3432, version) + sizes + b"\x01").ljust(256, b"\0")


@pytest.mark.parametrize("data, message", [
    (_llama2c_header() + b"\0" * 400, "but the file holds"),  # the header promises ~80 kB
    (_llama2c_header(version=1) + b"\0" * 400, "but the file holds"),
    (_llama2c_header(dim=2**31 - 1) + b"\0" * 64, "declares n_embd = 2147483647"),
    (_llama2c_header(layers=-3) + b"\0" * 64, "declares n_layer = -3"),
    (_llama2c_header(vocab=-(2**31)) + b"\0" * 64, "declares vocab_size = 2147483648"),
    (_llama2c_header(heads=0) + b"\0" * 64, "declares n_head = 0"),
    (_llama2c_header(heads=5) + b"\0" * 64, "the heads must divide the width"),
    (_llama2c_header(heads=4, kv_heads=3) + b"\0" * 64, "the key/value heads the heads"),
    (_llama2c_header(dim=65536, hidden=1 << 20, layers=4096, heads=1024, kv_heads=1024), "over the"),
    (_llama2c_header()[:20], "shorter than a llama2.c model.bin header"),
    (_llama2c_header(version=1)[:100], "shorter than a llama2.c version 1 header"),
])
def test_hostile_model_bin_is_refused_before_any_weight_is_read(monkeypatch, data, message):
    from lpos.checkpoints.layouts import llama2c

    def no_reading(*args, **kwargs):
        raise AssertionError("a weight was read before the header was checked")

    monkeypatch.setattr(llama2c.np, "memmap", no_reading)
    assert message in refused([("model.bin", data)])


# ---------------------------------------------------------------------------------------------
# Tokenizer files: meta.pkl through the plain unpickler, damaged tokenizer.json and
# .model files, size caps. Each is a TokenizerError with one sentence; nothing in a file runs.

class RunsOnLoad:
    """A pickle that would create `marker` when unpickled, through a reduce of a real function."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (self.marker,))


def tokenizer_refused(path: Path) -> str:
    from lpos.tokenizer import TokenizerError, load_tokenizer

    with pytest.raises(TokenizerError) as error:
        load_tokenizer(path)
    message = str(error.value)
    assert message and "\n" not in message and "Traceback" not in message
    return message


@pytest.mark.parametrize("make", [
    lambda marker: {"itos": {0: "a"}, "stoi": {"a": 0}, "x": RunsOnLoad(marker)},  # a reduce
    lambda marker: {"itos": {0: "a"}, "cls": collections.OrderedDict},  # a class
    lambda marker: {"itos": {0: "a"}, "fn": os.getcwd},  # a function
])
def test_meta_pkl_with_code_is_refused_and_nothing_runs(tmp_path, make):
    marker = tmp_path / "ran"
    (tmp_path / "meta.pkl").write_bytes(pickle.dumps(make(marker)))
    message = tokenizer_refused(tmp_path / "meta.pkl")
    assert "lpos reads only plain dictionaries, lists, strings and numbers" in message
    assert not marker.exists()


@pytest.mark.parametrize("content, message", [
    (pickle.dumps({"itos": {0: "a", 2: "b"}}), "'itos' ids are not 0 to 1"),
    (pickle.dumps({"itos": {0: "ab"}}), "tokens are not single characters"),
    (pickle.dumps({"itos": {0: "a"}, "stoi": {"a": 1}}), "'stoi' and 'itos' disagree"),
    (pickle.dumps([1, 2, 3]), "has no 'itos' dictionary"),
    (pickle.dumps({"itos": {0: "a"}})[:-5], "could not be read"),
    (b"\x80\x04\x95garbage", "could not be read"),
])
def test_damaged_meta_pkl(tmp_path, content, message):
    (tmp_path / "meta.pkl").write_bytes(content)
    assert message in tokenizer_refused(tmp_path / "meta.pkl")


@pytest.mark.parametrize("name, content, message", [
    ("tokenizer.json", b"{not json", "could not be read as a Hugging Face tokenizer (JSONDecodeError"),
    ("tokenizer.json", b'{"model": {"type": "BPE", "vocab": 7}}', "could not be read as a Hugging Face tokenizer"),
    ("tokenizer.json", b"\xff\xfe", "is not UTF-8 text"),
    ("tok.model", b"\x0a\x05hello" + random.Random(0).randbytes(64), "could not be read as a SentencePiece model"),
    ("tok.model", b"minbpe v1\n\n1\n", "has a line that is not"),
    ("tok.model", b"minbpe v1\n\n0\n300 301\n", "merge 1 joins token 301, which is not made yet"),
    ("tok.model", b"minbpe v1\n(unclosed\n0\n", "split pattern is not a regular expression"),
    ("tok.model", b"minbpe v1\n\n1\n<|x|> 5\n", "special tokens must have ids after"),
    ("input.txt", b"\xff\xfe\x00", "is not UTF-8 text"),
    ("input.txt", b"", "is empty"),
])
def test_damaged_tokenizer_files(tmp_path, name, content, message):
    (tmp_path / name).write_bytes(content)
    assert message in tokenizer_refused(tmp_path / name)


def test_tokenizer_files_over_the_cap_are_refused_unread(tmp_path, monkeypatch):
    import lpos.tokenizer
    import lpos.vocab.base

    monkeypatch.setattr(lpos.tokenizer, "MAX_TOKENIZER_BYTES", 2**20)
    monkeypatch.setattr(lpos.vocab.base, "MAX_TOKENIZER_BYTES", 2**20)
    (tmp_path / "input.txt").write_text("ab" * 2**20)
    assert "input.txt is over the 1 MB limit for a tokenizer file" in tokenizer_refused(tmp_path / "input.txt")
    monkeypatch.setattr(lpos.tokenizer, "MAX_TOKENIZER_BYTES", 10**9)  # the reader's own cap, checked again
    assert "input.txt is 2 MB; a text file is at most 1 MB" in tokenizer_refused(tmp_path / "input.txt")


def test_a_damaged_stored_tokenizer_is_a_checkpoint_error(tmp_path, tiny_model):
    from lpos.checkpoints import load, save

    save(tiny_model("learned"), {}, tmp_path / "m.pt")
    payload = torch.load(tmp_path / "m.pt", weights_only=True)
    for stored, message in [({"kind": "characters", "characters": "aa"}, "gives one character two ids"),
                            ({"kind": "minbpe", "pattern": ""}, "m.pt: the stored tokenizer is damaged (KeyError)"),
                            ({"kind": "exec"}, "m.pt: the stored tokenizer is of an unknown kind 'exec'"),
                            ("gpt2", "unknown kind 'str'")]:
        torch.save({**payload, "meta": {"tokenizer": stored}}, tmp_path / "m.pt")
        with pytest.raises(CheckpointError, match=re.escape(message)):
            load(tmp_path / "m.pt")
