"""A stand-in for localchat.engine.engine.Engine, for host and service unit tests only.

The prompt steers it: "slow" sleeps per token, "hang" ignores cancel, "crash"
ends the process, "overflow" raises ContextOverflowError, "bad schema" with a constraint raises
GrammarError, "boom" raises a plain exception. A target path ending in "missing.gguf" fails to load.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

from localchat.engine.errors import ContextOverflowError, GrammarError, ModelLoadError
from localchat.engine.stats import StatsRecorder
from localchat.engine.types import (
    EngineConfig,
    EngineInfo,
    FinishReason,
    GenerationRequest,
    GenerationResult,
    ModelInfo,
    SpeculationState,
    TokenEvent,
)


class FakeEngine:
    def __init__(self, config: EngineConfig) -> None:
        if config.target_path.endswith("missing.gguf"):
            raise ModelLoadError(f"The model file {config.target_path} does not exist.")
        if config.target_path.endswith("crash.gguf"):
            os._exit(7)
        model = ModelInfo(config.target_path, "fake", "llama", 1, 1, 2048, 100, True)
        self.info = EngineInfo(
            backend="CPU",
            target=model,
            draft=None,
            n_ctx=config.n_ctx,
            n_threads=1,
            gpu_layers=0,
            speculation=SpeculationState(active=True, drafter="n-gram", draft_tokens=4),
        )

    def generate(
        self,
        request: GenerationRequest,
        on_event: Callable[[TokenEvent], None] | None = None,
        should_cancel: Callable[[], bool] | None = None,
    ) -> GenerationResult:
        prompt = request.prompt or " ".join(m.content for m in request.messages)
        if "overflow" in prompt:
            raise ContextOverflowError("The message is too long (5000 of 4096 tokens).",
                                       needed=5000, n_ctx=4096, reserve=512)
        if "boom" in prompt:
            raise RuntimeError("boom")
        if request.constraint is not None and "bad schema" in prompt:
            raise GrammarError("The JSON schema cannot be used: Invalid type: strng.")
        delay = 0.02 if "slow" in prompt else 0.0005
        rec = StatsRecorder()
        start = time.perf_counter()
        text = []
        finish = FinishReason.LENGTH
        for i in range(request.max_tokens):
            if "hang" in prompt:
                time.sleep(3600)
            if "crash" in prompt and i == 5:
                os._exit(3)
            if should_cancel is not None and should_cancel():
                finish = FinishReason.CANCELLED
                break
            time.sleep(delay)
            piece = f"t{i} "
            text.append(piece)
            rec.generated_tokens += 1
            rec.verify_passes += 1
            rec.record_draft(2, 1)
            rec.generation_seconds = time.perf_counter() - start
            if on_event is not None:
                on_event(TokenEvent(piece, 1, 1, rec.snapshot(), self.info.speculation))
        return GenerationResult("".join(text), finish, rec.snapshot(), self.info.speculation)

    draft_problem = ""  # what the benchmark process reads

    def reset(self) -> None:
        pass

    def close(self) -> None:
        pass
