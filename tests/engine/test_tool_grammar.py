"""The tool-call grammars, checked by llguidance itself with Qwen2.5-Coder's real vocabulary: they compile,
accept what the model writes in its own format, and refuse other tools, other arguments and plain text."""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import llguidance
import pytest

from localchat.engine.backend import Model, init_backend
from localchat.engine.chat_format import marker_tokens, model_tool_support
from localchat.engine.grammar import GrammarCompiler
from localchat.engine.tooluse.formats import GENERIC, GRANITE, HERMES, LLAMA3, MISTRAL, THINK, ToolFormat
from localchat.engine.tooluse.grammar import ToolGrammar, Trigger, tool_grammar
from localchat.engine.types import ConstraintKind, OutputConstraint, Tool, ToolChoice, ToolChoiceMode

WEATHER = Tool(
    "get_weather",
    "Weather now",
    json.dumps({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}),
)
# "format" values llguidance does not know are ignored (the grammar sets "lenient"), not an error
SEARCH = Tool(
    "search", "", json.dumps({"type": "object", "properties": {"q": {"type": "string", "format": "query"}}})
)
TOOLS = (WEATHER, SEARCH)
AUTO, REQUIRED = ToolChoice(), ToolChoice(ToolChoiceMode.REQUIRED)
PARIS = '{"name": "get_weather", "arguments": {"city": "Paris"}}'
QWEN_CALL = f"<tool_call>\n{PARIS}\n</tool_call>"


class Vocab:
    def __init__(self, model: Model) -> None:
        from llguidance.llamacpp import lltokenizer_from_vocab

        self.model = model
        with warnings.catch_warnings():  # it reads each token's attributes through a deprecated name
            warnings.simplefilter("ignore", DeprecationWarning)
            self.tokenizer = lltokenizer_from_vocab(model.vocab)

    def accepts(self, grammar: ToolGrammar, text: str | list[int]) -> bool:
        compiled = llguidance.LLMatcher.grammar_from_lark(grammar.lark)
        error = llguidance.LLMatcher.validate_grammar(compiled, self.tokenizer)
        assert not error, f"{error}\n{grammar.lark}"
        matcher = llguidance.LLMatcher(self.tokenizer, compiled)
        tokens = (
            text
            if isinstance(text, list)
            else self.model.tokenize(text, add_special=False, parse_special=True)
        )
        return bool(matcher.try_consume_tokens(tokens) == len(tokens) and matcher.is_accepting())


@pytest.fixture(scope="module")
def qwen(qwen_target_path: Path) -> Iterator[Vocab]:
    init_backend()
    model = Model(qwen_target_path, 0, vocab_only=True)
    yield Vocab(model)
    model.close()


@pytest.fixture(scope="module")
def special(qwen: Vocab) -> dict[str, int]:
    markers = marker_tokens(qwen.model, model_tool_support(qwen.model))
    return {t: i for t, i in markers.items() if qwen.model.is_special(i)}


def test_qwens_call_markers_are_special_tokens_for_llguidance(special: dict[str, int]) -> None:
    assert special == {"<tool_call>": 151657, "</tool_call>": 151658}


def test_lazy_grammar_starts_at_the_trigger(qwen: Vocab, special: dict[str, int]) -> None:
    g = tool_grammar(HERMES, TOOLS, AUTO, True, special)
    assert g is not None and g.lazy and g.triggers == (Trigger("<tool_call>", 151657),)
    assert g.lark.splitlines()[2:4] == ["start: calls", "calls: call (WS? call)*"]
    assert "call: <[151657]> WS? body WS? <[151658]>" in g.lark
    assert qwen.accepts(g, QWEN_CALL)
    assert qwen.accepts(g, QWEN_CALL + "\n" + QWEN_CALL.replace("Paris", "Oslo"))
    assert qwen.accepts(g, '<tool_call>\n{"name": "search", "arguments": {"q": "x"}}\n</tool_call>')
    assert not qwen.accepts(g, QWEN_CALL.replace('"city"', '"town"'))  # the tool's schema holds
    assert not qwen.accepts(g, QWEN_CALL.replace("get_weather", "get_time"))  # only the listed tools
    assert not qwen.accepts(g, QWEN_CALL.replace("<tool_call>", "<tool_call"))  # the token, not text


def test_whole_grammar_when_a_call_is_required(qwen: Vocab, special: dict[str, int]) -> None:
    g = tool_grammar(HERMES, TOOLS, REQUIRED, False, special)
    assert g is not None and not g.lazy and g.triggers == ()
    assert qwen.accepts(g, QWEN_CALL)
    assert not qwen.accepts(g, QWEN_CALL + "\n" + QWEN_CALL)  # one call without parallel calls
    assert not qwen.accepts(g, "The weather in Paris is nice.")
    one = tool_grammar(HERMES, TOOLS, ToolChoice(ToolChoiceMode.FUNCTION, "search"), True, special)
    assert one is not None and not qwen.accepts(one, QWEN_CALL)
    assert qwen.accepts(one, '<tool_call>\n{"name": "search", "arguments": {}}\n</tool_call>')


def test_no_grammar_when_no_call_is_allowed(special: dict[str, int]) -> None:
    assert tool_grammar(HERMES, TOOLS, ToolChoice(ToolChoiceMode.NONE), True, special) is None
    assert tool_grammar(HERMES, (), AUTO, True, special) is None


def test_whole_grammar_lets_a_thinking_model_think_first(qwen: Vocab, special: dict[str, int]) -> None:
    # as text (a vocabulary without think tokens) ...
    g = tool_grammar(HERMES, TOOLS, REQUIRED, True, special, THINK)
    assert g is not None and qwen.accepts(g, f"<think>\nParis, so get_weather.\n</think>\n\n{QWEN_CALL}")
    assert qwen.accepts(g, QWEN_CALL)
    opened = tool_grammar(HERMES, TOOLS, REQUIRED, True, special, THINK, opens_thinking=True)
    assert opened is not None and qwen.accepts(opened, f"Paris, so get_weather.\n</think>\n\n{QWEN_CALL}")
    # ... and as special tokens (two of Qwen's own special tokens stand in for Qwen3's think tokens)
    box_start, box_end = (qwen.model.tokenize(t, False, True)[0] for t in ("<|box_start|>", "<|box_end|>"))
    with_think = {**special, "<think>": box_start, "</think>": box_end}
    g = tool_grammar(HERMES, TOOLS, REQUIRED, True, with_think, THINK)
    assert g is not None and f"think: <[{box_start}]> THINK_TEXT? <[{box_end}]> WS?" in g.lark
    tokens = [
        box_start,
        *qwen.model.tokenize("\nhmm\n", False),
        box_end,
        *qwen.model.tokenize(f"\n\n{QWEN_CALL}", False, True),
    ]
    assert qwen.accepts(g, tokens)
    lazy = tool_grammar(HERMES, TOOLS, AUTO, True, with_think, THINK, opens_thinking=True)
    assert lazy is not None and lazy.thinking == THINK and lazy.opens_thinking  # for the trigger's watcher


@pytest.mark.parametrize(
    ("fmt", "text"),
    [
        (LLAMA3, '{"name": "get_weather", "parameters": {"city": "Paris"}}'),
        (LLAMA3, '<|python_tag|>{"name": "search", "parameters": {"q": "x"}}'),
        (
            MISTRAL,
            '[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris"}}, '
            '{"name": "search", "arguments": {}}]',
        ),
        (GRANITE, '<|tool_call|>[{"name": "get_weather", "arguments": {"city": "Paris"}}]'),
        (GENERIC, QWEN_CALL),
    ],
)
def test_other_formats_grammars(qwen: Vocab, fmt: ToolFormat, text: str) -> None:
    # Qwen's vocabulary has none of these markers as tokens except <tool_call>: they are quoted text here.
    special = {"<tool_call>": 151657, "</tool_call>": 151658} if fmt is GENERIC else {}
    g = tool_grammar(fmt, TOOLS, REQUIRED, True, special)
    assert g is not None and qwen.accepts(g, text)
    assert not qwen.accepts(g, text.replace('"get_weather"', '"get_time"').replace('"search"', '"find"'))
    lazy = tool_grammar(fmt, TOOLS, AUTO, True, special)
    assert lazy is not None and lazy.triggers[0].text == fmt.openers[0]
    if fmt is LLAMA3:
        assert Trigger("{", None, at_start=True) in lazy.triggers


def reply_of(g: ToolGrammar | None) -> ToolGrammar:
    """``g`` with its whole-reply grammar as the grammar ``Vocab.accepts`` checks."""
    assert g is not None and g.reply is not None
    return replace(g, lark=g.reply)


def test_the_lazy_reply_is_free_text_until_the_trigger_token_then_the_calls(
    qwen: Vocab, special: dict[str, int]
) -> None:
    g = reply_of(tool_grammar(HERMES, TOOLS, AUTO, True, special))
    assert qwen.accepts(g, "Paris is the capital of France.")
    assert qwen.accepts(g, "I'll look it up.\n" + QWEN_CALL)
    assert qwen.accepts(g, QWEN_CALL + "\n" + QWEN_CALL)
    assert not qwen.accepts(g, "I'll look it up.\n" + QWEN_CALL.replace('"city"', '"town"'))
    assert not qwen.accepts(g, QWEN_CALL + " and some text after")  # after the calls, only the end
    # the trigger's plain text is free text: only the special token starts a call
    tokens = [*qwen.model.tokenize("Use <tool", False), *qwen.model.tokenize("_call> tags.", False)]
    assert qwen.accepts(g, tokens)
    whole = tool_grammar(HERMES, TOOLS, REQUIRED, False, special)
    assert whole is not None and whole.reply == whole.lark


def test_the_lazy_reply_lets_a_thinking_model_think_and_the_trigger_there_starts_nothing(
    qwen: Vocab, special: dict[str, int]
) -> None:
    g = reply_of(tool_grammar(HERMES, TOOLS, AUTO, True, special, THINK))
    think = "<think>\nA call could be <tool_call> here, but not in the thinking.\n</think>\n\n"
    # the trigger token inside the thinking is refused; the call after the thinking is constrained
    assert not qwen.accepts(g, think)
    plain = think.replace("<tool_call>", "a tool")
    assert qwen.accepts(g, plain + "It is sunny.") and qwen.accepts(g, plain + QWEN_CALL)
    assert not qwen.accepts(g, plain + QWEN_CALL.replace("get_weather", "get_time"))
    opened = reply_of(tool_grammar(HERMES, TOOLS, AUTO, True, special, THINK, opens_thinking=True))
    assert qwen.accepts(opened, "So get_weather.\n</think>\n\n" + QWEN_CALL)
    assert qwen.accepts(opened, "Nothing to call.\n</think>\n\nHello!")


@pytest.fixture(scope="module")
def smollm2(smollm2_path: Path) -> Iterator[GrammarCompiler]:
    init_backend()
    model = Model(smollm2_path, 0, vocab_only=True)
    yield GrammarCompiler(model)
    model.close()


def lazy_accepts(compiler: GrammarCompiler, g: ToolGrammar, pieces: list[str]) -> bool:
    """Whether the lazy constraint the engine makes of ``g.after_trigger`` accepts the text, tokenized
    piece by piece (so that a piece boundary may fall inside the trigger)."""
    assert g.after_trigger is not None and g.reply is None
    lazy = OutputConstraint(ConstraintKind.LARK, g.after_trigger, trigger=g.triggers[0].text)
    text = compiler.grammar_text(lazy)
    matcher = llguidance.LLMatcher(compiler.tokenizer, text)
    assert not matcher.is_error(), matcher.get_error()
    tokens = [t for piece in pieces for t in compiler.model.tokenize(piece, add_special=False)]
    return bool(matcher.try_consume_tokens(tokens) == len(tokens) and matcher.is_accepting())


def test_a_text_trigger_forces_the_call_from_its_first_occurrence(smollm2: GrammarCompiler) -> None:
    """tool_choice auto on a model whose vocabulary lacks ``<tool_call>`` (the generic format): the calls
    were read from the text, unforced, so a small model's call could name no listed tool or break its
    schema (issue 25). Now free text runs until the trigger's text, and the call is forced from there."""
    g = tool_grammar(GENERIC, TOOLS, AUTO, True, {})
    assert g is not None and g.lazy and g.reply is None and g.triggers == (Trigger("<tool_call>"),)
    call = f"<tool_call>\n{PARIS}\n</tool_call>"
    assert lazy_accepts(smollm2, g, ["Paris is the capital of France."])
    assert lazy_accepts(smollm2, g, ["I'll look it up.\n", call])
    split = ["Sure.<tool", "_call>", call.removeprefix("<tool_call>")]  # a token boundary inside the trigger
    assert lazy_accepts(smollm2, g, split)
    assert lazy_accepts(smollm2, g, [call, "\n", call.replace("Paris", "Oslo")])  # parallel calls
    assert not lazy_accepts(smollm2, g, [call.replace("get_weather", "get_time")])  # only the listed tools
    assert not lazy_accepts(smollm2, g, [call.replace('"city"', '"town"')])  # the tool's schema holds
    assert not lazy_accepts(smollm2, g, ["<tool_call> is a tag."])  # after the trigger, a call
    one = tool_grammar(GENERIC, TOOLS, AUTO, False, {})
    assert one is not None and not lazy_accepts(smollm2, one, [call, "\n", call])
    # not enforced: a thinking model's text trigger, Llama 3's bare JSON
    assert tool_grammar(GENERIC, TOOLS, AUTO, True, {}, THINK).after_trigger is None  # type: ignore[union-attr]
    assert tool_grammar(LLAMA3, TOOLS, AUTO, True, {}).after_trigger is None  # type: ignore[union-attr]
