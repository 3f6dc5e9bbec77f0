"""AttachmentReader: files attached to a message are read off the GUI thread.

Reading a big log or extracting a long PDF's text (chat.attachments) can take seconds; the GUI thread
never waits for it. ``read(paths)`` reads on a worker thread and answers on the GUI thread
(services/main_thread.py) with ``done(list[Attachment], list[str])``: the files read, in the order
given, and a sentence for each one refused.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

from PySide6.QtCore import QObject, Signal

from localchat.chat.attachments import Attachment, AttachmentError, read_attachment
from localchat.services.main_thread import on_main
from localchat.services.qt_signals import emit


class AttachmentReader(QObject):
    done = Signal(object, object)  # list[Attachment], list[str] (sentences)

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._tell = on_main(self._on_read)
        self.reading = 0  # how many reads are running

    def read(self, paths: Sequence[str]) -> None:
        self.reading += 1
        threading.Thread(target=self._work, args=(list(paths),), name="attach-read", daemon=True).start()

    def _work(self, paths: list[str]) -> None:
        read: list[Attachment] = []
        problems: list[str] = []
        for path in paths:
            try:
                read.append(read_attachment(path))
            except AttachmentError as exc:
                problems.append(str(exc))
            except Exception as exc:  # no file may take the app down
                problems.append(f"{path} could not be read ({type(exc).__name__}).")
        self._tell(read, problems)

    def _on_read(self, read: list[Attachment], problems: list[str]) -> None:
        self.reading -= 1
        emit(self.done, read, problems)
