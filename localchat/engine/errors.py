"""Typed engine errors. Each message is one sentence a user can read."""

from __future__ import annotations


class EngineError(Exception):
    """Base class for engine failures."""


class ModelLoadError(EngineError):
    """A GGUF file could not be loaded (missing, empty, truncated, not a GGUF, unsupported)."""


class IncompatibleDraftError(EngineError):
    """A drafter cannot draft for the target; ``rule`` names the first check that failed."""

    def __init__(self, rule: str, target_value: object, draft_value: object, detail: str = "") -> None:
        self.rule = rule
        self.target_value = target_value
        self.draft_value = draft_value
        msg = (
            f"The draft model is not compatible with the target: {rule} differs "
            f"(target {target_value!r}, drafter {draft_value!r})"
        )
        if detail:
            msg += f"; {detail}"
        super().__init__(msg + ".")


class ContextOverflowError(EngineError):
    """The prompt cannot fit in the context window even after dropping old messages."""


class GenerationError(EngineError):
    """llama.cpp failed while decoding."""


class GrammarError(EngineError):
    """An output constraint (JSON schema, grammar, regex) cannot be used: invalid, unsatisfiable, or
    too slow to compile. The message is one sentence naming the problem (the HTTP API answers 400)."""
