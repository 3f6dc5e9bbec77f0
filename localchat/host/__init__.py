"""The app's child processes and their supervisors; no Qt here.

- events.py: the one vocabulary from the engine to the window and the API (state snapshots,
  job events, ``Failure`` with a kind); failure_words.py: the sentences made from a Failure.
- protocol.py: what the app asks of a child (Load, Generate, Cancel, Shutdown; RunBench).
- child.py: spawn a child with a duplex pipe, send, receive, stop, kill, the exit code; the
  child's side (a reader thread that notices a vanished app; its log file).
- engine_child.py, bench_child.py: what runs in the engine and benchmark processes.
- supervisor.py: ``EngineSupervisor``, the one owner of the engine process and its state, with a
  fair queue of jobs beside it (jobs.py); ``BenchSupervisor`` for a benchmark run.

The app's entry point must call ``multiprocessing.freeze_support()`` before
anything else so the spawned child works in a PyInstaller build.
"""
