"""``localchat bench`` with its engine in a benchmark process of its own (host/supervisor.py's
BenchSupervisor, as the app's benchmark dialog runs it).

llama.cpp aborts the process it runs in when a worker of ``--rpc`` vanishes mid-reply; in the
benchmark process that ends the run, not this one: the records that arrived (each as it was done)
are kept, summarised and written as JSON marked incomplete, and the failure is one sentence naming
the worker. Ctrl+C reaches the benchmark process too, which ignores it (its parent ends it).

With ``--through-api`` or ``--link-latency`` the routes are measured from the benchmark process too
(bench/routes.py): its engines, the split target's included, are never in this one.
"""

from __future__ import annotations

import queue
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from localchat.bench.modes import BenchMode
from localchat.bench.prompts import BenchPrompt
from localchat.bench.report import BenchRecord, BenchReport
from localchat.bench.route_facts import RouteFacts
from localchat.cli.common import engine_failure, engine_log
from localchat.engine.types import EngineConfig, EngineInfo
from localchat.host.events import BenchDone, BenchProgress, Event, Failed, Loaded
from localchat.host.failure_words import Audience


@dataclass
class ChildBench:
    """What a benchmark process gave: its report (the records so far when it failed), the loaded
    engine's facts (None: it did not load), the failure in one sentence (None: it finished), and what
    it measured about its routes (None: it had none, or it failed)."""

    report: BenchReport
    info: EngineInfo | None
    failure: str | None
    routes: RouteFacts | None = None


def bench_in_child(
    config: EngineConfig,
    prompts: Sequence[BenchPrompt],
    modes: Sequence[BenchMode],
    max_tokens: int,
    repeat: int,
    on_loaded: Callable[[Loaded], None],
    on_record: Callable[[BenchRecord, int, int], None],
    *,
    api_url: str = "",
    link_delays: Sequence[float] = (),
) -> ChildBench:
    """Run the benchmark in its own process; ``on_loaded`` once the models are in, ``on_record`` after
    each run. ``api_url`` and ``link_delays``: the routes it measures too (bench/routes.py).
    KeyboardInterrupt ends the process and propagates."""
    from localchat.host.supervisor import BenchSupervisor

    events: queue.Queue[Event] = queue.Queue()
    log_path = engine_log()
    supervisor = BenchSupervisor(events.put, log_path=log_path)
    supervisor.start(config, prompts, modes, max_tokens, warmup=True, repeat=repeat, api_url=api_url,
                     link_delays=link_delays)
    records: list[BenchRecord] = []
    info: EngineInfo | None = None
    try:
        while True:
            event = events.get()
            if isinstance(event, Loaded):
                info = event.info
                on_loaded(event)
            elif isinstance(event, BenchProgress):
                records.append(event.record)
                on_record(event.record, event.done, event.total)
            elif isinstance(event, BenchDone):
                return ChildBench(event.report, info, None, event.routes)
            elif isinstance(event, Failed):
                return ChildBench(BenchReport(records=records), info,
                                  engine_failure(event.failure, Audience.BENCH, log_path))
    finally:
        supervisor.stop()
