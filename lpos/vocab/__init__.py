"""Tokenizers other than GPT-2's, one module per file format; `lpos.tokenizer.load_tokenizer`
reads any of them and is the one entry point.

Modules: base (the `Tokenizer` interface, `TokenizerError`, `TokenizerFormat`, size caps, the one renderer
of byte pieces), characters (a character vocabulary: nanoGPT's meta.pkl through a safe unpickler, or the
training text), minbpe (Karpathy's `.model` text file), huggingface (`tokenizer.json`, read by the
`tokenizers` library), sentencepiece (a SentencePiece `.model`, read by the `sentencepiece` library).

Each module declares its file formats (`TokenizerFormat`: how the user reads its name, the name endings an
upload takes, how to sniff it, how to read it); FORMATS holds them in the order they are tried, and every
list of tokenizer files in lpos (the upload box, the shared folder, error texts, the CLI's help) is built
from it.
"""
from lpos.vocab import characters, huggingface, minbpe, sentencepiece
from lpos.vocab.base import TokenizerFormat

# tried in this order: a pickle by its name or first byte, a .json, minbpe's text header, then any .model
FORMATS: tuple[TokenizerFormat, ...] = (characters.META_PICKLE, huggingface.FORMAT, minbpe.FORMAT,
                                        sentencepiece.FORMAT, characters.TRAINING_TEXT)
SUFFIXES = tuple(dict.fromkeys(suffix for f in FORMATS for suffix in f.suffixes))  # each name ending once
DESCRIBED = ", ".join(f.described for f in FORMATS[:-1]) + f" or {FORMATS[-1].described}"
