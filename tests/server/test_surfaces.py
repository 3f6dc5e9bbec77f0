"""Anthropic's Messages, OpenAI's Responses and Ollama's API on the real server over a real model
(SmolLM2-135M, F16: its greedy text depends only on the prompt), each driven by its official client;
bad input answered in each surface's own shape while the server keeps serving; and the guard against
web pages (a cross-site "simple" POST must not make the engine write)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import httpx
import jsonschema
import ollama
import openai
import pytest

from localchat.host.events import Finished, Tokens
from localchat.host.sources import Surface, surface_of
from tests.server.served import API_KEY, Served, serve

pytestmark = pytest.mark.slow

QUESTION = "Name three colours."
COUNTING = "1, 2, 3, 4, 5, 6, 7, 8, 9, 10,"


@pytest.fixture(scope="module")
def served(smollm2_f16_path: Path) -> Iterator[Served]:
    with serve(smollm2_f16_path, ctx=1024, queue=3) as s:
        yield s


def claude(served: Served) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=served.url, api_key=API_KEY, max_retries=0, timeout=120)


def ollama_client(served: Served) -> ollama.Client:
    return ollama.Client(host=served.url, headers={"Authorization": f"Bearer {API_KEY}"}, timeout=120)


def metric(text: str, name: str) -> float:
    return float(next((line.split()[-1] for line in text.splitlines() if line.startswith(name + " ")), 0))


# -- Anthropic ------------------------------------------------------------------------------


def test_anthropic_create_and_stream_give_the_same_text_with_statistics(served: Served) -> None:
    client = claude(served)
    msgs: list[Any] = [{"role": "user", "content": QUESTION}]
    made = client.messages.create(
        model="test-model",
        max_tokens=20,
        messages=msgs,
        system="Be brief.",
        extra_body={"speculative": {"mode": "ngram"}},
    )
    assert made.type == "message" and made.role == "assistant" and made.id.startswith("msg_")
    text = made.content[0].text  # type: ignore[union-attr]
    assert text and made.stop_reason in ("end_turn", "max_tokens")
    assert (
        made.usage.output_tokens > 0
        and made.usage.input_tokens + (made.usage.cache_read_input_tokens or 0) > 0
    )
    extra = made.model_extra or {}
    assert extra["timings"]["predicted_n"] == made.usage.output_tokens
    assert extra["speculative"]["mode"] == "ngram" and extra["speculative"]["drafter"]

    with client.messages.stream(
        model="test-model", max_tokens=20, messages=msgs, system="Be brief."
    ) as stream:
        streamed = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert streamed == text and final.content[0].text == text  # type: ignore[union-attr]
    assert final.stop_reason == made.stop_reason and final.usage.output_tokens == made.usage.output_tokens

    with (
        served.http() as http,
        http.stream(
            "POST",
            "/v1/messages",
            json={
                "model": "test-model",
                "max_tokens": 8,
                "stream": True,
                "messages": msgs,
            },
            headers={"anthropic-version": "2023-06-01"},
        ) as r,
    ):
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        names = [line[7:] for line in r.iter_lines() if line.startswith("event: ")]
    assert names[:3] == ["message_start", "ping", "content_block_start"]
    assert names[-3:] == ["content_block_stop", "message_delta", "message_stop"]

    counted = client.messages.count_tokens(model="test-model", messages=msgs, system="Be brief.")
    assert counted.input_tokens == made.usage.input_tokens + (made.usage.cache_read_input_tokens or 0)


def test_anthropic_stop_sequences_say_which_one_stopped(served: Served) -> None:
    client = claude(served)
    msgs: list[Any] = [{"role": "user", "content": "Count from one to ten in words."}]
    whole = client.messages.create(model="test-model", max_tokens=30, messages=msgs)
    text = whole.content[0].text  # type: ignore[union-attr]
    word = text.split()[len(text.split()) // 2]
    cut = client.messages.create(
        model="test-model", max_tokens=30, messages=msgs, stop_sequences=[word, "zzz"]
    )
    assert cut.stop_reason == "stop_sequence" and cut.stop_sequence == word
    assert cut.content[0].text == text[: text.index(word)]  # type: ignore[union-attr]


# -- OpenAI Responses -----------------------------------------------------------------------


def test_responses_text_stream_chain_and_store(served: Served) -> None:
    client = served.client()
    first = client.responses.create(
        model="test-model",
        input=QUESTION,
        max_output_tokens=16,
        instructions="Be brief.",
        extra_body={"speculative": {"mode": "ngram"}},
    )
    assert first.object == "response" and first.id.startswith("resp_") and first.output_text
    assert first.status in ("completed", "incomplete") and first.usage is not None
    assert (first.model_extra or {})["timings"]["predicted_n"] == first.usage.output_tokens
    assert (first.model_extra or {})["speculative"]["mode"] == "ngram"

    events = list(
        client.responses.create(
            model="test-model", input=QUESTION, max_output_tokens=16, instructions="Be brief.", stream=True
        )
    )
    kinds = [e.type for e in events]
    assert kinds[:4] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
    ]
    assert kinds[-1] in ("response.completed", "response.incomplete") and "response.output_text.done" in kinds
    assert "".join(e.delta for e in events if e.type == "response.output_text.delta") == first.output_text
    assert [e.sequence_number for e in events] == list(range(len(events)))
    assert events[-1].response.output_text == first.output_text  # type: ignore[union-attr]

    second = client.responses.create(
        model="test-model", input="Two more, please.", previous_response_id=first.id, max_output_tokens=8
    )
    alone = client.responses.create(model="test-model", input="Two more, please.", max_output_tokens=8)
    assert second.previous_response_id == first.id and second.usage is not None and alone.usage is not None
    # The chat went on: the second prompt holds the first question and its answer.
    assert second.usage.input_tokens >= alone.usage.input_tokens + first.usage.output_tokens
    assert client.responses.retrieve(first.id).output_text == first.output_text

    unstored = client.responses.create(model="test-model", input=QUESTION, max_output_tokens=4, store=False)
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(unstored.id)
    with pytest.raises(openai.NotFoundError) as gone:
        client.responses.create(model="test-model", input="More.", previous_response_id=unstored.id)
    assert "not kept here" in str(gone.value) and gone.value.code == "previous_response_not_found"
    client.responses.delete(first.id)
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(first.id)


# -- Ollama ---------------------------------------------------------------------------------


def test_ollama_list_show_ps_and_version(served: Served) -> None:
    client = ollama_client(served)
    listed = client.list().models
    assert [m.model for m in listed] == ["test-model:latest"]
    assert listed[0].details is not None and listed[0].details.format == "gguf"
    assert listed[0].details.family == "llama" and listed[0].details.quantization_level == "F16"
    shown = client.show("test-model")
    assert shown.capabilities is not None and {"completion", "tools"} <= set(shown.capabilities)
    assert shown.modelinfo is not None and shown.modelinfo["llama.context_length"] == 1024
    assert (
        shown.template is not None and "im_start" in shown.template and "num_ctx" in (shown.parameters or "")
    )
    running = client.ps().models
    assert running[0].model == "test-model:latest" and running[0].context_length == 1024
    with served.http() as http:
        assert http.get("/api/version").json()["version"]
    with pytest.raises(ollama.ResponseError) as missing:
        client.show("llama3.2:latest")
    assert missing.value.status_code == 404 and "GET /api/tags" in missing.value.error


def test_ollama_chat_stream_and_generate(served: Served) -> None:
    client = ollama_client(served)
    msgs = [{"role": "user", "content": QUESTION}]
    whole = client.chat(
        model="test-model:latest", messages=msgs, stream=False, options={"num_predict": 16}, keep_alive="5m"
    )
    assert whole.done and whole.done_reason in ("stop", "length") and whole.message.content
    assert whole.eval_count and whole.eval_duration and whole.prompt_eval_count
    parts = list(client.chat(model="test-model", messages=msgs, options={"num_predict": 16}, stream=True))
    assert "".join(p.message.content or "" for p in parts) == whole.message.content
    assert parts[-1].done and not any(p.done for p in parts[:-1]) and parts[-1].eval_count == whole.eval_count

    raw = client.generate(
        model="test-model", prompt=COUNTING, raw=True, stream=False, options={"num_predict": 8}
    )
    assert raw.response and raw.response.strip().startswith("11") and raw.done
    pieces = list(
        client.generate(
            model="test-model", prompt=COUNTING, raw=True, options={"num_predict": 8}, stream=True
        )
    )
    assert "".join(p.response or "" for p in pieces) == raw.response
    chatty = client.generate(
        model="test-model", prompt=QUESTION, system="Be brief.", stream=False, options={"num_predict": 8}
    )
    assert chatty.response

    with served.http() as http:  # NDJSON by default, as Ollama streams
        with http.stream(
            "POST", "/api/chat", json={"model": "test-model", "messages": msgs, "options": {"num_predict": 4}}
        ) as r:
            assert r.headers["content-type"].startswith("application/x-ndjson")
            lines = [json.loads(line) for line in r.iter_lines() if line]
        assert lines[-1]["done"] is True and lines[-1]["timings"]["predicted_n"] == lines[-1]["eval_count"]
        assert lines[-1]["speculative"]["mode"] == "adaptive"
        loaded = http.post("/api/generate", json={"model": "test-model"}).json()  # how clients preload
        assert loaded["done"] is True and loaded["done_reason"] == "load"


def test_ollama_says_what_localchat_does_instead(served: Served) -> None:
    client = ollama_client(served)
    with pytest.raises(ollama.ResponseError) as pull:
        client.pull("llama3.2")
    assert pull.value.status_code == 501 and "localchat pull" in pull.value.error
    with pytest.raises(ollama.ResponseError) as embed:
        client.embed(model="test-model", input="hello")
    assert "embeddings" in embed.value.error
    with served.http() as http:
        r = http.post("/api/create", json={"model": "x"})
        assert r.status_code == 501 and set(r.json()) == {"error"}


# -- structured output (enforced by the grammar engine) -------------------------------------

COLOUR = {
    "type": "object",
    "properties": {
        "colour": {"type": "string", "enum": ["red", "green", "blue"]},
        "count": {"type": "integer"},
    },
    "required": ["colour", "count"],
    "additionalProperties": False,
}


def test_structured_output_follows_the_schema_on_each_surface(served: Served) -> None:
    """The small model writes prose when asked; only the constraint makes each answer match."""
    ask = "Tell me about a colour you like."
    olla = ollama_client(served).chat(
        model="test-model",
        messages=[{"role": "user", "content": ask}],
        format=COLOUR,
        stream=False,
        options={"num_predict": 40},
    )
    jsonschema.validate(json.loads(olla.message.content or ""), COLOUR)
    resp = served.client().responses.create(
        model="test-model",
        input=ask,
        max_output_tokens=40,
        text={"format": {"type": "json_schema", "name": "colour", "schema": COLOUR, "strict": True}},
    )
    jsonschema.validate(json.loads(resp.output_text), COLOUR)
    made = claude(served).messages.create(
        model="test-model",
        max_tokens=40,
        messages=[{"role": "user", "content": ask}],
        output_config={"format": {"type": "json_schema", "schema": COLOUR}},
    )
    jsonschema.validate(json.loads(made.content[0].text), COLOUR)  # type: ignore[union-attr]


# -- every surface: statistics, sources, bad input ------------------------------------------


def test_each_surface_is_counted_in_metrics_and_names_itself_in_the_jobs_source(served: Served) -> None:
    with served.http() as http:
        before = http.get("/metrics").text
        claude(served).messages.create(
            model="test-model", max_tokens=4, messages=[{"role": "user", "content": "Hi"}]
        )
        served.client().responses.create(model="test-model", input="Hi", max_output_tokens=4)
        ollama_client(served).chat(
            model="test-model",
            messages=[{"role": "user", "content": "Hi"}],
            options={"num_predict": 4},
            stream=False,
        )
        after = http.get("/metrics").text
    for surface in ("anthropic", "responses", "ollama"):
        name = f'localchat:requests_by_surface_total{{surface="{surface}"}}'
        assert metric(after, name) == metric(before, name) + 1, surface
    assert (
        metric(after, "localchat:requests_served_total")
        == metric(before, "localchat:requests_served_total") + 3
    )
    sources = [surface_of(e.source) for e in served.events[-400:] if isinstance(e, Finished | Tokens)]
    assert {Surface.ANTHROPIC, Surface.RESPONSES, Surface.OLLAMA} <= set(sources)


def test_bad_input_gets_each_surfaces_own_error_shape_and_the_server_keeps_serving(served: Served) -> None:
    def anthropic_error(r: httpx.Response, status: int, kind: str) -> str:
        body = r.json()
        assert r.status_code == status and body["type"] == "error" and body["error"]["type"] == kind, body
        assert set(body["error"]) == {"type", "message"} and body["error"]["message"].endswith((".", ")"))
        return str(body["error"]["message"])

    def ollama_error(r: httpx.Response, status: int) -> str:
        body = r.json()
        assert r.status_code == status and set(body) == {"error"} and isinstance(body["error"], str), body
        return str(body["error"])

    def openai_error(r: httpx.Response, status: int) -> dict[str, Any]:
        body = r.json()
        assert r.status_code == status and set(body["error"]) == {"message", "type", "param", "code"}, body
        return body["error"]  # type: ignore[no-any-return]

    msgs = [{"role": "user", "content": "Hi"}]
    with served.http() as http:
        assert "not valid JSON" in anthropic_error(
            http.post("/v1/messages", content=b"{oops"), 400, "invalid_request_error"
        )
        assert "max_tokens" in anthropic_error(
            http.post("/v1/messages", json={"messages": msgs, "max_tokens": "x"}),
            400,
            "invalid_request_error",
        )
        assert "not served here" in anthropic_error(
            http.post("/v1/messages", json={"model": "claude-sonnet-4-5", "messages": msgs, "max_tokens": 4}),
            404,
            "not_found_error",
        )
        too_big = b'{"messages": [' + b" " * (1024 * 1024) + b"]}"
        anthropic_error(http.post("/v1/messages", content=too_big), 413, "request_too_large")
        with httpx.Client(base_url=served.url) as anonymous:
            r = anonymous.post("/v1/messages", json={"messages": msgs}, headers={"x-api-key": "wrong"})
            assert "x-api-key" in anthropic_error(r, 401, "authentication_error")
            assert (
                anonymous.post(
                    "/v1/messages", json={"messages": msgs, "max_tokens": 2}, headers={"x-api-key": API_KEY}
                ).status_code
                == 200
            )
            assert "test-key" not in ollama_error(anonymous.get("/api/tags"), 401)

        assert openai_error(http.post("/v1/responses", json={"input": 5}), 400)["param"] == "input"
        assert (
            openai_error(http.post("/v1/responses", json={"input": "x", "max_output_tokens": 0}), 400)[
                "param"
            ]
            == "max_output_tokens"
        )
        assert openai_error(http.get("/v1/responses/resp_nope"), 404)["code"] == "response_not_found"

        assert "not valid JSON" in ollama_error(http.post("/api/chat", content=b"[1,"), 400)
        assert "options" in ollama_error(http.post("/api/chat", json={"messages": msgs, "options": [1]}), 400)
        assert "/api/tags" in ollama_error(
            http.post("/api/chat", json={"model": "llama3.2:latest", "messages": msgs}), 404
        )
        assert "/api/chat" in ollama_error(http.get("/api/nothing"), 404)
        ollama_error(http.post("/api/generate", content=too_big), 413)

    with pytest.raises(anthropic.BadRequestError) as long:
        claude(served).messages.create(
            model="test-model", max_tokens=4, messages=[{"role": "user", "content": "word " * 3000}]
        )
    assert "context window" in str(long.value)
    assert (
        ollama_client(served)
        .chat(model="test-model", messages=msgs, stream=False, options={"num_predict": 4})
        .message.content
    )  # still serving


# -- web pages ------------------------------------------------------------------------------


def test_a_web_page_cannot_make_the_engine_write(served: Served) -> None:
    """Issue 29, item 4: a cross-site "simple" POST (text/plain, another site's Origin) made the engine
    write 146 tokens, and 18 of them filled the app's shared queue. Refused before any job, on every
    surface; a CORS preflight from that page gets no CORS answer."""
    page = {"Origin": "https://evil.example", "Content-Type": "text/plain"}
    bodies = {
        "/v1/chat/completions": {
            "messages": [{"role": "user", "content": "Write a long story."}],
            "max_tokens": 146,
        },
        "/v1/completions": {"prompt": COUNTING, "max_tokens": 146},
        "/v1/messages": {"messages": [{"role": "user", "content": "Write a long story."}], "max_tokens": 146},
        "/v1/responses": {"input": "Write a long story.", "max_output_tokens": 146},
        "/api/chat": {"messages": [{"role": "user", "content": "Write a long story."}], "stream": False},
        "/api/generate": {"prompt": COUNTING, "raw": True, "stream": False},
    }
    jobs_before = sum(isinstance(e, Finished) for e in served.events)
    with served.http() as http:
        served_before = metric(http.get("/metrics").text, "localchat:requests_served_total")
        for path, body in bodies.items():
            r = http.post(path, content=json.dumps(body).encode(), headers=page)
            assert r.status_code == 403, (path, r.status_code, r.text[:200])
            assert "web pages are refused" in r.text and "evil.example" in r.text
            assert "access-control-allow-origin" not in r.headers
            preflight = http.options(
                path, headers={"Origin": "https://evil.example", "Access-Control-Request-Method": "POST"}
            )
            assert preflight.status_code == 403 and "access-control-allow-origin" not in preflight.headers
        assert metric(http.get("/metrics").text, "localchat:requests_served_total") == served_before
    assert sum(isinstance(e, Finished) for e in served.events) == jobs_before  # no job ran
    assert served.supervisor.queued == 0


def test_allowed_origins_get_cors_and_the_others_are_refused(smollm2_f16_path: Path) -> None:
    allowed = "http://localhost:3000"
    with serve(smollm2_f16_path, ctx=512, cors_origins=(allowed,)) as s, s.http() as http:
        preflight = http.options(
            "/api/chat",
            headers={
                "Origin": allowed,
                "Access-Control-Request-Method": "POST",
                "Access-Control-Request-Headers": "content-type,x-api-key",
            },
        )
        assert preflight.status_code == 200 and preflight.headers["access-control-allow-origin"] == allowed
        r = http.post(
            "/api/chat",
            headers={"Origin": allowed},
            json={
                "model": "test-model",
                "messages": [{"role": "user", "content": "Hi"}],
                "stream": False,
                "options": {"num_predict": 4},
            },
        )
        assert r.status_code == 200 and r.headers["access-control-allow-origin"] == allowed
        other = http.post("/api/chat", headers={"Origin": "http://localhost:3001"}, json={"messages": []})
        assert other.status_code == 403 and set(other.json()) == {"error"}
