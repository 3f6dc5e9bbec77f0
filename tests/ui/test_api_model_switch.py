"""The window when an API request loads another model (Settings → Server → "Let API requests load other
models"): a reply streaming in the window finishes whole before the load, then the chat page and the
status bar say the API switched the model, the model's name follows, and with the setting off the
request is refused and the window keeps its model. The fake engine in a real engine process; the
models folder holds real GGUF files (the API lists what their headers describe)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from localchat.app import AppParts, build_main_window
from localchat.engine.types import FinishReason
from localchat.services import EngineClient
from localchat.settings.presets import ModelPreset

FAKE = "tests.host.fake_engine:FakeEngine"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def parts(qtbot, tmp_path: Path, two_models: Path) -> Iterator[AppParts]:
    client = EngineClient(engine_factory=FAKE, cancel_timeout_s=2.0)
    built = build_main_window(tmp_path / "config", tmp_path / "data", engine=client, autoload=False)
    qtbot.addWidget(built.window)
    built.settings.set("models_folder", str(two_models))
    built.settings.set("server_port", _free_port())
    built.settings.set("server_enabled", True)
    yield built
    if built.server is not None:
        built.server.stop()
    client.shutdown()
    built.store.close()


def _load(qtbot, parts: AppParts, path: Path) -> None:
    engine = parts.engine
    assert isinstance(engine, EngineClient)
    with qtbot.waitSignal(engine.state_changed, timeout=20_000,
                          check_params_cb=lambda s: s.ready and s.config.target_path == str(path)):
        parts.window.load_model(str(path))


def test_an_api_load_waits_for_the_windows_reply_and_the_window_says_the_api_switched(
    qtbot, parts: AppParts, two_models: Path
) -> None:
    window = parts.window
    _load(qtbot, parts, two_models / "SmolLM2-135M-Instruct.Q4_1.gguf")
    assert parts.server is not None and parts.server.url is not None
    api = httpx.Client(base_url=parts.server.url, timeout=60)
    assert [m["id"] for m in api.get("/v1/models").json()["data"]] == [
        "SmolLM2-135M-Instruct.Q4_1", "gemma-3-270m-q4_k_m"]

    # Gemma's preset (its context length) applies to the API's load as to the window's.
    presets = parts.session.model.presets
    assert presets is not None
    assert presets.save("gemma-3-270m-q4_k_m", ModelPreset({"context_length": 3072})) == ""
    parts.settings.set("max_reply_tokens", 60)
    ends = []
    parts.session.reply_finished.connect(ends.append)
    window.send_message("slow")  # about 1.2 s of tokens in the window
    qtbot.waitUntil(lambda: parts.engine.supervisor.running_source == "window", timeout=10_000)  # type: ignore[attr-defined]
    answers: list[httpx.Response] = []
    body = {"model": "gemma-3-270m-q4_k_m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}
    asker = threading.Thread(target=lambda: answers.append(api.post("/v1/chat/completions", json=body)))
    asker.start()
    qtbot.waitUntil(lambda: bool(ends), timeout=30_000)
    end = ends[0]
    assert end.result is not None and end.result.finish_reason is FinishReason.LENGTH  # not cut
    assert end.text.count("t") == 60
    qtbot.waitUntil(lambda: not asker.is_alive(), timeout=30_000)
    assert answers[0].status_code == 200 and answers[0].json()["model"] == "gemma-3-270m-q4_k_m"

    gemma = "gemma-3-270m-q4_k_m.gguf"
    qtbot.waitUntil(lambda: "loaded by an OpenAI request" in window.page.notice.text(), timeout=10_000)
    notice = window.page.notice.text()
    assert notice.startswith(gemma) and "the API switched the model" in notice
    assert "Let API requests load other models" in notice
    assert window.status.target_label.text().startswith("gemma-3-270m")  # the model's name follows
    assert parts.settings.last_model_path == str(two_models / gemma)  # and the next start loads it
    assert parts.engine.state.config is not None and parts.engine.state.config.n_ctx == 3072
    assert parts.session.model.preset == ModelPreset({"context_length": 3072})  # the window's replies too


def test_with_the_setting_off_the_request_is_refused_and_the_window_keeps_its_model(
    qtbot, parts: AppParts, two_models: Path
) -> None:
    _load(qtbot, parts, two_models / "SmolLM2-135M-Instruct.Q4_1.gguf")
    parts.settings.set("server_loads_models", False)
    assert parts.server is not None and parts.server.url is not None
    api = httpx.Client(base_url=parts.server.url, timeout=60)
    body = {"model": "gemma-3-270m-q4_k_m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}
    r = api.post("/v1/chat/completions", json=body)
    assert r.status_code == 403 and r.json()["error"]["code"] == "model_load_not_allowed"
    assert parts.engine.state.config is not None
    assert Path(parts.engine.state.config.target_path).name == "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert "loaded by" not in parts.window.page.notice.text()
