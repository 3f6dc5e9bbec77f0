"""A stand-in for services.EngineClient: the same signals, driven by the test."""

from __future__ import annotations

from PySide6.QtCore import QObject, Signal

from localchat.engine.stats import GenerationStats
from localchat.engine.textruns import concat_runs
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


def model_info(name: str = "Fake-1B", path: str = "/models/fake.gguf") -> ModelInfo:
    return ModelInfo(path, name, "llama", 1_000_000_000, 600_000_000, 4096, 32000, True)


def stats(
    tokens: int, seconds: float = 0.5, passes: int = 0, drafted: int = 0, accepted: int = 0
) -> GenerationStats:
    return GenerationStats(
        prompt_tokens=20,
        prompt_seconds=0.1,
        generated_tokens=tokens,
        generation_seconds=seconds,
        verify_passes=passes,
        drafted=drafted,
        accepted=accepted,
    )


ON = SpeculationState(active=True, drafter="Fake-0.1B", draft_tokens=4)
OFF = SpeculationState(active=False, drafter="off", reason="turned off")


class FakeEngine(QObject):
    load_started = Signal()
    loaded = Signal(object)
    load_failed = Signal(str)
    tokens_received = Signal(object)
    generation_finished = Signal(object)
    generation_failed = Signal(str)
    engine_died = Signal(str)

    def __init__(self) -> None:
        super().__init__()
        self.configs: list[EngineConfig] = []
        self.requests: list[GenerationRequest] = []
        self.cancelled = 0
        self.restarts = 0
        self.fail_next_load = ""
        self.text = ""
        self.runs: tuple[int, ...] = ()
        self.pid = None

    @property
    def config(self) -> EngineConfig | None:
        """Like EngineClient.config: the last configuration passed to load."""
        return self.configs[-1] if self.configs else None

    def load(self, config: EngineConfig) -> None:
        self.configs.append(config)
        self.load_started.emit()
        if self.fail_next_load:
            message, self.fail_next_load = self.fail_next_load, ""
            self.load_failed.emit(message)
            return
        info = EngineInfo("CPU", model_info(path=config.target_path), None, config.n_ctx, 2, 0, ON)
        self.loaded.emit(info)

    def generate(self, request: GenerationRequest) -> None:
        self.requests.append(request)
        self.text = ""
        self.runs = ()

    def cancel(self) -> None:
        self.cancelled += 1
        self.finish(FinishReason.CANCELLED)

    def restart(self) -> None:
        self.restarts += 1

    # driven by tests
    def speculation(self) -> SpeculationState:
        return ON if self.requests[-1].speculation.enabled else OFF

    def stream(self, text: str, tokens: int = 3, drafted_runs: tuple[int, ...] = ()) -> None:
        self.text += text
        self.runs = concat_runs(self.runs, drafted_runs or (len(text),))
        s = stats(tokens, passes=2, drafted=4, accepted=2)
        self.tokens_received.emit(TokenEvent(text, tokens, 1, s, self.speculation(), drafted_runs))

    def finish(self, reason: FinishReason = FinishReason.STOP) -> None:
        s = stats(12, passes=5, drafted=12, accepted=7)
        runs, self.runs = self.runs, ()
        self.generation_finished.emit(
            GenerationResult(self.text, reason, s, self.speculation(), drafted_runs=runs)
        )
