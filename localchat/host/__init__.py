"""The engine process: a typed message protocol (protocol.py) over a multiprocessing pipe.

- protocol.py: the request and reply dataclasses (Load, Generate, Cancel, Unload,
  Shutdown; Loaded, LoadFailed, Tokens, Finished, Failed, Unloaded).
- worker.py: the child's side (``serve``), which owns the Engine.
- process.py: the app's side (``EngineProcess``): start with spawn, send, receive, stop, kill.

The app's entry point must call ``multiprocessing.freeze_support()`` before
anything else so the spawned child works in a PyInstaller build.
"""

from localchat.host.process import EngineGone, EngineProcess

__all__ = ["EngineGone", "EngineProcess"]
