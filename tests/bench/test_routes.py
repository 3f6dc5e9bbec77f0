"""Routes (bench/modes.py): the same prompts measured in a second place in one run, each route's
figures against its own plain decoding; the runner's engines per route; the link-delay relay."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable
from types import SimpleNamespace

import pytest

from localchat.bench.link_delay import DelayedEngine, DelayRelay
from localchat.bench.modes import bench_mode, is_off, off_labels, routed
from localchat.bench.oracle import oracle_rows
from localchat.bench.prompts import (
    BenchPrompt,
    builtin_prompts,
    heldout2_prompts,
    heldout_prompts,
    prompts_from,
)
from localchat.bench.report import BenchReport, result_rows, same_text
from localchat.bench.route_facts import RouteFacts, ServerTime, TurnLatency, route_names
from localchat.bench.routes import OpenRoutes, here_config, open_routes
from localchat.bench.runner import run_bench
from localchat.engine.errors import EngineError
from localchat.engine.rpc_wire import Endpoint
from localchat.engine.stats import GenerationStats
from localchat.engine.types import (
    EngineConfig,
    FinishReason,
    GenerationRequest,
    GenerationResult,
    SpeculationState,
    TokenEvent,
)
from tests.bench.test_report import rec
from tests.engine.rpc_workers import serve_loopback


def test_a_routed_label_compares_with_off_on_its_own_route() -> None:
    adaptive = routed(bench_mode("adaptive"), "api")
    assert adaptive.name == "adaptive@api" and adaptive.route == "api"
    assert routed(bench_mode("draft", 8, label="draft:8"), "rpc+5ms").name == "draft:8@rpc+5ms"
    assert off_labels("adaptive@api") == ("off@api",) and off_labels("draft:8") == ("off",)
    assert off_labels("draft+ff@api") == ("off+ff@api", "off@api")
    assert is_off("off@rpc+5ms") and is_off("off") and not is_off("draft@api")


def test_summary_and_records_give_each_route_its_own_speed_up() -> None:
    report = BenchReport([rec("a", "code", "off", 10.0), rec("a", "code", "draft", 15.0, True),
                          rec("a", "code", "off@api", 8.0), rec("a", "code", "draft@api", 16.0, True)])
    rows = {r.mode: r for r in report.summary() if r.category == "all"}
    assert rows["draft"].speedup_vs_off == pytest.approx(1.5)
    assert rows["draft@api"].speedup_vs_off == pytest.approx(2.0)
    assert rows["off@api"].speedup_vs_off == pytest.approx(1.0)
    speedups = {row.record.mode: row.speedup for row in result_rows(report.records)}
    assert speedups == pytest.approx({"off": 1.0, "draft": 1.5, "off@api": 1.0, "draft@api": 2.0})


def test_the_oracle_judges_the_bench_engine_only() -> None:
    records = [rec("a", "code", "off", 10.0), rec("a", "code", "adaptive", 12.0),
               rec("a", "code", "off@api", 30.0), rec("a", "code", "adaptive@api", 9.0)]
    (row,) = oracle_rows(records)
    assert row.best_mode == "off" and row.adaptive_tokens_per_s == pytest.approx(12.0)


class TextOnly:
    """A BenchEngine that answers with text and no token ids (as the API does)."""

    def __init__(self, answer: Callable[[GenerationRequest], str]) -> None:
        self.answer = answer
        self.requests: list[GenerationRequest] = []

    def reset(self) -> None:
        pass

    def generate(self, request: GenerationRequest, on_event: Callable[[TokenEvent], None] | None = None,
                 should_cancel: Callable[[], bool] | None = None) -> GenerationResult:
        self.requests.append(request)
        stats = GenerationStats(generated_tokens=4, generation_seconds=0.1, verify_passes=4)
        spec = SpeculationState(False, "off")
        return GenerationResult(self.answer(request), FinishReason.STOP, stats, spec)


def test_the_runner_sends_routed_modes_to_their_engine_and_compares_texts() -> None:
    here = TextOnly(lambda r: "four")
    there = TextOnly(lambda r: "four" if not r.speculation.enabled else "five")
    modes = [bench_mode("off"), bench_mode("draft")]
    every = [*modes, *(routed(m, "api") for m in modes)]
    prompts = [BenchPrompt("a", "code", "Count."), BenchPrompt("b", "chat", "Hi.")]
    report = run_bench(here, prompts, every, 4, warmup=False, routes={"api": there})
    assert len(here.requests) == 4 and len(there.requests) == 4
    got = {(r.id, r.mode): r for r in report.records}
    assert got[("a", "draft")].matches_off is True
    # Through the route the draft's text differs from the route's own plain text: known by text only.
    assert got[("a", "draft@api")].matches_off is False and got[("a", "draft@api")].first_mismatch is None
    assert same_text(got[("a", "draft@api")]) == "no"
    with pytest.raises(ValueError, match="no engine for the route"):
        run_bench(here, prompts, every, 4, warmup=False)


def _echo_server() -> tuple[socket.socket, Endpoint]:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)

    def serve() -> None:
        conn, _ = server.accept()
        with conn:
            while data := conn.recv(1024):
                conn.sendall(data)

    threading.Thread(target=serve, daemon=True).start()
    return server, Endpoint("127.0.0.1", server.getsockname()[1])


def _echo_ms(sock: socket.socket) -> float:
    t = time.perf_counter()
    sock.sendall(b"ping")
    assert sock.recv(16) == b"ping"
    return (time.perf_counter() - t) * 1000


def test_the_relay_holds_each_chunk_its_delay_each_way_and_follows_a_new_delay() -> None:
    server, target = _echo_server()
    relay = DelayRelay(target, 0.03)
    try:
        with socket.create_connection((relay.endpoint.host, relay.endpoint.port)) as sock:
            assert _echo_ms(sock) >= 60  # 30 ms there and 30 back
            relay.delay_s = 0.0
            assert _echo_ms(sock) < 30
    finally:
        relay.close()
        server.close()


def test_a_delayed_engine_sets_its_delay_before_each_call() -> None:
    server, target = _echo_server()
    relays = [DelayRelay(target), DelayRelay(target)]
    inner = TextOnly(lambda r: "x")
    try:
        DelayedEngine(inner, relays, 0.005).reset()
        assert [r.delay_s for r in relays] == [0.005, 0.005]
        DelayedEngine(inner, relays, 0.02).generate(GenerationRequest())
        assert [r.delay_s for r in relays] == [0.02, 0.02] and len(inner.requests) == 1
    finally:
        for r in relays:
            r.close()
        server.close()


def test_the_held_out_prompts_ship_beside_the_built_in_ones_and_share_none() -> None:
    heldout = heldout_prompts()
    counts: dict[str, int] = {}
    for p in heldout:
        counts[p.category] = counts.get(p.category, 0) + 1
    assert counts == {"code": 4, "edit": 4, "chat": 4, "creative": 4}
    assert not {p.prompt for p in heldout} & {p.prompt for p in builtin_prompts()}
    assert prompts_from("heldout") == heldout and prompts_from("builtin") == builtin_prompts()


def test_the_second_held_out_set_has_eight_prompts_per_category_and_shares_none() -> None:
    second = heldout2_prompts()
    counts: dict[str, int] = {}
    for p in second:
        counts[p.category] = counts.get(p.category, 0) + 1
    assert counts == {"code": 8, "edit": 8, "chat": 8, "creative": 8}
    others = {p.prompt for p in builtin_prompts()} | {p.prompt for p in heldout_prompts()}
    assert not {p.prompt for p in second} & others
    assert prompts_from("heldout2") == second


def test_route_facts_name_the_routes_and_give_the_servers_rate_per_mode() -> None:
    assert route_names(True, [0, 1.5]) == ["api", "rpc+0ms", "rpc+1.5ms"] and route_names(False, []) == []
    draft = bench_mode("draft", 4).speculation
    facts = RouteFacts(True, (ServerTime("draft", 4, 40, 2.0), ServerTime("draft", 8, 10, 0.0)))
    assert facts.server_rate(draft) == pytest.approx(20.0)
    assert facts.server_rate(bench_mode("draft", 8).speculation) == 0.0  # no time measured
    assert facts.server_rate(bench_mode("off").speculation) == 0.0


class _Split:
    """What the benchmark process's factory makes for the split target."""

    def __init__(self, config: EngineConfig) -> None:
        self.config = config
        self.info = SimpleNamespace(placement="local + 1 worker")
        self.closed = False

    def close(self) -> None:
        self.closed = True


def _echo_many() -> tuple[socket.socket, Endpoint]:
    """Echoes every connection (a probe's HELLO comes back as an answer it does not expect: it is timed)."""
    def echo(conn: socket.socket) -> None:
        with conn:
            for data in iter(lambda: conn.recv(1024), b""):
                conn.sendall(data)

    return serve_loopback(echo)


def test_open_routes_splits_the_target_through_relays_and_times_each_delay() -> None:
    server, worker = _echo_many()
    made: list[_Split] = []

    def factory(config: EngineConfig) -> _Split:
        made.append(_Split(config))
        return made[-1]

    config = EngineConfig("t.gguf", rpc_servers=(str(worker),), tensor_split=(1.0, 1.0))
    try:
        with contextlib.ExitStack() as stack:
            routes = open_routes(stack, factory, config, "", [0, 20])
            (split,) = made
            # The split engine reaches the worker through a relay of its own, on 127.0.0.1.
            (relayed,) = split.config.rpc_servers
            assert relayed != str(worker) and relayed.startswith("127.0.0.1:")
            assert list(routes.engines) == ["rpc+0ms", "rpc+20ms"] and routes.api is None
            facts = routes.facts("Count.")
            assert [t.route for t in facts.round_trips] == ["rpc+0ms", "rpc+20ms"]
            assert facts.round_trips[1].hello_ms >= 40 > facts.round_trips[0].hello_ms
            assert facts.split_placement == "local + 1 worker" and not facts.api
        assert split.closed  # with the stack
    finally:
        server.close()
    # The bench's own engine then runs the whole target here.
    assert here_config(config, [0]).rpc_servers == () and here_config(config, []) == config


def test_open_routes_without_routes_opens_nothing() -> None:
    def factory(config: EngineConfig) -> None:
        raise AssertionError("no engine is made without a link delay")

    with contextlib.ExitStack() as stack:
        routes = open_routes(stack, factory, EngineConfig("t.gguf"), "", [])
    assert routes.engines == {} and routes.facts(None) == RouteFacts()


class _Api:
    """An ApiBenchEngine's facts: the server's timings per mode, and a latency that cannot be measured."""

    def __init__(self) -> None:
        self.server_seconds = {("draft", 4): (40, 2.0)}

    def turn_latency(self, prompt: str) -> TurnLatency:
        raise EngineError("The API answered with an error: 503")


def test_the_api_routes_facts_stand_without_a_latency_the_api_refused() -> None:
    routes = OpenRoutes(api=_Api())  # type: ignore[arg-type]
    facts = routes.facts("Count.")
    assert facts.api and facts.latency is None
    assert facts.server_times == (ServerTime("draft", 4, 40, 2.0),)
    assert routes.facts(None).latency is None  # a cancelled run measures none
