"""The conversation view in a real Qt event loop: what it shows, when it redraws, copy links, scrolling."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt, QUrl
from PySide6.QtGui import QGuiApplication

from localchat.ui.chat_view import REDRAW_MS, ChatView, DisplayMessage


@pytest.fixture
def view(qtbot) -> ChatView:
    v = ChatView()
    v.resize(500, 300)
    qtbot.addWidget(v)
    return v


def test_user_text_is_shown_as_typed_and_replies_as_markdown(view: ChatView) -> None:
    view.set_messages(
        [
            DisplayMessage("user", "**not bold** <script>alert(1)</script>"),
            DisplayMessage("assistant", "Some **bold** words.", footer="12.0 tok/s"),
        ]
    )
    text = view.toPlainText()
    assert "You" in text and "**not bold** <script>alert(1)</script>" in text
    assert "Some bold words." in text and "**" not in text.split("Some")[1]
    assert "12.0 tok/s" in text
    assert "<script>" not in view.toHtml()  # escaped, never markup


def test_placeholder_only_when_empty(view: ChatView) -> None:
    view.set_placeholder("Type a message below to start.")
    assert "Type a message below to start." in view.toPlainText()
    view.set_messages([DisplayMessage("user", "hi")])
    assert "Type a message below" not in view.toPlainText()


def test_streamed_text_is_redrawn_at_most_every_redraw_interval(qtbot, view: ChatView) -> None:
    view.begin_reply("Fake-1B")
    assert "Fake-1B" in view.toPlainText() and "…" in view.toPlainText()
    redraws = 0
    original = view.redraw

    def counted() -> None:
        nonlocal redraws
        redraws += 1
        original()

    view.redraw = counted  # type: ignore[method-assign]
    for i in range(50):
        view.append_reply(f"w{i} ")
    assert redraws == 0  # fifty pieces, no redraw yet: the timer batches them
    qtbot.waitUntil(lambda: "w49" in view.toPlainText(), timeout=REDRAW_MS * 20)
    assert redraws == 1
    assert view.streaming_text == "".join(f"w{i} " for i in range(50))


def test_end_reply_keeps_the_engine_final_text_and_footer(view: ChatView) -> None:
    view.begin_reply()
    view.append_reply("partial te")
    text = view.end_reply("Stopped. 3 tokens", "partial text")
    assert text == "partial text"
    assert view.streaming_text is None
    assert "partial text" in view.toPlainText() and "Stopped. 3 tokens" in view.toPlainText()


def test_copy_link_puts_the_code_on_the_clipboard(qtbot, view: ChatView) -> None:
    reply = "Run:\n\n```python\nprint('hi')\n```\n\nand\n\n```\nls -l\n```"
    view.set_messages([DisplayMessage("assistant", reply)])
    assert view.code_blocks == ["print('hi')", "ls -l"]
    with qtbot.waitSignal(view.code_copied) as blocker:
        view.anchorClicked.emit(QUrl("copy:1"))
    assert blocker.args == ["ls -l"]
    assert QGuiApplication.clipboard().text() == "ls -l"
    view.anchorClicked.emit(QUrl("copy:7"))  # a stale link does nothing
    assert QGuiApplication.clipboard().text() == "ls -l"


def test_streaming_does_not_pull_a_reader_who_scrolled_up(qtbot, view: ChatView) -> None:
    view.show()
    qtbot.waitExposed(view)
    view.set_messages([DisplayMessage("assistant", f"line {i}\n\n") for i in range(60)])
    bar = view.verticalScrollBar()
    assert bar.value() == bar.maximum() > 0
    view.begin_reply()  # a reply starts at the end, where the user just sent
    assert bar.value() == bar.maximum()
    bar.setValue(10)  # then the user scrolls up to read
    view.append_reply("more text " * 50)
    qtbot.wait(REDRAW_MS * 3)
    assert "more text" in view.toPlainText()
    assert bar.value() == 10
    bar.setValue(bar.maximum())
    view.append_reply("\n\nthe end")
    qtbot.waitUntil(lambda: "the end" in view.toPlainText(), timeout=REDRAW_MS * 20)
    assert bar.value() == bar.maximum()


def test_drafted_text_is_coloured_only_when_asked(view: ChatView) -> None:
    message = DisplayMessage("assistant", "Hello world", drafted=(0, 6, 5))
    view.set_messages([message])
    colour = view._colors.drafted.lstrip("#").lower()
    assert colour not in view.toHtml().lower()
    view.set_colour_drafted(True)
    assert colour in view.toHtml().lower()


def test_each_message_can_be_copied_whole_and_a_stored_one_deleted(qtbot, view: ChatView) -> None:
    reply = "Here:\n\n```python\nprint('hi')\n```\n\nDone."
    view.set_messages([DisplayMessage("user", "Show me", message_id=4), DisplayMessage("assistant", reply,
                                                                                       message_id=5)])
    assert "Copy" in view.toPlainText() and "Delete" in view.toPlainText()
    with qtbot.waitSignal(view.message_copied) as blocker:
        view.anchorClicked.emit(QUrl("msgcopy:1"))
    assert blocker.args == [reply]  # the whole Markdown, not only its code block
    assert QGuiApplication.clipboard().text() == reply
    with qtbot.waitSignal(view.delete_requested) as blocker:
        view.anchorClicked.emit(QUrl("msgdelete:5"))
    assert blocker.args == [5]


def test_the_context_menu_acts_on_the_message_under_the_pointer(qtbot, view: ChatView) -> None:
    view.show()
    qtbot.waitExposed(view)
    view.set_messages([DisplayMessage("user", "first question", message_id=1),
                       DisplayMessage("assistant", "the answer", message_id=2),
                       DisplayMessage("assistant", "not stored yet")])
    doc_text = view.toPlainText()
    cursor = view.textCursor()
    cursor.setPosition(doc_text.index("the answer") + 3)
    point = view.cursorRect(cursor).center()
    index = view.message_at(point)
    assert index == 1
    menu = view.message_menu(index)
    names = {a.objectName(): a for a in menu.actions()}
    with qtbot.waitSignal(view.delete_requested) as blocker:
        names["delete_message"].trigger()
    assert blocker.args == [2]
    names["copy_message"].trigger()
    assert QGuiApplication.clipboard().text() == "the answer"
    cursor.setPosition(doc_text.index("not stored") + 2)
    last = view.message_menu(view.message_at(view.cursorRect(cursor).center()))
    last_names = [a.objectName() for a in last.actions()]
    assert "copy_message" in last_names and "delete_message" not in last_names


def test_code_blocks_are_highlighted_in_the_view(view: ChatView) -> None:
    view.set_messages([DisplayMessage("assistant", "```python\nimport os\n```")])
    assert "import os" in view.toPlainText()
    # The document keeps the keyword's colour as a character format (not only in the HTML given to it).
    cursor = view.document().find("import")
    assert not cursor.isNull()
    colour = cursor.charFormat().foreground().color()
    assert colour.name() != view._colors.text  # coloured as a keyword, not the text colour


def test_a_users_message_menu_offers_edit(qtbot, view: ChatView) -> None:
    view.set_messages([DisplayMessage("user", "question", message_id=7), DisplayMessage("assistant", "answer",
                                                                                        message_id=8)])
    user_menu = {a.objectName(): a for a in view.message_menu(0).actions()}
    assert "edit_message" not in {a.objectName() for a in view.message_menu(1).actions()}
    with qtbot.waitSignal(view.edit_requested) as blocker:
        user_menu["edit_message"].trigger()
    assert blocker.args == [7]


def _long_chat(count: int = 400) -> list[DisplayMessage]:
    return [DisplayMessage("user" if i % 2 == 0 else "assistant",
                           f"message {i}: " + "words to read " * 30) for i in range(count)]


def _at_end(view: ChatView) -> bool:
    bar = view.verticalScrollBar()
    return bar.maximum() > 0 and bar.value() == bar.maximum()


def test_a_long_chat_loaded_before_the_window_shows_opens_at_its_newest(qtbot, view: ChatView) -> None:
    """The last chat is loaded at start-up, before the window appears: QTextEdit's first show scrolled to
    the top, and the new message, the reading progress and the reply stayed out of sight."""
    view.set_messages(_long_chat())
    view.show()
    qtbot.waitExposed(view)
    qtbot.wait(300)  # QTextDocument lays a long chat out a slice at a time, on a timer
    assert _at_end(view)
    assert not view.jump_button.isVisible()
    view.add_message(DisplayMessage("user", "the newest question"))
    view.begin_reply("Fake-1B")
    view.set_reading("Reading 12%")
    qtbot.wait(500)
    assert _at_end(view)
    cursor = view.cursorForPosition(view.viewport().rect().bottomLeft())
    shown = view.toPlainText()[max(0, cursor.position() - 200):cursor.position() + 50]
    assert "Reading 12%" in shown  # the reading progress is what the view shows at its foot


def test_scrolling_up_stops_following_and_the_jump_button_follows_again(qtbot, view: ChatView) -> None:
    view.show()
    qtbot.waitExposed(view)
    view.set_messages(_long_chat(40))
    view.add_message(DisplayMessage("user", "question"))
    view.begin_reply()
    view.append_reply("first words ")
    qtbot.waitUntil(lambda: "first words" in view.toPlainText(), timeout=REDRAW_MS * 20)
    assert _at_end(view) and view.following and not view.jump_button.isVisible()
    bar = view.verticalScrollBar()
    bar.triggerAction(bar.SliderAction.SliderPageStepSub)  # the user pages up
    held = bar.value()
    assert held < bar.maximum() and not view.following
    assert view.jump_button.isVisible()
    assert view.jump_button.text().endswith("Jump to newest")
    for _ in range(5):
        view.append_reply("more streamed text " * 20)
        qtbot.wait(REDRAW_MS * 2)
    assert bar.value() == held  # the reader is left where they were
    assert view.jump_button.isVisible()
    qtbot.mouseClick(view.jump_button, Qt.MouseButton.LeftButton)
    assert _at_end(view) and view.following and not view.jump_button.isVisible()
    view.append_reply("the last words")
    qtbot.waitUntil(lambda: "the last words" in view.toPlainText(), timeout=REDRAW_MS * 20)
    assert _at_end(view)
    view.end_reply("done")
    assert _at_end(view)


def test_a_message_the_user_sends_scrolls_into_view_even_when_scrolled_up(qtbot, view: ChatView) -> None:
    view.show()
    qtbot.waitExposed(view)
    view.set_messages(_long_chat(40))
    bar = view.verticalScrollBar()
    bar.setValue(0)  # reading the start of the chat
    assert not view.following and view.jump_button.isVisible()
    view.add_message(DisplayMessage("user", "a new question"))
    assert _at_end(view) and view.following and not view.jump_button.isVisible()


def test_a_finished_reply_leaves_a_reader_who_scrolled_up_in_place(qtbot, view: ChatView) -> None:
    view.show()
    qtbot.waitExposed(view)
    view.set_messages(_long_chat(40))
    view.begin_reply()
    bar = view.verticalScrollBar()
    bar.setValue(20)
    view.append_reply("text " * 300)
    view.end_reply("12 tok/s")
    assert bar.value() == 20 and view.jump_button.isVisible()
