"""Light, dark or the system's palette, applied to the whole application.

"system" leaves Qt's platform style and palette alone (Windows, macOS and the
common Linux desktops switch them with the system). "light" and "dark" use
the Fusion style, which draws every widget from the palette, so both look the
same on every platform.
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QPalette
from PySide6.QtWidgets import QApplication, QStyleFactory

THEMES = ("system", "light", "dark")

_original: tuple[str, QPalette] | None = None


def dark_palette() -> QPalette:
    p = QPalette()
    role = QPalette.ColorRole
    colors = {
        role.Window: "#232427",
        role.WindowText: "#e6e6e6",
        role.Base: "#2b2d31",  # lighter than the window: Fusion fills radio and check boxes with it
        role.AlternateBase: "#313338",
        role.ToolTipBase: "#2d2e31",
        role.ToolTipText: "#e6e6e6",
        role.PlaceholderText: "#9b9ea4",
        role.Text: "#e6e6e6",
        role.Button: "#2d2e31",
        role.ButtonText: "#e6e6e6",
        role.BrightText: "#ff6b6b",
        role.Light: "#3a3b3f",
        role.Midlight: "#323337",
        role.Mid: "#26272a",
        role.Dark: "#151617",
        role.Shadow: "#000000",
        role.Highlight: "#3d7bd9",
        role.HighlightedText: "#ffffff",
        role.Link: "#78aef8",
        role.LinkVisited: "#b48ef0",
    }
    for r, value in colors.items():
        p.setColor(r, QColor(value))
    disabled = QPalette.ColorGroup.Disabled
    for r in (role.WindowText, role.Text, role.ButtonText):
        p.setColor(disabled, r, QColor("#7c7f85"))
    p.setColor(disabled, role.Highlight, QColor("#404246"))
    return p


def apply_theme(theme: str, app: QApplication | None = None) -> None:
    """Switch the application to ``theme`` ("system", "light" or "dark")."""
    global _original
    app = app or QApplication.instance()  # type: ignore[assignment]
    if not isinstance(app, QApplication):
        return
    if _original is None:
        _original = (app.style().name(), app.palette())
    hints = app.styleHints()
    if theme == "dark":
        app.setStyle(QStyleFactory.create("Fusion"))
        if hasattr(hints, "setColorScheme"):
            hints.setColorScheme(Qt.ColorScheme.Dark)
        app.setPalette(dark_palette())
    elif theme == "light":
        app.setStyle(QStyleFactory.create("Fusion"))
        if hasattr(hints, "setColorScheme"):
            hints.setColorScheme(Qt.ColorScheme.Light)
        app.setPalette(app.style().standardPalette())
    else:
        if hasattr(hints, "unsetColorScheme"):
            hints.unsetColorScheme()
        style = QStyleFactory.create(_original[0])
        if style is not None:
            app.setStyle(style)
        app.setPalette(_original[1])


def muted(palette: QPalette) -> QColor:
    """Secondary text: readable, but quieter than the text around it (both palettes)."""
    text = palette.color(QPalette.ColorRole.WindowText)
    window = palette.color(QPalette.ColorRole.Window)
    mix = 0.68
    return QColor(
        round(text.red() * mix + window.red() * (1 - mix)),
        round(text.green() * mix + window.green() * (1 - mix)),
        round(text.blue() * mix + window.blue() * (1 - mix)),
    )
