"""Settings plus a chat turn into the engine's request and load configuration, and a prompt's turns
into the engine's messages."""

from __future__ import annotations

from collections.abc import Sequence

from localchat.chat import PromptTurn
from localchat.engine.types import (
    ChatMessage,
    DrafterKind,
    EngineConfig,
    GenerationRequest,
    SamplingParams,
    SpeculationConfig,
    Tool,
    ToolCall,
)
from localchat.settings import OptionReader, folders


def chat_message(turn: PromptTurn) -> ChatMessage:
    """One turn of a chat's prompt (``chat.prompt_turns``) as the engine's message, its tool calls too."""
    calls = tuple(ToolCall(c.id, c.name, c.arguments) for c in turn.tool_calls)
    return ChatMessage(turn.role, turn.content, tool_calls=calls, tool_call_id=turn.tool_call_id,
                       name=turn.name)


def build_request(
    settings: OptionReader,
    history: Sequence[ChatMessage],
    *,
    system_prompt: str = "",
    speculation_enabled: bool = True,
    max_tokens: int = 1024,
    session: str = "",
    resume_speculation: bool = False,
    temperature: float | None = None,
    tools: Sequence[Tool] = (),
    separate_reasoning: bool = False,
) -> GenerationRequest:
    """The request for one reply; ``temperature`` is a chat's own, over the setting's. ``tools``: the
    tool servers' tools, which the model may call (the engine reads its calls and constrains them)."""
    messages = list(history)
    if system_prompt.strip():
        messages.insert(0, ChatMessage("system", system_prompt.strip()))
    return GenerationRequest(
        messages=tuple(messages),
        max_tokens=max_tokens,
        sampling=SamplingParams(
            temperature=settings.temperature if temperature is None else temperature,
            top_k=settings.top_k,
            top_p=settings.top_p,
            min_p=settings.min_p,
            repeat_penalty=settings.repeat_penalty,
        ),
        speculation=SpeculationConfig(
            enabled=speculation_enabled,
            drafter=settings.drafter,
            draft_tokens=settings.draft_tokens,
            adaptive=settings.adaptive,
            resume=resume_speculation and speculation_enabled,
        ),
        session=session,
        tools=tuple(tools),
        separate_reasoning=separate_reasoning,
    )


def build_engine_config(
    settings: OptionReader, target_path: str, draft_path: str | None = None
) -> EngineConfig:
    chosen_draft = settings.draft_model_path or draft_path
    if settings.drafter in (DrafterKind.NGRAM, DrafterKind.NONE):
        chosen_draft = None
    return EngineConfig(
        target_path=target_path,
        draft_path=chosen_draft or None,
        n_ctx=settings.context_length,
        n_threads=settings.threads or None,
        gpu_layers=settings.gpu_layers,
        # Checked when the engine loads: a wrong address is a load failure that names it.
        rpc_servers=tuple(w.strip() for w in settings.rpc_workers.split(",") if w.strip()),
        # Recent conversations' KV caches: in memory, and the last ones on disk, so taking a chat
        # up again (also after a restart) reads only its new tokens.
        state_memory_bytes=settings.kv_cache_memory_mb * 10**6,
        state_folder=str(folders.kv_state_dir()) if settings.kv_cache_disk_mb else "",
        state_disk_bytes=settings.kv_cache_disk_mb * 10**6,
        exact=settings.exact_speculation,
    )
