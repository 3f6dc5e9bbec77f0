"""services.requests: settings read through typed properties become the engine's request and config."""

from __future__ import annotations

import pytest

from localchat.engine.types import ChatMessage, DrafterKind
from localchat.services.requests import build_engine_config, build_request
from localchat.settings import Settings


@pytest.mark.parametrize("kind", [DrafterKind.AUTO, DrafterKind.MODEL, DrafterKind.NGRAM, DrafterKind.NONE])
def test_the_drafter_setting_is_the_engine_kind(kind: DrafterKind) -> None:
    settings = Settings({"drafter": kind.value, "draft_tokens": 7, "temperature": 0.2, "top_k": 5})
    request = build_request(settings, [ChatMessage("user", "hi")], system_prompt=" be brief ")
    assert request.speculation.drafter is kind
    assert request.speculation.draft_tokens == 7
    assert (request.sampling.temperature, request.sampling.top_k) == (0.2, 5)
    assert request.messages[0] == ChatMessage("system", "be brief")


def test_a_stored_old_spelling_reaches_the_engine_as_a_draft_model() -> None:
    assert build_request(Settings({"drafter": "model"}), []).speculation.drafter is DrafterKind.MODEL


def test_engine_config_leaves_the_draft_model_out_without_a_model_drafter() -> None:
    with_model = build_engine_config(Settings({"threads": 3}), "t.gguf", "d.gguf")
    assert (with_model.draft_path, with_model.n_threads) == ("d.gguf", 3)
    assert build_engine_config(Settings({"drafter": "ngram"}), "t.gguf", "d.gguf").draft_path is None
    chosen = build_engine_config(Settings({"draft_model_path": "mine.gguf"}), "t.gguf", "d.gguf")
    assert chosen.draft_path == "mine.gguf" and chosen.n_threads is None


def test_workers_setting_reaches_the_engine_config() -> None:
    settings = Settings({"rpc_workers": " 10.0.0.5:50052, box.local:50053 ,"})
    config = build_engine_config(settings, "/m/target.gguf")
    assert config.rpc_servers == ("10.0.0.5:50052", "box.local:50053")
    assert build_engine_config(Settings(), "/m/target.gguf").rpc_servers == ()


def test_a_prompt_turn_with_tool_calls_becomes_the_engines_message() -> None:
    from localchat.chat.prompt import PromptTurn
    from localchat.chat.rounds import ToolCallRecord
    from localchat.services.requests import chat_message

    call = ToolCallRecord("c1", "add", '{"a": 1}')
    message = chat_message(PromptTurn("assistant", "Let me add.", tool_calls=(call,)))
    assert (message.role, message.content) == ("assistant", "Let me add.")
    assert [(c.id, c.name, c.arguments) for c in message.tool_calls] == [("c1", "add", '{"a": 1}')]
    result = chat_message(PromptTurn("tool", "2", tool_call_id="c1", name="add"))
    assert (result.tool_call_id, result.name, result.tool_calls) == ("c1", "add", ())
