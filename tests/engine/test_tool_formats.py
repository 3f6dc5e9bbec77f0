"""Which format a template speaks, whether a model thinks, and a request's tools checked in words."""

from __future__ import annotations

import json

import pytest

from localchat.engine.errors import ToolChoiceError, ToolRequestError, ToolSchemaError
from localchat.engine.tooluse.formats import GENERIC, GRANITE, HERMES, LLAMA3, MISTRAL, THINK, detect_support
from localchat.engine.tooluse.plan import plan_reply
from localchat.engine.tooluse.validate import check_tools
from localchat.engine.types import (
    ChatMessage,
    GenerationRequest,
    Tool,
    ToolChoice,
    ToolChoiceMode,
)

# Short stand-ins with each family's telling parts (the real Qwen template is tested in test_tool_render).
QWEN = "{% if tools %}<tools>{% for t in tools %}{{ t | tojson }}{% endfor %}</tools><tool_call>{% endif %}"
QWEN3 = QWEN + "{% if message.reasoning_content %}<think>{{ message.reasoning_content }}</think>{% endif %}"
LLAMA31 = "<|start_header_id|>{% if tools %}{{ tools }}{% endif %}ipython<|eot_id|>"
MISTRAL31 = "{% if tools %}[AVAILABLE_TOOLS]{{ tools }}[/AVAILABLE_TOOLS]{% endif %}[TOOL_CALLS]"
GRANITE3 = "{% if tools %}<|tool_call|>{{ tools }}{% endif %}"
R1_DISTILL = (
    "{% for m in messages %}{% if m['tool_calls'] %}<｜tool▁calls▁begin｜>{% endif %}{% endfor %}<think>\n"
)
SMOLLM2 = "{% for message in messages %}<|im_start|>{{ message['role'] }}{% endfor %}"


def no_tokens(text: str) -> bool:
    return False


@pytest.mark.parametrize(
    ("template", "fmt", "native", "thinks"),
    [
        (QWEN, HERMES, True, False),
        (QWEN3, HERMES, True, True),
        (LLAMA31, LLAMA3, True, False),
        (MISTRAL31, MISTRAL, True, False),
        (GRANITE3, GRANITE, True, False),
        (R1_DISTILL, GENERIC, False, True),  # renders calls but never the tools: the generic prompt
        (SMOLLM2, GENERIC, False, False),
        (None, GENERIC, False, False),  # no template at all
        ("<tool_call> but no tool list", GENERIC, False, False),
    ],
)
def test_format_from_template(template: str | None, fmt: object, native: bool, thinks: bool) -> None:
    support = detect_support(template, no_tokens)
    assert (support.format, support.native, support.thinking is not None) == (fmt, native, thinks)


def test_thinking_tokens_in_the_vocabulary_mean_a_thinking_model() -> None:
    support = detect_support(SMOLLM2, lambda text: text in (THINK.open, THINK.close))
    assert support.thinking == THINK and support.format is GENERIC


WEATHER = Tool(
    "get_weather", "Weather now", json.dumps({"type": "object", "properties": {"city": {"type": "string"}}})
)


@pytest.mark.parametrize(
    ("tools", "choice", "error", "words"),
    [
        (
            (Tool("f", parameters="{not json"),),
            ToolChoice(),
            ToolSchemaError,
            "parameters of tool 'f' are not valid JSON",
        ),
        ((Tool("f", parameters="[1, 2]"),), ToolChoice(), ToolSchemaError, "must be a JSON Schema object"),
        (
            (Tool("f", parameters='{"type": "string"}'),),
            ToolChoice(),
            ToolSchemaError,
            "must describe an object",
        ),
        ((WEATHER, WEATHER), ToolChoice(), ToolSchemaError, "Two tools are named 'get_weather'"),
        ((Tool(" "),), ToolChoice(), ToolSchemaError, "needs a name"),
        (
            (WEATHER,),
            ToolChoice(ToolChoiceMode.FUNCTION, "search"),
            ToolChoiceError,
            "names 'search', which is not",
        ),
        ((), ToolChoice(ToolChoiceMode.REQUIRED), ToolChoiceError, "needs at least one tool"),
    ],
)
def test_bad_tools_are_one_sentence(
    tools: tuple[Tool, ...], choice: ToolChoice, error: type, words: str
) -> None:
    with pytest.raises(error, match=words) as info:
        check_tools(tools, choice)
    message = str(info.value)
    assert message.endswith(".") and message.count(". ") == 0, message


def test_tools_with_a_raw_prompt_are_refused() -> None:
    with pytest.raises(ToolRequestError, match="need a chat"):
        check_tools((WEATHER,), ToolChoice(), raw_prompt=True)


def test_plan_reads_the_chosen_tools_only() -> None:
    support = detect_support(QWEN3, no_tokens)
    base = GenerationRequest(messages=(ChatMessage("user", "hi"),), tools=(WEATHER, Tool("search")))
    auto = plan_reply(base, support)
    assert auto.names == {"get_weather", "search"} and auto.parallel and auto.reasoning
    assert auto.stops == ("<tool_response>",)
    one = plan_reply(
        GenerationRequest(
            messages=base.messages,
            tools=base.tools,
            tool_choice=ToolChoice(ToolChoiceMode.FUNCTION, "search"),
        ),
        support,
    )
    assert one.names == {"search"} and not one.parallel
    none = plan_reply(
        GenerationRequest(
            messages=base.messages, tools=base.tools, tool_choice=ToolChoice(ToolChoiceMode.NONE)
        ),
        support,
    )
    assert none.names == frozenset() and none.prompt is not None and none.stops == ()
    plain = plan_reply(GenerationRequest(messages=base.messages), support)
    assert (
        plain.prompt is None and not plain.reasoning
    )  # the window's replies keep their thinking in the text
    split = plan_reply(GenerationRequest(messages=base.messages, separate_reasoning=True), support)
    assert split.reasoning
