"""A long prompt reports how far it has been read (tokens read of total, seconds so far) before the reply,
without changing the reply; a short one reads in one go; cancel stops the read part-way."""

from __future__ import annotations

from pathlib import Path

from localchat.engine.engine import Engine
from localchat.engine.types import (
    ChatMessage,
    EngineConfig,
    FinishReason,
    GenerationRequest,
    SamplingParams,
    TokenEvent,
)

GREEDY = SamplingParams(temperature=0.0)
LONG = "Here is a list of fruit: " + ", ".join(f"apple number {i}" for i in range(120)) + ". Which is last?"


def _request(text: str, session: str) -> GenerationRequest:
    return GenerationRequest(messages=(ChatMessage("user", text),), max_tokens=8, sampling=GREEDY,
                             session=session)


def test_progress_while_reading_a_long_prompt_and_the_same_reply(smollm2_path: Path) -> None:
    with Engine(EngineConfig(str(smollm2_path), n_ctx=2048, state_memory_bytes=0)) as engine:
        events: list[TokenEvent] = []
        watched = engine.generate(_request(LONG, "a"), on_event=events.append)
        progress = [e.prompt_progress for e in events if e.prompt_progress is not None]
        assert progress, "no progress for a long prompt"
        total = progress[0][1]
        assert total == watched.stats.prompt_tokens and total >= 256
        done = [p[0] for p in progress]
        assert done[0] == 0 and done[-1] == total and done == sorted(done) and len(done) >= 3
        assert all(not e.text for e in events if e.prompt_progress is not None)  # before any text
        engine.reset()
        unwatched = engine.generate(_request(LONG, "b"))
        assert unwatched.text == watched.text  # reading in chunks changes nothing
        engine.reset()
        short: list[TokenEvent] = []
        engine.generate(_request("Hi", "c"), on_event=short.append)
        assert all(e.prompt_progress is None for e in short)


def test_cancel_stops_the_read_part_way(smollm2_path: Path) -> None:
    with Engine(EngineConfig(str(smollm2_path), n_ctx=2048, state_memory_bytes=0)) as engine:
        seen: list[tuple[int, int, float]] = []

        def on_event(event: TokenEvent) -> None:
            if event.prompt_progress is not None:
                seen.append(event.prompt_progress)

        result = engine.generate(_request(LONG, "a"), on_event=on_event,
                                 should_cancel=lambda: any(p[0] > 0 for p in seen))
        assert result.finish_reason is FinishReason.CANCELLED and not result.text
        assert seen[-1][0] < seen[-1][1]
