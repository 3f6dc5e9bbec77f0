"""Fitting a long chat into the context, on a real model: exact, linear, cancellable."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from localchat.engine.backend import Model, init_backend
from localchat.engine.chat_format import ChatFormatter, FitCancelled
from localchat.engine.errors import ContextOverflowError
from localchat.engine.types import ChatMessage

N_CTX = 1024
RESERVE = 128


@pytest.fixture(scope="module")
def formatter(smollm2_path: Path) -> Iterator[ChatFormatter]:
    init_backend()
    model = Model(smollm2_path, 0)
    yield ChatFormatter(model)
    model.close()


def chat(n_messages: int) -> list[ChatMessage]:
    msgs = [ChatMessage("system", "You are a pirate.")]
    for i in range(n_messages // 2):
        msgs.append(ChatMessage("user", f"Question {i}: tell me about ship number {i}, please."))
        reply = f"Arr, ship {i} sails the seas far and wide, matey. " * (1 + i % 4)
        msgs.append(ChatMessage("assistant", reply))
    msgs.append(ChatMessage("user", "What is your name?"))
    return msgs


def one_at_a_time(f: ChatFormatter, msgs: list[ChatMessage], limit: int) -> tuple[int, list[int]]:
    """The rule the fit must keep: drop the oldest turn (a user+assistant pair) until the prompt fits."""
    system, rest, dropped = msgs[:1], msgs[1:], 0
    while True:
        tokens, _ = f.tokens_for(system + rest)
        if len(tokens) <= limit or len(rest) <= 1:
            return dropped, tokens
        cut = 2 if len(rest) > 2 and rest[0].role == "user" and rest[1].role == "assistant" else 1
        rest, dropped = rest[cut:], dropped + cut


class Counter:
    """Counts the calls to, and the characters through, the template renderer and the tokeniser."""

    def __init__(self, f: ChatFormatter, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls = 0
        self.chars = 0
        render, tokenize = f._formatter, f.model.tokenize

        def counted_render(**kwargs: Any) -> Any:
            self.calls += 1
            self.chars += sum(len(m["content"]) for m in kwargs["messages"])
            return render(**kwargs)

        def counted_tokenize(text: str, *args: Any, **kwargs: Any) -> list[int]:
            self.calls += 1
            self.chars += len(text)
            return tokenize(text, *args, **kwargs)

        monkeypatch.setattr(f, "_formatter", counted_render)
        monkeypatch.setattr(f.model, "tokenize", counted_tokenize)


@pytest.mark.parametrize("n", [51, 201])
def test_fit_drops_exactly_what_one_turn_at_a_time_would(formatter: ChatFormatter, n: int) -> None:
    msgs = chat(n)
    expected_dropped, expected_tokens = one_at_a_time(formatter, msgs, N_CTX - RESERVE)
    fitted = formatter.fit(msgs, N_CTX, RESERVE)
    assert fitted.dropped_messages == expected_dropped > 0
    assert fitted.tokens == expected_tokens


def test_fit_work_grows_linearly_with_the_chat(
    formatter: ChatFormatter, monkeypatch: pytest.MonkeyPatch
) -> None:
    work: dict[int, tuple[int, int, int]] = {}
    for n in (51, 101, 201, 401):
        msgs = chat(n)
        total_chars = sum(len(m.content) for m in msgs)
        counter = Counter(formatter, monkeypatch)
        fitted = formatter.fit(msgs, N_CTX, RESERVE)
        assert fitted.dropped_messages > 0
        work[n] = (counter.calls, counter.chars, total_chars)
        monkeypatch.undo()
    for n, (calls, chars, total) in work.items():
        # one tokenise per message plus a few whole-prompt renders, however long the chat
        assert calls <= n + 12, (n, calls)
        assert chars <= 12 * total, (n, chars, total)
    # the one-turn-at-a-time rule did one render per dropped turn: about n / 2 renders of the whole chat
    counter = Counter(formatter, monkeypatch)
    one_at_a_time(formatter, chat(401), N_CTX - RESERVE)
    assert counter.chars > 50 * work[401][2]


def test_fit_can_be_cancelled(formatter: ChatFormatter) -> None:
    checks = 0

    def cancel() -> bool:
        nonlocal checks
        checks += 1
        return checks > 10

    with pytest.raises(FitCancelled):
        formatter.fit(chat(201), N_CTX, RESERVE, should_cancel=cancel)


def test_a_message_too_long_alone_is_refused(formatter: ChatFormatter) -> None:
    msgs = [*chat(11)[:-1], ChatMessage("user", "apples and oranges " * 2000)]
    with pytest.raises(ContextOverflowError, match="context window holds 1024"):
        formatter.fit(msgs, N_CTX, RESERVE)


def test_engine_stops_a_reply_cancelled_while_its_prompt_is_fitted(smollm2_path: Path) -> None:
    from localchat.engine.engine import Engine
    from localchat.engine.types import EngineConfig, FinishReason, GenerationRequest, SpeculationConfig

    with Engine(EngineConfig(str(smollm2_path), n_ctx=N_CTX)) as eng:
        request = GenerationRequest(
            messages=tuple(chat(401)), max_tokens=16, speculation=SpeculationConfig(enabled=False)
        )
        result = eng.generate(request, should_cancel=lambda: True)
        assert result.finish_reason is FinishReason.CANCELLED
        assert result.text == "" and result.stats.generated_tokens == 0
        assert eng.generate(request).dropped_messages > 0  # the next reply is not affected


def test_a_template_that_loops_without_end_is_a_sentence_within_its_budget() -> None:
    import time

    from localchat.engine import chat_format
    from localchat.engine.errors import GenerationError
    from localchat.engine.types import ChatMessage

    class _Model:  # the part of backend.Model the formatter reads; the template is the point here
        chat_template = "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"

        def bos(self) -> int:
            return -1

        def eos(self) -> int:
            return -1

    formatter = chat_format.ChatFormatter(_Model())  # type: ignore[arg-type]
    t0 = time.monotonic()
    with pytest.raises(GenerationError, match="did not finish"):
        formatter.text_for([ChatMessage("user", "hi")])
    assert time.monotonic() - t0 < chat_format.RENDER_BUDGET_S + 3


class _TemplateOnly:
    """The part of backend.Model the formatter reads before rendering; the template is the point."""

    def __init__(self, template: str) -> None:
        self.chat_template = template

    def bos(self) -> int:
        return -1

    def eos(self) -> int:
        return -1


EACH_MESSAGE = "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}\n{% endfor %}"


@pytest.mark.parametrize(
    "template",
    [
        "{{ 'x' * 60000000 }}" + EACH_MESSAGE,
        "{% set pad = 'ab' * 5000000 %}{{ pad ~ pad ~ pad }}" + EACH_MESSAGE,
        EACH_MESSAGE + "{{ ' '|center(40000000) }}",
    ],
    ids=["multiply", "concatenate", "filter"],
)
def test_a_template_that_builds_a_huge_text_is_named_as_the_cause(template: str) -> None:
    """No loop, so the time limit never fired: the text went on to be tokenised (about 19 s) and the
    reply failed with a sentence that blamed the user's message. The rendered size is bounded too."""
    import time

    from localchat.engine import chat_format
    from localchat.engine.errors import GenerationError

    formatter = chat_format.ChatFormatter(_TemplateOnly(template))  # type: ignore[arg-type]
    t0 = time.monotonic()
    with pytest.raises(GenerationError) as caught:
        formatter.text_for([ChatMessage("user", "hi")])
    assert time.monotonic() - t0 < chat_format.RENDER_BUDGET_S + 3
    sentence = str(caught.value)
    assert "chat template" in sentence and "message" not in sentence.replace("chat template", "")
    assert "cannot be used for chat" in sentence


def test_a_long_chat_through_an_honest_template_is_not_refused() -> None:
    from localchat.engine import chat_format

    formatter = chat_format.ChatFormatter(_TemplateOnly(EACH_MESSAGE))  # type: ignore[arg-type]
    long_chat = [ChatMessage("user" if i % 2 == 0 else "assistant", "word " * 20_000) for i in range(40)]
    assert len(formatter.text_for(long_chat)) > 4_000_000
    short = formatter.text_for([ChatMessage("user", "")])
    assert short == "<|user|>\n"
