"""A SentencePiece `.model` (a protobuf), read and run by the `sentencepiece` library.

No BOS/EOS is added. A piece's "▁" is the space it stands for, and byte pieces (`<0x0A>`) show
as the byte's character, so chips read as text. A character the vocabulary lacks (the unknown
piece, when the model has no byte fallback) is named, from the pieces' surfaces.
"""
from __future__ import annotations

import re
from pathlib import Path

from lpos.vocab.base import Tokenizer, TokenizerError, TokenizerFormat, check_vocab_size, piece_labels, read_capped

BYTE_PIECE = re.compile(r"<0x([0-9A-Fa-f]{2})>")


class SentencePieceTokenizer(Tokenizer):
    kind = "sentencepiece"

    def __init__(self, proto: bytes, *, source: str):
        import sentencepiece

        self.processor = sentencepiece.SentencePieceProcessor()
        try:
            self.processor.LoadFromSerializedProto(proto)
        except Exception as e:
            raise TokenizerError(f"{source} could not be read as a SentencePiece model ({type(e).__name__})") from None
        self.proto, self.source = bytes(proto), source
        self.vocab_size = check_vocab_size(self.processor.get_piece_size(), source)
        self.name = f"SentencePiece {source} ({self.vocab_size:,})"

    def _encode(self, text: str) -> list[int]:
        return list(self.processor.encode(text))

    def _unknown(self, text: str) -> list[str]:
        unk = self.processor.unk_id()
        pieces = self.processor.encode(text, return_type="proto").pieces
        return [c for piece in pieces if piece.id == unk for c in piece.surface]

    def decode(self, ids: list[int]) -> str:
        return self.processor.decode(list(ids))

    def token_strings(self, ids: list[int]) -> list[str]:
        pieces = [self.processor.id_to_piece(i) for i in ids]
        return piece_labels([bytes([int(byte.group(1), 16)]) if (byte := BYTE_PIECE.fullmatch(piece))
                             else piece.replace("▁", " ").encode() for piece in pieces])

    def to_data(self) -> dict:
        return {"kind": self.kind, "proto": self.proto, "source": self.source}

    @classmethod
    def from_data(cls, data: dict) -> SentencePieceTokenizer:
        return cls(bytes(data["proto"]), source=str(data.get("source", "sentencepiece.model"))[:80])


def read_sentencepiece(path: Path) -> SentencePieceTokenizer:
    return SentencePieceTokenizer(read_capped(path, what="SentencePiece model"), source=path.name)


FORMAT = TokenizerFormat("a SentencePiece .model", (".model",), lambda head, suffix: suffix == ".model",
                         read_sentencepiece)  # after minbpe's, whose .model files are text
