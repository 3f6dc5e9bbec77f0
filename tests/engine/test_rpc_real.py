"""The target split over real `localchat worker` processes on 127.0.0.1, with the real Qwen pair.

Each engine runs in its own engine process (as in the app): ggml's device
registry is per process, and a worker added in the test process would stay
in every later model load's default device list.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from localchat.engine.rpc_wire import Endpoint, first_gone
from localchat.engine.types import (
    ChatMessage,
    DrafterKind,
    EngineConfig,
    GenerationRequest,
    GenerationResult,
    SpeculationConfig,
)
from localchat.host.child import ChildGone
from localchat.host.events import Failed, FailureKind, Finished, Loaded, Tokens
from localchat.host.protocol import Generate, Load
from tests.engine.rpc_workers import free_port, require_rpc, start_worker
from tests.host.processes import engine_process

pytestmark = pytest.mark.slow

PROMPT = (ChatMessage("user", "Write a Python function that returns the squares of a list of numbers."),)
OFF = SpeculationConfig(enabled=False)
DRAFT = SpeculationConfig(drafter=DrafterKind.MODEL, adaptive=False, draft_tokens=4)


@pytest.fixture
def workers() -> Iterator[list[tuple[subprocess.Popen[bytes], Endpoint]]]:
    require_rpc()
    started: list[tuple[subprocess.Popen[bytes], Endpoint]] = []
    try:
        started.append(start_worker())
        started.append(start_worker())
        yield started
    finally:
        for proc, _ in started:
            proc.kill()
            proc.wait(10)


def _run(config: EngineConfig, *requests: GenerationRequest) -> tuple[list[GenerationResult], str]:
    proc = engine_process()
    try:
        proc.send(Load(config))
        loaded = proc.receive(300)
        assert isinstance(loaded, Loaded), loaded
        results = []
        for i, request in enumerate(requests):
            proc.send(Generate(i, "window", request))
            while True:
                reply = proc.receive(300)
                assert reply is not None, "no reply in time"
                if isinstance(reply, Finished):
                    results.append(reply.result)
                    break
                assert not isinstance(reply, Failed), reply.failure
        return results, loaded.info.placement
    finally:
        proc.stop(5)


def _req(spec: SpeculationConfig, session: str) -> GenerationRequest:
    return GenerationRequest(messages=PROMPT, max_tokens=32, speculation=spec, session=session)


def test_split_over_one_and_two_workers_gives_the_local_text(
    workers, qwen_target_path: Path, qwen_draft_path: Path
) -> None:
    base = EngineConfig(str(qwen_target_path), str(qwen_draft_path), n_ctx=1024, n_threads=1)
    (local_off,), where = _run(base, _req(OFF, "a"))
    assert where == "local"
    one = replace(base, rpc_servers=(str(workers[0][1]),))
    (off, draft), where = _run(one, _req(OFF, "b"), _req(DRAFT, "c"))
    assert where == "local + 1 worker"
    assert draft.stats.drafted > 0 and draft.stats.accepted > 0
    # The same answer up to near-ties. A Q4_K_M target's batched passes (verification) and single-token
    # ones sum in different orders, and a worker's CPU backend multiplies with ggml's plain kernels
    # while this process may use repacked weights (AVX-512 and AVX2 CPUs): a near-tie late in the reply
    # can go either way (docs/BENCHMARKS.md). Exact equality is tested on SmolLM2 F16, whose kernels
    # agree (test_speculative.py).
    _same_answer(draft.text, off.text)
    _same_answer(off.text, local_off.text)
    two = replace(base, rpc_servers=tuple(str(ep) for _, ep in workers), tensor_split=(0.0, 1.0, 1.0))
    (off2,), where = _run(two, _req(OFF, "d"))
    assert where == "2 workers"
    _same_answer(off2.text, local_off.text)


def _same_answer(split: str, local: str) -> None:
    """The split's reply is the local one, or the same for its first 40 characters (a wrong split
    of the layers writes something else from the first token on)."""
    if split == local:
        return
    same = 0
    while same < min(len(split), len(local)) and split[same] == local[same]:
        same += 1
    assert same >= 40, f"the split run answered differently from the start:\n{split!r}\n{local!r}"


def test_unreachable_worker_at_load_is_named(qwen_target_path: Path) -> None:
    port = free_port()
    config = EngineConfig(str(qwen_target_path), n_ctx=512, rpc_servers=(f"127.0.0.1:{port}",))
    proc = engine_process()
    try:
        proc.send(Load(config))
        reply = proc.receive(120)
        assert isinstance(reply, Failed) and reply.failure.kind is FailureKind.LOAD_FAILED, reply
        assert f"127.0.0.1:{port}" in reply.failure.detail and "cannot be reached" in reply.failure.detail
    finally:
        proc.stop(5)


def test_worker_killed_mid_reply_ends_the_engine_and_is_named(
    workers, qwen_target_path: Path
) -> None:
    (worker, ep), (_, other) = workers
    config = EngineConfig(str(qwen_target_path), n_ctx=1024, n_threads=1, rpc_servers=(str(ep),),
                          tensor_split=(0.0, 1.0))
    proc = engine_process()
    try:
        proc.send(Load(config))
        assert isinstance(proc.receive(300), Loaded)
        long = GenerationRequest(prompt="Counting: 1, 2, 3, 4, 5,", max_tokens=2000, speculation=OFF)
        proc.send(Generate(1, "window", long))
        first = proc.receive(120)
        assert isinstance(first, Tokens), first
        os.kill(worker.pid, signal.SIGKILL)
        worker.wait(10)
        with pytest.raises(ChildGone):
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                reply = proc.receive(1.0)
                assert not isinstance(reply, Finished), "the reply finished although its worker died"
        assert first_gone([other, ep]) == ep
    finally:
        proc.kill()


def test_app_engine_client_names_the_worker_that_died(qtbot, workers, qwen_target_path: Path) -> None:
    """What the window hears when a worker dies mid-reply: one sentence naming it; the next load says it
    cannot be reached (the chat itself is kept by the session, see tests/services/test_chat_session.py)."""
    from localchat.host.events import FailureKind, Phase
    from localchat.host.failure_words import sentence
    from localchat.services.engine_client import EngineClient

    (worker, ep), _ = workers
    client = EngineClient()
    try:
        config = EngineConfig(str(qwen_target_path), n_ctx=1024, n_threads=1, rpc_servers=(str(ep),),
                              tensor_split=(1.0, 1.0))
        with qtbot.waitSignal(client.state_changed, timeout=300_000,
                              check_params_cb=lambda s: s.ready) as loaded:
            client.load(config)
        assert loaded.args[0].info.placement == "local + 1 worker"
        with qtbot.waitSignal(client.job_event, timeout=120_000):
            client.generate(GenerationRequest(prompt="Counting: 1, 2, 3, 4, 5,", max_tokens=2000,
                                              speculation=OFF))
        with qtbot.waitSignal(client.state_changed, timeout=60_000,
                              check_params_cb=lambda s: s.phase is Phase.STOPPED) as died:
            worker.kill()
        failure = died.args[0].failure
        assert failure.kind is FailureKind.WORKER_LOST and failure.worker == str(ep)
        words = sentence(failure)
        assert str(ep) in words and "stopped answering" in words and "chat is saved" in words
        with qtbot.waitSignal(client.state_changed, timeout=120_000,
                              check_params_cb=lambda s: s.phase is Phase.FAILED) as failed:
            client.load(config)
        words = sentence(failed.args[0].failure)
        assert str(ep) in words and "cannot be reached" in words
    finally:
        client.shutdown()
