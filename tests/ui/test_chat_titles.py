"""A chat's title comes from its first message, also when the chat was written before it."""

from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtCore import Qt

from localchat.app import AppParts, build_main_window
from tests.ui.fakes import FakeEngine


@pytest.fixture
def parts(qtbot, tmp_path: Path) -> AppParts:
    parts = build_main_window(tmp_path / "config", tmp_path / "data", engine=FakeEngine())
    qtbot.addWidget(parts.window)
    model = tmp_path / "model.gguf"
    model.write_bytes(b"GGUF")
    parts.window.load_model(str(model))
    return parts


def test_a_chat_begun_with_a_system_prompt_is_named_by_its_first_message(qtbot, parts: AppParts) -> None:
    """Typing the system prompt first wrote the chat as "New chat", and it kept that after its reply."""
    w, engine = parts.window, parts.engine
    assert isinstance(engine, FakeEngine)
    qtbot.keyClicks(w.system_prompt, "Answer in verse.")
    w.system_prompt.editingFinished.emit()
    assert w.sidebar.titles() == ["New chat"]
    qtbot.keyClicks(w.composer, "A poem about the sea")
    qtbot.keyClick(w.composer, Qt.Key.Key_Return, Qt.KeyboardModifier.ShiftModifier)
    qtbot.keyClicks(w.composer, "please")
    qtbot.keyClick(w.composer, Qt.Key.Key_Return)
    engine.stream("Waves roll in,\nwaves roll out.")
    engine.finish()
    assert w.sidebar.titles() == ["A poem about the sea"]
    conversation = parts.store.list_conversations()[0]
    assert conversation.title == "A poem about the sea" and conversation.system_prompt == "Answer in verse."


def test_a_title_the_user_gave_is_kept(qtbot, parts: AppParts) -> None:
    w, engine = parts.window, parts.engine
    assert isinstance(engine, FakeEngine)
    qtbot.keyClicks(w.system_prompt, "Be brief.")
    w.system_prompt.editingFinished.emit()
    chat = parts.store.list_conversations()[0]
    assert parts.session.rename(chat.id, "My own name")
    w.send_message("first question")
    engine.finish()
    w.send_message("second question")
    engine.finish()
    assert parts.store.get(chat.id).title == "My own name"
