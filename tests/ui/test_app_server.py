"""Settings → Server: the local API runs on the window's own engine (one process, one model), says so in
the status bar, shows an API request's speed, and a port in use is a sentence, not a crash."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from localchat.app import AppParts, build_main_window
from localchat.services import EngineClient

FAKE = "tests.host.fake_engine:FakeEngine"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def parts(qtbot, tmp_path: Path) -> Iterator[AppParts]:
    client = EngineClient(engine_factory=FAKE, cancel_timeout_s=2.0)
    built = build_main_window(tmp_path / "config", tmp_path / "data", engine=client, autoload=False)
    qtbot.addWidget(built.window)
    yield built
    if built.server is not None:
        built.server.stop()
    client.shutdown()
    built.store.close()


def test_the_api_shares_the_windows_engine_and_the_status_bar_says_so(qtbot, parts: AppParts) -> None:
    assert parts.server is not None and parts.server.url is None
    status = parts.window.status
    assert status.server_label.isHidden()
    port = _free_port()
    parts.settings.set("server_port", port)
    parts.settings.set("server_enabled", True)
    assert parts.server.url == f"http://127.0.0.1:{port}"
    assert not status.server_label.isHidden() and status.server_label.text() == f"API on :{port}"
    api = httpx.Client(base_url=parts.server.url, timeout=30)
    r = api.get("/health")
    assert r.status_code == 503 and r.json()["error"]["code"] == "no_model"

    engine = parts.engine
    assert isinstance(engine, EngineClient)
    with qtbot.waitSignal(engine.state_changed, timeout=20_000, check_params_cb=lambda s: s.ready):
        parts.window.load_model("/models/fake.gguf")
    assert api.get("/health").status_code == 200
    assert api.get("/v1/models").json()["data"][0]["id"] == "fake"
    pid = engine.state.pid

    answers: list[httpx.Response] = []
    body = {"model": "fake", "messages": [{"role": "user", "content": "slow"}], "max_tokens": 60}
    asker = threading.Thread(target=lambda: answers.append(api.post("/v1/chat/completions", json=body)))
    asker.start()
    qtbot.waitUntil(lambda: status.server_label.text() == f"OpenAI request · :{port}", timeout=20_000)
    qtbot.waitUntil(lambda: not asker.is_alive(), timeout=30_000)
    assert answers[0].status_code == 200
    assert answers[0].json()["choices"][0]["message"]["content"].startswith("t0 t1 ")
    qtbot.waitUntil(lambda: status.server_label.text() == f"API on :{port}", timeout=5_000)
    assert engine.state.pid == pid  # the same engine process answered the window's load and the API

    # The bar says which API a request came through: here Anthropic's Messages API.
    body = {"model": "fake", "messages": [{"role": "user", "content": "slow"}], "max_tokens": 60}
    asker = threading.Thread(target=lambda: answers.append(api.post("/v1/messages", json=body)))
    asker.start()
    qtbot.waitUntil(lambda: status.server_label.text() == f"Anthropic request · :{port}", timeout=20_000)
    assert "Anthropic API" in status.server_label.toolTip()
    qtbot.waitUntil(lambda: not asker.is_alive(), timeout=30_000)
    assert answers[1].status_code == 200 and answers[1].json()["content"][0]["text"].startswith("t0 t1 ")

    # Web pages are refused unless allowed (Settings → Server → Allowed web pages).
    page = {"Origin": "http://localhost:3000"}
    assert api.post("/v1/chat/completions", json=body, headers=page).status_code == 403
    parts.settings.set("server_allowed_origins", "http://localhost:3000")  # rebinds with it
    assert api.get("/v1/models", headers=page).status_code == 200

    parts.settings.set("server_api_key", "s3cret")  # rebinds with the key
    assert api.get("/v1/models").status_code == 401
    assert api.get("/v1/models", headers={"Authorization": "Bearer s3cret"}).status_code == 200
    parts.settings.set("server_enabled", False)
    assert parts.server.url is None and status.server_label.isHidden()
    with pytest.raises(httpx.ConnectError):
        api.get("/health")


def test_a_port_in_use_is_a_sentence_and_the_app_goes_on(qtbot, parts: AppParts) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        parts.settings.set("server_port", port)
        parts.settings.set("server_enabled", True)
        assert parts.server is not None and parts.server.url is None
        assert f"port {port}" in parts.server.error and "Settings → Server" in parts.server.error
        assert parts.window.status.server_label.isHidden()
