"""Tokenizers other than GPT-2's, one module per file format; `lpos.tokenizer.load_tokenizer`
reads any of them and is the one entry point.

Modules: base (the `Tokenizer` interface, `TokenizerError`, size caps), characters (a character
vocabulary: nanoGPT's meta.pkl through a safe unpickler, or the training text), minbpe (Karpathy's
`.model` text file), huggingface (`tokenizer.json`, read by the `tokenizers` library),
sentencepiece (a SentencePiece `.model`, read by the `sentencepiece` library).
"""
