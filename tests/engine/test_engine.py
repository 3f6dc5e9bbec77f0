"""engine.Engine on a real model: what it reports after load, a raw prompt too long for the context,
old messages left out with a notice, reset, stop strings, cancel before the reply, close twice."""

from __future__ import annotations

from pathlib import Path

import pytest

from localchat.engine.engine import Engine
from localchat.engine.errors import ContextOverflowError
from localchat.engine.types import (
    ChatMessage,
    EngineConfig,
    FinishReason,
    GenerationRequest,
    SamplingParams,
    SpeculationConfig,
)

GREEDY = SamplingParams(temperature=0.0)
OFF = SpeculationConfig(enabled=False)


@pytest.fixture(scope="module")
def engine(smollm2_path: Path) -> Engine:
    eng = Engine(EngineConfig(str(smollm2_path), n_ctx=512, n_threads=2, state_memory_bytes=0))
    yield eng
    eng.close()


def test_info_after_load(engine: Engine, smollm2_path: Path) -> None:
    info = engine.info
    assert info.target.path == str(smollm2_path) and info.target.architecture == "llama"
    assert info.n_ctx == 512 and info.n_threads == 2 and info.draft is None
    assert info.backend == "CPU" and info.placement == "local"
    assert info.target.has_chat_template and info.target.n_vocab > 1000


def test_a_raw_prompt_longer_than_the_context_is_a_sentence(engine: Engine) -> None:
    with pytest.raises(ContextOverflowError, match="context window holds 512"):
        engine.generate(GenerationRequest(prompt="word " * 2000, max_tokens=8, speculation=OFF))


def test_old_messages_are_left_out_with_a_notice(engine: Engine) -> None:
    history = tuple(ChatMessage("user" if i % 2 == 0 else "assistant", f"Message {i}: " + "lorem " * 40)
                    for i in range(12))
    result = engine.generate(GenerationRequest(messages=(*history, ChatMessage("user", "Say hi.")),
                                               max_tokens=4, sampling=GREEDY, speculation=OFF))
    assert result.dropped_messages > 0 and "did not fit in the context window" in result.notice
    assert result.stats.prompt_tokens + result.stats.cached_prompt_tokens <= 512


def test_reset_reads_the_prompt_again_and_the_text_is_the_same(engine: Engine) -> None:
    ask = GenerationRequest(messages=(ChatMessage("user", "Name a colour."),), max_tokens=6,
                            sampling=GREEDY, speculation=OFF)
    engine.reset()
    first = engine.generate(ask)
    again = engine.generate(ask)
    assert again.stats.cached_prompt_tokens > 0  # the same prompt: its cache is reused
    engine.reset()
    fresh = engine.generate(ask)
    assert fresh.stats.cached_prompt_tokens == 0
    assert first.text == again.text == fresh.text


def test_a_stop_string_ends_the_reply_before_it(engine: Engine) -> None:
    ask = GenerationRequest(messages=(ChatMessage("user", "Count from 1 to 10, separated by commas."),),
                            max_tokens=40, sampling=GREEDY, speculation=OFF)
    full = engine.generate(ask)
    assert "3" in full.text
    cut = full.text.index("3")
    stopped = engine.generate(GenerationRequest(messages=ask.messages, max_tokens=40, sampling=GREEDY,
                                                speculation=OFF, stop=("3",)))
    assert stopped.finish_reason is FinishReason.STOP and stopped.text == full.text[:cut]


def test_cancel_before_the_reply_and_close_twice(smollm2_path: Path) -> None:
    eng = Engine(EngineConfig(str(smollm2_path), n_ctx=512, state_memory_bytes=0))
    result = eng.generate(GenerationRequest(prompt="Hello", max_tokens=8, speculation=OFF),
                          should_cancel=lambda: True)
    assert result.finish_reason is FinishReason.CANCELLED and result.text == ""
    eng.close()
    eng.close()  # idempotent: the app's exit path may close it again
