"""The main window's menus: every action, its shortcut, and the shortcut named where buttons show it.

Standard keys where Qt has one (each platform's own), the usual chat-app keys
elsewhere; every shortcut is on a menu action, so the menus show it.
"""

from __future__ import annotations

from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QAbstractButton, QLineEdit, QMainWindow


def _key(action: QAction) -> str:
    return action.shortcut().toString(QKeySequence.SequenceFormat.NativeText)


class WindowMenus:
    """Chat, Models, Settings and Help, on ``window``'s menu bar."""

    def __init__(self, window: QMainWindow, speculation_on: bool) -> None:
        def action(text: str, key: QKeySequence.StandardKey | str | None = None, tip: str = "") -> QAction:
            made = QAction(text, window)
            if key is not None:
                made.setShortcut(QKeySequence(key))
            if tip:
                made.setToolTip(tip)
            return made

        bar = window.menuBar()
        chat = bar.addMenu("&Chat")
        self.new_action = action("New chat", QKeySequence.StandardKey.New)
        self.search_action = action("Search chats", QKeySequence.StandardKey.Find)
        self.regenerate_action = action("Regenerate reply", "Ctrl+R")
        self.edit_action = action("Edit last message", "Ctrl+E", "Also Up in an empty message box")
        self.chat_settings_action = action("Chat settings…",
                                           tip="This chat's own temperature and reply length")
        self.export_markdown_action = action("Export chat as Markdown…")
        self.export_json_action = action("Export chat as JSON…")
        self.quit_action = action("Quit", QKeySequence.StandardKey.Quit)
        for group in ((self.new_action, self.search_action), (self.regenerate_action, self.edit_action),
                      (self.chat_settings_action,), (self.export_markdown_action, self.export_json_action),
                      (self.quit_action,)):
            if chat.actions():
                chat.addSeparator()
            chat.addActions(list(group))
        models = bar.addMenu("&Models")
        self.open_model_action = action("Open a GGUF file…")
        self.manager_action = action("Model manager…")
        self.benchmark_action = action("Benchmark…")
        self.speculation_action = action("Speculative decoding", "Ctrl+Shift+S")
        self.speculation_action.setCheckable(True)
        self.speculation_action.setChecked(speculation_on)
        self.save_preset_action = action(
            "Save settings as this model's preset",
            tip="Keep the sampling, context length and this chat's system prompt for the loaded model: "
                "applied whenever it loads")
        self.clear_preset_action = action("Clear this model's preset",
                                          tip="The loaded model uses the app's settings again")
        models.addActions([self.open_model_action, self.manager_action, self.benchmark_action])
        models.addSeparator()
        models.addActions([self.save_preset_action, self.clear_preset_action])
        models.addSeparator()
        models.addAction(self.speculation_action)
        self.settings_action = action("Settings…", QKeySequence.StandardKey.Preferences)
        bar.addMenu("&Settings").addAction(self.settings_action)
        self.log_folder_action = action("Open log folder",
                                        tip="Where engine.log is: attach it to a bug report")
        bar.addMenu("&Help").addAction(self.log_folder_action)

    def name_shortcuts(self, regenerate: QAbstractButton, edit: QAbstractButton, new: QAbstractButton,
                       search: QLineEdit) -> None:
        """Say each button's key in its tooltip, as the menus show them."""
        regenerate.setToolTip(f"Write the last reply again ({_key(self.regenerate_action)})")
        edit.setToolTip(f"Change your last message and send it again ({_key(self.edit_action)})")
        new.setToolTip(f"Start a new conversation ({_key(self.new_action)})")
        search.setPlaceholderText(f"Search chats ({_key(self.search_action)})")
