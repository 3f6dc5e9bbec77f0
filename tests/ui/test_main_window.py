"""The main window with the real settings file and chat store and a fake engine client."""

from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtCore import Qt

from localchat.app import AppParts, build_main_window
from localchat.engine.types import FinishReason
from localchat.host.events import Tokens
from tests.ui.fakes import FakeEngine


@pytest.fixture
def parts(qtbot, tmp_path: Path) -> AppParts:
    parts = build_main_window(tmp_path / "config", tmp_path / "data", engine=FakeEngine())
    qtbot.addWidget(parts.window)
    return parts


def loaded(parts: AppParts, tmp_path: Path) -> FakeEngine:
    model = tmp_path / "model.gguf"
    model.write_bytes(b"GGUF")
    parts.window.load_model(str(model))
    engine = parts.engine
    assert isinstance(engine, FakeEngine)
    return engine


def test_first_run_shows_the_welcome_panel(parts: AppParts) -> None:
    assert parts.window.pages.currentWidget() is parts.window.welcome


def test_send_streams_and_stores_the_reply(qtbot, parts: AppParts, tmp_path: Path) -> None:
    engine = loaded(parts, tmp_path)
    w = parts.window
    assert w.pages.currentWidget() is not w.welcome
    qtbot.keyClicks(w.composer, "Hello there")
    qtbot.keyClick(w.composer, Qt.Key.Key_Return)
    assert w.session.generating
    assert engine.requests[-1].messages[-1].content == "Hello there"
    engine.stream("Hi! ")
    engine.stream("Here is `code`.")
    assert w.chat_view.streaming_text == "Hi! Here is `code`."
    engine.finish()
    assert not w.session.generating
    conversation = parts.store.list_conversations()[0]
    assert conversation.title == "Hello there"
    assert [m.role for m in parts.store.messages(conversation.id)] == ["user", "assistant"]
    assert "tok/s" in w.status.last_reply_label.text()
    assert w.sidebar.titles() == ["Hello there"]


def test_shift_enter_is_a_newline(qtbot, parts: AppParts, tmp_path: Path) -> None:
    loaded(parts, tmp_path)
    w = parts.window
    qtbot.keyClicks(w.composer, "one")
    qtbot.keyClick(w.composer, Qt.Key.Key_Return, Qt.KeyboardModifier.ShiftModifier)
    qtbot.keyClicks(w.composer, "two")
    assert w.composer.toPlainText() == "one\ntwo"
    assert not w.session.generating


def test_stop_keeps_the_partial_reply(qtbot, parts: AppParts, tmp_path: Path) -> None:
    engine = loaded(parts, tmp_path)
    w = parts.window
    w.send_message("Count to ten")
    engine.stream("1 2 3")
    w.show()
    w.activateWindow()
    qtbot.waitUntil(w.isActiveWindow)
    w.composer.setFocus()
    qtbot.keyClick(w.composer, Qt.Key.Key_Escape)
    assert engine.cancelled == 1
    assert not w.session.generating
    messages = parts.store.messages(w.session.current_id)
    assert messages[-1].content == "1 2 3"
    assert not messages[-1].complete


def test_speculation_toggle_reaches_the_next_request(parts: AppParts, tmp_path: Path) -> None:
    engine = loaded(parts, tmp_path)
    w = parts.window
    w.status.speculation_button.click()
    w.send_message("hi")
    assert engine.requests[-1].speculation.enabled is False
    engine.stream("x")
    engine.finish()
    assert "off" in w.status.speculation_text
    assert parts.settings.get("speculation") is False


def test_regenerate_and_edit_last(parts: AppParts, tmp_path: Path) -> None:
    engine = loaded(parts, tmp_path)
    w = parts.window
    w.send_message("first")
    engine.stream("reply one")
    engine.finish()
    w.session.regenerate()
    assert [m.content for m in engine.requests[-1].messages] == ["first"]
    engine.stream("reply two")
    engine.finish()
    assert [m.content for m in parts.store.messages(w.session.current_id)] == ["first", "reply two"]
    w.edit_last()
    assert w.composer.toPlainText() == "first"
    w.composer.setPlainText("second")
    w.composer.submit()
    assert [m.content for m in engine.requests[-1].messages] == ["second"]
    engine.stream("reply three")
    engine.finish()
    assert [m.content for m in parts.store.messages(w.session.current_id)] == ["second", "reply three"]


def test_system_prompt_is_per_chat(parts: AppParts, tmp_path: Path) -> None:
    engine = loaded(parts, tmp_path)
    w = parts.window
    w.send_message("hi")
    engine.finish()
    w.system_prompt.setText("Be brief.")
    w.system_prompt.editingFinished.emit()
    w.send_message("again")
    assert engine.requests[-1].messages[0].role == "system"
    assert engine.requests[-1].messages[0].content == "Be brief."
    engine.finish()
    w.new_conversation()
    assert w.system_prompt.text() == ""


def test_engine_death_keeps_partial_reply_and_next_message_restarts(parts: AppParts, tmp_path: Path) -> None:
    engine = loaded(parts, tmp_path)
    w = parts.window
    w.send_message("tell me")
    engine.stream("partial")
    engine.die(-9)
    assert not w.session.generating
    assert "exit code -9" in w.notice.text() and "next message starts a new engine" in w.notice.text()
    assert "Traceback" not in w.notice.text()
    assert [m.content for m in parts.store.messages(w.session.current_id)] == ["tell me", "partial"]
    w.send_message("again")  # the engine's supervisor starts it again for this reply
    assert len(engine.configs) == 1
    assert engine.requests[-1].messages[-1].content == "again"
    engine.stream("fine")
    engine.finish()
    assert parts.store.messages(w.session.current_id)[-1].content == "fine"


def test_load_failure_shows_a_sentence(parts: AppParts, tmp_path: Path) -> None:
    engine = parts.engine
    assert isinstance(engine, FakeEngine)
    engine.fail_next_load = "The file fake.gguf is not a GGUF model."
    parts.window.load_model(str(tmp_path / "fake.gguf"))
    assert parts.window.notice.text() == "The file fake.gguf is not a GGUF model."
    assert parts.window.engine.state.info is None


def test_sidebar_rename_delete_search(parts: AppParts, tmp_path: Path) -> None:
    engine = loaded(parts, tmp_path)
    w = parts.window
    for text in ("apples", "bananas"):
        w.new_conversation()
        w.send_message(text)
        engine.finish()
    assert w.sidebar.titles() == ["bananas", "apples"]
    first = parts.store.list_conversations()[1]
    w.sidebar.rename_requested.emit(first.id, "Fruit")
    assert parts.store.get(first.id).title == "Fruit"
    w.sidebar.search.setText("banana")
    assert w.sidebar.titles() == ["bananas"]
    w.sidebar.search.clear()
    w.sidebar.delete_requested.emit(first.id)
    assert w.sidebar.titles() == ["bananas"]


def test_ctrl_n_starts_a_new_chat(qtbot, parts: AppParts, tmp_path: Path) -> None:
    engine = loaded(parts, tmp_path)
    w = parts.window
    w.send_message("hi")
    engine.finish(FinishReason.STOP)
    assert w.session.current_id is not None
    w.menus.new_action.trigger()
    assert w.session.current_id is None
    assert w.chat_view.toPlainText().strip() != "hi"


def test_history_survives_a_restart(qtbot, tmp_path: Path) -> None:
    first = build_main_window(tmp_path / "c", tmp_path / "d", engine=FakeEngine())
    qtbot.addWidget(first.window)
    engine = loaded(first, tmp_path)
    first.window.send_message("remember me")
    engine.stream("I will.")
    engine.finish()
    first.window.close()
    first.store.close()
    second = build_main_window(tmp_path / "c", tmp_path / "d", engine=FakeEngine())
    qtbot.addWidget(second.window)
    assert second.window.sidebar.titles() == ["remember me"]
    assert second.settings.get("last_model_path") == str(tmp_path / "model.gguf")
    second.window.sidebar.list.setCurrentRow(0)
    assert "I will." in second.window.chat_view.toPlainText()


def test_accepted_draft_text_is_coloured_when_switched_on(parts: AppParts, tmp_path: Path) -> None:
    engine = loaded(parts, tmp_path)
    w = parts.window
    w.send_message("Say hi")
    engine.stream("Hello ", drafted_runs=(0, 6))  # all six characters from accepted drafts
    engine.stream("world", drafted_runs=(5,))
    assert w.chat_view.streaming_runs == (0, 6, 5)
    assert not w.chat_view.colour_drafted  # off by default, as in LM Studio
    assert "#1a7f37" not in w.chat_view.toHtml() and "#7ee787" not in w.chat_view.toHtml()
    parts.settings.set("colour_accepted_tokens", True)
    assert w.chat_view.colour_drafted
    engine.finish()
    html_text = w.chat_view.toHtml()
    colour = w.chat_view._colors.drafted
    assert colour.lstrip("#") in html_text.lower()
    stored = parts.store.messages(parts.store.list_conversations()[0].id)[-1]
    assert stored.stats["drafted_runs"] == [0, 6, 5]
    # Reopened from the history, the marking is still there.
    w.new_conversation()
    w._show_conversation(stored.conversation_id)
    assert colour.lstrip("#") in w.chat_view.toHtml().lower()
    parts.settings.set("colour_accepted_tokens", False)
    assert colour.lstrip("#") not in w.chat_view.toHtml().lower()


def test_a_damaged_history_opens_the_app_with_a_dialog(qtbot, tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "chats.sqlite3").write_bytes(b"this is not a database" * 1000)
    parts = build_main_window(tmp_path / "config", data, engine=FakeEngine())
    qtbot.addWidget(parts.window)
    assert parts.recovery is not None
    dialog = parts.window.history_dialog
    assert dialog is not None and dialog.isVisible()
    assert dialog.text() == "Your chat history could not be read: the file is damaged."
    assert str(parts.recovery.moved_to) in dialog.informativeText()
    assert "empty history" in dialog.informativeText()
    assert parts.recovery.moved_to.read_bytes() == b"this is not a database" * 1000
    assert parts.window.sidebar.titles() == []
    engine = loaded(parts, tmp_path)
    parts.window.send_message("a fresh start")  # the new history works
    engine.finish()
    assert parts.window.sidebar.titles() == ["a fresh start"]


def test_a_locked_history_keeps_the_typed_text(qtbot, parts: AppParts, tmp_path: Path) -> None:
    from localchat.chat import ConversationStore

    parts.store._db.execute("PRAGMA busy_timeout = 100")  # the test need not wait the full 2 s
    engine = loaded(parts, tmp_path)
    w = parts.window
    other = ConversationStore(parts.store.path)
    other._db.execute("BEGIN EXCLUSIVE")
    try:
        qtbot.keyClicks(w.composer, "Do not lose me")
        qtbot.keyClick(w.composer, Qt.Key.Key_Return)
    finally:
        other._db.execute("ROLLBACK")
        other.close()
    assert w.composer.toPlainText() == "Do not lose me"
    assert w.notice.text() == "Could not save the chat: the chat history is in use by another localchat."
    assert not w.session.generating and engine.requests == []
    w.send_button.click()
    assert w.composer.toPlainText() == "" and w.session.generating


def test_help_opens_the_log_folder(qtbot, parts: AppParts, monkeypatch, tmp_path: Path) -> None:
    from PySide6.QtGui import QDesktopServices

    from localchat.settings import folders

    opened: list[str] = []
    monkeypatch.setattr(folders, "log_dir", lambda: tmp_path / "logs")
    monkeypatch.setattr(QDesktopServices, "openUrl", lambda url: opened.append(url.toLocalFile()) or True)
    menus = [a.text() for a in parts.window.menuBar().actions()]
    assert "&Help" in menus
    parts.window.menus.log_folder_action.trigger()
    assert opened == [str(tmp_path / "logs")] and (tmp_path / "logs").is_dir()


def _answer_dialog(qtbot, name: str, button_text: str) -> None:
    """Click ``button_text`` in the modal box called ``name`` once it is open (the real dialog)."""
    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QApplication, QMessageBox

    def click() -> None:
        box = QApplication.activeModalWidget()
        if not isinstance(box, QMessageBox) or box.objectName() != name:
            QTimer.singleShot(20, click)
            return
        for button in box.buttons():
            if button.text().replace("&", "") == button_text:
                button.click()
                return
        raise AssertionError(f"no button {button_text!r} in {[b.text() for b in box.buttons()]}")

    QTimer.singleShot(0, click)


def _chat_of_two_exchanges(parts: AppParts, tmp_path: Path) -> FakeEngine:
    engine = loaded(parts, tmp_path)
    w = parts.window
    for question, answer in (("First?", "One."), ("Second?", "Two.")):
        w.send_message(question)
        engine.stream(answer)
        engine.finish()
    return engine


def test_deleting_a_reply_deletes_only_it(qtbot, parts: AppParts, tmp_path: Path) -> None:
    _chat_of_two_exchanges(parts, tmp_path)
    w = parts.window
    first_reply = next(m for m in w.chat_view.messages if m.content == "One.")
    assert first_reply.message_id is not None
    w.chat_view.delete_requested.emit(first_reply.message_id)
    assert [m.content for m in parts.store.messages(w.session.current_id)] == ["First?", "Second?", "Two."]
    assert "One." not in w.chat_view.toPlainText()


@pytest.mark.parametrize(
    ("button", "left"),
    [
        ("Delete this message only", ["One.", "Second?", "Two."]),
        ("Delete it and what follows", []),
        ("Cancel", ["First?", "One.", "Second?", "Two."]),
    ],
)
def test_deleting_a_user_message_asks_about_what_follows(
    qtbot, parts: AppParts, tmp_path: Path, button: str, left: list[str]
) -> None:
    _chat_of_two_exchanges(parts, tmp_path)
    w = parts.window
    question = next(m for m in w.chat_view.messages if m.content == "First?")
    assert question.message_id is not None
    _answer_dialog(qtbot, "delete_message_dialog", button)
    w.chat_view.delete_requested.emit(question.message_id)
    assert [m.content for m in parts.store.messages(w.session.current_id)] == left
    assert [m.content for m in w.chat_view.messages] == left


def test_a_message_cannot_be_deleted_while_its_chat_is_answering(parts: AppParts, tmp_path: Path) -> None:
    engine = _chat_of_two_exchanges(parts, tmp_path)
    w = parts.window
    reply = next(m for m in w.chat_view.messages if m.content == "Two.")
    w.session.regenerate()
    engine.stream("Again")
    assert reply.message_id is not None
    w.chat_view.delete_requested.emit(reply.message_id)
    assert "Stop the reply" in w.notice.text()
    engine.finish()


def test_export_from_the_menu_and_the_sidebar(qtbot, parts: AppParts, tmp_path: Path, monkeypatch) -> None:
    import json

    from PySide6.QtWidgets import QFileDialog

    _chat_of_two_exchanges(parts, tmp_path)
    w = parts.window
    chosen: list[Path] = []
    monkeypatch.setattr(QFileDialog, "getSaveFileName", lambda *a, **k: (str(chosen[-1]), ""))
    chosen.append(tmp_path / "out" / "chat")  # no suffix given: the format's own is added
    (tmp_path / "out").mkdir()
    w.menus.export_markdown_action.trigger()
    text = (tmp_path / "out" / "chat.md").read_text(encoding="utf-8")
    assert "## You\n\nFirst?" in text and "Two." in text
    assert "Exported" in w.notice.text()
    chosen.append(tmp_path / "out" / "chat.json")
    menu = w.sidebar.conversation_menu(w.sidebar.list.item(0))
    next(a for a in menu.actions() if a.objectName() == "export_json").trigger()
    document = json.loads((tmp_path / "out" / "chat.json").read_text(encoding="utf-8"))
    assert [m["content"] for m in document["messages"]] == ["First?", "One.", "Second?", "Two."]
    assert document["messages"][1]["stats"]["generated_tokens"] == 12
    chosen.append(tmp_path / "gone" / "chat.md")
    w.menus.export_markdown_action.trigger()
    assert w.notice.text().startswith("Could not export the chat to")
    assert "folder does not exist" in w.notice.text()


def test_chat_settings_are_kept_with_the_chat(qtbot, parts: AppParts, tmp_path: Path) -> None:
    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QApplication

    from localchat.ui.chat_settings_dialog import ChatSettingsDialog

    engine = _chat_of_two_exchanges(parts, tmp_path)
    w = parts.window
    assert w.menus.chat_settings_action.isEnabled()

    def fill() -> None:
        dialog = QApplication.activeModalWidget()
        if not isinstance(dialog, ChatSettingsDialog):
            QTimer.singleShot(20, fill)
            return
        assert not dialog.temperature.isEnabled() and dialog.temperature.value() == 0.7
        dialog.own_temperature.setChecked(True)
        dialog.temperature.setValue(0.25)
        dialog.own_length.setChecked(True)
        dialog.length.setValue(200)
        dialog.accept()

    QTimer.singleShot(0, fill)
    w.menus.chat_settings_action.trigger()
    assert parts.store.get(w.session.current_id).options == {"temperature": 0.25, "max_reply_tokens": 200}
    w.session.regenerate()
    assert (engine.requests[-1].max_tokens, engine.requests[-1].sampling.temperature) == (200, 0.25)
    engine.finish()
    dialog = w.chat_settings_dialog(w.session.current_id)
    assert dialog.own_length.isChecked() and dialog.length.value() == 200
    dialog.own_length.setChecked(False)
    assert dialog.length.value() == 1024  # back to showing the app's setting
    assert dialog.values() == {"temperature": 0.25}
    w.new_conversation()
    assert not w.menus.chat_settings_action.isEnabled()


def test_keyboard_shortcuts_are_on_the_menus_and_work(qtbot, parts: AppParts, tmp_path: Path) -> None:
    from PySide6.QtGui import QKeySequence

    engine = _chat_of_two_exchanges(parts, tmp_path)
    w = parts.window
    menu_keys = {
        a.text(): a.shortcut().toString()
        for top in w.menuBar().actions()
        for a in top.menu().actions()
    }
    assert menu_keys["New chat"] == QKeySequence(QKeySequence.StandardKey.New).toString()
    assert menu_keys["Search chats"] == QKeySequence(QKeySequence.StandardKey.Find).toString()
    assert menu_keys["Regenerate reply"] == "Ctrl+R"
    assert menu_keys["Edit last message"] == "Ctrl+E"
    assert menu_keys["Speculative decoding"] == "Ctrl+Shift+S"
    assert "Ctrl+R" in w.regenerate_button.toolTip()
    w.show()
    w.activateWindow()
    qtbot.waitUntil(w.isActiveWindow)
    w.composer.setFocus()
    requests = len(engine.requests)
    qtbot.keyClick(w.composer, Qt.Key.Key_R, Qt.KeyboardModifier.ControlModifier)
    assert len(engine.requests) == requests + 1 and w.session.generating  # regenerate
    engine.finish()
    qtbot.keyClick(w.composer, Qt.Key.Key_E, Qt.KeyboardModifier.ControlModifier)
    assert w.composer.toPlainText() == "Second?" and w.session.editing
    w.composer.clear()
    w.session.stop_editing()
    qtbot.keyClick(w.composer, Qt.Key.Key_Up)  # Up in the empty box edits the last message too
    assert w.composer.toPlainText() == "Second?" and w.session.editing
    qtbot.keyClick(w.composer, Qt.Key.Key_Up)  # with text in the box Up only moves the cursor
    assert w.composer.toPlainText() == "Second?"
    assert w.menus.speculation_action.isChecked() and parts.settings.speculation
    mods = Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier
    qtbot.keyClick(w.composer, Qt.Key.Key_S, mods)
    assert not parts.settings.speculation and not w.status.speculation_enabled
    assert not w.menus.speculation_action.isChecked()
    qtbot.keyClick(w.composer, Qt.Key.Key_F, Qt.KeyboardModifier.ControlModifier)
    assert w.sidebar.search.hasFocus()
    qtbot.keyClick(w.sidebar.search, Qt.Key.Key_N, Qt.KeyboardModifier.ControlModifier)
    assert w.session.current_id is None


def test_regenerate_shows_a_switcher_between_the_answers(qtbot, parts: AppParts, tmp_path: Path) -> None:
    from PySide6.QtCore import QUrl

    engine = _chat_of_two_exchanges(parts, tmp_path)
    w = parts.window
    assert "1/1" not in w.chat_view.toPlainText()  # one answer: no switcher
    w.session.regenerate()
    assert "Two." not in w.chat_view.toPlainText()  # the answer being replaced is not shown meanwhile
    engine.stream("Deux.")
    engine.finish()
    assert "‹ 2/2 ›" in w.chat_view.toPlainText() and "Deux." in w.chat_view.toPlainText()
    reply = w.chat_view.messages[-1]
    assert reply.variant == (2, 2) and reply.message_id is not None
    assert f'href="variant:{reply.message_id}:-1"' in w.chat_view.toHtml()
    w.chat_view.anchorClicked.emit(QUrl(f"variant:{reply.message_id}:-1"))
    text = w.chat_view.toPlainText()
    assert "‹ 1/2 ›" in text and "Two." in text and "Deux." not in text
    w.send_message("Third?")
    assert [m.content for m in engine.requests[-1].messages][-3:] == ["Second?", "Two.", "Third?"]
    engine.finish()


def test_editing_an_earlier_message_from_its_header(qtbot, parts: AppParts, tmp_path: Path) -> None:
    from PySide6.QtCore import QUrl

    engine = _chat_of_two_exchanges(parts, tmp_path)
    w = parts.window
    first = next(m for m in w.chat_view.messages if m.content == "First?")
    assert f'href="msgedit:{first.message_id}"' in w.chat_view.toHtml()
    reply = next(m for m in w.chat_view.messages if m.content == "One.")
    assert f'href="msgedit:{reply.message_id}"' not in w.chat_view.toHtml()  # replies are not edited
    w.chat_view.anchorClicked.emit(QUrl(f"msgedit:{first.message_id}"))
    assert w.composer.toPlainText() == "First?" and "Editing your message" in w.notice.text()
    w.composer.setPlainText("First, again?")
    w.composer.submit()
    assert [m.content for m in engine.requests[-1].messages] == ["First, again?"]
    engine.stream("Again one.")
    engine.finish()
    assert [m.content for m in w.chat_view.messages] == ["First, again?", "Again one."]


def test_a_reply_the_store_could_not_keep_stays_on_screen(qtbot, parts: AppParts, tmp_path: Path) -> None:
    engine = loaded(parts, tmp_path)
    w = parts.window
    w.send_message("write a lot")
    store = parts.store
    pages = store._db.execute("PRAGMA page_count").fetchone()[0]
    store._db.execute(f"PRAGMA max_page_count = {pages + 1}")
    engine.stream("y" * 200_000)
    engine.finish()
    assert "disk is full" in w.notice.text()
    assert w.chat_view.messages[-1].content == "y" * 200_000


def test_a_long_prompt_being_read_shows_its_progress_then_the_reply(
    qtbot, parts: AppParts, tmp_path: Path
) -> None:
    from localchat.engine.types import TokenEvent
    from tests.ui.fakes import stats

    engine = loaded(parts, tmp_path)
    w = parts.window
    w.send_message("Summarise our long chat")
    event = TokenEvent("", 0, 0, stats(0), engine.speculation(), prompt_progress=(256, 1024, 4.0))
    engine.job_event.emit(Tokens(engine.job, "window", event))
    qtbot.waitUntil(lambda: "Reading the conversation: 256 of 1,024 tokens, about 12 s left"
                    in w.chat_view.toPlainText(), timeout=3000)
    qtbot.waitUntil(lambda: w.status.rate_label.text() == "Reading 25%", timeout=3000)
    assert w.chat_view.streaming_text == ""
    assert [m.role for m in parts.store.messages(w.session.current_id)] == ["user"]  # nothing saved yet
    engine.stream("Here it is.")
    qtbot.waitUntil(lambda: "Reading the conversation" not in w.chat_view.toPlainText(), timeout=3000)
    assert w.chat_view.streaming_text == "Here it is."
    engine.finish()


def test_the_benchmark_dialog_follows_the_model_loaded_while_it_is_open(
    qtbot, parts: AppParts, tmp_path: Path
) -> None:
    """Run is greyed (said once, beside the models) while no model is loaded, and ready once one is."""
    from localchat.ui.bench_dialog import BenchmarkDialog

    w = parts.window
    w.show()
    w.menus.benchmark_action.trigger()
    w.menus.benchmark_action.trigger()  # the same dialog again: connected once
    (dialog,) = w.findChildren(BenchmarkDialog)
    assert not dialog.run_button.isEnabled()
    assert dialog.model_label.text().startswith("Load a model first")
    loaded(parts, tmp_path)
    assert dialog.run_button.isEnabled()
    assert "model.gguf" in dialog.model_label.text()
    dialog.close()
