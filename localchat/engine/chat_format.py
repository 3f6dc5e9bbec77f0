"""Turn chat messages into prompt tokens with the GGUF's own chat template, fitting the context.

The template is rendered with llama-cpp-python's Jinja2 formatter (the one its
own chat API uses). A chat that does not fit loses its oldest turns, never the
system prompt and never the newest user message; a message that cannot fit
even alone is refused with a sentence that says how long it is. Fitting is
linear in the chat's length (each message is tokenised once; the whole prompt
is rendered a few times, not once per dropped turn) and can be cancelled.

With tools (engine/tooluse/render.py): a template that renders tools gets them and
the chat's calls and results in the shapes it expects; any other template (or a native
one that refuses the chat) gets the generic prompt, tools described in the system
message. A tool round (the assistant's calls and their results) is dropped as a
whole, never a result without its call. Every render keeps the time budget.
"""

from __future__ import annotations

import functools
import logging
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import FrameType
from typing import Any

from localchat.engine.backend import Model
from localchat.engine.errors import ContextOverflowError, GenerationError, InvalidRequestError
from localchat.engine.tooluse.formats import THINK, ToolSupport, detect_support
from localchat.engine.tooluse.render import (
    ToolPrompt,
    generic_messages,
    native_messages,
    tool_dicts,
    uses_tools,
)
from localchat.engine.types import ChatMessage

log = logging.getLogger("localchat.engine")

RENDER_BUDGET_S = 2.0
# The most text a template may make: its own words (a system preamble, tool instructions) up to
# RENDER_SLACK_CHARS, plus RENDER_TEXT_FACTOR times the chat's text (a template may show a message
# more than once). One string operation in C (``'x' * 10**8``) never meets the time limit's check.
RENDER_SLACK_CHARS = 256 * 1024
RENDER_TEXT_FACTOR = 4


class _RenderTimeout(Exception):
    pass


class _TemplateRefused(Exception):
    """The template raised (its own raise_exception, or a Jinja error) for these messages."""


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
    opens_thinking: bool = False  # the prompt ends inside an open thinking block (the reply starts there)


@dataclass(frozen=True)
class _Rendered:
    tokens: list[int]
    stop: tuple[str, ...]
    opens_thinking: bool


def model_tool_support(model: Model) -> ToolSupport:
    """What ``model`` does with tools and thinking, from its template and vocabulary."""

    def one_token(text: str) -> bool:
        return len(model.tokenize(text, add_special=False, parse_special=True)) == 1

    return detect_support(model.chat_template, one_token)


def marker_tokens(model: Model, support: ToolSupport) -> dict[str, int]:
    """The format's and thinking's markers that are one token of ``model``'s vocabulary, by text.
    The engine shows these tokens' text (a control token's is hidden by default) so the reply's
    reader sees ``<|python_tag|>`` or ``[TOOL_CALLS]``."""
    out = {}
    for text in support.markers:
        ids = model.tokenize(text, add_special=False, parse_special=True)
        if len(ids) == 1:
            out[text] = ids[0]
    return out


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

    @functools.cached_property
    def support(self) -> ToolSupport:
        """What the model does with tools and thinking (asked on first use: a plain chat never needs it)."""
        return model_tool_support(self.model)

    def _render(self, messages: Sequence[ChatMessage], tools: ToolPrompt | None = None) -> Any:
        """The prompt for ``messages`` (and the tools): the template's own tool rendering where it has
        one, else the generic prompt; GenerationError with a sentence when the template refuses."""
        with_tools = tools is not None or uses_tools(messages)
        if with_tools and self.support.native:
            try:
                described = tool_dicts(tools.tools) if tools else None
                return self._render_dicts(native_messages(messages), described)
            except _TemplateRefused as exc:
                log.warning("the chat template refused the chat with tools (%s); using the generic form", exc)
        dicts = generic_messages(messages, tools) if with_tools else _as_dicts(messages)
        try:
            return self._render_dicts(dicts, None)
        except _TemplateRefused as exc:
            raise GenerationError(str(exc)) from None

    def _render_dicts(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> Any:
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
        previous = sys.gettrace()
        sys.settrace(tracer)
        try:
            render: Any = self._formatter  # takes the OpenAI TypedDicts; these dicts are that shape
            result = render(messages=messages) if tools is None else render(messages=messages, tools=tools)
        except _RenderTimeout:
            raise GenerationError(
                f"The model's chat template did not finish within {RENDER_BUDGET_S:g} s (it may loop "
                "without end); this model file cannot be used for chat as it is."
            ) from None
        except Exception as exc:  # the template is code from the file: whatever it raises is its own
            raise _TemplateRefused(_template_failure(exc)) from exc
        finally:
            sys.settrace(previous)
        # Bounded here, before tokenising: a template that builds a huge text in one operation passed
        # the time limit, took ~19 s to tokenise, and the reply then failed with a sentence blaming
        # the user's text for the template's.
        made, given = len(str(result.prompt)), _text_chars(messages) + _text_chars(tools)
        if made > RENDER_SLACK_CHARS + RENDER_TEXT_FACTOR * given:
            raise GenerationError(
                f"The model's chat template made {made:,} characters of prompt out of {given:,} "
                "characters of chat (it builds text of its own without bound); this model file "
                "cannot be used for chat as it is."
            )
        return result

    def _tokens(self, messages: Sequence[ChatMessage], tools: ToolPrompt | None = None) -> _Rendered:
        result = self._render(messages, tools)
        stop = result.stop
        stops: tuple[str, ...] = (stop,) if isinstance(stop, str) else tuple(stop or ())
        add_special = not result.added_special
        tokens = self.model.tokenize(result.prompt, add_special=add_special and self.model.add_bos())
        opens = str(result.prompt).rstrip().endswith(THINK.open) and self.support.thinking is not None
        return _Rendered(tokens, stops, opens)

    def tokens_for(
        self, messages: Sequence[ChatMessage], tools: ToolPrompt | None = None
    ) -> tuple[list[int], tuple[str, ...]]:
        rendered = self._tokens(messages, tools)
        return rendered.tokens, rendered.stop

    def text_for(self, messages: Sequence[ChatMessage], tools: ToolPrompt | None = None) -> str:
        """The formatted prompt as text (for tools that feed it to another program)."""
        result = self._render(messages, tools)
        return str(result.prompt)

    def fit(
        self,
        messages: Sequence[ChatMessage],
        n_ctx: int,
        reserve: int,
        should_cancel: Callable[[], bool] | None = None,
        tools: ToolPrompt | None = None,
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
            raise InvalidRequestError("There is no message to answer.")
        cancel = should_cancel or _never
        system = [m for m in msgs[:1] if m.role == "system"]
        rest = msgs[len(system) :]
        limit = n_ctx - reserve
        whole = self._tokens(system + rest, tools)
        tokens = whole.tokens
        if len(tokens) <= limit:
            return FormattedPrompt(tokens, 0, whole.stop, whole.opens_thinking)
        starts = _turn_starts(rest)
        if len(starts) == 1:
            raise _overflow(len(tokens), n_ctx, reserve)
        # What dropping the first k messages saves: their own tokens plus the template's share of each.
        sizes = []
        for m in rest:
            if cancel():
                raise FitCancelled()
            sizes.append(len(self.model.tokenize(_message_text(m), add_special=False, parse_special=False)))
        framing = max(0, len(tokens) - sum(sizes)) // len(system + rest)
        saved = [0]
        for size in sizes:
            saved.append(saved[-1] + size + framing)

        measured: dict[int, _Rendered] = {0: whole}

        def render(j: int) -> int:
            if cancel():
                raise FitCancelled()
            if j not in measured:
                measured[j] = self._tokens(system + rest[starts[j] :], tools)
            return len(measured[j].tokens)

        def estimate(k: int) -> int:
            # anchored on the nearest start whose real length is known, so estimation errors stay local
            anchor = min(measured, key=lambda j: abs(j - k))
            return len(measured[anchor].tokens) + saved[starts[anchor]] - saved[starts[k]]

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
                raise _overflow(len(measured[last].tokens), n_ctx, reserve)
            found = last
        # Whatever the estimates missed: the smallest fitting start lies in (lo, found].
        while found - lo > 1:
            mid = (lo + found) // 2
            if render(mid) <= limit:
                found = mid
            else:
                lo = mid
        kept = measured[found]
        return FormattedPrompt(kept.tokens, starts[found], kept.stop, kept.opens_thinking)


class FitCancelled(Exception):
    """The reply was cancelled while its prompt was being fitted into the context."""


def _never() -> bool:
    return False


def _turn_starts(rest: Sequence[ChatMessage]) -> list[int]:
    """Where the kept part of the chat may begin: the oldest turn goes as a user+assistant pair, and
    tool results go with the call before them (the kept part never starts with a result). The newest
    message is always kept, and so are the newest results with the call they answer."""
    end = len(rest) - 1
    while end > 0 and rest[end].role == "tool":
        end -= 1
    starts = [0]
    i = 0
    while i < end:
        pair = end - i > 1 and rest[i].role == "user" and rest[i + 1].role == "assistant"
        i += 2 if pair else 1
        while i < end and rest[i].role == "tool":
            i += 1
        starts.append(i)
    return starts


def _message_text(m: ChatMessage) -> str:
    """The text a message adds to the prompt, for the size estimate: its content and its calls."""
    return m.content + "".join(c.name + c.arguments for c in m.tool_calls)


def _overflow(needed: int, n_ctx: int, reserve: int) -> ContextOverflowError:
    return ContextOverflowError(
        f"This message needs {needed} tokens but the context window holds {n_ctx}, "
        f"with {reserve} kept free for the reply. Shorten the message or the system prompt, "
        "or raise the context length in Settings.",
        needed=needed, n_ctx=n_ctx, reserve=reserve,
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
