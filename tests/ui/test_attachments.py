"""Attaching files to a message in the real window (fake engine): the Attach button and drops on the
message box, the chips, what is sent and stored, a file cut to fit the context, a refused file."""

from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtCore import QMimeData, QPoint, QPointF, Qt, QUrl
from PySide6.QtGui import QDragEnterEvent, QDropEvent
from PySide6.QtWidgets import QApplication, QLabel, QToolButton

from localchat.app import AppParts, build_main_window
from localchat.ui import dialogs
from tests.chat.pdfs import write_pdf
from tests.ui.fakes import FakeEngine


@pytest.fixture
def parts(qtbot, tmp_path: Path) -> AppParts:
    parts = build_main_window(tmp_path / "config", tmp_path / "data", engine=FakeEngine())
    qtbot.addWidget(parts.window)
    parts.window.show()
    model = tmp_path / "model.gguf"
    model.write_bytes(b"GGUF")
    parts.window.load_model(str(model))
    return parts


def _sent(parts: AppParts) -> str:
    engine = parts.engine
    assert isinstance(engine, FakeEngine)
    return engine.requests[-1].messages[-1].content


def test_the_attach_button_adds_chips_and_send_inlines_the_files(
        qtbot, parts: AppParts, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    w = parts.window
    code = tmp_path / "sort.py"
    code.write_text("print(sorted([3, 1, 2]))\n")
    pdf = write_pdf(tmp_path / "paper.pdf", ["Drafts are verified in one pass"])
    monkeypatch.setattr(dialogs, "ask_attachments", lambda _parent: [str(code), str(pdf)])
    qtbot.mouseClick(w.page.attach_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: len(w.page.attachments) == 2)  # read off the GUI thread
    assert w.page.chips.isVisible() and w.page.chips.names() == ["sort.py", "paper.pdf"]
    assert w.page.chips.chips[0].findChild(QLabel, "chip_size").text() == "1 line"  # type: ignore[union-attr]

    qtbot.keyClicks(w.composer, "What does this print?")
    qtbot.keyClick(w.composer, Qt.Key.Key_Return)
    sent = _sent(parts)
    assert sent == ("What does this print?\n\nsort.py:\n```python\nprint(sorted([3, 1, 2]))\n```"
                    "\n\npaper.pdf:\n```\nDrafts are verified in one pass\n```")
    assert not w.page.chips.isVisible() and w.page.attachments == [] and w.composer.toPlainText() == ""
    conversation = parts.store.list_conversations()[0]
    assert parts.store.messages(conversation.id)[0].content == sent  # stored as sent
    assert conversation.title == "What does this print?"


def test_files_dropped_on_the_message_box_are_attached_and_can_be_removed(
        qtbot, parts: AppParts, tmp_path: Path) -> None:
    w = parts.window
    a, b = tmp_path / "a.txt", tmp_path / "b.md"
    a.write_text("alpha\n")
    b.write_text("# beta\n")
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(a)), QUrl.fromLocalFile(str(b))])
    # As a drag from a file manager: it enters the box (accepted), then drops.
    enter = QDragEnterEvent(QPoint(10, 10), Qt.DropAction.CopyAction, mime, Qt.MouseButton.LeftButton,
                            Qt.KeyboardModifier.NoModifier)
    QApplication.sendEvent(w.composer.viewport(), enter)
    assert enter.isAccepted()
    drop = QDropEvent(QPointF(10, 10), Qt.DropAction.CopyAction, mime, Qt.MouseButton.LeftButton,
                      Qt.KeyboardModifier.NoModifier)
    QApplication.sendEvent(w.composer.viewport(), drop)
    qtbot.waitUntil(lambda: len(w.page.attachments) == 2)
    assert w.page.chips.names() == ["a.txt", "b.md"]
    assert w.composer.toPlainText() == ""  # the paths were not typed in

    remove = w.page.chips.chips[0].findChild(QToolButton, "chip_remove")
    assert remove is not None
    qtbot.mouseClick(remove, Qt.MouseButton.LeftButton)
    assert w.page.chips.names() == ["b.md"]
    # A file alone may be sent, without typed text.
    qtbot.keyClick(w.composer, Qt.Key.Key_Return)
    assert _sent(parts) == "b.md:\n```markdown\n# beta\n```"


def test_a_binary_file_is_refused_with_a_sentence_and_the_rest_attached(
        qtbot, parts: AppParts, tmp_path: Path) -> None:
    w = parts.window
    binary, text = tmp_path / "photo.jpg", tmp_path / "notes.txt"
    binary.write_bytes(b"\xff\xd8\xff\xe0\0\x10JFIF\0" + bytes(range(256)))
    text.write_text("keep me\n")
    w.page.attach_files([str(binary), str(text)])
    qtbot.waitUntil(lambda: not w.page.attachment_reader.reading)
    assert w.page.chips.names() == ["notes.txt"]
    assert w.notice.isVisible() and "photo.jpg is not a text file" in w.notice.text()


def test_a_file_too_big_for_the_context_is_cut_with_a_sentence(
        qtbot, parts: AppParts, tmp_path: Path) -> None:
    w = parts.window
    n_ctx = parts.engine.state.info.n_ctx  # type: ignore[union-attr]
    big = tmp_path / "server.log"
    big.write_text("".join(f"request {i:06d} served\n" for i in range(n_ctx)))  # 22 chars a line
    w.page.attach_files([str(big)])
    # Sent before the file was read (its answer comes through the event loop, which has not run): it waits.
    w.send_message("Any errors?")
    assert "Still reading the attached files" in w.notice.text() and not w.session.generating
    qtbot.waitUntil(lambda: len(w.page.attachments) == 1)
    qtbot.keyClicks(w.composer, "Any errors?")
    qtbot.keyClick(w.composer, Qt.Key.Key_Return)
    sent = _sent(parts)
    assert len(sent) / 4 < n_ctx  # the file no longer fills the context
    assert sent.startswith("Any errors?\n\nserver.log:\n```\nrequest 000000 served\n")
    assert f"of {n_ctx:,} lines of server.log" in sent and "does not fit in the model's context" in sent
    assert "Only the first" in w.notice.text() and w.notice.isVisible()  # said under the chat too
