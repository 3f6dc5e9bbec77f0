"""bench/api_engine.ApiBenchEngine: the benchmark's engine seen through the local API (a real server
on 127.0.0.1 over a real engine process, SmolLM2): a reply's text and figures as the client saw them,
the server's own timings kept per mode, an error as the engine's error, and turn latencies."""

from __future__ import annotations

from pathlib import Path

import pytest

from localchat.bench.api_engine import ApiBenchEngine
from localchat.engine.errors import EngineError
from localchat.engine.types import (
    ChatMessage,
    DrafterKind,
    FinishReason,
    GenerationRequest,
    SamplingParams,
    SpeculationConfig,
)
from tests.server.served import serve


def test_replies_through_the_api_carry_the_clients_and_the_servers_figures(smollm2_path: Path) -> None:
    with serve(smollm2_path, smollm2_path, ctx=512) as served:
        key = served.settings.api_key or "none"
        engine = ApiBenchEngine(served.url + "/v1", model="test-model", api_key=key)
        request = GenerationRequest(
            messages=(ChatMessage("user", "Count from one to ten in words."),), max_tokens=10,
            sampling=SamplingParams(temperature=0.0), session="bench:p1",
            speculation=SpeculationConfig(drafter=DrafterKind.MODEL, draft_tokens=3, adaptive=False))
        result = engine.generate(request)
        assert result.finish_reason is FinishReason.LENGTH and result.text
        assert result.stats.generated_tokens == 10
        assert result.stats.prompt_tokens > 0 and result.stats.drafted > 0
        assert result.speculation.active and result.speculation.drafter == "draft"
        ((mode, n), (tokens, seconds)) = next(iter(engine.server_seconds.items()))
        assert (mode, n, tokens) == ("draft", 3, 10) and seconds > 0

        latency = engine.turn_latency("Say hello.", max_tokens=4)
        assert latency.first_turn_s > 0 and latency.follow_up_s > 0

        wrong = ApiBenchEngine(served.url + "/v1", model="test-model", api_key="wrong-key")
        with pytest.raises(EngineError, match="The API answered with an error"):
            wrong.generate(GenerationRequest(messages=(ChatMessage("user", "hi"),), max_tokens=2))
