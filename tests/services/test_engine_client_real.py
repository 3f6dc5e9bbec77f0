"""EngineClient with the real engine on SmolLM2-135M: stream, kill -9 mid-reply, recover."""

from __future__ import annotations

import os
import signal
from pathlib import Path

from localchat.engine.types import ChatMessage, EngineConfig, GenerationRequest, SpeculationConfig
from localchat.services import EngineClient

# A raw prompt that greedy decoding keeps continuing (no early end of text).
LONG = GenerationRequest(
    prompt="Counting: 1, 2, 3, 4, 5, 6, 7, 8,", max_tokens=4000, speculation=SpeculationConfig(enabled=False)
)
PROMPT = (ChatMessage("user", "Name three colours."),)


def test_stream_kill_and_recover(qtbot, smollm2_path: Path) -> None:
    client = EngineClient()
    try:
        with qtbot.waitSignal(client.loaded, timeout=120_000) as loaded:
            client.load(EngineConfig(str(smollm2_path), n_ctx=512))
        assert loaded.args[0].target.n_vocab > 0

        events = []
        client.tokens_received.connect(events.append)
        with qtbot.waitSignal(client.generation_finished, timeout=120_000) as finished:
            client.generate(GenerationRequest(messages=PROMPT, max_tokens=24))
        result = finished.args[0]
        assert events and "".join(e.text for e in events) == result.text
        assert result.stats.tokens_per_s > 0

        # Kill the engine mid-reply: engine_died with the sentence, no reply state left.
        events.clear()
        with qtbot.waitSignal(client.tokens_received, timeout=60_000):
            client.generate(LONG)
        first_pid = client.pid
        assert first_pid is not None
        with qtbot.waitSignal(client.engine_died, timeout=10_000) as died:
            os.kill(first_pid, signal.SIGKILL)
        assert died.args[0] == (
            "The engine stopped unexpectedly (exit code -9). "
            "Your chat is saved; the next message starts a new engine."
        )
        assert events  # the partial reply reached the GUI before the crash

        # The next request starts a new process with the same model.
        with qtbot.waitSignal(client.generation_finished, timeout=120_000) as again:
            client.generate(GenerationRequest(messages=PROMPT, max_tokens=8))
        assert again.args[0].text
        assert client.pid != first_pid
    finally:
        client.stop()
