"""Save and load models: the lpos format, and the layouts people save (nanoGPT `ckpt.pt`,
trainer dicts, bare state_dicts, Hugging Face GPT-2 folders). Nothing in a file is executed.

    from lpos import checkpoints
    model, meta = checkpoints.load("rope")            # a shipped name, a file or a folder
    checkpoints.save(model, meta, "my.pt")

Modules, bottom up: errors (CheckpointError, NeedsHeadCount), payload (reading a torch file
safely), build (checking a configuration, building the model), lpos_format (save, and reading
an lpos file), layouts/ (one module per layout family, a registry of recognisers), reading
(available, load, describe), reference (ModelRef: which model a URL, the model box and the caches
name), uploads (reading uploaded files, without Streamlit).
"""
from lpos.checkpoints.build import MAX_PADDED_VOCAB, check_vocabulary
from lpos.checkpoints.errors import CheckpointError, NeedsHeadCount, NeedsTokenizer, head_counts
from lpos.checkpoints.layouts.huggingface import HF_CONFIG, HF_WEIGHTS
from lpos.checkpoints.lpos_format import FORMAT_VERSION, save
from lpos.checkpoints.payload import MAX_BYTES, PickledConfig, read_payload
from lpos.checkpoints.reading import CHECKPOINT_DIR, available, describe, load
from lpos.checkpoints.reference import ModelRef
from lpos.corpus import SHIPPED_SEED

__all__ = ["CHECKPOINT_DIR", "FORMAT_VERSION", "HF_CONFIG", "HF_WEIGHTS", "MAX_BYTES", "MAX_PADDED_VOCAB",
           "SHIPPED_SEED", "CheckpointError", "ModelRef", "NeedsHeadCount", "NeedsTokenizer", "PickledConfig", "available", "check_vocabulary",
           "describe", "head_counts", "load", "read_payload", "save"]
