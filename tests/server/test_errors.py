"""server.errors: one table answers every engine Failure kind, with a status a client can act on."""

from __future__ import annotations

from localchat.host.events import Failure, FailureKind
from localchat.server.errors import FAILURE_STATUS, failure_error


def test_every_kind_has_a_status() -> None:
    assert set(FAILURE_STATUS) == set(FailureKind)


def test_statuses_clients_can_act_on() -> None:
    overflow = failure_error(Failure(FailureKind.CONTEXT_EXCEEDED, needed=5000, n_ctx=4096, reserve=512))
    assert (overflow.status, overflow.code, overflow.param) == (400, "context_length_exceeded", "messages")
    assert overflow.message.startswith("The prompt needs 5000 tokens")
    full = failure_error(Failure(FailureKind.QUEUE_FULL, waiting=16, retry_after_s=9))
    assert full.status == 429 and full.headers["Retry-After"] == "9"
    died = failure_error(Failure(FailureKind.ENGINE_DIED, exitcode=3))
    assert (died.status, died.code) == (500, "engine_died") and "being restarted" in died.message
    loading = failure_error(Failure(FailureKind.LOAD_FAILED, "The file is damaged."))
    assert loading.status == 503 and loading.headers["Retry-After"]
    assert loading.message == "The file is damaged."
