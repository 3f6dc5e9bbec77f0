"""Settings plus a chat turn into the engine's request and load configuration."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from localchat.engine.types import (
    ChatMessage,
    DrafterKind,
    EngineConfig,
    GenerationRequest,
    SamplingParams,
    SpeculationConfig,
)

_DRAFTERS = {
    "auto": DrafterKind.AUTO,
    "model": DrafterKind.MODEL,
    "ngram": DrafterKind.NGRAM,
    "none": DrafterKind.NONE,
}


class SettingsReader(Protocol):
    def get(self, name: str) -> Any: ...


def build_request(
    settings: SettingsReader,
    history: Sequence[ChatMessage],
    *,
    system_prompt: str = "",
    speculation_enabled: bool = True,
    max_tokens: int = 1024,
    session: str = "",
) -> GenerationRequest:
    messages = list(history)
    if system_prompt.strip():
        messages.insert(0, ChatMessage("system", system_prompt.strip()))
    return GenerationRequest(
        messages=tuple(messages),
        max_tokens=max_tokens,
        sampling=SamplingParams(
            temperature=float(settings.get("temperature")),
            top_k=int(settings.get("top_k")),
            top_p=float(settings.get("top_p")),
            min_p=float(settings.get("min_p")),
            repeat_penalty=float(settings.get("repeat_penalty")),
        ),
        speculation=SpeculationConfig(
            enabled=speculation_enabled,
            drafter=_DRAFTERS.get(str(settings.get("drafter")), DrafterKind.AUTO),
            draft_tokens=int(settings.get("draft_tokens")),
            adaptive=bool(settings.get("adaptive")),
        ),
        session=session,
    )


def build_engine_config(
    settings: SettingsReader, target_path: str, draft_path: str | None = None
) -> EngineConfig:
    chosen_draft = str(settings.get("draft_model_path") or "") or draft_path
    if str(settings.get("drafter")) in ("ngram", "none"):
        chosen_draft = None
    threads = int(settings.get("threads"))
    return EngineConfig(
        target_path=target_path,
        draft_path=chosen_draft or None,
        n_ctx=int(settings.get("context_length")),
        n_threads=threads or None,
        gpu_layers=int(settings.get("gpu_layers")),
    )
