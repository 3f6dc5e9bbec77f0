"""A stand-in for services.EngineClient (an EnginePort), driven by the test."""

from __future__ import annotations

from dataclasses import replace

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
    ToolCall,
)
from localchat.host.events import EngineState, Failed, Failure, FailureKind, Finished, Phase, Tokens


def model_info(name: str = "Fake-1B", path: str = "/models/fake.gguf", tool_use: bool = False) -> ModelInfo:
    return ModelInfo(path, name, "llama", 1_000_000_000, 600_000_000, 4096, 32000, True,
                     tool_format="hermes" if tool_use else "generic", tool_use=tool_use)


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
    """Implements services.engine_port.EnginePort without a process: loads at once, and the test
    drives each reply (``stream``, ``finish``, ``fail``, ``die``)."""

    state_changed = Signal(object)
    job_event = Signal(object)

    def __init__(self) -> None:
        super().__init__()
        self.configs: list[EngineConfig] = []
        self.requests: list[GenerationRequest] = []
        self.cancelled = 0
        self.fail_next_load = ""
        self.text = ""
        self.runs: tuple[int, ...] = ()
        self.job = 0
        self._state = EngineState()
        self.log_path: str | None = None
        self.supervisor = None
        self.tool_use = False  # the models it loads were trained to call tools (their template has tools)

    @property
    def state(self) -> EngineState:
        return self._state

    def set_state(self, **changes: object) -> None:
        self._state = replace(self._state, **changes)  # type: ignore[arg-type]
        self.state_changed.emit(self._state)

    def load(self, config: EngineConfig) -> None:
        self.configs.append(config)
        self.set_state(phase=Phase.LOADING, config=config, info=None, failure=None)
        if self.fail_next_load:
            message, self.fail_next_load = self.fail_next_load, ""
            self.set_state(phase=Phase.FAILED, failure=Failure(FailureKind.LOAD_FAILED, message))
            return
        target = model_info(path=config.target_path, tool_use=self.tool_use)
        info = EngineInfo("CPU", target, None, config.n_ctx, 2, 0, ON)
        self.set_state(phase=Phase.READY, info=info, ever_loaded=True, pid=4242)

    def generate(self, request: GenerationRequest) -> int:
        self.requests.append(request)
        self.text = ""
        self.runs = ()
        self.job += 1
        return self.job

    def cancel(self) -> None:
        self.cancelled += 1
        self.finish(FinishReason.CANCELLED)

    def memory_bytes(self) -> int | None:
        return None

    def shutdown(self) -> None:
        pass

    # driven by tests
    def speculation(self) -> SpeculationState:
        return ON if self.requests[-1].speculation.enabled else OFF

    def stream(self, text: str, tokens: int = 3, drafted_runs: tuple[int, ...] = (),
               source: str = "window") -> None:
        self.text += text
        self.runs = concat_runs(self.runs, drafted_runs or (len(text),))
        s = stats(tokens, passes=2, drafted=4, accepted=2)
        event = TokenEvent(text, tokens, 1, s, self.speculation(), drafted_runs)
        self.job_event.emit(Tokens(self.job, source, event))

    def finish(self, reason: FinishReason = FinishReason.STOP) -> None:
        s = stats(12, passes=5, drafted=12, accepted=7)
        runs, self.runs = self.runs, ()
        result = GenerationResult(self.text, reason, s, self.speculation(), drafted_runs=runs)
        self.job_event.emit(Finished(self.job, "window", result))

    def call_tools(self, *calls: tuple[str, str], text: str = "") -> tuple[ToolCall, ...]:
        """The reply ends in tool calls: (name, arguments as JSON text) each, after ``text``."""
        if text:
            self.stream(text)
        made = tuple(ToolCall(f"call_{self.job}_{i}", name, args) for i, (name, args) in enumerate(calls))
        s = stats(20, passes=6, drafted=12, accepted=9)
        result = GenerationResult(self.text, FinishReason.TOOL_CALLS, s, self.speculation(), tool_calls=made)
        self.runs = ()
        self.job_event.emit(Finished(self.job, "window", result))
        return made

    def fail(self, failure: Failure) -> None:
        self.job_event.emit(Failed(self.job, "window", failure))

    def die(self, exitcode: int = -9) -> None:
        """The engine process ended mid-reply: the reply fails, the state says STOPPED."""
        failure = Failure(FailureKind.ENGINE_DIED, exitcode=exitcode)
        self.fail(failure)
        self.set_state(phase=Phase.STOPPED, info=None, pid=None, failure=failure)
