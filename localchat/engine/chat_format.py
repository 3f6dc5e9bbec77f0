"""Turn chat messages into prompt tokens with the GGUF's own chat template, fitting the context.

The template is rendered with llama-cpp-python's Jinja2 formatter (the one its
own chat API uses). A chat that does not fit loses its oldest turns, never the
system prompt and never the newest user message; a message that cannot fit
even alone is refused with a sentence that says how long it is.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from localchat.engine.backend import Model
from localchat.engine.errors import ContextOverflowError
from localchat.engine.types import ChatMessage

# Used when a GGUF carries no template: ChatML, which most instruct models understand.
FALLBACK_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


@dataclass(frozen=True)
class FormattedPrompt:
    tokens: list[int]
    dropped_messages: int
    stop: tuple[str, ...]


class ChatFormatter:
    def __init__(self, model: Model) -> None:
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter

        template = model.chat_template or FALLBACK_TEMPLATE
        self.model = model
        self.has_template = model.chat_template is not None
        bos = model.bos()
        eos = model.eos()
        self._formatter = Jinja2ChatFormatter(
            template=template,
            eos_token=model.piece(eos, special=True).decode("utf-8", "replace") if eos >= 0 else "",
            bos_token=model.piece(bos, special=True).decode("utf-8", "replace") if bos >= 0 else "",
        )

    def tokens_for(self, messages: Sequence[ChatMessage]) -> tuple[list[int], tuple[str, ...]]:
        result = self._formatter(messages=_as_dicts(messages))
        stop = result.stop
        stops: tuple[str, ...] = (stop,) if isinstance(stop, str) else tuple(stop or ())
        add_special = not result.added_special
        tokens = self.model.tokenize(result.prompt, add_special=add_special and self.model.add_bos())
        return tokens, stops

    def text_for(self, messages: Sequence[ChatMessage]) -> str:
        """The formatted prompt as text (for tools that feed it to another program)."""
        result = self._formatter(messages=_as_dicts(messages))
        return str(result.prompt)

    def fit(self, messages: Sequence[ChatMessage], n_ctx: int, reserve: int) -> FormattedPrompt:
        """Format ``messages``, dropping the oldest turns until the prompt leaves ``reserve`` tokens free."""
        msgs = list(messages)
        if not msgs:
            raise ContextOverflowError("There is no message to answer.")
        system = [m for m in msgs[:1] if m.role == "system"]
        rest = msgs[len(system) :]
        dropped = 0
        limit = n_ctx - reserve
        while True:
            tokens, stops = self.tokens_for(system + rest)
            if len(tokens) <= limit:
                return FormattedPrompt(tokens, dropped, stops)
            if len(rest) <= 1:
                break
            # Drop the oldest turn: a user message and the assistant reply after it.
            cut = 2 if len(rest) > 2 and rest[0].role == "user" and rest[1].role == "assistant" else 1
            rest = rest[cut:]
            dropped += cut
        raise ContextOverflowError(
            f"This message needs {len(tokens)} tokens but the context window holds {n_ctx}, "
            f"with {reserve} kept free for the reply. Shorten the message or the system prompt, "
            "or raise the context length in Settings."
        )


def _as_dicts(messages: Sequence[ChatMessage]) -> Any:
    """llama-cpp-python's formatter takes OpenAI-style message dicts (TypedDicts per role)."""
    return [{"role": m.role, "content": m.content} for m in messages]
