"""The theme setting: dark and light palettes applied app-wide, and back to the system's."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtGui import QPalette
from PySide6.QtWidgets import QApplication

from localchat.app import build_main_window
from localchat.ui.theme import dark_palette, muted
from tests.ui.fakes import FakeEngine

ROLE = QPalette.ColorRole


def lightness(palette: QPalette, role: QPalette.ColorRole) -> int:
    return palette.color(role).lightness()


def test_dark_palette_keeps_text_and_controls_readable() -> None:
    p = dark_palette()
    assert lightness(p, ROLE.Window) < 60 and lightness(p, ROLE.Text) > 200
    # Fusion fills radio buttons, check boxes and fields with Base: it must stand out from the window.
    assert lightness(p, ROLE.Base) - lightness(p, ROLE.Window) >= 8
    help_text = muted(p).lightness()
    assert lightness(p, ROLE.Window) + 60 < help_text < lightness(p, ROLE.WindowText)


def test_the_setting_switches_the_whole_app_and_back(qtbot, tmp_path: Path) -> None:
    app = QApplication.instance()
    assert isinstance(app, QApplication)
    before = app.palette().color(ROLE.Window)
    parts = build_main_window(tmp_path / "config", tmp_path / "data", engine=FakeEngine())
    qtbot.addWidget(parts.window)
    try:
        parts.settings.set("theme", "dark")
        assert app.style().name().lower() == "fusion"
        assert app.palette().color(ROLE.Window).lightness() < 60
        parts.settings.set("theme", "light")
        assert app.palette().color(ROLE.Window).lightness() > 180
    finally:
        parts.settings.set("theme", "system")
    assert app.palette().color(ROLE.Window) == before
