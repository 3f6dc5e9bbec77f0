"""The routes of ``localchat bench`` built where the benchmark runs: in the benchmark process.

A route is a second place the same prompts are measured in (bench/modes.py): ``api``, the local API
through the OpenAI client (``--through-api``; the server and its engine process belong to the
command, which passes their address), and ``rpc+MSms``, the target split over the workers reached
through a relay that adds MS ms each way (``--link-latency``; the relays and the split engine live
here, beside the bench's own engine, so a worker that vanishes aborts the benchmark process, not the
command). ``open_routes`` builds them; bench/route_facts.py's ``RouteFacts`` is what was measured
about them, sent back with the report (host/events.py's ``BenchDone``) for the command to print and
write as JSON.

The engine is made by the factory the benchmark process was given: nothing here imports
``localchat.engine.engine``.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from localchat.bench.api_engine import ApiBenchEngine
from localchat.bench.link_delay import DelayedEngine, DelayRelay, round_trip_ms
from localchat.bench.route_facts import API, RoundTrip, RouteFacts, ServerTime, link_route
from localchat.bench.runner import BenchEngine
from localchat.engine.errors import EngineError
from localchat.engine.rpc_wire import parse_endpoint
from localchat.engine.types import EngineConfig

log = logging.getLogger(__name__)


def here_config(config: EngineConfig, delays: Sequence[float]) -> EngineConfig:
    """The bench's own engine: with link delays it holds the whole target (the split one is a route)."""
    return replace(config, rpc_servers=(), tensor_split=()) if delays else config


@dataclass
class OpenRoutes:
    """The routes' engines for the runner (route name: engine), and what is known about them so far."""

    engines: dict[str, BenchEngine] = field(default_factory=dict)
    api: ApiBenchEngine | None = None
    round_trips: list[RoundTrip] = field(default_factory=list)
    split_placement: str = ""

    def facts(self, prompt: str | None) -> RouteFacts:
        """The facts, with the API's time to first token measured now on ``prompt`` (None: not measured,
        the run was cancelled)."""
        if self.api is None:
            return RouteFacts(round_trips=tuple(self.round_trips), split_placement=self.split_placement)
        latency = None
        if prompt is not None:
            try:
                latency = self.api.turn_latency(prompt)
            except EngineError as exc:  # the run's records stand without it
                log.warning("the time to first token through the API was not measured: %s", exc)
        times = tuple(ServerTime(mode, n, tokens, seconds)
                      for (mode, n), (tokens, seconds) in self.api.server_seconds.items())
        return RouteFacts(True, times, latency, tuple(self.round_trips), self.split_placement)


def open_routes(stack: contextlib.ExitStack, factory: Callable[[EngineConfig], Any], config: EngineConfig,
                api_url: str, delays: Sequence[float]) -> OpenRoutes:
    """The routes a run asks for: the API at ``api_url`` (``.../v1``; "" none), and with ``delays`` the
    target split over ``config``'s workers, each reached through a relay; closed with ``stack``."""
    routes = OpenRoutes()
    if api_url:
        routes.api = ApiBenchEngine(api_url)
        routes.engines[API] = routes.api
    if not delays:
        return routes
    relays = []
    for address in config.rpc_servers:
        relay = DelayRelay(parse_endpoint(address))
        stack.callback(relay.close)
        relays.append(relay)
    # Round trips first: a worker serves one computer at a time, and the split engine will hold it.
    for delay in delays:
        for relay in relays:
            relay.delay_s = delay / 1000
        routes.round_trips.append(RoundTrip(link_route(delay), delay, round_trip_ms(relays[0].endpoint)))
    for relay in relays:
        relay.delay_s = 0.0  # the weights go over at full speed
    split = factory(replace(config, rpc_servers=tuple(str(r.endpoint) for r in relays)))
    stack.callback(split.close)
    routes.split_placement = split.info.placement
    for delay in delays:
        routes.engines[link_route(delay)] = DelayedEngine(split, relays, delay / 1000)
    return routes
