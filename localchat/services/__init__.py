"""QtCore glue between the pure layers and the widgets (QObjects with signals; no widgets).

- ``EngineClient`` (engine_client.py): the window's EnginePort (engine_port.py) over the
  engine's supervisor: state_changed(EngineState) and job_event(Tokens | Finished | Failed),
  host/events.py's objects as the engine process sent them.
- ``ChatSession`` (chat_session.py): the conversations' life (send, regenerate, edit,
  stop, every write to the store); signals reply_started, text_streamed, reply_finished,
  notice and conversations_changed. ``ReplyRecorder`` saves a reply as it streams;
  ``LoadedModel`` (loaded_model.py) is the loaded model's names and preset, ``ChatTools``
  (chat_tools.py) a reply's rounds and each chat's tools.
- main_thread.py: ``on_main``, the one way back to the GUI thread.
- ``SettingsService`` (settings_service.py): settings with changed(name, value),
  saved at once; ``load_messages`` for the window to show.
"""

from localchat.services.chat_session import ChatSession
from localchat.services.engine_client import EngineClient
from localchat.services.settings_service import SettingsService

__all__ = ["ChatSession", "EngineClient", "SettingsService"]
