"""The whole app on the real engine process and the real SmolLM2 model (offscreen)."""

from __future__ import annotations

import os
import re
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from localchat.app import AppParts, build_main_window
from localchat.host.events import Finished, Phase, Tokens

pytest.importorskip("llama_cpp")
pytestmark = pytest.mark.slow

LOAD_MS = 180_000
REPLY_MS = 180_000


def _build(qtbot, tmp_path: Path, max_tokens: int = 24) -> AppParts:
    parts = build_main_window(tmp_path / "config", tmp_path / "data", max_tokens=max_tokens)
    qtbot.addWidget(parts.window)
    return parts


def _close(parts: AppParts) -> None:
    parts.window.close()
    parts.engine.shutdown()
    parts.store.close()


@pytest.fixture
def app(qtbot, tmp_path: Path) -> Iterator[AppParts]:
    parts = _build(qtbot, tmp_path)
    yield parts
    _close(parts)


def _load(qtbot, parts: AppParts, path: Path) -> None:
    with qtbot.waitSignal(parts.engine.state_changed, timeout=LOAD_MS, check_params_cb=lambda s: s.ready):
        parts.window.load_model(str(path))


def _reply(qtbot, parts: AppParts, text: str) -> None:
    with qtbot.waitSignal(parts.engine.job_event, timeout=REPLY_MS,
                          check_params_cb=lambda e: isinstance(e, Finished)):
        parts.window.send_message(text)


def _rate(text: str) -> float:
    match = re.search(r"([\d.]+) tok/s", text)
    assert match, text
    return float(match.group(1))


def test_reply_streams_with_live_stats_and_speculation_toggle(
    qtbot, app: AppParts, smollm2_path: Path
) -> None:
    _load(qtbot, app, smollm2_path)
    w = app.window
    assert w.status.target_label.text()
    assert w.status.backend_label.text()
    batches: list[str] = []
    app.engine.job_event.connect(lambda e: batches.append(e.event.text) if isinstance(e, Tokens) else None)
    # Each refresh during the reply shows the prompt being read, that nothing is written yet (on a slow
    # machine a refresh can fall between the two), or the speed: once a speed is shown, it stays.
    shown: list[str] = []
    w.status.timer.timeout.connect(lambda: shown.append(w.status.rate_label.text()))
    _reply(qtbot, app, "Write a short poem about the sea.")
    assert batches, "no tokens streamed"
    first = next((i for i, t in enumerate(shown) if "tok/s" in t and t != "\u2013 tok/s"), len(shown))
    assert all(re.fullmatch(r"Reading \d+%|\u2013 tok/s", t) for t in shown[:first]), shown
    assert all(_rate(t) > 0 for t in shown[first:]), shown
    assert _rate(w.status.rate_label.text()) > 0
    assert _rate(w.status.last_reply_label.text()) > 0
    assert w.status.context_label.text().startswith("Context ")
    messages = app.store.messages(w.session.current_id)
    assert [m.role for m in messages] == ["user", "assistant"]
    assert messages[-1].content.strip()
    # A file the catalog does not list is named by its file name, on the reply and in the status bar.
    assert smollm2_path.name in w.chat_view.toPlainText() and "Assistant" not in w.chat_view.toPlainText()
    assert w.status.target_label.text() == smollm2_path.name

    w.status.speculation_button.click()  # off for the next reply
    _reply(qtbot, app, "And one about the mountains.")
    assert "off" in w.status.speculation_text
    assert len(app.store.messages(w.session.current_id)) == 4


def test_engine_killed_mid_reply_keeps_history_and_recovers(
    qtbot, tmp_path: Path, smollm2_path: Path
) -> None:
    parts = _build(qtbot, tmp_path, max_tokens=400)
    try:
        _load(qtbot, parts, smollm2_path)
        w = parts.window
        engine = parts.engine
        with qtbot.waitSignal(engine.job_event, timeout=REPLY_MS):
            w.send_message("Tell me a long story about a lighthouse keeper.")
        pid = engine.state.pid
        assert pid is not None
        with qtbot.waitSignal(engine.state_changed, timeout=30_000,
                              check_params_cb=lambda s: s.phase is Phase.STOPPED):
            os.kill(pid, signal.SIGKILL)
        assert not w.session.generating
        assert "stopped unexpectedly" in w.notice.text()
        assert "Traceback" not in w.notice.text()
        messages = parts.store.messages(w.session.current_id)
        assert messages[0].content.startswith("Tell me a long story")
        assert len(messages) == 2 and messages[1].content.strip() and not messages[1].complete
        w._max_tokens = 16
        _reply(qtbot, parts, "Thanks. Now say hello.")
        messages = parts.store.messages(w.session.current_id)
        assert [m.role for m in messages] == ["user", "assistant", "user", "assistant"]
        assert messages[-1].content.strip()
    finally:
        _close(parts)


def test_history_and_model_survive_an_app_restart(qtbot, tmp_path: Path, smollm2_path: Path) -> None:
    first = _build(qtbot, tmp_path)
    try:
        _load(qtbot, first, smollm2_path)
        _reply(qtbot, first, "Say hi.")
        reply = first.store.messages(first.window.session.current_id)[-1].content
    finally:
        _close(first)
    second = _build(qtbot, tmp_path)  # loads the last model again on its own
    try:
        assert second.window.sidebar.titles() == ["Say hi."]
        second.window.sidebar.list.setCurrentRow(0)
        # The view renders Markdown (a blank line is a paragraph break, *emphasis* loses its marks): compare
        # words, not spacing or Markdown's marks.
        shown = " ".join(second.window.chat_view.toPlainText().split())
        assert " ".join(re.sub(r"[*_`#]", "", reply).split())[:20] in shown
        qtbot.waitUntil(lambda: second.window.engine.state.info is not None, timeout=LOAD_MS)
    finally:
        _close(second)


def test_a_broken_model_file_shows_a_sentence(qtbot, app: AppParts, tmp_path: Path) -> None:
    fake = tmp_path / "broken.gguf"
    fake.write_bytes(b"GGUF" + b"\0" * 64)
    with qtbot.waitSignal(app.engine.state_changed, timeout=LOAD_MS,
                          check_params_cb=lambda s: s.phase is Phase.FAILED):
        app.window.load_model(str(fake))
    text = app.window.notice.text()
    assert text and "Traceback" not in text and "\n" not in text
    assert app.window.engine.state.info is None
