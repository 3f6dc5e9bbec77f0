"""The benchmark as a feature of its own: prompts, modes, records, one report format, the runner.

- prompts.py: the built-in and held-out sets and user prompts (JSON Lines or typed, one per line).
- modes.py: what each mode name means (off, draft, ngram, auto, adaptive; NAME:N), and routes
  (MODE@api, MODE@rpc+5ms: the same mode measured in a second place, in the same run).
- report.py: a run's records, its summary, and ONE report format (JSON and CSV) written by
  the CLI and the app alike (the schema is in docs/BENCHMARKS.md).
- memory.py: peak resident memory, measured in the process that ran the models.
- runner.py: runs every prompt in every mode on an engine. The module here that drives
  an engine (a route only stands between it and one); it reaches it through a Protocol, so even it
  does not import
  ``localchat.engine.engine``. It runs in the benchmark process (host/bench_child.py, for the
  app's dialog and ``localchat bench`` alike), never in the GUI process (an import-linter
  contract checks that the GUI imports neither it nor the engine, directly or not).
- api_engine.py: a route through an OpenAI-compatible server, timed as the official client sees it.
- link_delay.py: a route to RPC workers behind added link latency (a delaying TCP relay).
- routes.py: the routes a run asks for, built in the benchmark process; route_facts.py: what was
  measured about them, sent back with the report.
"""
