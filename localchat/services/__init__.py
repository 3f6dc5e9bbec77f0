"""QtCore glue between the pure layers and the widgets (QObjects with signals; no widgets).

- ``EngineClient`` (engine_client.py): starts the engine process and talks to
  it; signals load_started, loaded(EngineInfo), load_failed(str),
  tokens_received(TokenEvent), generation_finished(GenerationResult),
  generation_failed(str), engine_died(str).
- ``SettingsService`` (settings_service.py): settings with changed(name, value),
  saved at once; ``load_messages`` for the window to show.
"""

from localchat.services.engine_client import EngineClient
from localchat.services.settings_service import SettingsService

__all__ = ["EngineClient", "SettingsService"]
