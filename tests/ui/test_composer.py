"""The message box grows with what is typed (three lines empty, eight at most, then it scrolls), so the
chat keeps the window's height: a 400-message chat under an eight-line empty box showed a third less."""

from __future__ import annotations

from localchat.ui.composer import Composer


def _lines(box: Composer) -> float:
    return (box.height() - 2 * box.frameWidth()) / box.fontMetrics().lineSpacing()


def test_the_box_grows_with_the_text_and_stops_at_eight_lines(qtbot) -> None:
    box = Composer()
    qtbot.addWidget(box)
    box.resize(600, box.height())
    box.show()
    empty = box.height()
    assert 3 <= _lines(box) < 4.5, _lines(box)
    box.setPlainText("\n".join(f"line {i}" for i in range(5)))
    qtbot.waitUntil(lambda: box.height() > empty)
    assert 5 <= _lines(box) < 6.5, _lines(box)
    box.setPlainText("\n".join(f"line {i}" for i in range(40)))
    qtbot.waitUntil(lambda: _lines(box) >= 8)
    assert _lines(box) < 9.5, "the box grew past eight lines"
    assert box.verticalScrollBar().maximum() > 0, "the rest of the text does not scroll"
    box.clear()
    qtbot.waitUntil(lambda: box.height() == empty)


def test_a_long_wrapped_line_counts_as_the_lines_it_shows(qtbot) -> None:
    box = Composer()
    qtbot.addWidget(box)
    box.resize(300, box.height())
    box.show()
    empty = box.height()
    box.setPlainText("word " * 120)  # one paragraph, many lines once wrapped at 300 px
    qtbot.waitUntil(lambda: box.height() > empty)
