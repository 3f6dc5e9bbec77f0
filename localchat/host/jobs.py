"""The jobs waiting for the engine: one fair, bounded queue, and each job's handle.

Fairness: jobs wait in one line per source ("window", "api:<conversation>"),
and the next job is taken round-robin across sources, so one agent resending
long conversations cannot starve the window or another client. The number of
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

from localchat.engine.types import GenerationRequest
from localchat.host.events import Failed, Failure, FailureKind, Finished, JobEvent

log = logging.getLogger(__name__)


@dataclass(eq=False)
class JobHandle:
    """One submitted request. Read ``events`` until a Finished or Failed arrives."""

    id: int
    source: str
    request: GenerationRequest
    # Where its events wait for the reader (None: its reader takes them from the supervisor's listener).
    events: queue.SimpleQueue[JobEvent] | None = field(default_factory=queue.SimpleQueue)
    notify: Callable[[JobEvent], None] | None = None  # called after each event (from the supervisor)
    submitted_at: float = field(default_factory=time.monotonic)
    started_at: float | None = None
    cancel_requested: bool = False
    done: bool = False

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

    def next(self) -> JobHandle | None:
        """The first source in line gives its oldest job and goes to the back of the line."""
        while self._order:
            source = self._order.popleft()
            line = self._lines.get(source)
            if not line:
                self._lines.pop(source, None)
                continue
            job = line.popleft()
            if line:
                self._order.append(source)
            else:
                del self._lines[source]
            return job
        return None

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
