"""The other places ``localchat bench`` measures the same prompts in, beside its own engine.

- ``--through-api``: the same model served by the local API (an engine process behind the HTTP
  server, as ``localchat serve`` runs it) on 127.0.0.1, each reply streamed by the official
  ``openai`` client (bench/api_engine.py); every mode runs directly and through the API, prompt by
  prompt, labelled ``MODE`` and ``MODE@api``. Two copies of the models are loaded (this process's
  and the engine process's), used one at a time.
- ``--link-latency MS[,MS...]`` with ``--rpc``: the target on this computer alone (``MODE``), and
  split over the workers reached through a relay adding MS ms each way (``MODE@rpc+MSms``,
  bench/link_delay.py), one engine loaded through the relay and measured at every latency.

Each route's figures are compared with plain decoding on the same route; ``print_routes`` sets
the routes side by side (and what theory predicts for the link), ``route_facts`` puts what was
measured about each route into the JSON report (its ``routes`` key).
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from localchat.bench.api_engine import ApiBenchEngine, TurnLatency
from localchat.bench.link_delay import DelayedEngine, DelayRelay, round_trip_ms
from localchat.bench.modes import ROUTE_MARK, BenchMode, is_off, off_labels
from localchat.bench.report import BenchReport, SummaryRow
from localchat.bench.runner import BenchEngine
from localchat.engine.rpc_wire import parse_endpoint
from localchat.engine.types import EngineConfig

API = "api"


@dataclass
class Routes:
    engines: dict[str, BenchEngine] = field(default_factory=dict)
    api: ApiBenchEngine | None = None
    latency: TurnLatency | None = None
    round_trips: dict[str, tuple[float, float]] = field(default_factory=dict)  # route: (delay ms, HELLO ms)


def link_route(delay_ms: float) -> str:
    return f"rpc+{delay_ms:g}ms"


def parse_delays(text: str) -> list[float]:
    """``--link-latency`` as milliseconds; ValueError with a sentence."""
    try:
        delays = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise ValueError(
            f"--link-latency takes milliseconds separated by commas (0,1,5), not {text!r}.") from None
    if not delays or any(d < 0 or d > 10_000 for d in delays):
        raise ValueError("--link-latency takes milliseconds from 0 to 10000, separated by commas (0,1,5).")
    return list(dict.fromkeys(delays))


def start_api(stack: contextlib.ExitStack, config: EngineConfig, max_tokens: int) -> ApiBenchEngine:
    """The local API on 127.0.0.1 (any free port) over an engine process of its own, loaded."""
    from localchat.host.supervisor import EngineSupervisor
    from localchat.server import ServerSettings, ServerThread, bind_socket, create_app

    supervisor = EngineSupervisor(config)
    settings = ServerSettings(model_id="localchat", max_tokens=max(max_tokens, 64))
    server = ServerThread(create_app(supervisor, settings), bind_socket("127.0.0.1", 0),
                          settings.connections())
    api = ApiBenchEngine(server.url + "/v1", settings.model_id)  # before loading: needs openai
    stack.callback(supervisor.close)
    supervisor.start()
    server.start()
    stack.callback(server.stop)
    supervisor.wait_ready()
    return api


def start_links(stack: contextlib.ExitStack, config: EngineConfig, delays: Sequence[float]) -> Routes:
    """The target split over ``config``'s workers, each reached through a relay; one route per delay."""
    from localchat.engine.engine import Engine

    relays = []
    for address in config.rpc_servers:
        relay = DelayRelay(parse_endpoint(address))
        stack.callback(relay.close)
        relays.append(relay)
    routes = Routes()
    # Round trips first: a worker serves one computer at a time, and the split engine will hold it.
    for delay in delays:
        for relay in relays:
            relay.delay_s = delay / 1000
        routes.round_trips[link_route(delay)] = (delay, round_trip_ms(relays[0].endpoint))
    for relay in relays:
        relay.delay_s = 0.0  # the weights go over at full speed
    split = stack.enter_context(Engine(replace(config, rpc_servers=tuple(str(r.endpoint) for r in relays))))
    print(f"split: target on {split.info.placement}, the workers through a relay adding "
          f"{', '.join(f'{d:g}' for d in delays)} ms each way", flush=True)
    for delay in delays:
        routes.engines[link_route(delay)] = DelayedEngine(split, relays, delay / 1000)
    return routes


def with_routes(modes: Sequence[BenchMode], routes: Sequence[str]) -> list[BenchMode]:
    """Every mode here, then every mode on each route."""
    from localchat.bench.modes import routed

    return [*modes, *(routed(m, r) for r in routes for m in modes)]


def _all_rows(report: BenchReport) -> dict[str, SummaryRow]:
    return {row.mode: row for row in report.summary() if row.category == "all"}


def print_routes(report: BenchReport, modes: Sequence[BenchMode], routes: Routes) -> None:
    """The routes side by side (category ``all``)."""
    rows = _all_rows(report)
    if routes.api is not None:
        print()
        print("through the API (tokens/s the OpenAI client saw) against the engine in this process:")
        for m in modes:
            here, there = rows.get(m.name), rows.get(f"{m.name}{ROUTE_MARK}{API}")
            if here is None or there is None:
                continue
            line = f"  {m.name:10s} {there.tokens_per_s:8.2f} against {here.tokens_per_s:8.2f} " \
                   f"({there.tokens_per_s / here.tokens_per_s:.2f}x)"
            server = server_rate(routes.api, m)
            if server:
                line += f"; the server's own timings {server:.2f} ({server / here.tokens_per_s:.2f}x)"
            print(line)
        if routes.latency is not None:
            first, follow = routes.latency.first_turn_s * 1000, routes.latency.follow_up_s * 1000
            print(f"time to first token through the API: first turn {first:.0f} ms (a long system prompt), "
                  f"follow-up turn {follow:.0f} ms (only its new tokens are read)")
    if routes.round_trips:
        _print_links(rows, modes, routes)


def _print_links(rows: dict[str, SummaryRow], modes: Sequence[BenchMode], routes: Routes) -> None:
    spec = [m.name for m in modes if not is_off(m.name)]
    print()
    lines = [("here alone", "", "-")] + [
        (f"split, +{delay:g} ms each way", f"{ROUTE_MARK}{route}", f"{rtt:.1f} ms")
        for route, (delay, rtt) in routes.round_trips.items()]
    w = max(len(label) for label, _, _ in lines)
    head = "".join(f" {m + ' tok/s':>14s} {'x off':>6s} {'acc.len':>7s}" for m in spec)
    print(f"{'target':{w}s} {'round trip':>10s} {'off tok/s':>9s}{head}")
    for label, suffix, rtt in lines:
        off = rows.get(f"off{suffix}")
        if off is None:
            continue
        cells = ""
        for m in spec:
            r = rows.get(f"{m}{suffix}")
            if r is not None:
                cells += f" {r.tokens_per_s:14.2f} {r.tokens_per_s / off.tokens_per_s:5.2f}x " \
                         f"{r.acceptance_length:7.2f}"
        print(f"{label:{w}s} {rtt:>10s} {off.tokens_per_s:9.2f}{cells}")
    local_off = rows.get("off")
    if local_off is None:
        return
    print()
    for route in routes.round_trips:
        suffix = f"{ROUTE_MARK}{route}"
        off = rows.get(off_labels(f"off{suffix}")[0])
        if off is None:
            continue
        extra_s = 1 / off.tokens_per_s - 1 / local_off.tokens_per_s  # link seconds added per target pass
        for m in spec:
            here, there = rows.get(m), rows.get(f"{m}{suffix}")
            if here is None or there is None or here.speedup_vs_off is None:
                continue
            length = there.acceptance_length or 1.0
            predicted = length / (length / here.tokens_per_s + extra_s) / off.tokens_per_s
            measured = there.tokens_per_s / off.tokens_per_s
            print(f"{route}, {m}: speed-up {measured:.2f}x (local {here.speedup_vs_off:.2f}x, ratio "
                  f"{measured / here.speedup_vs_off:.2f}); theory from the link's cost of "
                  f"{1000 * extra_s:.1f} ms a pass and acc.len {length:.2f}: {predicted:.2f}x")


def server_rate(api: ApiBenchEngine, mode: BenchMode) -> float:
    """The server's own tokens/s for ``mode``'s replies (its ``timings``); 0 if unknown."""
    from localchat.engine.speculation_modes import mode_for_speculation

    key = (mode_for_speculation(mode.speculation), mode.speculation.draft_tokens)
    tokens, seconds = api.server_seconds.get(key, (0, 0.0))
    return tokens / seconds if seconds > 0 else 0.0


def route_facts(modes: Sequence[BenchMode], routes: Routes) -> list[dict[str, Any]]:
    """What the JSON report says about each route (its ``routes`` key)."""
    out: list[dict[str, Any]] = []
    if routes.api is not None:
        fact: dict[str, Any] = {"route": API, "client": "openai",
                                "server_tokens_per_s": {m.name: round(server_rate(routes.api, m), 3)
                                                        for m in modes}}
        if routes.latency is not None:
            fact["first_turn_ttft_ms"] = round(routes.latency.first_turn_s * 1000, 1)
            fact["follow_up_ttft_ms"] = round(routes.latency.follow_up_s * 1000, 1)
        out.append(fact)
    for route, (delay, rtt) in routes.round_trips.items():
        out.append({"route": route, "delay_ms": delay, "round_trip_ms": round(rtt, 2)})
    return out
