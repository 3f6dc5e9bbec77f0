"""What a benchmark measured about its routes (bench/routes.py), as plain frozen data: it crosses from
the benchmark process to the command in host/events.py's ``BenchDone``, so the window's side imports
it too and it imports nothing that drives an engine."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from localchat.engine.speculation_modes import mode_for_speculation
from localchat.engine.types import SpeculationConfig

API = "api"


def link_route(delay_ms: float) -> str:
    return f"rpc+{delay_ms:g}ms"


@dataclass(frozen=True)
class TurnLatency:
    """Time to first token through the API: a first turn, and its follow-up (only its new tokens are
    read: the server keeps the conversation's cache)."""

    first_turn_s: float
    follow_up_s: float


@dataclass(frozen=True)
class RoundTrip:
    route: str
    delay_ms: float
    hello_ms: float  # the median HELLO exchange with the first worker through the relay


@dataclass(frozen=True)
class ServerTime:
    """The API server's own timings for one mode's replies: its tokens and generation seconds."""

    mode: str  # the API's mode name (engine/speculation_modes.py)
    draft_tokens: int
    tokens: int
    seconds: float


@dataclass(frozen=True)
class RouteFacts:
    """What a run measured about its routes, beside the records."""

    api: bool = False
    server_times: tuple[ServerTime, ...] = ()
    latency: TurnLatency | None = None
    round_trips: tuple[RoundTrip, ...] = ()
    split_placement: str = ""  # where the split target ran ("local + 1 worker")

    def server_rate(self, speculation: SpeculationConfig) -> float:
        """The server's own tokens/s for replies in this speculation mode; 0 if unknown."""
        key = (mode_for_speculation(speculation), speculation.draft_tokens)
        for t in self.server_times:
            if (t.mode, t.draft_tokens) == key and t.seconds > 0:
                return t.tokens / t.seconds
        return 0.0


def route_names(api: bool, delays: Sequence[float]) -> list[str]:
    """The routes a run has, in the order their modes are listed."""
    return [*([API] if api else []), *(link_route(d) for d in delays)]
