"""Load on request, on real models and the official clients: /v1/models and Ollama's /api/tags list the
local models beside the loaded one (it first); a request naming another loads it and answers from it;
with loads not allowed it is a 403 that names the model and the setting; an unknown name stays a 404 in
each surface's shape; a file that fails to load is a 500 naming it and the model before comes back;
two clients naming two models take turns without a failure."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import ollama
import openai
import pytest

from localchat.catalog.drafters import load_catalog
from localchat.catalog.library import Library
from localchat.engine.types import EngineConfig
from localchat.host.events import Phase, StateChanged
from localchat.server.model_shelf import ModelShelf
from tests.server.served import Served, serve

SMOL = "SmolLM2-135M-Instruct.Q4_1"
GEMMA = "gemma-3-270m-q4_k_m"


class Allow:
    """The setting, as the shelf asks it at each request."""

    def __init__(self) -> None:
        self.on = True

    def __call__(self) -> bool:
        return self.on


@pytest.fixture
def allow() -> Allow:
    return Allow()


@pytest.fixture
def served(two_models: Path, allow: Allow) -> Iterator[Served]:
    shelf = ModelShelf(lambda: Library([two_models]), load_catalog,
                       lambda target, draft: EngineConfig(target, draft, n_ctx=1024), allow)
    with serve(two_models / f"{SMOL}.gguf", shelf=shelf, model_id="", api_key=None, queue=8) as s:
        yield s


def test_the_list_shows_every_local_model_the_loaded_one_first(served: Served) -> None:
    listed = served.client().models.list().data
    assert [m.id for m in listed] == [SMOL, GEMMA]
    assert [m.model_extra["loaded"] for m in listed] == [True, False]  # type: ignore[index]
    tags = ollama.Client(host=served.url).list().models
    assert [t.model for t in tags] == [f"{SMOL}:latest", f"{GEMMA}:latest"]
    with pytest.raises(ollama.ResponseError) as shown:  # /api/show describes the loaded model only
        ollama.Client(host=served.url).show(f"{GEMMA}:latest")
    assert shown.value.status_code == 404 and "not loaded" in str(shown.value)
    assert ollama.Client(host=served.url).show(SMOL).capabilities


def test_a_request_naming_another_model_loads_it_and_answers_from_it(served: Served) -> None:
    client = served.client()
    reply = client.chat.completions.create(model=GEMMA, messages=[{"role": "user", "content": "Say hi."}],
                                           max_tokens=8, temperature=0)
    assert reply.model == GEMMA and reply.choices[0].message.content
    state = served.supervisor.state
    assert state.ready and Path(state.config.target_path).name == f"{GEMMA}.gguf"  # type: ignore[union-attr]
    assert state.requested_by.startswith("openai:")
    assert [m.id for m in client.models.list().data] == [GEMMA, SMOL]  # the loaded one first
    # Streaming through a load back to the first model: the stream's model is the one named.
    chunks = list(client.chat.completions.create(
        model=SMOL, messages=[{"role": "user", "content": "Hi"}], max_tokens=4, stream=True))
    assert chunks and {c.model for c in chunks} == {SMOL}
    # Ollama's client names it with a tag; its chat loads it as well.
    answer = ollama.Client(host=served.url).chat(model=f"{GEMMA}:latest",
                                                 messages=[{"role": "user", "content": "Hi"}],
                                                 options={"num_predict": 4})
    assert answer.message.content is not None
    assert Path(served.supervisor.state.config.target_path).name == f"{GEMMA}.gguf"  # type: ignore[union-attr]


def test_with_loads_not_allowed_the_request_is_refused_naming_the_model_and_the_setting(
    served: Served, allow: Allow
) -> None:
    allow.on = False
    with pytest.raises(openai.PermissionDeniedError) as refused:
        served.client().chat.completions.create(model=GEMMA, messages=[{"role": "user", "content": "Hi"}],
                                                max_tokens=4)
    message = str(refused.value)
    assert GEMMA in message and "Let API requests load other models" in message
    assert "--no-load-on-request" in message
    assert Path(served.supervisor.state.config.target_path).name == f"{SMOL}.gguf"  # type: ignore[union-attr]
    with httpx.Client(base_url=served.url, timeout=30) as http:
        r = http.post("/api/chat", json={"model": GEMMA, "messages": [{"role": "user", "content": "Hi"}]})
        assert r.status_code == 403 and GEMMA in r.json()["error"]
        r = http.post("/v1/messages", json={"model": GEMMA, "max_tokens": 4,
                                            "messages": [{"role": "user", "content": "Hi"}]})
        assert r.status_code == 403 and r.json()["error"]["type"] == "permission_error"
    # The loaded model still answers.
    reply = served.client().chat.completions.create(model=SMOL, messages=[{"role": "user", "content": "Hi"}],
                                                    max_tokens=4)
    assert reply.choices[0].message.content is not None


def test_an_unknown_model_is_a_404_in_each_surfaces_shape(served: Served) -> None:
    with pytest.raises(openai.NotFoundError) as missing:
        served.client().chat.completions.create(model="no-such-model",
                                                messages=[{"role": "user", "content": "Hi"}])
    assert "no-such-model" in str(missing.value)
    with httpx.Client(base_url=served.url, timeout=30) as http:
        r = http.post("/api/chat", json={"model": "no-such-model", "messages": []})
        assert r.status_code == 404 and "no-such-model" in r.json()["error"]
        r = http.post("/v1/messages", json={"model": "no-such-model", "max_tokens": 4,
                                            "messages": [{"role": "user", "content": "Hi"}]})
        assert r.status_code == 404 and r.json()["type"] == "error"
        assert r.json()["error"]["type"] == "not_found_error"
        r = http.post("/v1/responses", json={"model": "no-such-model", "input": "Hi"})
        assert r.status_code == 404 and r.json()["error"]["code"] == "model_not_found"


def test_a_file_that_fails_to_load_is_a_clear_error_and_the_model_before_comes_back(
    served: Served, two_models: Path, smollm2_path: Path
) -> None:
    # Its header reads, and names an architecture llama.cpp does not know: listed, and fails to load.
    broken = two_models / "broken-model.gguf"
    data = smollm2_path.read_bytes()
    at = data.index(b"general.architecture") + len(b"general.architecture") + 12
    assert data[at:at + 5] == b"llama"
    broken.write_bytes(data[:at] + b"llamz" + data[at + 5:])
    assert "broken-model" in [m.id for m in served.client().models.list().data]
    with pytest.raises(openai.InternalServerError) as failed:
        served.client().chat.completions.create(model="broken-model",
                                                messages=[{"role": "user", "content": "Hi"}], max_tokens=4)
    assert "broken-model" in str(failed.value) and "loaded again" in str(failed.value)
    served.supervisor.wait_ready(120)
    state = served.supervisor.state
    assert Path(state.config.target_path).name == f"{SMOL}.gguf"  # type: ignore[union-attr]
    assert state.refused_path == str(broken)
    reply = served.client().chat.completions.create(model=SMOL, messages=[{"role": "user", "content": "Hi"}],
                                                    max_tokens=4)
    assert reply.choices[0].message.content is not None


def test_two_clients_naming_two_models_take_turns_without_a_failure(served: Served) -> None:
    answers: dict[str, list[str]] = {SMOL: [], GEMMA: []}
    problems: list[BaseException] = []

    def ask(model: str) -> None:
        client = served.client(timeout=300)
        try:
            for _ in range(3):
                reply = client.chat.completions.create(model=model, max_tokens=4,
                                                       messages=[{"role": "user", "content": "Hi"}])
                answers[model].append(reply.model)
        except Exception as exc:  # the test reports it
            problems.append(exc)

    threads = [threading.Thread(target=ask, args=(m,)) for m in (SMOL, GEMMA)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(600)
    assert not problems, problems
    assert answers == {SMOL: [SMOL] * 3, GEMMA: [GEMMA] * 3}
    phases = [e.state.phase for e in served.events if isinstance(e, StateChanged)]
    loads = sum(1 for a, b in itertools.pairwise(phases) if b is Phase.READY and a is not b)
    # The first load, then a switch or two: each client's next request comes within LINGER_S of its
    # answer and goes before the other model's (without it: a switch before nearly every request, 1 + 5).
    assert loads <= 1 + 3, loads
    assert not any(isinstance(e, StateChanged) and e.state.phase is Phase.FAILED for e in served.events)
