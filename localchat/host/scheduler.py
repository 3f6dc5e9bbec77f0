"""EngineBroker: the one owner of an engine process, shared fairly by several sources of requests.

The local HTTP API (localchat.server) submits every request here, and the
app's window is meant to sit on the same broker (the Qt EngineClient will wrap
it), so the window and the API share ONE engine process and ONE loaded model.
Nothing here imports Qt, and the API is small on purpose:

    broker = EngineBroker(config); broker.start()       # loads the model in the background
    broker.wait_ready(timeout)                           # EngineInfo, or BrokerError with a sentence
    handle = broker.submit(request, source="api:chat-1") # QueueFull when the queue is full
    event = handle.events.get()                          # JobTokens... then JobFinished or JobFailed
    broker.cancel(handle)                                # queued: dropped; running: Cancel at the next step
    broker.close()

Threading: one daemon thread drives the EngineProcess (start, send, receive,
stop, kill; its public API only) and runs one job at a time; ``submit`` and
``cancel`` may be called from any thread. Each job's events go to its own
thread-safe queue; ``handle.notify`` (if set) is called after every event, so
an asyncio loop or a Qt object can wake up without polling (the server calls
``loop.call_soon_threadsafe`` from it).

Fairness: jobs wait in one queue per source ("window", "api:<conversation>"),
and the next job is taken round-robin across sources, so one agent resending
long conversations cannot starve the window or another client. The queue
length is bounded (``QueueFull`` carries a Retry-After estimate).

Failures: if the engine process dies, the running job fails with a sentence
and the engine is started again with the last configuration (the next job
waits for that load rather than failing). A job whose Cancel is not honoured
within ``cancel_timeout_s`` has its engine killed and restarted.

The engine keeps one KV cache: consecutive turns of one conversation reuse
their common prefix, but a request from another conversation in between
replaces it (only the shared prefix, e.g. a common system prompt, survives).
"""

from __future__ import annotations

import collections
import contextlib
import enum
import itertools
import logging
import math
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from localchat.engine.types import EngineConfig, EngineInfo, GenerationRequest, GenerationResult, TokenEvent
from localchat.host.process import EngineGone, EngineProcess, load_death_sentence
from localchat.host.protocol import Cancel, Failed, Finished, Generate, Load, Loaded, LoadFailed, Tokens
from localchat.host.worker import DEFAULT_ENGINE

log = logging.getLogger(__name__)

POLL_S = 0.02  # how often the broker thread looks at cancel flags while a job runs
BROKER_STOPPED = ("The engine's manager stopped on an internal error (the log has the details); "
                  "restart localchat.")
EXIT_CODE_WAIT_S = 1.0


class BrokerError(Exception):
    """The broker cannot serve: the model failed to load, or the broker was closed. ``str`` is a sentence."""


class QueueFull(BrokerError):
    def __init__(self, queued: int, retry_after_s: int) -> None:
        self.queued = queued
        self.retry_after_s = retry_after_s
        super().__init__(
            f"{queued} requests are already waiting for the engine; try again in {retry_after_s} s."
        )


class BrokerState(enum.Enum):
    STOPPED = "stopped"
    LOADING = "loading"
    READY = "ready"
    FAILED = "failed"  # the last load failed; ``load_error`` says why


@dataclass(frozen=True)
class JobTokens:
    event: TokenEvent


@dataclass(frozen=True)
class JobFinished:
    result: GenerationResult


@dataclass(frozen=True)
class JobFailed:
    message: str  # a sentence for the user
    engine_died: bool = False
    exitcode: int | None = None  # when the engine died: its exit code, if known
    hung: bool = False  # the engine was killed because it ignored a cancel


JobEvent = JobTokens | JobFinished | JobFailed


# What the broker tells its listener (``EngineBroker(listener=...)``), from the broker thread:
# the app's window shows loads, deaths and what the engine is generating for whom.


@dataclass(frozen=True)
class LoadStarted:
    config: EngineConfig


@dataclass(frozen=True)
class LoadDone:
    info: EngineInfo


@dataclass(frozen=True)
class LoadError:
    message: str


@dataclass(frozen=True)
class EngineDied:
    exitcode: int | None
    while_loading: bool = False
    hung: bool = False


@dataclass(frozen=True)
class JobProgress:
    """A job produced tokens: who asked (its source) and the engine's latest figures."""

    source: str
    event: TokenEvent


@dataclass(frozen=True)
class JobEnded:
    source: str


BrokerEvent = LoadStarted | LoadDone | LoadError | EngineDied | JobProgress | JobEnded


@dataclass(eq=False)
class JobHandle:
    """One submitted request. Read ``events`` until a JobFinished or JobFailed arrives."""

    id: int
    source: str
    request: GenerationRequest
    events: queue.SimpleQueue[JobEvent] = field(default_factory=queue.SimpleQueue)
    notify: Callable[[], None] | None = None
    submitted_at: float = field(default_factory=time.monotonic)
    started_at: float | None = None
    cancel_requested: bool = False
    done: bool = False

    def _put(self, event: JobEvent) -> None:
        if isinstance(event, JobFinished | JobFailed):
            self.done = True
        self.events.put(event)
        if self.notify is not None:
            try:
                self.notify()
            except Exception:  # a closed event loop must not stop the broker
                log.debug("notify for job %d failed", self.id, exc_info=True)


def died_sentence(exitcode: int | None) -> str:
    code = "exit code unknown" if exitcode is None else f"exit code {exitcode}"
    return f"The engine stopped unexpectedly ({code}) while writing this reply; it is being restarted."


class EngineBroker:
    """Owns one EngineProcess and runs jobs from several sources on it, one at a time, fairly."""

    def __init__(
        self,
        config: EngineConfig | None,
        *,
        engine_factory: str = DEFAULT_ENGINE,
        log_path: str | None = None,
        max_queue: int = 16,
        cancel_timeout_s: float = 5.0,
        restart_eagerly: bool = True,
        listener: Callable[[BrokerEvent], None] | None = None,
    ) -> None:
        """``config`` None: no model until ``load``. ``restart_eagerly``: after the engine died,
        start it again at once (a server), or only when a job or ``load`` asks (the window, so a
        model that cannot load again is not retried behind the user's back)."""
        self._config = config
        self.restart_eagerly = restart_eagerly
        self._listener = listener
        self._engine_factory = engine_factory
        self._log_path = log_path
        self.max_queue = max_queue
        self.cancel_timeout_s = cancel_timeout_s
        self._cond = threading.Condition()
        self._queues: dict[str, collections.deque[JobHandle]] = {}
        self._order: collections.deque[str] = collections.deque()  # sources with waiting jobs
        self._ids = itertools.count(1)
        self._running: JobHandle | None = None
        self._process: EngineProcess | None = None
        self._state = BrokerState.STOPPED
        self._info: EngineInfo | None = None
        self._load_error = ""
        self._reload = False  # ``load`` asked for another model
        self._ever_loaded = False
        self._closing = False
        self._thread: threading.Thread | None = None
        self._job_seconds: collections.deque[float] = collections.deque(maxlen=16)

    # -- state (any thread) ------------------------------------------------------------
    @property
    def state(self) -> BrokerState:
        return self._state

    @property
    def info(self) -> EngineInfo | None:
        """What is loaded, or None while loading or after a failed load."""
        return self._info

    @property
    def config(self) -> EngineConfig | None:
        """The last configuration asked for (reloaded after a crash); None before the first ``load``."""
        return self._config

    @property
    def log_path(self) -> str | None:
        return self._log_path

    @property
    def load_error(self) -> str:
        return self._load_error

    @property
    def ever_loaded(self) -> bool:
        """True once a model has loaded (a restart after a crash does not make this False again)."""
        return self._ever_loaded

    @property
    def pid(self) -> int | None:
        process = self._process
        return process.pid if process is not None else None

    @property
    def queued(self) -> int:
        with self._cond:
            return sum(len(q) for q in self._queues.values())

    @property
    def busy(self) -> bool:
        return self._running is not None

    @property
    def running_source(self) -> str | None:
        job = self._running
        return job.source if job is not None else None

    def _tell(self, event: BrokerEvent) -> None:
        if self._listener is not None:
            try:
                self._listener(event)
            except Exception:  # a listener's failure must not stop the engine
                log.exception("the broker's listener failed on %r", event)

    # -- commands (any thread) ---------------------------------------------------------
    def start(self) -> None:
        """Start the broker thread, which starts the engine and loads the configured model."""
        if self._thread is not None:
            return
        self._state = BrokerState.LOADING
        self._thread = threading.Thread(target=self._run, name="engine-broker", daemon=True)
        self._thread.start()

    def wait_ready(self, timeout: float | None = None) -> EngineInfo:
        """Block until the model is loaded; BrokerError with the load's sentence if it failed."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while self._state is BrokerState.LOADING or self._state is BrokerState.STOPPED:
                if self._config is None:
                    raise BrokerError("No model is loaded; choose a model first.")
                if self._closing:
                    raise BrokerError("The engine was closed before the model loaded.")
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise BrokerError(f"The model did not load within {timeout:g} seconds.")
                self._cond.wait(0.1 if left is None else min(left, 0.1))
            if self._state is BrokerState.FAILED or self._info is None:
                raise BrokerError(self._load_error or "The model could not be loaded.")
            return self._info

    def load(self, config: EngineConfig) -> None:
        """Load another model once the running job (if any) ends; queued jobs then run on it."""
        with self._cond:
            self._config = config
            self._info = None
            self._state = BrokerState.LOADING
            self._reload = True
            self._cond.notify_all()

    def submit(
        self, request: GenerationRequest, source: str = "window", notify: Callable[[], None] | None = None
    ) -> JobHandle:
        """Queue ``request`` behind the other sources' jobs; QueueFull if ``max_queue`` are waiting."""
        with self._cond:
            if self._closing:
                raise BrokerError("The engine is shutting down.")
            if self._thread is not None and not self._thread.is_alive():
                raise BrokerError(self._load_error or BROKER_STOPPED)
            waiting = sum(len(q) for q in self._queues.values())
            if waiting >= self.max_queue:
                raise QueueFull(waiting, self._retry_after(waiting))
            handle = JobHandle(next(self._ids), source, request, notify=notify)
            q = self._queues.setdefault(source, collections.deque())
            q.append(handle)
            if source not in self._order:
                self._order.append(source)
            self._cond.notify_all()
            return handle

    def cancel(self, handle: JobHandle) -> None:
        """A queued job is dropped (JobFailed); a running one gets Cancel, then JobFinished(CANCELLED)."""
        with self._cond:
            if handle.done:
                return
            handle.cancel_requested = True
            q = self._queues.get(handle.source)
            if q is not None and handle in q:
                q.remove(handle)
                self._forget_source_if_empty(handle.source)
                handle._put(JobFailed("The request was cancelled before it started."))
            self._cond.notify_all()

    def close(self, timeout: float = 3.0) -> None:
        """Fail the waiting jobs, cancel the running one, stop the engine (blocks up to ``timeout``)."""
        with self._cond:
            self._closing = True
            for q in self._queues.values():
                for job in q:
                    job._put(JobFailed("The server is shutting down."))
            self._queues.clear()
            self._order.clear()
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout)
        process = self._process
        if process is not None:
            process.stop(1.0)
            process.close()
            self._process = None
        self._state = BrokerState.STOPPED

    # -- the broker thread --------------------------------------------------------------
    def _retry_after(self, waiting: int) -> int:
        mean = sum(self._job_seconds) / len(self._job_seconds) if self._job_seconds else 2.0
        return max(1, min(60, math.ceil(mean * max(1, waiting) / 2)))

    def _forget_source_if_empty(self, source: str) -> None:
        q = self._queues.get(source)
        if q is not None and not q:
            del self._queues[source]
            with contextlib.suppress(ValueError):
                self._order.remove(source)

    def _next_job(self) -> JobHandle | None:
        """Round-robin: the first source in line gives its oldest job and goes to the back of the line."""
        while self._order:
            source = self._order.popleft()
            q = self._queues.get(source)
            if not q:
                self._queues.pop(source, None)
                continue
            job = q.popleft()
            if q:
                self._order.append(source)
            else:
                del self._queues[source]
            return job
        return None

    def _run(self) -> None:
        job: JobHandle | None = None
        try:
            while True:
                with self._cond:
                    while not self._closing and not self._order and not self._engine_wanted():
                        self._cond.wait(0.5)
                        if self._idle_death():
                            break
                    if self._closing:
                        return
                    wanted = self._engine_wanted()
                if wanted:
                    self._ensure_engine()
                    continue
                with self._cond:
                    job = self._next_job()
                    if job is None:
                        continue
                    self._running = job
                try:
                    self._run_job(job)
                finally:
                    with self._cond:
                        self._running = None
                        self._cond.notify_all()
                job = None
        except Exception:
            log.exception("the engine broker stopped unexpectedly")
            self._stopped_unexpectedly(job)

    def _stopped_unexpectedly(self, running: JobHandle | None) -> None:
        """The broker thread is ending on a fault: say so to everyone who waits on it (a load, the
        running job, the queued ones, the listener), instead of leaving them waiting for ever."""
        message = BROKER_STOPPED
        with self._cond:
            self._state = BrokerState.FAILED
            self._load_error = message
            self._info = None
            waiting = [job for q in self._queues.values() for job in q]
            if running is not None:
                waiting.insert(0, running)
            for job in waiting:
                if not job.done:
                    job._put(JobFailed(message))
            self._queues.clear()
            self._order.clear()
            self._cond.notify_all()
        self._tell(LoadError(message))

    def _idle_death(self) -> bool:
        """An engine that ended while idle (killed, out of memory): say so now, not at the next job."""
        process = self._process
        if process is None or process.is_alive() or self._info is None:
            return False
        code = process.exitcode
        log.warning("engine process %s ended while idle (exit code %s)", process.pid, code)
        self._discard_process()  # the condition's lock is re-entrant
        self._tell(EngineDied(code))
        return True

    def _engine_wanted(self) -> bool:
        """Whether to (re)start or reload before the next job: at start, after a crash or ``load``."""
        if self._config is None:
            return False
        if self._reload:
            return True
        alive = self._process is not None and self._process.is_alive()
        needed = not alive or self._info is None
        # After a failed load (or a death, when not restarting eagerly), only a job asks again.
        idle_ok = self._state is BrokerState.FAILED or (
            self._state is BrokerState.STOPPED and not self.restart_eagerly
        )
        return needed and (not idle_ok or bool(self._order))

    def _ensure_engine(self) -> None:
        with self._cond:
            self._state = BrokerState.LOADING
            self._info = None
            self._reload = False
            config = self._config
            self._cond.notify_all()
        assert config is not None
        self._tell(LoadStarted(config))
        process = self._process
        if process is None or not process.is_alive():
            self._discard_process()
            process = EngineProcess(self._engine_factory, self._log_path)
            process.start()
            self._process = process
        error = ""
        info: EngineInfo | None = None
        try:
            process.send(Load(config))
            while info is None and not error:
                if self._closing:
                    return
                reply = process.receive(0.1)
                if isinstance(reply, Loaded):
                    info = reply.info
                elif isinstance(reply, LoadFailed):
                    error = reply.message
        except EngineGone:
            code = process.wait_exitcode(EXIT_CODE_WAIT_S)
            error = load_death_sentence(code)
            self._discard_process()
            self._tell(EngineDied(code, while_loading=True))
        with self._cond:
            if self._reload:  # another load was asked for meanwhile; its answer is the one that counts
                return
            if info is not None:
                self._info, self._state, self._load_error = info, BrokerState.READY, ""
                self._ever_loaded = True
                log.info("model loaded: %s", info.target.name)
                self._tell(LoadDone(info))
            else:
                self._state, self._load_error = BrokerState.FAILED, error
                log.warning("load failed: %s", error)
                self._tell(LoadError(error))
                # The jobs waiting now cannot run: tell them why instead of retrying for ever.
                for q in self._queues.values():
                    for job in q:
                        job._put(JobFailed(error))
                self._queues.clear()
                self._order.clear()
            self._cond.notify_all()

    def _run_job(self, job: JobHandle) -> None:
        try:
            self._run_job_on_engine(job)
        finally:
            self._tell(JobEnded(job.source))

    def _run_job_on_engine(self, job: JobHandle) -> None:
        if job.cancel_requested:
            job._put(JobFailed("The request was cancelled before it started."))
            return
        process = self._process
        if process is None or self._info is None:
            job._put(JobFailed(self._load_error or "No model is loaded."))
            return
        rid = job.id
        job.started_at = time.monotonic()
        cancel_sent: float | None = None
        try:
            process.send(Generate(rid, job.request))
            while True:
                if (job.cancel_requested or self._closing) and cancel_sent is None:
                    process.send(Cancel(rid))
                    cancel_sent = time.monotonic()
                if cancel_sent is not None and time.monotonic() - cancel_sent > self.cancel_timeout_s:
                    log.warning("the engine did not stop within %.1f s of cancel; killing it",
                                self.cancel_timeout_s)
                    process.kill()
                    code = process.exitcode
                    self._discard_process()
                    job._put(JobFailed(
                        f"The engine did not stop within {self.cancel_timeout_s:g} seconds, so it was "
                        "ended; it is being restarted.", engine_died=True, exitcode=code, hung=True))
                    self._tell(EngineDied(code, hung=True))
                    return
                reply = process.receive(POLL_S)
                if reply is None:
                    continue
                if isinstance(reply, Tokens) and reply.request_id == rid:
                    job._put(JobTokens(reply.event))
                    self._tell(JobProgress(job.source, reply.event))
                elif isinstance(reply, Finished) and reply.request_id == rid:
                    self._job_seconds.append(time.monotonic() - job.started_at)
                    job._put(JobFinished(reply.result))
                    return
                elif isinstance(reply, Failed) and reply.request_id == rid:
                    job._put(JobFailed(reply.message))
                    return
        except EngineGone:
            code = process.wait_exitcode(EXIT_CODE_WAIT_S)
            log.warning("engine process %s ended during job %d (exit code %s)", process.pid, rid, code)
            self._discard_process()
            job._put(JobFailed(died_sentence(code), engine_died=True, exitcode=code))
            self._tell(EngineDied(code))

    def _discard_process(self) -> None:
        process, self._process = self._process, None
        with self._cond:
            self._info = None
            if not self._closing:
                self._state = BrokerState.LOADING if self.restart_eagerly else BrokerState.STOPPED
        if process is not None:
            process.kill()
            process.close()
