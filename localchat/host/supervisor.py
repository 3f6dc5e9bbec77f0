"""Supervisors: the one owner of each child process and of everything known about it.

``EngineSupervisor`` owns the engine process and its state: it spawns it,
loads models, restarts it after a death (at once for a server, at the next job
for the window), leaves a worker that has gone out of the restart when the
pair fits here alone, kills an engine that ignores a cancel, and notices a
death while idle. It is the only holder of ``EngineState``: every change is a
new frozen snapshot, published as ``StateChanged``. Beside it, a fair queue of
jobs (host/jobs.py) from several sources: the window and the API clients share
ONE engine process and ONE loaded model::

    supervisor = EngineSupervisor(config, listener=...); supervisor.start()
    supervisor.wait_ready(timeout)                          # EngineInfo, or EngineUnavailable
    job = supervisor.submit(request, source="api:chat-1")   # EngineUnavailable when it cannot queue
    event = job.events.get()                                # Tokens... then Finished or Failed
    supervisor.cancel(job)                                  # queued: dropped; running: Cancel
    supervisor.close()

An API request may name another local model (``submit_load``, then ``submit`` with ``model``): the
load is a job in the same queue, so it waits for the running job (a reply streaming in the window
is never cut), loads are one at a time, and a job that needs another model is held back while jobs
for the loaded one wait or may come (``LINGER_S`` after each), for at most ``SWITCH_PATIENCE_S``
after the last load: two clients naming two models do not make the engine reload between every
request, and neither waits much longer than that for its turn. When such a load fails, the
request gets the failure and the model loaded before it is loaded again, so the window and the
other clients keep theirs (``EngineState.refused_path`` says what failed).

``BenchSupervisor`` runs one benchmark process the same way (spawn, pump,
death, a cancel that is not honoured). Both run one thread each, touch their
child only from it, and tell their ``listener`` every event of host/events.py
from that thread, in order: a Qt object hands them to the GUI thread
(services/main_thread.py), an asyncio loop wakes on a job's ``notify``.

The engine keeps one KV cache: consecutive turns of one conversation reuse
their common prefix, and engine/state_cache.py keeps recent conversations'
caches, so a request from another conversation in between costs little.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import logging
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from localchat.bench.modes import BenchMode
from localchat.bench.prompts import BenchPrompt
from localchat.bench.report import BenchReport
from localchat.catalog.sizes import Fit, fits_in_memory, total_ram
from localchat.engine.rpc_wire import gone_worker
from localchat.engine.types import EngineConfig, EngineInfo, GenerationRequest
from localchat.host.child import ChildGone, ChildProcess
from localchat.host.engine_child import DEFAULT_ENGINE
from localchat.host.events import (
    BenchDone,
    BenchProgress,
    EngineState,
    Event,
    Failed,
    Failure,
    FailureKind,
    Finished,
    JobEvent,
    Loaded,
    Phase,
    StateChanged,
    Tokens,
)
from localchat.host.failure_words import Audience, sentence
from localchat.host.jobs import FairQueue, JobHandle
from localchat.host.protocol import Cancel, Generate, Load, RunBench, Shutdown

log = logging.getLogger(__name__)

POLL_S = 0.02  # how often a supervisor looks at cancel flags while its child works
IDLE_CHECK_S = 0.5  # how often an idle supervisor checks that its child still lives
HELD_CHECK_S = 0.05  # how often it looks again at jobs held back (LOAD_GRACE_S, LINGER_S)
EXIT_CODE_WAIT_S = 1.0  # after the pipe closed, how long to wait for the child's exit code
STOP_WAIT_S = 1.0  # how long a leaving child is given before it is killed
# After a model loaded, how long jobs for it go before a job naming another (which waits at most this).
SWITCH_PATIENCE_S = 20.0
# After a load job, how long a job that would load yet another model waits for the loading request's
# own job (it is submitted once the request is read against the model: a few milliseconds).
LOAD_GRACE_S = 2.0
# After a job, how long a job that would load another model waits for the next one on the loaded
# model (a client's next request arrives within milliseconds of its answer), within SWITCH_PATIENCE_S
# of the last load: two clients sending one request at a time do not make the engine reload each time.
LINGER_S = 1.0

Listener = Callable[[Event], None]
# How a process that called abort() ends: SIGABRT on POSIX; exit code 3 on Windows.
ABORT_EXIT_CODES = frozenset({3} if sys.platform == "win32" else {-int(signal.SIGABRT)})


def lost_worker(workers: tuple[str, ...], exitcode: int | None) -> str | None:
    """The worker to blame for a child that ended (None: none is): the first that refuses connections,
    else, when the child aborted, the workers it had: llama.cpp's RPC client aborts the process on any
    worker that hangs up or answers wrongly mid-command, also one that still accepts connections (a
    worker restarted meanwhile, or something that answers HELLO and then hangs up)."""
    if not workers:
        return None
    gone = gone_worker(workers)
    if gone is not None:
        return str(gone)
    if exitcode in ABORT_EXIT_CODES:
        return " or ".join(workers)
    return None


class EngineUnavailable(Exception):
    """The engine cannot take the request (or did not load); ``str`` is a sentence for an API client."""

    def __init__(self, failure: Failure) -> None:
        self.failure = failure
        super().__init__(sentence(failure, Audience.API))


class Supervisor:
    """What every child's supervisor does the same way: one thread, one child at a time, telling."""

    def __init__(self, target: str, *, what: str, listener: Listener | None, engine_factory: str,
                 log_path: str | None, cancel_timeout_s: float) -> None:
        self._target = target
        self.what = what
        self._listener = listener
        self._engine_factory = engine_factory
        self.log_path = log_path
        self.cancel_timeout_s = cancel_timeout_s
        self._process: ChildProcess | None = None
        self._thread: threading.Thread | None = None

    def _tell(self, event: Event) -> None:
        if self._listener is not None:
            try:
                self._listener(event)
            except Exception:  # a listener's failure must not stop the child's supervision
                log.exception("the %s supervisor's listener failed on %r", self.what, event)

    def _spawn(self, *args: object, farewell: object | None = None) -> ChildProcess:
        process = ChildProcess(self._target, name=f"localchat-{self.what}", what=self.what, farewell=farewell)
        process.spawn(*args, self._engine_factory, self.log_path)
        self._process = process
        return process

    def _start_thread(self, run: Callable[[], None]) -> None:
        self._thread = threading.Thread(target=run, name=f"{self.what}-supervisor", daemon=True)
        self._thread.start()

    @property
    def thread_alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def _end_child(self) -> None:
        process, self._process = self._process, None
        if process is not None:
            process.kill()
            process.close()


class EngineSupervisor(Supervisor):
    """Owns one engine process and its state; runs jobs from several sources on it, one at a time."""

    def __init__(
        self,
        config: EngineConfig | None,
        *,
        engine_factory: str = DEFAULT_ENGINE,
        log_path: str | None = None,
        max_queue: int = 16,
        cancel_timeout_s: float = 5.0,
        restart_eagerly: bool = True,
        listener: Listener | None = None,
    ) -> None:
        """``config`` None: no model until ``load``. ``restart_eagerly``: after the engine died, start
        it again at once (a server), or only when a job asks (the window, so a model that cannot load
        again is not retried behind the user's back)."""
        super().__init__("localchat.host.engine_child:serve", what="engine", listener=listener,
                         engine_factory=engine_factory, log_path=log_path, cancel_timeout_s=cancel_timeout_s)
        self.restart_eagerly = restart_eagerly
        self._cond = threading.Condition()
        self._queue = FairQueue(max_queue)
        self._ids = itertools.count(1)
        self._running: JobHandle | None = None
        self._state = EngineState(Phase.NO_MODEL, config)
        self._reload = config is not None  # a load was asked for and not begun
        self._closing = False
        self._switched_at = float("-inf")  # when a model last finished loading
        self._job_ended_at = float("-inf")  # when the last job that ran ended
        self._grace_until = float("-inf")  # a load job loaded a model for a request not queued yet

    # -- reading (any thread) ----------------------------------------------------------
    @property
    def state(self) -> EngineState:
        return self._state

    @property
    def queued(self) -> int:
        with self._cond:
            return len(self._queue)

    @property
    def running_source(self) -> str | None:
        job = self._running
        return job.source if job is not None else None

    @property
    def max_queue(self) -> int:
        return self._queue.limit

    def _set_state(self, **changes: object) -> None:
        """Replace the snapshot and publish it (called with ``_cond`` held, so snapshots keep order)."""
        self._state = dataclasses.replace(self._state, **changes)  # type: ignore[arg-type]
        self._cond.notify_all()
        self._tell(StateChanged(self._state))

    # -- commands (any thread) ---------------------------------------------------------
    def start(self) -> None:
        """Start the supervisor's thread, which starts the engine and loads the configured model."""
        with self._cond:
            if self._thread is not None:
                return
            if self._state.config is not None:
                self._set_state(phase=Phase.LOADING)
            self._start_thread(self._run)

    def wait_ready(self, timeout: float | None = None) -> EngineInfo:
        """Block until the model is loaded; EngineUnavailable with the reason if it cannot be."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while True:
                state = self._state
                if state.ready:
                    assert state.info is not None
                    return state.info
                if self._closing or state.phase is Phase.CLOSED:
                    raise EngineUnavailable(Failure(FailureKind.CLOSED))
                if state.config is None:
                    raise EngineUnavailable(Failure(FailureKind.NO_MODEL))
                if state.phase is Phase.FAILED:
                    raise EngineUnavailable(state.failure or Failure(FailureKind.LOAD_FAILED))
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise EngineUnavailable(Failure(
                        FailureKind.LOAD_FAILED, f"The model did not load within {timeout:g} seconds."))
                self._cond.wait(0.1 if left is None else min(left, 0.1))

    def load(self, config: EngineConfig) -> None:
        """Load another model once the running job (if any) ends; queued jobs then run on it."""
        with self._cond:
            self._reload = True
            self._set_state(phase=Phase.LOADING, config=config, info=None, failure=None, dropped_workers=(),
                            requested_by="", refused_path="", refused_failure=None)

    def runs_on(self, config: EngineConfig) -> bool:
        """Whether ``config``'s model is the one loaded, or being loaded (by the window or a job)."""
        current = self._state.config
        return current is not None and current.target_path == config.target_path

    def submit(
        self,
        request: GenerationRequest,
        source: str = "window",
        notify: Callable[[JobEvent | None], None] | None = None,
        *,
        queue_events: bool = True,
        model: EngineConfig | None = None,
    ) -> JobHandle:
        """Queue ``request`` behind the other sources' jobs. ``queue_events`` False: its events reach
        the listener only (the window's client reads them there), not the handle's queue too.
        ``model``: the model it must run on, loaded first when another is loaded by then."""
        return self._add(request, source, notify, queue_events, model)

    def submit_load(self, config: EngineConfig, source: str,
                    notify: Callable[[JobEvent | None], None] | None = None) -> JobHandle:
        """Queue a load of ``config`` for ``source`` (an API request that named another model). The
        handle ends with ``loaded`` set, or with Failed (the model loaded before is loaded again)."""
        return self._add(None, source, notify, True, config)

    def _add(self, request: GenerationRequest | None, source: str,
             notify: Callable[[JobEvent | None], None] | None, queue_events: bool,
             model: EngineConfig | None) -> JobHandle:
        with self._cond:
            if self._closing:
                raise EngineUnavailable(Failure(FailureKind.CLOSED))
            if self._thread is not None and not self._thread.is_alive():
                raise EngineUnavailable(self._state.failure or Failure(FailureKind.INTERNAL))
            full = self._queue.full()
            if full is not None:
                raise EngineUnavailable(full)
            job = JobHandle(next(self._ids), source, request, notify=notify, model=model)
            if not queue_events:
                job.events = None
            self._queue.add(job)
            self._cond.notify_all()
            return job

    def cancel(self, job: JobHandle) -> None:
        """A queued job is dropped (Failed CANCELLED); a running one gets Cancel, then Finished."""
        with self._cond:
            if job.done:
                return
            job.cancel_requested = True
            if self._queue.remove(job):
                self._end(job, Failed(job.id, job.source, Failure(FailureKind.CANCELLED)))
            self._cond.notify_all()

    def close(self, timeout: float = 3.0) -> None:
        """Fail the waiting jobs, cancel the running one, stop the engine (blocks up to ``timeout``)."""
        with self._cond:
            self._closing = True
            self._fail_waiting(Failure(FailureKind.CLOSED))
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout)
        process, self._process = self._process, None
        if process is not None:
            process.stop(STOP_WAIT_S)
            process.close()
        with self._cond:
            self._set_state(phase=Phase.CLOSED, info=None, pid=None)

    # -- the supervisor's thread ---------------------------------------------------------
    def _end(self, job: JobHandle, event: Tokens | Finished | Failed) -> None:
        """Hand a job its event and tell the listener."""
        job.put(event)
        self._tell(event)

    def _fail_waiting(self, failure: Failure) -> None:
        for job in self._queue.drain():
            self._end(job, Failed(job.id, job.source, failure))

    def _run(self) -> None:
        job: JobHandle | None = None
        try:
            while True:
                ended = False
                with self._cond:
                    while (not self._closing and not self._queue.any(self._runnable)
                           and not self._engine_wanted()):
                        self._cond.wait(HELD_CHECK_S if len(self._queue) else IDLE_CHECK_S)
                        ended = self._ended_while_idle()
                        if ended:
                            break
                    if self._closing:
                        return
                if ended:
                    self._idle_death()
                    continue
                with self._cond:
                    wanted = self._engine_wanted()
                if wanted:
                    self._ensure_engine()
                    continue
                with self._cond:
                    job = self._queue.next(self._defer, self._held)
                    if job is None:
                        continue
                    self._running = job
                log.debug("job %d from %s: %s", job.id, job.source, "load" if job.request is None else "run")
                try:
                    if self._switch_for(job):
                        self._run_job(job)
                finally:
                    with self._cond:
                        if job.request is not None:
                            self._job_ended_at = time.monotonic()
                        self._running = None
                        self._cond.notify_all()
                job = None
        except Exception:
            log.exception("the engine supervisor stopped unexpectedly")
            self._stopped_unexpectedly(job)

    def _held(self, job: JobHandle) -> bool:
        """Not to run yet, as it would load another model: while the request a load job loaded the
        current one for has not queued its job yet (LOAD_GRACE_S), so that request is not answered from
        a model loaded twice; and for LINGER_S after a job, within SWITCH_PATIENCE_S of the last load,
        so the loaded model's next request goes first. Called with ``_cond`` held."""
        if job.model is None or self.runs_on(job.model):
            return False
        now = time.monotonic()
        if now < self._grace_until:
            return True
        return now - self._job_ended_at < LINGER_S and now - self._switched_at < SWITCH_PATIENCE_S

    def _runnable(self, job: JobHandle) -> bool:
        return not self._held(job)

    def _defer(self, job: JobHandle) -> bool:
        """Hold ``job`` back (other sources' jobs first): it needs another model, and the last load
        was less than SWITCH_PATIENCE_S ago (called with ``_cond`` held)."""
        if job.model is None or self.runs_on(job.model):
            return False
        return time.monotonic() - self._switched_at < SWITCH_PATIENCE_S

    def _switch_for(self, job: JobHandle) -> bool:
        """Load the model ``job`` names, unless it is loaded; whether the job is to run now.

        A load job ends here. When the load fails the job gets the failure, the model loaded before
        is loaded again, and the jobs waiting stay queued (they may name either model)."""
        want = job.model
        if want is None or job.cancel_requested:
            return True
        if not (self.runs_on(want) and self._state.ready and self._process is not None):
            before = self._state
            with self._cond:
                self._reload = True
                self._set_state(phase=Phase.LOADING, config=want, info=None, failure=None, dropped_workers=(),
                                requested_by=job.source, refused_path="", refused_failure=None)
            self._ensure_engine(fail_waiting=False)
            state = self._state
            if not (state.ready and self.runs_on(want)):
                failure = state.failure or Failure(
                    FailureKind.LOAD_FAILED, "Another model was asked for while this one was loading.")
                restoring = self._begin_restore(before, want, failure)
                self._end(job, Failed(job.id, job.source, failure))  # the state says what comes back
                if restoring:
                    self._ensure_engine(fail_waiting=False)
                return False
        if job.request is None:
            assert self._state.info is not None
            self._grace_until = time.monotonic() + LOAD_GRACE_S
            job.load_done(self._state.info)
            return False
        if want is not None:
            self._grace_until = float("-inf")  # a request's job runs on its model: the grace is over
        return True

    def _begin_restore(self, before: EngineState, refused: EngineConfig, failure: Failure) -> bool:
        """After an API request's load failed: ask to load again the model loaded before it (the state
        says what was refused and why); False when there was none (it stays failed) or another load
        was asked for meanwhile."""
        with self._cond:
            if before.config is None or not before.ready or self._reload or self._closing:
                return False
            self._reload = True
            self._set_state(phase=Phase.LOADING, config=before.config, info=None, failure=None,
                            dropped_workers=(), requested_by=before.requested_by,
                            refused_path=refused.target_path, refused_failure=failure)
            return True

    def _stopped_unexpectedly(self, running: JobHandle | None) -> None:
        """The thread is ending on a fault: tell everyone who waits on it (a load, the running job,
        the queued ones, the listener), instead of leaving them waiting for ever."""
        failure = Failure(FailureKind.INTERNAL)
        with self._cond:
            if running is not None and not running.done:
                self._end(running, Failed(running.id, running.source, failure))
            self._fail_waiting(failure)
            self._set_state(phase=Phase.FAILED, info=None, failure=failure)

    def _engine_wanted(self) -> bool:
        """Whether to (re)start or reload before the next job: at start, after a death, or ``load``."""
        state = self._state
        if state.config is None:
            return False
        if self._reload:
            return True
        alive = self._process is not None and self._process.is_alive()
        if alive and state.info is not None:
            return False
        # After a failed load (or a death, when not restarting eagerly), only a job asks again.
        waits_for_a_job = state.phase is Phase.FAILED or (
            state.phase is Phase.STOPPED and not self.restart_eagerly)
        return not waits_for_a_job or bool(len(self._queue))

    def _died(self, process: ChildProcess, *, while_loading: bool = False) -> Failure:
        """Why the engine process ended: a worker that no longer answers, or the process itself."""
        code = process.wait_exitcode(EXIT_CODE_WAIT_S)
        config = self._state.config
        lost = lost_worker(config.rpc_servers, code) if config is not None else None
        if lost is not None:
            return Failure(FailureKind.WORKER_LOST, exitcode=code, worker=lost, while_loading=while_loading)
        return Failure(FailureKind.ENGINE_DIED, exitcode=code, while_loading=while_loading)

    def _ended_while_idle(self) -> bool:
        process = self._process
        return process is not None and not process.is_alive() and self._state.info is not None

    def _idle_death(self) -> None:
        """An engine that ended while idle (killed, out of memory): say so now, not at the next job."""
        process = self._process
        if process is None:
            return
        failure = self._died(process)
        log.warning("engine process %s ended while idle (exit code %s)", process.pid, failure.exitcode)
        self._stopped(failure)

    def _stopped(self, failure: Failure) -> None:
        """The engine process is gone: forget it; the state says why."""
        self._end_child()
        with self._cond:
            if not self._closing:
                self._set_state(phase=Phase.STOPPED, info=None, pid=None, failure=failure)

    def _restart_config(self, config: EngineConfig) -> EngineConfig:
        """After a worker went away: when the pair fits in this computer's memory, run here alone."""
        failure = self._state.failure
        if failure is None or failure.kind is not FailureKind.WORKER_LOST or not config.rpc_servers:
            return config
        size = sum(Path(p).stat().st_size for p in (config.target_path, config.draft_path or "")
                   if p and Path(p).is_file())
        if fits_in_memory(size, total_ram()) is not Fit.YES:
            return config  # the load names the missing worker
        return dataclasses.replace(config, rpc_servers=(), tensor_split=())

    def _ensure_engine(self, fail_waiting: bool = True) -> None:
        with self._cond:
            asked, self._reload = self._reload, False
            config = self._state.config
        assert config is not None
        dropped: tuple[str, ...] = self._state.dropped_workers
        failure = self._state.failure
        if not asked and failure is not None:  # a restart after a death
            restart = self._restart_config(config)
            if restart != config:
                dropped, config = (failure.worker,), restart
        with self._cond:
            if self._reload:  # another load was asked for meanwhile
                return
            self._set_state(phase=Phase.LOADING, config=config, info=None, dropped_workers=dropped)
        process = self._process
        if process is None or not process.is_alive():
            self._end_child()
            process = self._spawn(farewell=Shutdown())
            with self._cond:
                self._set_state(pid=process.pid)
        info: EngineInfo | None = None
        failure = None
        try:
            process.send(Load(config))
            while info is None and failure is None:
                if self._closing:
                    return
                reply = process.receive(0.1)
                if isinstance(reply, Loaded):
                    info = reply.info
                elif isinstance(reply, Failed):
                    failure = reply.failure
        except ChildGone:
            failure = self._died(process, while_loading=True)
            self._end_child()
        with self._cond:
            if self._reload:  # another load was asked for meanwhile; its answer is the one that counts
                return
            if info is not None:
                log.info("model loaded: %s", info.target.name)
                self._switched_at = time.monotonic()  # its jobs go first for SWITCH_PATIENCE_S
                self._set_state(phase=Phase.READY, info=info, failure=None, ever_loaded=True)
                return
            assert failure is not None
            log.warning("load failed: %s", sentence(failure))
            self._set_state(phase=Phase.FAILED, info=None, failure=failure,
                            pid=self._process.pid if self._process is not None else None)
            # The jobs waiting now cannot run: tell them why instead of retrying for ever.
            if fail_waiting:
                self._fail_waiting(failure)

    def _run_job(self, job: JobHandle) -> None:
        if job.cancel_requested:
            self._end(job, Failed(job.id, job.source, Failure(FailureKind.CANCELLED)))
            return
        process = self._process
        state = self._state
        if process is None or not state.ready:
            failure = state.failure or Failure(FailureKind.NO_MODEL)
            self._end(job, Failed(job.id, job.source, failure))
            return
        assert job.request is not None  # a load job ends in _switch_for
        job.started_at = time.monotonic()
        cancel_sent: float | None = None
        try:
            process.send(Generate(job.id, job.source, job.request))
            while True:
                if (job.cancel_requested or self._closing) and cancel_sent is None:
                    process.send(Cancel(job.id))
                    cancel_sent = time.monotonic()
                if cancel_sent is not None and time.monotonic() - cancel_sent > self.cancel_timeout_s:
                    log.warning("the engine did not stop within %.1f s of cancel; killing it",
                                self.cancel_timeout_s)
                    process.kill()
                    failure = Failure(FailureKind.HUNG, exitcode=process.exitcode,
                                      timeout_s=self.cancel_timeout_s)
                    self._end(job, Failed(job.id, job.source, failure))
                    self._stopped(failure)
                    return
                reply = process.receive(POLL_S)
                if not isinstance(reply, Tokens | Finished | Failed) or reply.job != job.id:
                    continue
                if isinstance(reply, Finished):
                    self._queue.took(time.monotonic() - job.started_at)
                self._end(job, reply)
                if not isinstance(reply, Tokens):
                    return
        except ChildGone:
            failure = self._died(process)
            log.warning("engine process %s ended during job %d (exit code %s)", process.pid, job.id,
                        failure.exitcode)
            self._end(job, Failed(job.id, job.source, failure))
            self._stopped(failure)


class BenchSupervisor(Supervisor):
    """Runs one benchmark process at a time; tells Loaded, BenchProgress, then BenchDone or Failed.

    After ``cancel`` the child stops between engine steps; if it has not answered within
    ``cancel_timeout_s`` it is killed and BenchDone(cancelled=True) carries the runs that arrived.
    """

    def __init__(self, listener: Listener, *, engine_factory: str = DEFAULT_ENGINE,
                 log_path: str | None = None, cancel_timeout_s: float = 10.0) -> None:
        super().__init__("localchat.host.bench_child:serve_bench", what="benchmark", listener=listener,
                         engine_factory=engine_factory, log_path=log_path, cancel_timeout_s=cancel_timeout_s)
        self._cancel_at: float | None = None
        self._stop = threading.Event()
        self._over = threading.Event()  # its last event was told (its thread may still be ending)

    @property
    def running(self) -> bool:
        return self.thread_alive and not self._over.is_set()

    def start(self, config: EngineConfig, prompts: Sequence[BenchPrompt], modes: Sequence[BenchMode],
              max_tokens: int, *, warmup: bool = True, repeat: int = 1, api_url: str = "",
              link_delays: Sequence[float] = ()) -> None:
        """Start a benchmark; RuntimeError if one is already running. ``api_url`` and ``link_delays``: the
        routes it measures as well (protocol.RunBench); ``config`` names the workers either way, so a
        worker that vanishes is named."""
        if self.running:
            raise RuntimeError("a benchmark is already running")
        if self._thread is not None:
            self._thread.join(1.0)  # it has told its last event: it is only closing the child
        self._cancel_at = None
        self._stop.clear()
        self._over.clear()
        process = self._spawn(RunBench(config, tuple(prompts), tuple(modes), max_tokens, warmup, repeat,
                                       api_url, tuple(link_delays)))
        self._start_thread(lambda: self._run(process, config))

    def cancel(self) -> None:
        """Stop after the current engine step; BenchDone(cancelled=True) follows."""
        process = self._process
        if process is None or self._cancel_at is not None:
            return
        self._cancel_at = time.monotonic()
        with contextlib.suppress(ChildGone):  # its death is told by the thread
            process.send(Cancel(0))

    def stop(self) -> None:
        """End the benchmark at once, telling nothing more (the dialog is closing)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(2.0)
        self._end_child()

    def _last(self, event: BenchDone | Failed) -> None:
        self._over.set()
        self._tell(event)

    def _run(self, process: ChildProcess, config: EngineConfig) -> None:
        partial = BenchReport()
        loaded = False
        try:
            while not self._stop.is_set():
                cancel_at = self._cancel_at
                if cancel_at is not None and time.monotonic() - cancel_at > self.cancel_timeout_s:
                    log.warning("the benchmark did not stop within %.1f s of cancel; killing it",
                                self.cancel_timeout_s)
                    self._last(BenchDone(partial, cancelled=True))
                    return
                message = process.receive(POLL_S)
                if isinstance(message, BenchProgress):
                    partial.records.append(message.record)
                if isinstance(message, BenchDone | Failed):
                    self._last(message)
                    return
                if isinstance(message, Loaded | BenchProgress):
                    loaded = True
                    self._tell(message)
        except ChildGone:
            code = process.wait_exitcode(EXIT_CODE_WAIT_S)
            log.warning("benchmark process %s ended (exit code %s)", process.pid, code)
            if not self._stop.is_set():
                if self._cancel_at is not None:
                    self._last(BenchDone(partial, cancelled=True))
                else:
                    # The runs so far reached the listener as BenchProgress; the failure says why no more
                    # came: a worker that stopped answering (llama.cpp aborts then), or the process.
                    lost = lost_worker(config.rpc_servers, code)
                    failure = (Failure(FailureKind.WORKER_LOST, exitcode=code, worker=lost,
                                       while_loading=not loaded) if lost
                               else Failure(FailureKind.ENGINE_DIED, exitcode=code))
                    self._last(Failed(0, "bench", failure))
        finally:
            if self._process is process:
                self._end_child()
