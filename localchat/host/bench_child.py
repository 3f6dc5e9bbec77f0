"""The benchmark process: loads its own Engine, runs ``bench.runner.run_bench`` and reports each run.

With routes (``localchat bench --through-api`` or ``--link-latency``) it measures them too, from here
(bench/routes.py): the API through its address, the split target through relays of its own.

A benchmark runs in a spawned child of its own (not in the chat's engine
process) so it can start from empty caches, use the same greedy settings for
every mode, and be killed without touching the chat. Its supervisor is
host/supervisor.py's ``BenchSupervisor``, the same machinery as the engine's;
the app never imports this module (only the child does, by name).

It gets its ``RunBench`` when spawned and answers with host/events.py's
``Loaded``, ``BenchProgress``, ``BenchDone`` or ``Failed``. ``Cancel`` sets a
flag that ``run_bench`` checks between runs and the engine between steps; a
vanished app (EOF on the pipe) sets the same flag, so the child ends instead of
holding a model in memory.

No Qt here.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any, Protocol

from localchat.bench.report import BenchRecord
from localchat.bench.routes import here_config, open_routes
from localchat.bench.runner import BenchEngine, run_bench
from localchat.engine.types import EngineConfig, EngineInfo
from localchat.host.child import ParentGone, ParentLink, configure_logging
from localchat.host.engine_child import DEFAULT_ENGINE, generation_failure, load_factory, load_failure
from localchat.host.events import BenchDone, BenchProgress, Failed, Failure, FailureKind, Loaded
from localchat.host.protocol import Cancel, RunBench

log = logging.getLogger(__name__)

SOURCE = "bench"


class BenchableEngine(BenchEngine, Protocol):
    """What the benchmark process needs from localchat.engine.engine.Engine, beyond the runner's needs."""

    info: EngineInfo
    draft_problem: str

    def close(self) -> None: ...


class _BenchRunner:
    def __init__(self, conn: Connection, job: RunBench, factory: Callable[[EngineConfig], Any]) -> None:
        self._job = job
        self._factory = factory
        self._cancel = threading.Event()
        self._link = ParentLink(conn, self._on_message, self._cancel.set, name="bench")

    def _on_message(self, message: object) -> None:
        if isinstance(message, Cancel):
            self._cancel.set()

    def _fail(self, failure: Failure) -> None:
        self._link.send(Failed(0, SOURCE, failure))

    def run(self) -> None:
        self._link.start()
        job = self._job
        try:
            with contextlib.ExitStack() as stack:
                try:
                    engine: BenchableEngine = self._factory(here_config(job.config, job.link_delays))
                except Exception as exc:
                    log.warning("benchmark load failed: %s", exc, exc_info=True)
                    self._fail(load_failure(exc))
                    return
                stack.callback(_close_quietly, engine)
                self._link.send(Loaded(engine.info, engine.draft_problem or ""))
                try:
                    routes = open_routes(stack, self._factory, job.config, job.api_url, job.link_delays)
                except Exception as exc:
                    log.warning("the benchmark's routes could not start: %s", exc, exc_info=True)
                    self._fail(load_failure(exc))
                    return

                def on_record(record: BenchRecord, done: int, total: int) -> None:
                    self._link.send(BenchProgress(record, done, total))

                try:
                    report = run_bench(engine, job.prompts, job.modes, job.max_tokens, on_record=on_record,
                                       should_cancel=self._cancel.is_set, warmup=job.warmup,
                                       repeat=job.repeat, routes=routes.engines)
                    cancelled = self._cancel.is_set()
                    facts = (routes.facts(None if cancelled else job.prompts[0].prompt)
                             if job.api_url or job.link_delays else None)
                except (ParentGone, KeyboardInterrupt):
                    raise
                except Exception as exc:
                    log.warning("benchmark failed: %s", exc, exc_info=True)
                    self._fail(generation_failure(exc))
                    return
                # Closed before the report goes: the engine saves the pair's profile as it closes, and the
                # app may end this process as soon as it has the report.
                stack.close()
                self._link.send(BenchDone(report, cancelled, facts))
        except ParentGone:
            log.info("the app closed the pipe; leaving the benchmark")


def _close_quietly(engine: BenchableEngine) -> None:
    with contextlib.suppress(Exception):
        engine.close()


def serve_bench(
    conn: Connection, job: RunBench, engine_factory: str = DEFAULT_ENGINE, log_path: str | None = None
) -> None:
    """Entry point of the benchmark process (the target of multiprocessing's spawn)."""
    configure_logging(log_path, "bench")
    log.info("benchmark process started: %d prompts x %d modes", len(job.prompts), len(job.modes))
    try:
        factory = load_factory(engine_factory)
    except Exception as exc:
        log.exception("cannot import the engine %s", engine_factory)
        detail = f"The engine could not start ({type(exc).__name__}: {exc})."
        failure = Failure(FailureKind.LOAD_FAILED, detail)
        with contextlib.suppress(OSError, BrokenPipeError):
            conn.send(Failed(0, SOURCE, failure))
        conn.close()
        return
    _BenchRunner(conn, job, factory).run()
    conn.close()
    log.info("benchmark process leaving")
