"""HubSearchService: the model manager's hub search, off the GUI thread.

``search(words)`` and ``files(repo)`` run ``hub.search`` on a worker thread and answer on the GUI
thread (services/main_thread.py) with signals; the GUI thread never waits on the network. An answer
to a question that a newer one replaced is dropped, so typing fast shows the last search's results.

Signals::

    found(str, object)        the words, list[HubRepo]
    files_found(str, object)  the repository, list[HubFile]
    failed(str)               a sentence
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QObject, Signal

from localchat.hub.search import SearchError, repo_files, search
from localchat.services.main_thread import on_main
from localchat.services.qt_signals import emit


class HubSearchService(QObject):
    found = Signal(str, object)
    files_found = Signal(str, object)
    failed = Signal(str)

    def __init__(self, endpoint: str | None = None, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._endpoint = endpoint
        self._asked = itertools.count(1)
        self._latest = {"search": 0, "files": 0}
        self._tell = on_main(self._on_answer)

    def search(self, words: str) -> None:
        self._ask("search", lambda: search(words, endpoint=self._endpoint), words)

    def files(self, repo: str) -> None:
        self._ask("files", lambda: repo_files(repo, endpoint=self._endpoint), repo)

    def _ask(self, kind: str, call: Callable[[], Any], about: str) -> None:
        ticket = next(self._asked)
        self._latest[kind] = ticket

        def work() -> None:
            try:
                self._tell(kind, ticket, about, call(), "")
            except SearchError as exc:
                self._tell(kind, ticket, about, None, str(exc))

        threading.Thread(target=work, name=f"hub-{kind}", daemon=True).start()

    def _on_answer(self, kind: str, ticket: int, about: str, result: Any, problem: str) -> None:
        if ticket != self._latest[kind]:
            return  # a newer question replaced this one
        if problem:
            emit(self.failed, problem)
        elif kind == "search":
            emit(self.found, about, result)
        else:
            emit(self.files_found, about, result)
