"""Can this drafter draft for that target? llama.cpp's vocabulary rules, first failure reported.

Rules (in order): same vocabulary type; same BOS and EOS ids; same add-BOS and
add-EOS flags; vocabulary sizes within 128 of each other; identical token
text for every id from 5 up to the smaller vocabulary size. Token ids below 5
are skipped, as llama.cpp does, because control tokens there often differ
harmlessly.
"""

from __future__ import annotations

from typing import Protocol

from localchat.engine.errors import IncompatibleDraftError

MAX_VOCAB_SIZE_DIFF = 128
FIRST_CHECKED_TOKEN = 5

VOCAB_TYPES = {0: "none", 1: "SPM", 2: "BPE", 3: "WPM", 4: "UGM", 5: "RWKV", 6: "PLaMo-2"}


class Vocabulary(Protocol):
    n_vocab: int

    def vocab_type(self) -> int: ...
    def bos(self) -> int: ...
    def eos(self) -> int: ...
    def add_bos(self) -> bool: ...
    def add_eos(self) -> bool: ...
    def token_text(self, token: int) -> bytes: ...


def check_compatible(target: Vocabulary, draft: Vocabulary) -> None:
    """Raise IncompatibleDraftError naming the first rule that fails."""
    tt, dt = target.vocab_type(), draft.vocab_type()
    if tt != dt:
        raise IncompatibleDraftError("vocabulary type", VOCAB_TYPES.get(tt, tt), VOCAB_TYPES.get(dt, dt))
    if target.bos() != draft.bos():
        raise IncompatibleDraftError("BOS token id", target.bos(), draft.bos())
    if target.eos() != draft.eos():
        raise IncompatibleDraftError("EOS token id", target.eos(), draft.eos())
    if target.add_bos() != draft.add_bos():
        raise IncompatibleDraftError("add-BOS flag", target.add_bos(), draft.add_bos())
    if target.add_eos() != draft.add_eos():
        raise IncompatibleDraftError("add-EOS flag", target.add_eos(), draft.add_eos())
    diff = abs(target.n_vocab - draft.n_vocab)
    if diff > MAX_VOCAB_SIZE_DIFF:
        raise IncompatibleDraftError(
            "vocabulary size",
            target.n_vocab,
            draft.n_vocab,
            f"they may differ by at most {MAX_VOCAB_SIZE_DIFF} tokens",
        )
    for tok in range(FIRST_CHECKED_TOKEN, min(target.n_vocab, draft.n_vocab)):
        a, b = target.token_text(tok), draft.token_text(tok)
        if a != b:
            raise IncompatibleDraftError(
                f"text of token {tok}",
                a.decode("utf-8", errors="replace"),
                b.decode("utf-8", errors="replace"),
            )
