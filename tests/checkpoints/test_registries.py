"""One registry per kind of file: the tokenizer formats lpos.vocab declares and the checkpoint
layouts lpos.checkpoints.layouts declares; the upload box, the shared folder, the CLI's help and the error
texts are all built from them, so what one offers the others take."""
from __future__ import annotations

import io

import pytest
import torch

from lpos import vocab
from lpos.checkpoints import CheckpointError, load
from lpos.checkpoints.layouts import FILE_LAYOUTS, FOLDER_LAYOUTS, TORCH_SUFFIXES
from lpos.checkpoints.uploads import HF_FILES, is_tokenizer_file
from lpos.cli.choosing import TOKENIZER_HELP
from lpos.tokenizer import TOKENIZER_FILES, load_tokenizer


def test_the_upload_box_takes_exactly_the_registered_suffixes():
    from lpos.ui.upload import ACCEPTED_TYPES

    registered = {name.rsplit(".", 1)[-1] for name in (*TORCH_SUFFIXES, *HF_FILES, *vocab.SUFFIXES)}
    assert set(ACCEPTED_TYPES) == registered
    assert {"pt", "pth", "ckpt", "bin", "safetensors", "json", "pkl", "model", "txt"} <= registered


@pytest.mark.parametrize("suffix", vocab.SUFFIXES)
def test_every_tokenizer_suffix_is_a_tokenizer_upload(suffix):
    assert is_tokenizer_file(f"tok{suffix}") and is_tokenizer_file(f"TOK{suffix.upper()}")


@pytest.mark.parametrize("name", ["model.pt", "course.pth", "config.json", "model.safetensors", "stories260K.bin"])
def test_model_files_are_not_tokenizers(name):
    assert not is_tokenizer_file(name)


def test_the_shared_folder_offers_every_model_suffix_and_nothing_else(tmp_path, monkeypatch):
    from lpos.ui.models import SHARED_DIR_ENV, shared_dir_files

    for n, suffix in enumerate(TORCH_SUFFIXES):
        (tmp_path / f"m{n}{suffix.upper() if n % 2 else suffix}").write_bytes(b"")
    (tmp_path / "meta.pkl").write_bytes(b"")
    (tmp_path / "notes.txt").write_text("")
    (tmp_path / "hf").mkdir()
    (tmp_path / "hf" / "config.json").write_text("{}")
    monkeypatch.setenv(SHARED_DIR_ENV, str(tmp_path))
    offered = sorted(path.name for path in shared_dir_files().values())
    assert offered == sorted([*(p.name for p in tmp_path.iterdir() if p.suffix.lower() in TORCH_SUFFIXES), "hf"])
    assert "m1.PTH" in offered  # a course's model.pth, whatever its case


def test_every_format_is_named_where_a_tokenizer_is_asked_for():
    for described in (f.described for f in vocab.FORMATS):
        assert described in TOKENIZER_FILES and described in TOKENIZER_HELP


def test_a_file_no_format_sniffs_names_every_format(tmp_path):
    (tmp_path / "vocab.csv").write_text("a,b")
    with pytest.raises(Exception) as refused:
        load_tokenizer(tmp_path / "vocab.csv")
    assert all(f.described in str(refused.value) for f in vocab.FORMATS)


def test_a_dict_of_no_layout_names_every_layout(tmp_path):
    torch.save({"iter_num": 3}, buffer := io.BytesIO())
    (tmp_path / "odd.pt").write_bytes(buffer.getvalue())
    with pytest.raises(CheckpointError) as refused:
        load(tmp_path / "odd.pt")
    assert all(layout.name in str(refused.value) for layout in FILE_LAYOUTS)


def test_a_folder_of_no_layout_names_every_folder_layout(tmp_path):
    (tmp_path / "half").mkdir()
    (tmp_path / "half" / "config.json").write_text("{}")
    with pytest.raises(CheckpointError) as refused:
        load(tmp_path / "half")
    assert all(layout.name in str(refused.value) and layout.files in str(refused.value) for layout in FOLDER_LAYOUTS)
