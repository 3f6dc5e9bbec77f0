"""The jobs waiting for the engine: one fair, bounded queue, and each job's handle.

Fairness: jobs wait in one line per source ("window", "api:<conversation>"),
and the next job is taken round-robin across sources, so one agent resending
long conversations cannot starve the window or another client. A job may name
the model it must run on (``model``, an API request that named one): the
supervisor may ``defer`` such a job while others can run on the model loaded
now, so two clients naming two models do not make the engine reload between
every request. A job without a request (``request`` None) is a load: it ends
once its ``model`` is loaded (``loaded``) or failed to load. The number of
waiting jobs is bounded; a full queue is a ``Failure(QUEUE_FULL)`` with a
Retry-After estimate from the recent jobs' durations.

Not thread-safe on its own: the supervisor calls it under its lock.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import math
import queue
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from localchat.engine.types import EngineConfig, EngineInfo, GenerationRequest
from localchat.host.events import Failed, Failure, FailureKind, Finished, JobEvent

log = logging.getLogger(__name__)


@dataclass(eq=False)
class JobHandle:
    """One submitted request. Read ``events`` until a Finished or Failed arrives."""

    id: int
    source: str
    request: GenerationRequest | None  # None: a load job (its ``model`` loaded, then it ends)
    # Where its events wait for the reader (None: its reader takes them from the supervisor's listener).
    events: queue.SimpleQueue[JobEvent] | None = field(default_factory=queue.SimpleQueue)
    # Called after each event (from the supervisor); None: a load job's model is loaded.
    notify: Callable[[JobEvent | None], None] | None = None
    submitted_at: float = field(default_factory=time.monotonic)
    started_at: float | None = None
    cancel_requested: bool = False
    done: bool = False
    model: EngineConfig | None = None  # the model it must run on (None: whatever is loaded)
    loaded: EngineInfo | None = None  # a load job that succeeded: what it loaded

    def load_done(self, info: EngineInfo) -> None:
        """A load job's model is loaded: it ends (its reader sees ``done`` and ``loaded``)."""
        self.loaded = info
        self.done = True
        if self.notify is not None:
            try:
                self.notify(None)
            except Exception:  # a closed event loop must not stop the supervisor
                log.debug("notify for job %d failed", self.id, exc_info=True)

    def put(self, event: JobEvent) -> None:
        if isinstance(event, Finished | Failed):
            self.done = True
        if self.events is not None:
            self.events.put(event)
        if self.notify is not None:
            try:
                self.notify(event)
            except Exception:  # a closed event loop must not stop the supervisor
                log.debug("notify for job %d failed", self.id, exc_info=True)


class FairQueue:
    """Waiting jobs, one line per source, served round-robin; at most ``limit`` in all."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._lines: dict[str, collections.deque[JobHandle]] = {}
        self._order: collections.deque[str] = collections.deque()  # sources with waiting jobs
        self._durations: collections.deque[float] = collections.deque(maxlen=16)

    def __len__(self) -> int:
        return sum(len(line) for line in self._lines.values())

    def __iter__(self) -> Iterator[JobHandle]:
        for line in self._lines.values():
            yield from line

    def full(self) -> Failure | None:
        """The QUEUE_FULL failure when ``limit`` jobs are waiting, else None."""
        waiting = len(self)
        if waiting < self.limit:
            return None
        return Failure(FailureKind.QUEUE_FULL, waiting=waiting, retry_after_s=self._retry_after(waiting))

    def add(self, job: JobHandle) -> None:
        self._lines.setdefault(job.source, collections.deque()).append(job)
        if job.source not in self._order:
            self._order.append(job.source)

    def remove(self, job: JobHandle) -> bool:
        line = self._lines.get(job.source)
        if line is None or job not in line:
            return False
        line.remove(job)
        if not line:
            del self._lines[job.source]
            with contextlib.suppress(ValueError):
                self._order.remove(job.source)
        return True

    def next(self, defer: Callable[[JobHandle], bool] | None = None,
             hold: Callable[[JobHandle], bool] | None = None) -> JobHandle | None:
        """The first source in line gives its oldest job and goes to the back of the line.

        ``defer``: a source whose oldest job it holds back is passed over while another source's is
        not (a job for another model waits while jobs for the loaded one are waiting); when every
        source's is held back, the first in line goes anyway. ``hold``: a source whose oldest job it
        names is not served now at all (None when every source's is held)."""
        for source in list(self._order):
            if not self._lines.get(source):
                self._lines.pop(source, None)
                self._order.remove(source)
        order = [s for s in self._order if hold is None or not hold(self._lines[s][0])]
        if not order:
            return None
        chosen = order[0]
        if defer is not None:
            chosen = next((s for s in order if not defer(self._lines[s][0])), chosen)
        self._order.remove(chosen)
        line = self._lines[chosen]
        job = line.popleft()
        if line:
            self._order.append(chosen)
        else:
            del self._lines[chosen]
        return job

    def any(self, test: Callable[[JobHandle], bool]) -> bool:
        """Whether some source's oldest job passes ``test``."""
        return any(line and test(line[0]) for line in self._lines.values())

    def drain(self) -> list[JobHandle]:
        """Every waiting job, oldest line first; the queue is empty after."""
        jobs = list(self)
        self._lines.clear()
        self._order.clear()
        return jobs

    def took(self, seconds: float) -> None:
        """A job ran for ``seconds`` (the Retry-After estimate's sample)."""
        self._durations.append(seconds)

    def _retry_after(self, waiting: int) -> int:
        mean = sum(self._durations) / len(self._durations) if self._durations else 2.0
        return max(1, min(60, math.ceil(mean * max(1, waiting) / 2)))
