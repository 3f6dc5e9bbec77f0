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
    """The prompt cannot fit in the context window even after dropping old messages.

    ``needed``, ``n_ctx`` and ``reserve`` are the figures (tokens), so that the app and the API can
    word it for their readers without reading this sentence back."""

    def __init__(self, message: str, *, needed: int, n_ctx: int, reserve: int) -> None:
        super().__init__(message)
        self.needed = needed
        self.n_ctx = n_ctx
        self.reserve = reserve


class InvalidRequestError(EngineError):
    """The request asks for something the engine cannot do (nothing to answer, a grammar that does not
    compile, a tool the request does not list...): the caller's to fix, not the engine's fault."""


class GenerationError(EngineError):
    """llama.cpp failed while decoding."""


class ToolRequestError(InvalidRequestError):
    """A request's tools or tool_choice cannot be used; the message says which and why."""


class ToolSchemaError(ToolRequestError):
    """A tool's parameters are not a JSON Schema object, or two tools share a name."""


class ToolChoiceError(ToolRequestError):
    """tool_choice asks for a call the request's tools cannot give."""


class GrammarError(InvalidRequestError):
    """An output constraint (JSON schema, grammar, regex) cannot be used: invalid, unsatisfiable, or
    too slow to compile. The message is one sentence naming the problem (the HTTP API answers 400)."""
