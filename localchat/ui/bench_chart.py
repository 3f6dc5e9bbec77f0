"""Benchmark charts drawn with QPainter (QtCharts is not part of PySide6-Essentials).

- ``GroupedBarChart``: one group per prompt, one bar per mode (tokens/s).
- ``LineChart``: acceptance rate by draft position, one line per mode.

Both take plain numbers, so they know nothing of the engine's types.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence

from PySide6.QtCore import QPointF, QRectF, QSize, Qt
from PySide6.QtGui import QColor, QFontMetrics, QPainter, QPaintEvent, QPen
from PySide6.QtWidgets import QSizePolicy, QWidget

MODE_COLORS = {
    "off": QColor("#8a8f98"),
    "draft": QColor("#2f7ed8"),
    "ngram": QColor("#2aa876"),
    "auto": QColor("#8e5cc7"),
    "adaptive": QColor("#e8833a"),
}
_EXTRA = [QColor("#c0392b"), QColor("#16a085"), QColor("#7f8c8d"), QColor("#d4ac0d")]


def mode_color(mode: str, index: int = 0) -> QColor:
    base = mode.partition(":")[0]
    return QColor(MODE_COLORS.get(base, _EXTRA[index % len(_EXTRA)]))


def nice_step(top: float, ticks: int = 5) -> float:
    """A round axis step (1, 2 or 5 times a power of ten) giving about ``ticks`` intervals up to ``top``."""
    if top <= 0:
        return 1.0
    raw = top / ticks
    power = 10 ** math.floor(math.log10(raw))
    for m in (1, 2, 5, 10):
        if m * power >= raw:
            return float(m * power)
    return float(10 * power)


def _fmt(value: float) -> str:
    return f"{value:.0f}" if value >= 10 or value == int(value) else f"{value:.1f}"


class _Chart(QWidget):
    def __init__(self, title: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._title = title
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Expanding)
        self.setMinimumSize(280, 200)

    def sizeHint(self) -> QSize:
        return QSize(480, 260)

    def _frame(self, p: QPainter, fm: QFontMetrics, legend: Sequence[str]) -> QRectF:
        """Draw the title and legend; return the rectangle left for the plot."""
        pal = self.palette()
        p.fillRect(self.rect(), pal.base())
        p.setPen(pal.text().color())
        y = fm.height() + 4
        p.drawText(QPointF(8, y), self._title)
        x = float(self.width() - 8)
        for i, name in reversed(list(enumerate(legend))):
            w = fm.horizontalAdvance(name)
            x -= w
            p.setPen(pal.text().color())
            p.drawText(QPointF(x, y), name)
            x -= 14
            p.fillRect(QRectF(x, y - fm.ascent() + 2, 10, 10), mode_color(name, i))
            x -= 12
        return QRectF(0, y + 8, self.width(), self.height() - y - 8)

    def _y_axis(
        self, p: QPainter, fm: QFontMetrics, plot: QRectF, top: float, step: float, label: str = "",
        percent: bool = False,
    ) -> None:
        grid = QColor(self.palette().text().color())
        grid.setAlpha(40)
        text = self.palette().text().color()
        v = 0.0
        while v <= top + step * 1e-6:
            y = plot.bottom() - v / top * plot.height()
            p.setPen(QPen(grid, 1))
            p.drawLine(QPointF(plot.left(), y), QPointF(plot.right(), y))
            p.setPen(text)
            s = f"{v * 100:.0f}%" if percent else _fmt(v) if step >= 1 else f"{v:.1f}"
            p.drawText(
                QRectF(0, y - fm.height() / 2, plot.left() - 6, fm.height()),
                int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter),
                s,
            )
            v += step
        if label:
            p.save()
            p.translate(fm.height() * 0.2, plot.center().y())
            p.rotate(-90)
            p.drawText(
                QRectF(-plot.height() / 2, 0, plot.height(), fm.height()),
                int(Qt.AlignmentFlag.AlignCenter),
                label,
            )
            p.restore()

    def _empty(self, p: QPainter, plot: QRectF, message: str) -> None:
        p.setPen(self.palette().placeholderText().color())
        p.drawText(plot, int(Qt.AlignmentFlag.AlignCenter), message)


class GroupedBarChart(_Chart):
    """Values per (group, series): here tokens/s per (prompt, mode)."""

    def __init__(
        self, title: str = "Tokens per second by prompt and mode", parent: QWidget | None = None
    ) -> None:
        super().__init__(title, parent)
        self.setObjectName("bench_speed_chart")
        self._groups: list[str] = []
        self._series: list[str] = []
        self._values: dict[tuple[str, str], float] = {}

    def set_data(
        self, groups: Sequence[str], series: Sequence[str], values: dict[tuple[str, str], float]
    ) -> None:
        self._groups, self._series, self._values = list(groups), list(series), dict(values)
        self.update()

    def paintEvent(self, event: QPaintEvent) -> None:
        p = QPainter(self)
        p.setRenderHint(QPainter.RenderHint.Antialiasing)
        fm = p.fontMetrics()
        area = self._frame(p, fm, self._series)
        top_value = max(self._values.values(), default=0.0)
        if not self._groups or top_value <= 0:
            self._empty(p, area, "Run a benchmark to see tokens per second here.")
            p.end()
            return
        step = nice_step(top_value)
        top = math.ceil(top_value / step) * step
        left = fm.horizontalAdvance(_fmt(top)) + fm.height() + 12
        n = len(self._groups)
        width = area.width() - left - 10
        group_w = width / n
        labels = list(self._groups)
        widest = max(fm.horizontalAdvance(s) for s in labels)
        rotate = widest > group_w - 4
        max_label = 120
        bottom_margin = (min(widest, max_label) * 0.72 + fm.height() + 6) if rotate else fm.height() + 8
        plot = QRectF(area.left() + left, area.top() + 4, width, area.height() - bottom_margin - 4)
        if plot.height() < 30:
            rotate, bottom_margin = False, fm.height() + 8
            plot.setHeight(area.height() - bottom_margin - 4)
        self._y_axis(p, fm, plot, top, step, "tok/s")
        text = self.palette().text().color()
        bars = max(1, len(self._series))
        pad = group_w * 0.15
        bar_w = (group_w - 2 * pad) / bars
        for gi, group in enumerate(self._groups):
            gx = plot.left() + gi * group_w
            for si, series in enumerate(self._series):
                v = self._values.get((group, series))
                if v is None or v <= 0:
                    continue
                h = v / top * plot.height()
                p.fillRect(
                    QRectF(gx + pad + si * bar_w, plot.bottom() - h, max(1.0, bar_w - 1), h),
                    mode_color(series, si),
                )
            p.setPen(text)
            label = labels[gi]
            if rotate:
                label = fm.elidedText(label, Qt.TextElideMode.ElideRight, max_label)
                p.save()
                p.translate(gx + group_w / 2 + fm.ascent() / 2, plot.bottom() + 6)
                p.rotate(-45)
                p.drawText(QPointF(-fm.horizontalAdvance(label), 0), label)
                p.restore()
            else:
                p.drawText(
                    QRectF(gx, plot.bottom() + 4, group_w, fm.height()),
                    int(Qt.AlignmentFlag.AlignHCenter | Qt.AlignmentFlag.AlignTop),
                    label,
                )
        p.setPen(QPen(text, 1))
        p.drawLine(QPointF(plot.left(), plot.bottom()), QPointF(plot.right(), plot.bottom()))
        p.end()


class LineChart(_Chart):
    """Acceptance rate (0-1) by draft position (1, 2, ...), one line per mode."""

    def __init__(
        self, title: str = "Acceptance rate by draft position", parent: QWidget | None = None
    ) -> None:
        super().__init__(title, parent)
        self.setObjectName("bench_position_chart")
        self._lines: dict[str, list[float]] = {}

    def set_data(self, lines: Mapping[str, Sequence[float]]) -> None:
        self._lines = {k: list(v) for k, v in lines.items() if v}
        self.update()

    def paintEvent(self, event: QPaintEvent) -> None:
        p = QPainter(self)
        p.setRenderHint(QPainter.RenderHint.Antialiasing)
        fm = p.fontMetrics()
        names = list(self._lines)
        area = self._frame(p, fm, names)
        positions = max((len(v) for v in self._lines.values()), default=0)
        if positions == 0:
            self._empty(p, area, "No draft tokens were verified yet.")
            p.end()
            return
        left = fm.horizontalAdvance("100%") + fm.height() + 12
        plot = QRectF(
            area.left() + left, area.top() + 4, area.width() - left - 14, area.height() - 2 * fm.height() - 14
        )
        self._y_axis(p, fm, plot, 1.0, 0.2, "acceptance rate", percent=True)
        text = self.palette().text().color()
        slot = plot.width() / positions
        p.setPen(text)
        for i in range(positions):
            x = plot.left() + (i + 0.5) * slot
            p.drawText(
                QRectF(x - slot / 2, plot.bottom() + 4, slot, fm.height()),
                int(Qt.AlignmentFlag.AlignHCenter | Qt.AlignmentFlag.AlignTop),
                str(i + 1),
            )
        p.drawText(
            QRectF(plot.left(), plot.bottom() + fm.height() + 6, plot.width(), fm.height()),
            int(Qt.AlignmentFlag.AlignHCenter | Qt.AlignmentFlag.AlignTop),
            "draft position",
        )
        for li, (name, values) in enumerate(self._lines.items()):
            color = mode_color(name, li)
            p.setPen(QPen(color, 2))
            points = [
                QPointF(plot.left() + (i + 0.5) * slot, plot.bottom() - min(1.0, max(0.0, v)) * plot.height())
                for i, v in enumerate(values)
            ]
            for a, b in itertools.pairwise(points):
                p.drawLine(a, b)
            p.setBrush(color)
            for pt in points:
                p.drawEllipse(pt, 3, 3)
        p.setPen(QPen(text, 1))
        p.drawLine(QPointF(plot.left(), plot.bottom()), QPointF(plot.right(), plot.bottom()))
        p.end()
