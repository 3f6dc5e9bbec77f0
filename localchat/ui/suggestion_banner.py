"""The line under the chat that offers a model: one suiting this computer better ("Get NAME" · "Not
now"), or one just downloaded ("Load now" · "Not now")."""

from __future__ import annotations

import html

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QLabel, QWidget

from localchat.services.qt_signals import emit


class SuggestionBanner(QLabel):
    model_requested = Signal(str)  # the catalog entry id offered, when the user follows "Get"
    load_requested = Signal(str, object)  # a downloaded model's path and its drafter's (or None): "Load now"

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__("", parent)
        self.setObjectName("suggestion")
        self.setWordWrap(True)
        self.setTextFormat(Qt.TextFormat.RichText)
        self.setTextInteractionFlags(Qt.TextInteractionFlag.TextBrowserInteraction)
        self.setOpenExternalLinks(False)
        self._entry = ""
        self._load: tuple[str, str | None] | None = None
        self.linkActivated.connect(self._on_link_activated)
        self.hide()

    def offer(self, sentence: str, entry_id: str, name: str) -> None:
        """The sentence, then "Get NAME" (asks for ``entry_id``) and "Not now" (hides the line)."""
        self._entry, self._load = entry_id, None
        self.setText(f"{html.escape(sentence)} <a href=\"get\">Get {html.escape(name)}</a> · "
                     f"<a href=\"dismiss\">Not now</a>")
        self.setToolTip(sentence)
        self.show()

    def offer_load(self, sentence: str, target: str, draft: str | None) -> None:
        """The sentence, then "Load now" (asks to load ``target`` with ``draft``) and "Not now"."""
        self._entry, self._load = "", (target, draft)
        self.setText(f"{html.escape(sentence)} <a href=\"load\">Load now</a> · "
                     f"<a href=\"dismiss\">Not now</a>")
        self.setToolTip(target)
        self.show()

    def _on_link_activated(self, link: str) -> None:
        self.hide()
        if link == "get" and self._entry:
            emit(self.model_requested, self._entry)
        elif link == "load" and self._load is not None:
            emit(self.load_requested, *self._load)
