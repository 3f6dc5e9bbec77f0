"""QtCore glue between the pure layers and the widgets (QObjects with signals; no widgets).

- ``EngineClient`` (engine_client.py): starts the engine process and talks to
  it; signals load_started, loaded(EngineInfo), load_failed(str),
  tokens_received(TokenEvent), generation_finished(GenerationResult),
  generation_failed(str), engine_died(str).
- ``ChatSession`` (chat_session.py): the conversations' life (send,
  regenerate, edit, stop, saving as the reply streams, restarting the engine
  after a crash); signals reply_started, text_streamed, reply_finished,
  notice, model_loaded, engine_stopped and more.
- ``SettingsService`` (settings_service.py): settings with changed(name, value),
  saved at once; ``load_messages`` for the window to show.
"""

from localchat.services.chat_session import ChatSession
from localchat.services.engine_client import EngineClient
from localchat.services.settings_service import SettingsService

__all__ = ["ChatSession", "EngineClient", "SettingsService"]
