"""The app's child processes: one child-process layer (child.py) and what runs on it.

- child.py: spawn a child with a duplex pipe, send, receive, stop, kill, join, the exit
  code; the child's side (a reader thread that notices a vanished app; its log file).
- protocol.py: the engine's request and reply dataclasses (Load, Generate, Cancel, Unload,
  Shutdown; Loaded, LoadFailed, Tokens, Finished, Failed, Unloaded).
- worker.py: the engine process's side (``serve``), which owns the Engine.
- process.py: the app's side (``EngineProcess``).
- bench_protocol.py, bench_worker.py, bench_process.py: the same three for the benchmark.
- scheduler.py: ``EngineBroker``, one engine process shared by several clients (the API).

The app's entry point must call ``multiprocessing.freeze_support()`` before
anything else so the spawned child works in a PyInstaller build.
"""

from localchat.host.process import EngineGone, EngineProcess

__all__ = ["EngineGone", "EngineProcess"]
