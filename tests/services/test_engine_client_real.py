"""EngineClient with the real engine on SmolLM2-135M: stream, kill -9 mid-reply, recover."""

from __future__ import annotations

import os
import signal
from pathlib import Path

from localchat.engine.types import ChatMessage, EngineConfig, GenerationRequest, SpeculationConfig
from localchat.host.events import Failed, FailureKind, Finished, Phase, Tokens
from localchat.services import EngineClient

# A raw prompt that greedy decoding keeps continuing (no early end of text).
LONG = GenerationRequest(
    prompt="Counting: 1, 2, 3, 4, 5, 6, 7, 8,", max_tokens=4000, speculation=SpeculationConfig(enabled=False)
)
PROMPT = (ChatMessage("user", "Name three colours."),)


def _end(event) -> bool:
    return isinstance(event, Finished | Failed)


def test_stream_kill_and_recover(qtbot, smollm2_path: Path) -> None:
    client = EngineClient()
    try:
        with qtbot.waitSignal(client.state_changed, timeout=120_000,
                              check_params_cb=lambda s: s.phase is Phase.READY) as loaded:
            client.load(EngineConfig(str(smollm2_path), n_ctx=512))
        assert loaded.args[0].info.target.n_vocab > 0

        events = []
        client.job_event.connect(events.append)
        with qtbot.waitSignal(client.job_event, timeout=120_000, check_params_cb=_end) as finished:
            client.generate(GenerationRequest(messages=PROMPT, max_tokens=24))
        result = finished.args[0].result
        assert "".join(e.event.text for e in events if isinstance(e, Tokens)) == result.text
        assert result.stats.tokens_per_s > 0

        # Kill the engine mid-reply: the reply fails as a death, with what streamed before it kept.
        events.clear()
        with qtbot.waitSignal(client.job_event, timeout=60_000):
            client.generate(LONG)
        first_pid = client.state.pid
        assert first_pid is not None
        with qtbot.waitSignal(client.job_event, timeout=10_000, check_params_cb=_end) as died:
            os.kill(first_pid, signal.SIGKILL)
        failure = died.args[0].failure
        assert failure.kind is FailureKind.ENGINE_DIED and failure.exitcode == -9
        assert any(isinstance(e, Tokens) for e in events)  # the partial reply reached the GUI first

        # The next request starts a new process with the same model.
        with qtbot.waitSignal(client.job_event, timeout=120_000, check_params_cb=_end) as again:
            client.generate(GenerationRequest(messages=PROMPT, max_tokens=8))
        assert again.args[0].result.text
        assert client.state.pid != first_pid
    finally:
        client.shutdown()
