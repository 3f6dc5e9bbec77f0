"""The line under the chat that offers a model suiting this computer better: "Get NAME" · "Not now"."""

from __future__ import annotations

import html

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QLabel, QWidget

from localchat.services.qt_signals import emit


class SuggestionBanner(QLabel):
    model_requested = Signal(str)  # the catalog entry id offered, when the user follows "Get"

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__("", parent)
        self.setObjectName("suggestion")
        self.setWordWrap(True)
        self.setTextFormat(Qt.TextFormat.RichText)
        self.setTextInteractionFlags(Qt.TextInteractionFlag.TextBrowserInteraction)
        self.setOpenExternalLinks(False)
        self._entry = ""
        self.linkActivated.connect(self._on_link_activated)
        self.hide()

    def offer(self, sentence: str, entry_id: str, name: str) -> None:
        """The sentence, then "Get NAME" (asks for ``entry_id``) and "Not now" (hides the line)."""
        self._entry = entry_id
        self.setText(f"{html.escape(sentence)} <a href=\"get\">Get {html.escape(name)}</a> · "
                     f"<a href=\"dismiss\">Not now</a>")
        self.setToolTip(sentence)
        self.show()

    def _on_link_activated(self, link: str) -> None:
        self.hide()
        if link == "get" and self._entry:
            emit(self.model_requested, self._entry)
