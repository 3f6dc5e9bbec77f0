"""Labels and buttons that give way: they ask for their whole text but accept any width, eliding it.

A QLabel or QToolButton asks for at least the width of its text, so a status bar
of them grows the window by itself as the texts get longer (a model's name, a
long reason). These ask for a few characters at least, draw the text elided to
the width they get, and put the whole text in the tooltip when it is cut.
"""

from __future__ import annotations

from PySide6.QtCore import QSize, Qt
from PySide6.QtGui import QPainter, QPaintEvent, QResizeEvent
from PySide6.QtWidgets import QLabel, QSizePolicy, QStyle, QToolButton, QWidget

MIN_CHARS = "Ww…"  # the least either keeps visible


class ElidedLabel(QLabel):
    """A one-line plain-text label: ``text()`` is the whole text, the screen shows what fits."""

    def __init__(self, parent: QWidget | None = None, explanation: str = "") -> None:
        super().__init__(parent)
        self._explanation = explanation
        self.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Preferred)
        self.setToolTip(explanation)

    def set_explanation(self, text: str) -> None:
        self._explanation = text
        self._update_tooltip()

    @property
    def elided(self) -> bool:
        return self.shown_text() != self.text()

    def shown_text(self) -> str:
        width = self.contentsRect().width()
        metrics = self.fontMetrics()
        if metrics.horizontalAdvance(self.text()) <= width:
            return self.text()  # elidedText's own rounding would cut a text that just fits
        return metrics.elidedText(self.text(), Qt.TextElideMode.ElideRight, width)

    def setText(self, text: str) -> None:
        super().setText(text)
        self._update_tooltip()

    def minimumSizeHint(self) -> QSize:
        hint = super().minimumSizeHint()
        if not self.text():
            return hint
        margins = self.contentsMargins()
        least = self.fontMetrics().horizontalAdvance(MIN_CHARS) + margins.left() + margins.right()
        return QSize(min(hint.width(), least), hint.height())

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self._update_tooltip()

    def paintEvent(self, event: QPaintEvent) -> None:
        painter = QPainter(self)
        alignment = int(self.alignment() | Qt.AlignmentFlag.AlignVCenter)
        self.style().drawItemText(
            painter, self.contentsRect(), alignment, self.palette(), self.isEnabled(), self.shown_text(),
            self.foregroundRole(),
        )
        painter.end()

    def _update_tooltip(self) -> None:
        whole = self.text() if self.text() and self.elided else ""
        tip = "\n".join(t for t in (whole, self._explanation) if t)
        if tip != self.toolTip():
            self.setToolTip(tip)


class ElidedToolButton(QToolButton):
    """A text button that shows ``full_text`` when it fits, else ``short_text``, elided if need be.

    It asks for the full text's width when that fits in ``max_width``, else the short text's
    (what it will show), and accepts a few characters.
    """

    def __init__(self, parent: QWidget | None = None, max_width: int = 340) -> None:
        super().__init__(parent)
        self._full = ""
        self._short = ""
        self._max_width = max_width
        self.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextOnly)
        # A tool button's policy is Fixed: its minimum would be its whole text's width.
        self.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Fixed)

    @property
    def full_text(self) -> str:
        return self._full

    def set_texts(self, full: str, short: str = "") -> None:
        self._full = full
        self._short = short or full
        self.updateGeometry()
        self._fit()

    def _padding(self) -> int:
        # What the style puts around a tool button's text (its margins, and the frame of auto-raise).
        return self.style().pixelMetric(QStyle.PixelMetric.PM_ButtonMargin, None, self) * 2 + 8

    def sizeHint(self) -> QSize:
        hint = super().sizeHint()
        metrics = self.fontMetrics()
        width = metrics.horizontalAdvance(self._full) + self._padding()
        if width > self._max_width:
            width = metrics.horizontalAdvance(self._short) + self._padding()
        return QSize(min(width, self._max_width), hint.height())

    def minimumSizeHint(self) -> QSize:
        hint = super().minimumSizeHint()
        return QSize(self.fontMetrics().horizontalAdvance(MIN_CHARS) + self._padding(), hint.height())

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self._fit()

    def _fit(self) -> None:
        room = max(0, self.width() - self._padding())
        metrics = self.fontMetrics()
        if metrics.horizontalAdvance(self._full) <= room:
            shown = self._full
        elif metrics.horizontalAdvance(self._short) <= room:
            shown = self._short  # elidedText's own rounding would cut a text that just fits
        else:
            shown = metrics.elidedText(self._short, Qt.TextElideMode.ElideRight, room)
        if shown != self.text():
            self.setText(shown)
