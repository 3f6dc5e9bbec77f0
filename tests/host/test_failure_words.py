"""host.failure_words: every Failure kind has words for each reader, made from its facts."""

from __future__ import annotations

import pytest

from localchat.host.events import Failure, FailureKind
from localchat.host.failure_words import Audience, dropped_workers_sentence, sentence


@pytest.mark.parametrize("kind", list(FailureKind))
@pytest.mark.parametrize("audience", list(Audience))
def test_every_kind_has_a_sentence_for_every_reader(kind: FailureKind, audience: Audience) -> None:
    text = sentence(Failure(kind, exitcode=1, worker="10.0.0.2:50052", needed=10, n_ctx=8, reserve=2,
                            waiting=3, retry_after_s=4, timeout_s=5.0), audience)
    assert text and (text[0].isupper() or text[0].isdigit()) and text.endswith((".", ")"))
    assert "\n" not in text and "Failure" not in text


def test_the_window_and_the_api_hear_a_death_in_their_own_words() -> None:
    died = Failure(FailureKind.ENGINE_DIED, exitcode=-9)
    assert sentence(died) == ("The engine stopped unexpectedly (exit code -9). "
                              "Your chat is saved; the next message starts a new engine.")
    with_log = sentence(died, log_path="/logs/engine.log")
    assert with_log.endswith("What the engine said is in /logs/engine.log.")
    assert sentence(died, Audience.API) == ("The engine stopped unexpectedly (exit code -9) while writing "
                                            "this reply; it is being restarted.")
    assert "results so far are kept" in sentence(died, Audience.BENCH)
    loading = Failure(FailureKind.ENGINE_DIED, exitcode=None, while_loading=True)
    assert sentence(loading).startswith("The engine stopped while loading the model (exit code unknown)")


def test_context_words_come_from_the_counts_not_from_the_engines_sentence() -> None:
    failure = Failure(FailureKind.CONTEXT_EXCEEDED, "whatever the engine said", needed=5000, n_ctx=4096,
                      reserve=512)
    assert sentence(failure) == ("This message needs 5000 tokens but the context window holds 4096, with "
                                 "512 kept free for the reply. Shorten the message or the system prompt, "
                                 "or raise the context length in Settings.")
    assert sentence(failure, Audience.API).startswith("The prompt needs 5000 tokens")
    assert sentence(Failure(FailureKind.CONTEXT_EXCEEDED, "There is no room.")) == "There is no room."


def test_workers_are_named() -> None:
    lost = Failure(FailureKind.WORKER_LOST, worker="10.0.0.2:50052")
    assert "The worker 10.0.0.2:50052 stopped answering" in sentence(lost)
    assert "Settings → Workers" in sentence(lost)
    assert "10.0.0.2:50052 is gone" in dropped_workers_sentence(("10.0.0.2:50052",))
