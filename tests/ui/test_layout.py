"""The window's layout: the status bar never widens it, the welcome texts wrap whole, its size and
place come back after a restart, and every reply is headed with the catalog's name for its model."""

from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtWidgets import QLabel

from localchat.app import AppParts, build_main_window
from localchat.engine.types import FinishReason, GenerationResult, SpeculationState, TokenEvent
from localchat.host.events import Finished, Tokens
from localchat.ui import formatting
from tests.ui.fakes import FakeEngine, stats

STARTER_FILE = "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
STARTER_NAME = "Qwen2.5-Coder 1.5B Instruct · Q4_K_M"
PAUSED = SpeculationState(active=False, drafter="Fake-0.1B", draft_tokens=4, paused=True, speedup=0.75)


@pytest.fixture
def parts(qtbot, tmp_path: Path) -> AppParts:
    parts = build_main_window(tmp_path / "config", tmp_path / "data", engine=FakeEngine())
    qtbot.addWidget(parts.window)
    return parts


def load(parts: AppParts, tmp_path: Path, name: str = STARTER_FILE) -> FakeEngine:
    model = tmp_path / name
    model.write_bytes(b"GGUF")
    parts.window.load_model(str(model))
    engine = parts.engine
    assert isinstance(engine, FakeEngine)
    return engine


def test_welcome_texts_wrap_whole_at_any_window_size(qtbot, parts: AppParts) -> None:
    w = parts.window
    w.show()
    qtbot.waitExposed(w)
    labels = [label for label in w.welcome.findChildren(QLabel) if label.wordWrap() and label.text()]
    assert {label.objectName() for label in labels} >= {"welcome_intro", "starter_note"}
    for width, height in ((1180, 760), (800, 600), (520, 420), (380, 300), (1400, 260)):
        w.resize(width, height)
        qtbot.wait(30)
        for label in labels:
            needed = label.heightForWidth(label.width())
            assert label.height() >= needed, (width, height, label.objectName(), label.height(), needed)
            assert label.width() <= w.welcome.width()  # no column wider than the page


def test_the_status_bar_never_widens_the_window(qtbot, parts: AppParts, tmp_path: Path) -> None:
    long_file = "a-very-long-model-file-name-that-nobody-would-shorten-70b-instruct-preview-q4_k_m.gguf"
    engine = load(parts, tmp_path, long_file)
    w = parts.window
    w.resize(1180, 760)
    w.show()
    qtbot.waitExposed(w)
    for i in range(4):
        w.send_message(f"question {i}")
        event = TokenEvent("x" * 40, 5, 0, stats(5, 0.2, 2, 8, 3), PAUSED)
        engine.job_event.emit(Tokens(engine.job, "window", event))
        qtbot.wait(250)  # the status bar redraws on its timer
        big = stats(123456, 0.5, 40000, 90000, 80000)
        result = GenerationResult("x" * 40, FinishReason.STOP, big, PAUSED)
        engine.job_event.emit(Finished(engine.job, "window", result))
        w.chat_view.code_copied.emit("code")
    qtbot.wait(50)
    assert w.width() == 1180
    assert w.status.speculation_text == formatting.paused_sentence(0.75)
    w.resize(640, 600)
    qtbot.wait(50)
    assert w.width() == 640
    assert w.status.compact and w.status.target_label.isVisible() and w.status.speculation_button.isVisible()


def test_code_copied_hides_neither_the_model_nor_the_toggle(qtbot, parts: AppParts, tmp_path: Path) -> None:
    load(parts, tmp_path)
    w = parts.window
    w.show()
    qtbot.waitExposed(w)
    w.chat_view.code_copied.emit("print(1)")
    assert w.status.flash_label.text() == "Code copied" and w.status.flash_label.isVisible()
    assert w.status.currentMessage() == ""
    assert w.status.target_label.isVisible() and w.status.target_label.text() == STARTER_NAME
    assert w.status.speculation_button.isVisible()


def test_every_reply_is_headed_with_the_catalog_name(qtbot, tmp_path: Path) -> None:
    first = build_main_window(tmp_path / "c", tmp_path / "d", engine=FakeEngine())
    qtbot.addWidget(first.window)
    engine = load(first, tmp_path)
    w = first.window
    w.send_message("hello")
    engine.stream("Hi there.")
    w.chat_view.redraw()
    assert STARTER_NAME in w.chat_view.toPlainText()  # while it streams
    engine.finish()
    text = w.chat_view.toPlainText()
    assert STARTER_NAME in text and "Assistant" not in text  # finished: the same name
    assert "Fake-1B" not in text  # the GGUF's general.name is not used
    cid = w.session.current_id
    w.new_conversation()
    assert cid is not None
    w._on_sidebar_conversation_selected(cid)
    assert STARTER_NAME in w.chat_view.toPlainText()  # read back from the store
    w.close()
    first.store.close()
    second = build_main_window(tmp_path / "c", tmp_path / "d", engine=FakeEngine(), autoload=False)
    qtbot.addWidget(second.window)
    second.window._on_sidebar_conversation_selected(cid)
    assert STARTER_NAME in second.window.chat_view.toPlainText()  # after a restart, no model loaded


def test_the_window_comes_back_where_and_as_large_as_it_was(qtbot, tmp_path: Path) -> None:
    first = build_main_window(tmp_path / "c", tmp_path / "d", engine=FakeEngine())
    qtbot.addWidget(first.window)
    first.window.show()
    qtbot.waitExposed(first.window)
    first.window.resize(700, 500)
    first.window.move(30, 40)
    qtbot.wait(30)
    where = first.window.pos()
    first.window.close()
    first.store.close()
    assert first.settings.get("window_geometry")
    second = build_main_window(tmp_path / "c", tmp_path / "d", engine=FakeEngine())
    qtbot.addWidget(second.window)
    second.window.show()
    qtbot.waitExposed(second.window)
    assert (second.window.width(), second.window.height()) == (700, 500)
    assert second.window.pos() == where
    # Switched off: the default size, and nothing remembered on close.
    second.settings.set("remember_window", False)
    second.window.resize(600, 450)
    second.window.close()
    second.store.close()
    third = build_main_window(tmp_path / "c", tmp_path / "d", engine=FakeEngine())
    qtbot.addWidget(third.window)
    assert (third.window.width(), third.window.height()) == (1180, 760)


def test_a_reply_that_ends_paused_says_why_in_plain_words(qtbot, parts: AppParts, tmp_path: Path) -> None:
    engine = load(parts, tmp_path)
    w = parts.window
    w.send_message("hi")
    result = GenerationResult("ok", FinishReason.STOP, stats(5), PAUSED)
    engine.job_event.emit(Finished(engine.job, "window", result))
    assert w.notice.text() == (
        "Speculation is paused: on this computer the drafter costs more than it saves for this model (0.8x)."
    )


def test_a_reply_drafted_by_lookup_alone_says_why(qtbot, parts: AppParts, tmp_path: Path) -> None:
    from localchat.engine.adaptive import lookup_instead

    engine = load(parts, tmp_path)
    w = parts.window
    w.send_message("hi")
    lookup = SpeculationState(active=True, drafter="n-gram", reason=lookup_instead(0.62), draft_tokens=16)
    result = GenerationResult("ok", FinishReason.STOP, stats(5), lookup)
    engine.job_event.emit(Finished(engine.job, "window", result))
    assert w.notice.text() == (
        "On this computer the draft model costs more than it saves for this model (0.62x at best), "
        "so drafts come from the conversation itself (n-gram lookup)."
    )
    assert w.status.speculation_text == "Draft: n-gram"
    # A reply drafted by the draft model leaves no notice.
    w.send_message("again")
    engine.finish()
    assert w.notice.text() == ""
