"""host.jobs: the fair queue serves sources round-robin, is bounded, and drains in order."""

from __future__ import annotations

from localchat.engine.types import GenerationRequest
from localchat.host.events import Failed, FailureKind, Finished, Tokens
from localchat.host.jobs import FairQueue, JobHandle

REQUEST = GenerationRequest(prompt="hi", max_tokens=2)


def _job(i: int, source: str) -> JobHandle:
    return JobHandle(i, source, REQUEST)


def test_round_robin_across_sources() -> None:
    q = FairQueue(10)
    for i, source in enumerate(["a", "a", "a", "b", "c", "b"], start=1):
        q.add(_job(i, source))
    order = []
    while (job := q.next()) is not None:
        order.append((job.id, job.source))
    assert order == [(1, "a"), (4, "b"), (5, "c"), (2, "a"), (6, "b"), (3, "a")]


def test_bounded_with_a_retry_estimate_from_recent_jobs() -> None:
    q = FairQueue(2)
    assert q.full() is None
    q.add(_job(1, "a"))
    q.add(_job(2, "b"))
    full = q.full()
    assert full is not None and full.kind is FailureKind.QUEUE_FULL and full.waiting == 2
    assert full.retry_after_s == 2  # no job measured yet: 2 s each, half of the two waiting
    for _ in range(4):
        q.took(30.0)
    later = q.full()
    assert later is not None and later.retry_after_s == 30


def test_remove_and_drain() -> None:
    q = FairQueue(5)
    jobs = [_job(1, "a"), _job(2, "b"), _job(3, "a")]
    for job in jobs:
        q.add(job)
    assert q.remove(jobs[1]) and not q.remove(jobs[1])
    assert q.drain() == [jobs[0], jobs[2]] and len(q) == 0 and q.next() is None


def test_a_handle_ends_at_its_last_event_and_may_skip_its_own_queue() -> None:
    seen: list[object] = []
    job = JobHandle(7, "api:x", REQUEST, notify=seen.append)
    job.put(Tokens(7, "api:x", None))  # type: ignore[arg-type]
    assert not job.done
    job.put(Finished(7, "api:x", None))  # type: ignore[arg-type]
    assert job.done and len(seen) == 2 and job.events is not None and job.events.qsize() == 2
    quiet = JobHandle(8, "window", REQUEST, events=None)
    quiet.put(Failed(8, "window", None))  # type: ignore[arg-type]
    assert quiet.done


def test_a_held_back_job_waits_while_another_source_can_go_and_goes_when_none_can() -> None:
    q = FairQueue(8)
    other, mine, later = _job(1, "openai:b"), _job(2, "openai:a"), _job(3, "openai:a")
    for job in (other, mine, later):
        q.add(job)
    held = {1}  # job 1 names another model
    assert q.next(lambda j: j.id in held) is mine
    assert q.next(lambda j: j.id in held) is later
    assert q.next(lambda j: j.id in held) is other  # every source's next job is held back: it goes
    assert q.next(lambda j: True) is None
