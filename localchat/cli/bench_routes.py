"""The other places ``localchat bench`` measures the same prompts in, beside its own engine.

- ``--through-api``: the same model served by the local API (an engine process behind the HTTP
  server, as ``localchat serve`` runs it) on 127.0.0.1, each reply streamed by the official
  ``openai`` client (bench/api_engine.py); every mode runs directly and through the API, prompt by
  prompt, labelled ``MODE`` and ``MODE@api``. Two copies of the models are loaded (the benchmark
  process's and the API's engine process's), used one at a time. The server runs here, on a thread;
  the benchmark process is its client.
- ``--link-latency MS[,MS...]`` with ``--rpc``: the target on this computer alone (``MODE``), and
  split over the workers reached through a relay adding MS ms each way (``MODE@rpc+MSms``,
  bench/link_delay.py), one engine loaded through the relay and measured at every latency; the
  relays and both engines are the benchmark process's (bench/routes.py).

Each route's figures are compared with plain decoding on the same route; ``print_routes`` sets
the routes side by side (and what theory predicts for the link), ``route_facts`` puts what was
measured about each route into the JSON report (its ``routes`` key).
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any

from localchat.bench.modes import ROUTE_MARK, BenchMode, is_off, off_labels
from localchat.bench.report import BenchReport, SummaryRow
from localchat.bench.route_facts import API, RouteFacts
from localchat.engine.types import EngineConfig


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


def require_openai() -> None:
    """ApiUnavailable (a sentence) when the ``openai`` package is missing: said before anything loads."""
    import importlib.util

    from localchat.bench.api_engine import ApiUnavailable

    if importlib.util.find_spec("openai") is None:
        raise ApiUnavailable("--through-api needs the openai package: pip install openai")


def start_api(stack: contextlib.ExitStack, config: EngineConfig, max_tokens: int,
              log_path: str | None) -> str:
    """The local API on 127.0.0.1 (any free port) over an engine process of its own, loaded; its
    address for the OpenAI client (``.../v1``). EngineUnavailable when the model does not load."""
    from localchat.host.supervisor import EngineSupervisor
    from localchat.server import ServerSettings, ServerThread, bind_socket, create_app

    # Not restarted behind the benchmark's back: a death fails the request, and the run says so.
    supervisor = EngineSupervisor(config, log_path=log_path, restart_eagerly=False)
    settings = ServerSettings(model_id="localchat", max_tokens=max(max_tokens, 64))
    server = ServerThread(create_app(supervisor, settings), bind_socket("127.0.0.1", 0),
                          settings.connections())
    stack.callback(supervisor.close)
    supervisor.start()
    server.start()
    stack.callback(server.stop)
    supervisor.wait_ready()
    return server.url + "/v1"


def with_routes(modes: Sequence[BenchMode], routes: Sequence[str]) -> list[BenchMode]:
    """Every mode here, then every mode on each route."""
    from localchat.bench.modes import routed

    return [*modes, *(routed(m, r) for r in routes for m in modes)]


def _all_rows(report: BenchReport) -> dict[str, SummaryRow]:
    return {row.mode: row for row in report.summary() if row.category == "all"}


def print_routes(report: BenchReport, modes: Sequence[BenchMode], routes: RouteFacts | None) -> None:
    """The routes side by side (category ``all``)."""
    if routes is None:
        return
    rows = _all_rows(report)
    if routes.api:
        print()
        print("through the API (tokens/s the OpenAI client saw) against the benchmark's own engine:")
        for m in modes:
            here, there = rows.get(m.name), rows.get(f"{m.name}{ROUTE_MARK}{API}")
            if here is None or there is None:
                continue
            line = f"  {m.name:10s} {there.tokens_per_s:8.2f} against {here.tokens_per_s:8.2f} " \
                   f"({there.tokens_per_s / here.tokens_per_s:.2f}x)"
            server = routes.server_rate(m.speculation)
            if server:
                line += f"; the server's own timings {server:.2f} ({server / here.tokens_per_s:.2f}x)"
            print(line)
        if routes.latency is not None:
            first, follow = routes.latency.first_turn_s * 1000, routes.latency.follow_up_s * 1000
            print(f"time to first token through the API: first turn {first:.0f} ms (a long system prompt), "
                  f"follow-up turn {follow:.0f} ms (only its new tokens are read)")
    if routes.round_trips:
        _print_links(rows, modes, routes)


def _print_links(rows: dict[str, SummaryRow], modes: Sequence[BenchMode], routes: RouteFacts) -> None:
    spec = [m.name for m in modes if not is_off(m.name)]
    print()
    delays = ", ".join(f"{t.delay_ms:g}" for t in routes.round_trips)
    print(f"split: target on {routes.split_placement}, the workers through a relay adding {delays} ms "
          "each way")
    lines = [("here alone", "", "-")] + [
        (f"split, +{t.delay_ms:g} ms each way", f"{ROUTE_MARK}{t.route}", f"{t.hello_ms:.1f} ms")
        for t in routes.round_trips]
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
    for route in (t.route for t in routes.round_trips):
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


def route_facts(modes: Sequence[BenchMode], routes: RouteFacts | None) -> list[dict[str, Any]]:
    """What the JSON report says about each route (its ``routes`` key)."""
    out: list[dict[str, Any]] = []
    if routes is None:
        return out
    if routes.api:
        fact: dict[str, Any] = {"route": API, "client": "openai",
                                "server_tokens_per_s": {m.name: round(routes.server_rate(m.speculation), 3)
                                                        for m in modes}}
        if routes.latency is not None:
            fact["first_turn_ttft_ms"] = round(routes.latency.first_turn_s * 1000, 1)
            fact["follow_up_ttft_ms"] = round(routes.latency.follow_up_s * 1000, 1)
        out.append(fact)
    for t in routes.round_trips:
        out.append({"route": t.route, "delay_ms": t.delay_ms, "round_trip_ms": round(t.hello_ms, 2)})
    return out
