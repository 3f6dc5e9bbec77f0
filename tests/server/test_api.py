"""The local API against a real server and a real model (SmolLM2-135M, F16), driven by the official client.

F16 because its batched and single-token kernels agree exactly: greedy text
then depends only on the prompt, so concurrent and sequential runs, and
replies with and without a reused cache, can be compared character for character.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import openai
import psutil
import pytest

from localchat.engine.types import FinishReason
from localchat.host.events import Finished
from localchat.host.sources import Surface, surface_of
from localchat.host.supervisor import EngineSupervisor
from tests.server.served import API_KEY, Served, serve

pytestmark = pytest.mark.slow

COUNTING = "1, 2, 3, 4, 5, 6, 7, 8, 9, 10,"  # a raw prompt the model keeps continuing


@pytest.fixture(scope="module")
def served(smollm2_f16_path: Path) -> Iterator[Served]:
    with serve(smollm2_f16_path, ctx=1024, queue=3) as s:
        yield s


def ask(
    client: openai.OpenAI, text: str, max_tokens: int = 24, **kw: object
) -> openai.types.chat.ChatCompletion:
    return client.chat.completions.create(
        model="test-model", messages=[{"role": "user", "content": text}], max_tokens=max_tokens,
        temperature=0, **kw,  # type: ignore[arg-type]
    )


def wait_idle(supervisor: EngineSupervisor, timeout: float = 5.0) -> float:
    start = time.monotonic()
    while supervisor.running_source is not None or supervisor.queued:
        assert time.monotonic() - start < timeout, "the engine is still busy"
        time.sleep(0.02)
    return time.monotonic() - start


def test_models_lists_the_served_model(served: Served) -> None:
    models = served.client().models.list()
    assert [m.id for m in models.data] == ["test-model"]


def test_chat_non_streamed_and_streamed_give_the_same_text_with_statistics(served: Served) -> None:
    client = served.client()
    reply = ask(client, "Name three colours.")
    text = reply.choices[0].message.content
    assert text and reply.choices[0].finish_reason in ("stop", "length")
    assert reply.usage is not None and reply.usage.completion_tokens > 0
    assert reply.usage.prompt_tokens_details is not None
    assert isinstance(reply.usage.prompt_tokens_details.cached_tokens, int)
    assert reply.usage.completion_tokens_details is not None
    assert reply.usage.completion_tokens_details.accepted_prediction_tokens is not None
    timings = (reply.model_extra or {})["timings"]
    assert timings["predicted_n"] == reply.usage.completion_tokens and timings["predicted_per_second"] > 0

    stream = client.chat.completions.create(
        model="test-model", messages=[{"role": "user", "content": "Name three colours."}], max_tokens=24,
        temperature=0, stream=True, stream_options={"include_usage": True},
    )
    chunks = list(stream)
    streamed = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert streamed == text
    finish = [c for c in chunks if c.choices and c.choices[0].finish_reason]
    assert len(finish) == 1 and "timings" in (finish[0].model_extra or {})
    assert chunks[-1].usage is not None
    assert chunks[-1].usage.completion_tokens == reply.usage.completion_tokens


def test_follow_up_turn_pays_only_for_its_new_tokens(served: Served) -> None:
    client = served.client()
    system = {"role": "system", "content": "You are a terse assistant. " * 20}
    first_msgs = [system, {"role": "user", "content": "What is 2 + 2?"}]
    first = client.chat.completions.create(
        model="test-model", messages=first_msgs, max_tokens=12, temperature=0)
    answer = first.choices[0].message.content or ""
    follow = [*first_msgs, {"role": "assistant", "content": answer},
              {"role": "user", "content": "And 3 + 3?"}]
    second = client.chat.completions.create(model="test-model", messages=follow, max_tokens=12, temperature=0)
    assert first.usage is not None and second.usage is not None
    cached = second.usage.prompt_tokens_details.cached_tokens  # type: ignore[union-attr]
    new = (second.model_extra or {})["timings"]["prompt_n"]
    assert cached >= first.usage.prompt_tokens - 2, (cached, first.usage.prompt_tokens)
    assert new < 30 and cached + new == second.usage.prompt_tokens


def test_two_alternating_conversations_each_pay_only_for_their_new_tokens(served: Served) -> None:
    """An agent alternating two conversations (A, B, A, B): each follow-up restores its own
    conversation's saved cache, though the other one came between (issue 12, item 6)."""
    client = served.client()

    def turn(messages: list[dict[str, str]]) -> openai.types.chat.ChatCompletion:
        return client.chat.completions.create(model="test-model", messages=messages,  # type: ignore[arg-type]
                                              max_tokens=12, temperature=0)

    convs = {
        "a": [{"role": "system", "content": "You are a terse assistant about cooking. " * 12},
              {"role": "user", "content": "How long do I boil an egg?"}],
        "b": [{"role": "system", "content": "You are a terse assistant about astronomy. " * 12},
              {"role": "user", "content": "What is a light year?"}],
    }
    firsts = {k: turn(v) for k, v in convs.items()}
    for key, follow in (("a", "And a soft one?"), ("b", "And a parsec?")):
        first = firsts[key]
        msgs = [*convs[key], {"role": "assistant", "content": first.choices[0].message.content or ""},
                {"role": "user", "content": follow}]
        second = turn(msgs)
        assert first.usage is not None and second.usage is not None
        cached = second.usage.prompt_tokens_details.cached_tokens  # type: ignore[union-attr]
        assert cached >= first.usage.prompt_tokens, (key, cached, first.usage.prompt_tokens)
        assert second.usage.prompt_tokens - cached < 30


def test_completions_and_llama_cpp_native_endpoint(served: Served) -> None:
    client = served.client()
    done = client.completions.create(model="test-model", prompt=COUNTING, max_tokens=8, temperature=0)
    text = done.choices[0].text
    assert text.strip().startswith("11")
    streamed = "".join(c.choices[0].text for c in client.completions.create(
        model="test-model", prompt=COUNTING, max_tokens=8, temperature=0, stream=True) if c.choices)
    assert streamed == text

    with served.http() as http, http.stream("POST", "/completion", json={
        "prompt": COUNTING, "n_predict": 8, "stream": True, "temperature": 0,
    }) as r:
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        objs = [json.loads(line[6:]) for line in r.iter_lines() if line.startswith("data: ")]
    assert "".join(o["content"] for o in objs) == text
    assert objs[-1]["stop"] is True and objs[-1]["timings"]["predicted_n"] == 8
    assert all(o["stop"] is False for o in objs[:-1])


def test_fill_in_the_middle_needs_a_model_with_fim_tokens(served: Served) -> None:
    with served.http() as http:
        r = http.post("/v1/completions", json={"prompt": "def f():", "suffix": "\n", "max_tokens": 4})
        assert r.status_code == 400 and error_of(r)["code"] == "fim_not_supported"
        assert error_of(r)["param"] == "suffix"
        r = http.post("/infill", json={"input_prefix": 3, "input_suffix": ""})
        assert r.status_code == 400 and error_of(r)["param"] == "input_prefix"


def test_health_and_metrics(served: Served) -> None:
    with served.http() as http:
        assert http.get("/health").json() == {"status": "ok"}
        before = http.get("/metrics").text
        ask(served.client(), "Hello", max_tokens=4)
        after = http.get("/metrics").text

    def value(text: str, name: str) -> float:
        return float(next(line.split()[1] for line in text.splitlines() if line.startswith(name + " ")))

    for name in ("llamacpp:spec_decode_num_draft_tokens_total",
                 "llamacpp:spec_decode_num_accepted_tokens_total",
                 "llamacpp:spec_decode_num_drafts_total"):
        assert f"# TYPE {name} counter" in after
    tokens = "llamacpp:tokens_predicted_total"
    served_total = "localchat:requests_served_total"
    assert value(after, tokens) >= value(before, tokens) + 1
    assert value(after, served_total) == value(before, served_total) + 1


def test_four_concurrent_clients_get_the_sequential_texts(served: Served) -> None:
    prompts = ["Name a fruit.", "Name a planet.", "Say hello in French.", "What is the capital of Italy?"]
    client = served.client()
    sequential = [ask(client, p, 16).choices[0].message.content for p in prompts]
    # Four at once against a queue of three: if all four arrive before the engine takes the first, the
    # last is told to retry (429 with Retry-After), as the openai client does by default.
    with ThreadPoolExecutor(4) as pool:
        concurrent = list(pool.map(
            lambda p: ask(served.client(max_retries=3), p, 16).choices[0].message.content, prompts))
    assert concurrent == sequential


def test_speculative_field_and_fallback_warning(served: Served) -> None:
    client = served.client()
    off = ask(client, "Repeat: the cat sat on the mat. the cat sat on the mat.", 24,
              extra_body={"speculative": {"mode": "off"}})
    ngram = ask(client, "Repeat: the cat sat on the mat. the cat sat on the mat.", 24,
                extra_body={"speculative": {"mode": "ngram", "n_max": 6}})
    assert ngram.choices[0].message.content == off.choices[0].message.content
    assert (off.model_extra or {})["timings"]["draft_n"] == 0
    assert (ngram.model_extra or {})["speculative"]["mode"] == "ngram"
    draft = ask(client, "Hi", 4, extra_body={"speculative": {"mode": "draft"}})  # no draft model is loaded
    extra = draft.model_extra or {}
    assert extra["speculative"]["mode"] == "ngram" and "No draft model" in extra["warning"]


def test_disconnect_mid_stream_frees_the_engine(served: Served) -> None:
    client = served.client()
    stream = client.completions.create(model="test-model", prompt=COUNTING, max_tokens=500, temperature=0,
                                       stream=True)
    for i, _chunk in enumerate(stream):
        if i == 2:
            break
    stream.close()
    # Judged by what the engine did, not by the clock (a busy machine takes its time): the job ended as
    # cancelled, long before its 500 tokens, and the engine is free for the next request.
    wait_idle(served.supervisor, 120.0)
    ends = [e for e in served.events if isinstance(e, Finished) and surface_of(e.source) is Surface.OPENAI]
    assert ends[-1].result.finish_reason is FinishReason.CANCELLED
    assert ends[-1].result.stats.generated_tokens < 400
    assert ask(client, "Hi", 4).choices[0].message.content


def error_of(response: httpx.Response) -> dict[str, object]:
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"message", "type", "param", "code"}
    assert "Traceback" not in response.text
    return body["error"]  # type: ignore[no-any-return]


def test_bad_input_gets_the_openai_error_shape_and_the_server_keeps_serving(served: Served) -> None:
    chat = "/v1/chat/completions"
    msgs = [{"role": "user", "content": "Hi"}]
    with served.http() as http:
        r = http.post(chat, content=b"{not json")
        assert r.status_code == 400 and error_of(r)["code"] == "invalid_json"
        r = http.post(chat, json={"model": "test-model"})
        assert r.status_code == 400 and error_of(r)["param"] == "messages"
        r = http.post(chat, json={"messages": msgs, "max_tokens": "ten"})
        assert r.status_code == 400 and error_of(r)["param"] == "max_tokens"
        r = http.post(chat, json={"messages": [{"role": "user", "content": 5}]})
        assert r.status_code == 400 and error_of(r)["code"] == "invalid_type"
        r = http.post(chat, json={"messages": msgs, "max_tokens": 100_000})
        assert r.status_code == 400 and "more than this server allows" in str(error_of(r)["message"])
        r = http.post(chat, json={"messages": msgs, "speculative": {"mode": "warp"}})
        assert r.status_code == 400 and error_of(r)["param"] == "speculative.mode"
        r = http.post(chat, content=b'{"messages": [' + b" " * (1024 * 1024) + b"]}")
        assert r.status_code == 413 and error_of(r)["code"] == "body_too_large"
        r = http.post(chat, json={"messages": msgs}, headers={"Host": "attacker.example:11435"})
        assert r.status_code == 403 and error_of(r)["code"] == "host_not_allowed"
        r = http.post(chat, json={"messages": msgs}, headers={"Authorization": "Bearer wrong"})
        assert r.status_code == 401 and error_of(r)["type"] == "authentication_error"
        r = http.get("/v1/nothing")
        assert r.status_code == 404 and error_of(r)["code"] == "not_found"
        preflight = {"Origin": "https://example.com", "Access-Control-Request-Method": "POST"}
        r = http.options(chat, headers=preflight)
        assert "access-control-allow-origin" not in r.headers  # no CORS unless --cors-origin
    with httpx.Client(base_url=served.url) as anonymous:
        assert anonymous.get("/health").status_code == 200  # health needs no key
        assert anonymous.get("/v1/models").status_code == 401

    client = served.client()
    with pytest.raises(openai.NotFoundError) as nf:
        client.chat.completions.create(model="gpt-4o", messages=msgs, max_tokens=4)  # type: ignore[arg-type]
    assert "not served here" in str(nf.value)
    with pytest.raises(openai.BadRequestError) as too_long:
        ask(client, "word " * 3000, 4)
    assert too_long.value.code == "context_length_exceeded" and "context window" in str(too_long.value)
    with pytest.raises(openai.BadRequestError):  # the same refusal when streaming: before any chunk
        list(client.chat.completions.create(model="test-model", stream=True, max_tokens=4,
                                            messages=[{"role": "user", "content": "word " * 3000}]))
    assert ask(client, "Hi", 4).choices[0].message.content  # still serving


def test_full_queue_answers_429_with_retry_after(served: Served) -> None:
    client = served.client()
    streams = [client.completions.create(model="test-model", prompt=COUNTING, max_tokens=500, stream=True,
                                         temperature=0, user=f"client-{i}") for i in range(1)]
    next(iter(streams[0]))  # the first job runs
    waiting: list[object] = []

    def queued(i: int) -> None:
        waiting.append(served.client(timeout=60).completions.create(
            model="test-model", prompt=COUNTING, max_tokens=500, stream=True, user=f"client-{i}"))

    threads = [threading.Thread(target=queued, args=(i,), daemon=True) for i in range(1, 4)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 30
    while served.supervisor.queued < 3:
        assert time.monotonic() < deadline, "the queue did not fill"
        time.sleep(0.01)
    with served.http() as http:
        r = http.post("/v1/completions", json={"prompt": "x", "max_tokens": 2})
    assert r.status_code == 429 and error_of(r)["code"] == "queue_full"
    assert int(r.headers["Retry-After"]) >= 1
    for s in streams:
        s.close()
    # The queued clients give up too; their jobs leave the queue without running to the end.
    for t in threads:
        t.join(30)
    for s in waiting:
        s.close()  # type: ignore[attr-defined]
    wait_idle(served.supervisor, 10)
    assert ask(client, "Hi", 4).choices[0].message.content


def test_engine_killed_mid_reply_fails_that_request_and_the_next_is_served(served: Served) -> None:
    client = served.client()
    stream = client.completions.create(model="test-model", prompt=COUNTING, max_tokens=500, temperature=0,
                                       stream=True)
    it = iter(stream)
    next(it)
    old_pid = served.supervisor.state.pid
    assert old_pid is not None
    psutil.Process(old_pid).kill()
    with pytest.raises(openai.APIError) as died:
        for _ in it:
            pass
    assert "stopped unexpectedly" in str(died.value)
    reply = ask(client, "Hi", 4)  # waits for the restarted engine, no 503
    assert reply.choices[0].message.content
    assert served.supervisor.state.pid not in (None, old_pid)


def test_loading_answers_503_with_retry_after() -> None:
    with serve(None, start=False) as s, s.http() as http:
        health = http.get("/health")
        assert health.status_code == 503 and health.headers["Retry-After"]
        r = http.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": "Hi"}]})
        assert r.status_code == 503 and error_of(r)["code"] == "model_loading"
        assert int(r.headers["Retry-After"]) >= 1
        assert http.get("/v1/models").status_code == 200  # answers at once, also while loading
    assert API_KEY
