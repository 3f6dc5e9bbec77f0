"""ui.menus: every shortcut is on a menu action, and the buttons say their keys."""

from __future__ import annotations

from PySide6.QtWidgets import QLineEdit, QMainWindow, QPushButton

from localchat.ui.menus import WindowMenus


def test_menus_hold_every_action_and_name_the_keys(qtbot) -> None:
    window = QMainWindow()
    qtbot.addWidget(window)
    menus = WindowMenus(window, speculation_on=False)
    titles = [a.text() for a in window.menuBar().actions()]
    assert titles == ["&Chat", "&Models", "&Settings", "&Help"]
    assert menus.regenerate_action.shortcut().toString() == "Ctrl+R"
    assert menus.speculation_action.isCheckable() and not menus.speculation_action.isChecked()
    buttons = [QPushButton(window) for _ in range(3)]
    search = QLineEdit(window)
    menus.name_shortcuts(*buttons, search)
    assert buttons[0].toolTip().endswith("(Ctrl+R)") and buttons[1].toolTip().endswith("(Ctrl+E)")
    assert "Search chats (" in search.placeholderText()
