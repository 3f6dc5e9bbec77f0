"""A chat's own settings (temperature, reply length) over the app's, kept on its conversation row.

They are a JSON object on the conversation, validated against the options'
declaration (settings/options.py) whenever they are read: a value that no
longer fits its option (an older version's bounds, a hand edit) is left out
with a log line and the app's setting is used.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from localchat.chat import ConversationStore
from localchat.settings import OPTIONS_BY_NAME, InvalidValueError, OptionReader, Value

if TYPE_CHECKING:
    from localchat.services.settings_service import SettingsService

log = logging.getLogger(__name__)

# The settings a chat may hold its own value of (by option name), over the app's: the Chat settings
# dialog's, and whether tools are offered in it (the Tools button under the message box).
CHAT_OPTIONS = ("temperature", "max_reply_tokens", "tools_in_chats")
DIALOG_OPTIONS = ("temperature", "max_reply_tokens")


class ChatOptions:
    def __init__(self, store: ConversationStore, settings: SettingsService, max_tokens: int | None) -> None:
        self._store = store
        self._settings = settings
        self._max_tokens = max_tokens  # None: the max_reply_tokens setting (or the chat's own)

    def values(self, conversation_id: int) -> dict[str, Value]:
        """The chat's own values of CHAT_OPTIONS; one that no longer fits its option is left out."""
        options: dict[str, Value] = {}
        for name, value in self._store.get(conversation_id).options.items():
            if name not in CHAT_OPTIONS:
                continue
            try:
                options[name] = OPTIONS_BY_NAME[name].validate(value)
            except InvalidValueError as exc:
                log.warning("chat %s: %s; the app's setting is used", conversation_id, exc)
        return options

    @staticmethod
    def checked(options: dict[str, Value]) -> dict[str, Value]:
        """``options`` validated against their declaration; InvalidValueError with a sentence if not."""
        checked: dict[str, Value] = {}
        for name, value in options.items():
            if name not in CHAT_OPTIONS:
                raise ValueError(f"{name} is not a setting a chat can hold")
            checked[name] = OPTIONS_BY_NAME[name].validate(value)
        return checked

    def tools_on(self, conversation_id: int | None) -> bool:
        """Whether this chat offers tools (its own choice, else the tools_in_chats setting)."""
        own = self.values(conversation_id) if conversation_id is not None else {}
        return bool(own.get("tools_in_chats", self._settings.tools_in_chats))

    def reply_settings(
        self, conversation_id: int | None, base: OptionReader | None = None,
    ) -> tuple[float, int]:
        """The temperature and reply length the next reply in this chat is written with: the chat's own,
        else ``base``'s (the settings as the loaded model's preset has them), else the app's."""
        own = self.values(conversation_id) if conversation_id is not None else {}
        app = base if base is not None else self._settings
        temperature = own.get("temperature", app.temperature)
        length = own.get("max_reply_tokens", self._max_tokens or app.max_reply_tokens)
        return float(temperature), int(length)
