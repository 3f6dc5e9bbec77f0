"""Turn chat messages into prompt tokens with the GGUF's own chat template, fitting the context.

The template is rendered with llama-cpp-python's Jinja2 formatter (the one its
own chat API uses). A chat that does not fit loses its oldest turns, never the
system prompt and never the newest user message; a message that cannot fit
even alone is refused with a sentence that says how long it is. Fitting is
linear in the chat's length (each message is tokenised once; the whole prompt
is rendered a few times, not once per dropped turn) and can be cancelled.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import FrameType
from typing import Any

from localchat.engine.backend import Model
from localchat.engine.errors import ContextOverflowError, GenerationError
from localchat.engine.types import ChatMessage

RENDER_BUDGET_S = 2.0
# The most text a template may make: its own words (a system preamble, tool instructions) up to
# RENDER_SLACK_CHARS, plus RENDER_TEXT_FACTOR times the chat's text (a template may show a message
# more than once). One string operation in C (``'x' * 10**8``) never meets the time limit's check.
RENDER_SLACK_CHARS = 256 * 1024
RENDER_TEXT_FACTOR = 4


class _RenderTimeout(Exception):
    pass


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
        # A template that does not parse is said when a chat is rendered, not at load: raw prompts
        # (``--raw``, /v1/completions) never use it, and the model still serves those.
        self._unreadable = ""
        try:
            self._formatter = Jinja2ChatFormatter(
                template=template,
                eos_token=model.piece(eos, special=True).decode("utf-8", "replace") if eos >= 0 else "",
                bos_token=model.piece(bos, special=True).decode("utf-8", "replace") if bos >= 0 else "",
            )
        except Exception as exc:  # jinja2's TemplateSyntaxError, or anything else its compiler raises
            self._unreadable = (
                f"The model's chat template cannot be read ({_template_problem(exc)}); this model file "
                "cannot be used for chat as it is (raw prompts still work)."
            )

    def _render(self, messages: Sequence[ChatMessage]) -> Any:
        """The template rendered, within RENDER_BUDGET_S: a GGUF's template is code from the file, and
        one with a runaway loop (nested ``range`` loops pass Jinja's sandbox) must not hang the engine."""
        deadline = time.monotonic() + RENDER_BUDGET_S
        count = 0

        def tracer(frame: FrameType, event: str, arg: object) -> Any:
            nonlocal count
            count += 1
            if count % 4096 == 0 and time.monotonic() > deadline:
                raise _RenderTimeout
            return tracer

        if self._unreadable:
            raise GenerationError(self._unreadable)
        chat = _as_dicts(messages)
        previous = sys.gettrace()
        sys.settrace(tracer)
        try:
            result = self._formatter(messages=chat)
        except _RenderTimeout:
            raise GenerationError(
                f"The model's chat template did not finish within {RENDER_BUDGET_S:g} s (it may loop "
                "without end); this model file cannot be used for chat as it is."
            ) from None
        except Exception as exc:  # the template is code from the file: whatever it raises is its own
            raise GenerationError(_template_failure(exc)) from None
        finally:
            sys.settrace(previous)
        # Bounded here, before tokenising: a template that builds a huge text in one operation passed
        # the time limit, took ~19 s to tokenise, and the reply then failed with a sentence blaming
        # the user's text for the template's.
        made, given = len(str(result.prompt)), _text_chars(chat)
        if made > RENDER_SLACK_CHARS + RENDER_TEXT_FACTOR * given:
            raise GenerationError(
                f"The model's chat template made {made:,} characters of prompt out of {given:,} "
                "characters of chat (it builds text of its own without bound); this model file "
                "cannot be used for chat as it is."
            )
        return result

    def tokens_for(self, messages: Sequence[ChatMessage]) -> tuple[list[int], tuple[str, ...]]:
        result = self._render(messages)
        stop = result.stop
        stops: tuple[str, ...] = (stop,) if isinstance(stop, str) else tuple(stop or ())
        add_special = not result.added_special
        tokens = self.model.tokenize(result.prompt, add_special=add_special and self.model.add_bos())
        return tokens, stops

    def text_for(self, messages: Sequence[ChatMessage]) -> str:
        """The formatted prompt as text (for tools that feed it to another program)."""
        result = self._render(messages)
        return str(result.prompt)

    def fit(
        self,
        messages: Sequence[ChatMessage],
        n_ctx: int,
        reserve: int,
        should_cancel: Callable[[], bool] | None = None,
    ) -> FormattedPrompt:
        """Format ``messages``, dropping the oldest turns until the prompt leaves ``reserve`` tokens free.

        Linear in the chat's length: each message's text is tokenised once, the
        first message to keep is estimated from those sizes (anchored on the real
        length of the whole prompt), and a handful of full renders confirm it and
        find the exact first turn that fits (the fewest dropped, as if one turn
        were dropped at a time). ``should_cancel`` is checked between steps; a
        true answer raises ``FitCancelled``.
        """
        msgs = list(messages)
        if not msgs:
            raise ContextOverflowError("There is no message to answer.")
        cancel = should_cancel or _never
        system = [m for m in msgs[:1] if m.role == "system"]
        rest = msgs[len(system) :]
        limit = n_ctx - reserve
        tokens, stops = self.tokens_for(system + rest)
        if len(tokens) <= limit:
            return FormattedPrompt(tokens, 0, stops)
        starts = _turn_starts(rest)
        if len(starts) == 1:
            raise _overflow(len(tokens), n_ctx, reserve)
        # What dropping the first k messages saves: their own tokens plus the template's share of each.
        sizes = []
        for m in rest:
            if cancel():
                raise FitCancelled()
            sizes.append(len(self.model.tokenize(m.content, add_special=False, parse_special=False)))
        framing = max(0, len(tokens) - sum(sizes)) // len(system + rest)
        saved = [0]
        for size in sizes:
            saved.append(saved[-1] + size + framing)

        measured: dict[int, tuple[list[int], tuple[str, ...]]] = {0: (tokens, stops)}

        def render(j: int) -> int:
            if cancel():
                raise FitCancelled()
            if j not in measured:
                measured[j] = self.tokens_for(system + rest[starts[j] :])
            return len(measured[j][0])

        def estimate(k: int) -> int:
            # anchored on the nearest start whose real length is known, so estimation errors stay local
            anchor = min(measured, key=lambda j: abs(j - k))
            return len(measured[anchor][0]) + saved[starts[anchor]] - saved[starts[k]]

        last = len(starts) - 1
        lo, found = 0, None  # starts[lo] is known not to fit; starts[found] is known to fit
        for _ in range(4):
            upper = found if found is not None else last + 1
            if upper - lo <= 1:
                break
            j = next((k for k in range(lo + 1, upper) if estimate(k) <= limit), upper - 1)
            if render(j) <= limit:
                found = j
            else:
                lo = j
        if found is None:
            if render(last) > limit:
                raise _overflow(len(measured[last][0]), n_ctx, reserve)
            found = last
        # Whatever the estimates missed: the smallest fitting start lies in (lo, found].
        while found - lo > 1:
            mid = (lo + found) // 2
            if render(mid) <= limit:
                found = mid
            else:
                lo = mid
        tokens, stops = measured[found]
        return FormattedPrompt(tokens, starts[found], stops)


class FitCancelled(Exception):
    """The reply was cancelled while its prompt was being fitted into the context."""


def _never() -> bool:
    return False


def _turn_starts(rest: Sequence[ChatMessage]) -> list[int]:
    """Where the kept part of the chat may begin: the oldest turn goes as a user+assistant pair."""
    starts = [0]
    i = 0
    while len(rest) - i > 1:
        pair = len(rest) - i > 2 and rest[i].role == "user" and rest[i + 1].role == "assistant"
        i += 2 if pair else 1
        starts.append(i)
    return starts


def _overflow(needed: int, n_ctx: int, reserve: int) -> ContextOverflowError:
    return ContextOverflowError(
        f"This message needs {needed} tokens but the context window holds {n_ctx}, "
        f"with {reserve} kept free for the reply. Shorten the message or the system prompt, "
        "or raise the context length in Settings."
    )


def _template_problem(exc: BaseException) -> str:
    """What jinja2 (or the template) said, with the template's line when jinja2 knows it."""
    line = getattr(exc, "lineno", None)
    text = str(getattr(exc, "message", None) or exc).rstrip(".") or type(exc).__name__
    return f"line {line}: {text}" if isinstance(line, int) else text


def _template_failure(exc: BaseException) -> str:
    """A sentence for an exception raised while the template rendered a chat."""
    from jinja2.exceptions import SecurityError

    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    if tb is not None and tb.tb_frame.f_code.co_name == "raise_exception":
        # The template's own refusal ("Conversation roles must alternate ..."): its words are for the user.
        return f"The model's chat template refused this chat: {str(exc).rstrip('.')}."
    if isinstance(exc, SecurityError):
        return (
            f"The model's chat template tried to reach outside its sandbox ({_template_problem(exc)}); "
            "this model file cannot be used for chat as it is."
        )
    return (
        f"The model's chat template failed ({type(exc).__name__}: {_template_problem(exc)}); this model "
        "file cannot be used for chat as it is."
    )


def _text_chars(value: object) -> int:
    """The characters of every text in what is handed to the template (messages, and their parts)."""
    if isinstance(value, str):
        return len(value)
    if isinstance(value, dict):
        return sum(_text_chars(v) for v in value.values())
    if isinstance(value, list | tuple):
        return sum(_text_chars(v) for v in value)
    return 0


def _as_dicts(messages: Sequence[ChatMessage]) -> Any:
    """llama-cpp-python's formatter takes OpenAI-style message dicts (TypedDicts per role)."""
    return [{"role": m.role, "content": m.content} for m in messages]
