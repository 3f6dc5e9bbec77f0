"""AttachmentBudget: the files attached to a message, inlined after its text as far as the context
has room for them.

The room is the loaded context (the one loading, else the context_length setting) less the chat so
far (its system prompt and messages), the typed text and the reply's length, in estimated tokens;
``chat.attachments.inline`` cuts what does not fit and says so in its notes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from localchat.chat import ConversationStore
from localchat.chat.attachments import Attachment, Inlined, budget_tokens, estimate_tokens, inline

if TYPE_CHECKING:
    from localchat.services.chat_options import ChatOptions
    from localchat.services.engine_port import EnginePort
    from localchat.services.loaded_model import LoadedModel
    from localchat.services.settings_service import SettingsService


class AttachmentBudget:
    def __init__(self, store: ConversationStore, engine: EnginePort, settings: SettingsService,
                 options: ChatOptions, model: LoadedModel) -> None:
        self._store = store
        self._engine = engine
        self._settings = settings
        self._options = options
        self._model = model

    def inline(self, conversation_id: int | None, text: str, attachments: Sequence[Attachment]) -> Inlined:
        """``text`` with ``attachments`` after it, as the next message of this chat (None: a new one)."""
        return inline(text, attachments, self.tokens(conversation_id, text))

    def tokens(self, conversation_id: int | None, text: str) -> int:
        """Tokens attached files may take in the next message of this chat, after ``text``."""
        state = self._engine.state
        n_ctx = (state.info.n_ctx if state.info is not None
                 else state.config.n_ctx if state.config is not None else self._settings.context_length)
        held = text
        if conversation_id is not None:
            held = self._store.get(conversation_id).system_prompt + text
            held += "".join(m.content for m in self._store.messages(conversation_id))
        _temperature, max_tokens = self._options.reply_settings(conversation_id, self._model.reader())
        return budget_tokens(n_ctx, estimate_tokens(held), max_tokens)
