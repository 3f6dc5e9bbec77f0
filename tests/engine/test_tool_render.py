"""Chats with tools rendered by real models' templates: Qwen2.5-Coder's own tool branch, and the generic
prompt for SmolLM2, Gemma 3 (no template in the test file) and a Gemma-style template; context fitting
that drops a tool round whole."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from localchat.engine import chat_format
from localchat.engine.backend import Model, init_backend
from localchat.engine.chat_format import ChatFormatter
from localchat.engine.errors import GenerationError
from localchat.engine.tooluse.formats import GENERIC, HERMES
from localchat.engine.tooluse.render import ToolPrompt
from localchat.engine.types import ChatMessage, Tool, ToolCall, ToolChoice, ToolChoiceMode

WEATHER = Tool(
    "get_weather",
    "Get the current weather in a city",
    json.dumps({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}),
)
TOOLS = ToolPrompt((WEATHER,))
CALL = ToolCall("call_abcdefghijk", "get_weather", '{"city": "Paris"}')
CALL_TEXT = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
RESULT = '{"temperature_c": 18, "condition": "light rain"}'
ROUND = [
    ChatMessage("user", "What's the weather in Paris?"),
    ChatMessage("assistant", "", tool_calls=(CALL,)),
    ChatMessage("tool", RESULT, tool_call_id=CALL.id, name="get_weather"),
]


def formatter_for(path: Path) -> Iterator[ChatFormatter]:
    init_backend()
    model = Model(path, 0, vocab_only=True)
    yield ChatFormatter(model)
    model.close()


@pytest.fixture(scope="module")
def qwen(qwen_target_path: Path) -> Iterator[ChatFormatter]:
    yield from formatter_for(qwen_target_path)


@pytest.fixture(scope="module")
def smollm2(smollm2_path: Path) -> Iterator[ChatFormatter]:
    yield from formatter_for(smollm2_path)


@pytest.fixture(scope="module")
def gemma3(gemma3_path: Path) -> Iterator[ChatFormatter]:
    yield from formatter_for(gemma3_path)


def test_qwen_renders_tools_calls_and_results_with_its_own_template(qwen: ChatFormatter) -> None:
    assert qwen.support.format is HERMES and qwen.support.native and qwen.support.thinking is None
    text = qwen.text_for(ROUND, TOOLS)
    # the template's tool branch: the definitions inside <tools>, in the OpenAI shape it iterates over
    assert (
        "<tools>\n"
        + json.dumps(
            {
                "type": "function",
                "function": {
                    "name": "get_weather",
                    "description": WEATHER.description,
                    "parameters": json.loads(WEATHER.parameters),
                },
            },
            ensure_ascii=False,
        )
        + "\n</tools>"
        in text
    )
    # the call as the model writes it (arguments an object, not a quoted string), the result in its tags
    assert f"<|im_start|>assistant\n{CALL_TEXT}<|im_end|>" in text
    assert f"<|im_start|>user\n<tool_response>\n{RESULT}\n</tool_response><|im_end|>" in text
    assert text.endswith("<|im_start|>assistant\n")
    assert "# Tools" in text and "Call a function" not in text  # the template's words, not the generic ones


def test_qwen_renders_a_past_tool_round_without_tools_offered(qwen: ChatFormatter) -> None:
    text = qwen.text_for(
        [*ROUND, ChatMessage("assistant", "It is 18 °C and raining."), ChatMessage("user", "Thanks")]
    )
    assert "<tools>" not in text and '"arguments": {"city": "Paris"}' in text and "<tool_response>" in text


def test_qwen_offers_the_tools_again_to_a_question_after_a_tool_round(qwen: ChatFormatter) -> None:
    """The chat's next message: the tools in the system turn, the past round and answer, then the question."""
    answer = ChatMessage("assistant", "It is 18 °C and raining.")
    text = qwen.text_for([*ROUND, answer, ChatMessage("user", "And in Oslo?")], TOOLS)
    order = [text.index(t) for t in ("<tools>", CALL_TEXT, "<tool_response>", "It is 18 °C and raining.",
                                      "<|im_start|>user\nAnd in Oslo?<|im_end|>")]
    assert order == sorted(order) and text.endswith("<|im_start|>assistant\n")


def test_several_results_share_one_user_turn_in_qwens_template(qwen: ChatFormatter) -> None:
    second = ToolCall("call_bcdefghijkl", "get_weather", '{"city": "Oslo"}')
    chat = [
        ROUND[0],
        ChatMessage("assistant", "", tool_calls=(CALL, second)),
        ChatMessage("tool", "18", tool_call_id=CALL.id),
        ChatMessage("tool", "3", tool_call_id=second.id),
    ]
    text = qwen.text_for(chat, TOOLS)
    assert (
        "<|im_start|>user\n<tool_response>\n18\n</tool_response>\n<tool_response>\n3\n</tool_response><|im_end|>"
        in text
    )


def test_smollm2_gets_the_generic_prompt(smollm2: ChatFormatter) -> None:
    assert smollm2.support.format is GENERIC and not smollm2.support.native
    text = smollm2.text_for([ChatMessage("system", "Be brief."), *ROUND], TOOLS)
    system = text.split("<|im_end|>")[0]
    assert system.startswith("<|im_start|>system\nBe brief.\n\n# Tools")
    assert '"name": "get_weather"' in system and "<tool_call>" in system
    assert f"<|im_start|>assistant\n{CALL_TEXT}<|im_end|>" in text
    assert f"<|im_start|>user\n<tool_response>\n{RESULT}\n</tool_response><|im_end|>" in text
    assert "<|im_start|>tool" not in text  # only roles every template knows


def test_tool_choice_is_said_in_the_generic_prompt(smollm2: ChatFormatter) -> None:
    text = smollm2.text_for(
        ROUND[:1], ToolPrompt((WEATHER,), ToolChoice(ToolChoiceMode.FUNCTION, "get_weather"), False)
    )
    assert 'Call the function "get_weather" in this reply.' in text and "one function at a time" in text
    text = smollm2.text_for(ROUND[:1], ToolPrompt((WEATHER,), ToolChoice(ToolChoiceMode.NONE)))
    assert "Do not call a function in this reply." in text


def test_gemma3_file_without_a_template_gets_the_generic_prompt(gemma3: ChatFormatter) -> None:
    assert not gemma3.has_template and gemma3.support.format is GENERIC
    tokens, _ = gemma3.tokens_for(ROUND, TOOLS)
    text = gemma3.text_for(ROUND, TOOLS)
    assert "# Tools" in text and "<tool_response>" in text and len(tokens) > 100


# A template in Gemma 3's manner (written for this test): the system text joins the first user turn,
# roles must alternate, the assistant is "model".
GEMMA_STYLE = (
    "{{ bos_token }}{% set first = '' %}{% if messages[0]['role'] == 'system' %}"
    "{% set first = messages[0]['content'] + '\n\n' %}{% set loop_messages = messages[1:] %}"
    "{% else %}{% set loop_messages = messages %}{% endif %}"
    "{% for message in loop_messages %}"
    "{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
    "{% set role = 'model' if message['role'] == 'assistant' else message['role'] %}"
    "<start_of_turn>{{ role }}\n{{ (first if loop.first else '') + message['content'] }}<end_of_turn>\n"
    "{% endfor %}{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}"
)


class _TemplateModel:
    """The part of backend.Model the formatter reads, with a template of the test's own."""

    def __init__(self, template: str) -> None:
        self.chat_template = template

    def bos(self) -> int:
        return -1

    def eos(self) -> int:
        return -1

    def tokenize(self, text: str, add_special: bool, parse_special: bool = True) -> list[int]:
        return list(range(len(text)))


def test_a_template_that_requires_alternating_roles_reads_tool_rounds() -> None:
    f = ChatFormatter(_TemplateModel(GEMMA_STYLE))  # type: ignore[arg-type]
    second = ToolCall("call_bcdefghijkl", "get_weather", '{"city": "Oslo"}')
    chat = [
        ChatMessage("system", "Be brief."),
        ROUND[0],
        ChatMessage("assistant", "Checking.", tool_calls=(CALL, second)),
        ChatMessage("tool", "18", tool_call_id=CALL.id),
        ChatMessage("tool", "3", tool_call_id=second.id),
    ]
    text = f.text_for(chat, TOOLS)
    assert text.count("<start_of_turn>user") == 2 and text.count("<start_of_turn>model") == 2
    assert "<start_of_turn>user\nBe brief.\n\n# Tools" in text
    assert "Checking.\n<tool_call>\n" in text and text.count('<tool_call>\n{"name": "get_weather"') == 2
    assert "<tool_response>\n18\n</tool_response>\n\n<tool_response>\n3\n</tool_response>" in text


# A native template (hermes markers, a tool list) that allows one call per message, as Llama 3.1's does.
ONE_CALL_ONLY = (
    "{% if tools %}<tools>{{ tools | tojson }}</tools>{% endif %}"
    "{% for m in messages %}{% if m.tool_calls is defined and m.tool_calls | length > 1 %}"
    "{{ raise_exception('This model only supports single tool-calls at once!') }}{% endif %}"
    "<|{{ m.role }}|>{{ m.content }}{% if m.tool_calls is defined %}"
    "<tool_call>{{ m.tool_calls[0].function | tojson }}</tool_call>{% endif %}"
    "{% endfor %}<|assistant|>"
)


def test_a_native_template_that_refuses_the_chat_falls_back_to_the_generic_prompt() -> None:
    f = ChatFormatter(_TemplateModel(ONE_CALL_ONLY))  # type: ignore[arg-type]
    assert f.support.native and f.support.format is HERMES
    one = f.text_for(ROUND, TOOLS)
    assert (
        one.startswith("<tools>")
        and '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}' in one
    )
    second = ToolCall("call_bcdefghijkl", "get_weather", '{"city": "Oslo"}')
    two = f.text_for([ROUND[0], ChatMessage("assistant", "", tool_calls=(CALL, second))], TOOLS)
    assert (
        not two.startswith("<tools>")
        and two.startswith("<|system|># Tools")
        and two.count('<tool_call>\n{"name": "get_weather"') == 2
    )


def test_a_template_that_refuses_a_plain_chat_is_a_sentence() -> None:
    f = ChatFormatter(_TemplateModel(GEMMA_STYLE))  # type: ignore[arg-type]
    with pytest.raises(GenerationError, match="refused this chat: Conversation roles must alternate"):
        f.text_for([ChatMessage("user", "a"), ChatMessage("user", "b")])


# -- context fitting ---------------------------------------------------------------------------------


def test_turn_starts_keep_tool_results_with_their_call() -> None:
    u, a, t = (
        ChatMessage("user", "q"),
        ChatMessage("assistant", "", tool_calls=(CALL,)),
        ChatMessage("tool", "r"),
    )
    done = ChatMessage("assistant", "answer")
    chat = [u, a, t, t, done, u, a, t]
    starts = chat_format._turn_starts(chat)
    assert all(chat[s].role != "tool" for s in starts)
    assert max(starts) <= 6  # the newest results stay with the call (index 6) they answer
    assert chat_format._turn_starts([u, ChatMessage("assistant", "x"), u]) == [0, 2]  # as before tools


def test_fitting_a_long_tool_chat_drops_whole_rounds(smollm2_path: Path) -> None:
    init_backend()
    model = Model(smollm2_path, 0, vocab_only=True)
    try:
        f = ChatFormatter(model)
        chat = [ChatMessage("system", "You look up weather.")]
        for i in range(40):
            c = ToolCall(f"call_{i:012d}", "get_weather", json.dumps({"city": f"City {i}"}))
            chat += [
                ChatMessage("user", f"Weather in city {i}, please, and be thorough about it."),
                ChatMessage("assistant", "", tool_calls=(c,)),
                ChatMessage("tool", f"Sunny and {i} degrees in City {i}.", tool_call_id=c.id),
                ChatMessage("assistant", f"City {i} is sunny at {i} degrees."),
            ]
        final = ToolCall("call_final000000", "get_weather", '{"city": "Paris"}')
        chat += [
            ChatMessage("user", "And Paris?"),
            ChatMessage("assistant", "", tool_calls=(final,)),
            ChatMessage("tool", "Rain, 18 degrees.", tool_call_id=final.id),
        ]
        for n_ctx in range(900, 1300, 40):  # where the cut falls varies: each kind of message gets its turn
            fitted = f.fit(chat, n_ctx, 128, tools=TOOLS)
            kept = chat[1 + fitted.dropped_messages :]
            assert fitted.dropped_messages > 0 and len(fitted.tokens) <= n_ctx - 128
            assert kept[0].role != "tool", n_ctx
            called = {c.id for m in kept for c in m.tool_calls}
            assert all(m.tool_call_id in called for m in kept if m.role == "tool")
            assert kept[-3:] == chat[-3:]
    finally:
        model.close()
