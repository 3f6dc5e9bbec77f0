"""The Hugging Face token for the GUI: read and save it, and check it with the hub off the GUI thread.

``HubTokenService`` wraps ``hub.token`` (which keeps the token in
huggingface-hub's own token file, see there why) for the settings dialog:

- ``stored()``, ``location()``, ``env_overrides()``: what the field shows;
- ``save(token)``: "" when saved, else the sentence saying why not;
- ``check(token)``: asks the hub's ``whoami`` in a worker thread; the answer
  comes back on the GUI thread as ``checked(ok, sentence)``.

The GUI thread never waits on the network: the worker's answer comes back
through services/main_thread.py, as in DownloadService.
"""

from __future__ import annotations

import logging
import threading

from PySide6.QtCore import QObject, Signal

from localchat.hub import token as hub_token
from localchat.hub.errors import DownloadError
from localchat.services.main_thread import on_main
from localchat.services.qt_signals import emit

log = logging.getLogger(__name__)


class HubTokenService(QObject):
    checked = Signal(bool, str)  # the hub accepted the token, and a sentence saying whose it is or why not

    def __init__(self, *, endpoint: str | None = None, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._endpoint = endpoint
        self._answer = on_main(self._on_worker_answer)

    def stored(self) -> str:
        return hub_token.stored_token()

    def location(self) -> str:
        return str(hub_token.token_file())

    def env_overrides(self) -> bool:
        """True when HF_TOKEN is set: huggingface-hub then uses it instead of the saved token."""
        return hub_token.env_token() is not None

    def save(self, token: str) -> str:
        try:
            hub_token.save_token(token)
        except DownloadError as exc:
            log.warning("%s", exc)
            return str(exc)
        return ""

    def check(self, token: str) -> None:
        worker = threading.Thread(target=self._run, args=(token,), name="hub-whoami", daemon=True)
        worker.start()

    def _run(self, token: str) -> None:
        try:
            account = hub_token.check_token(token, self._endpoint)
        except DownloadError as exc:
            self._answer(False, str(exc))
        except Exception as exc:  # a sentence for the user, the details for the log
            log.exception("checking the Hugging Face token failed")
            self._answer(False, f"The token could not be checked ({type(exc).__name__}).")
        else:
            role = f" ({account.role} access)" if account.role else ""
            self._answer(True, f"The hub accepted the token: signed in as {account.name}{role}.")

    def _on_worker_answer(self, ok: bool, sentence: str) -> None:
        emit(self.checked, ok, sentence)
