"""Token-to-screen latency of streamed replies in the real app: first text and each batch.

    python tools/ui_latency.py --model MODEL.gguf [--replies 5] [--max-tokens 160]

Builds the real window (offscreen) with the real engine process, sends ``--replies``
messages, and records two clocks (``time.monotonic``, one clock for every process on
the machine):

- in the engine process, when each piece of text was produced (an engine factory
  that wraps ``Engine.generate``'s event callback, writing to a JSON Lines file);
- in the window, each time the chat view draws the streaming reply, and how many
  characters it showed.

For each drawing: its time minus the time the engine produced the last character it
shows. Printed: the first text's latency (median over the replies) and the median
and 90th percentile over every drawing.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

PROBE_ENV = "LOCALCHAT_LATENCY_PROBE"
PROMPTS = (
    "Write a Python function that checks whether a string is a palindrome, with a docstring.",
    "Explain in three sentences what a hash map is.",
    "List five tips for writing clear commit messages.",
    "Write a short poem about the sea.",
    "Write a Python class for a stack with push, pop and peek.",
)


def probe_engine(config: Any) -> Any:
    """The engine factory the window's engine process runs: the real Engine, its events timed."""
    from localchat.engine.engine import Engine

    engine = Engine(config)
    generate = engine.generate
    out = Path(os.environ[PROBE_ENV])

    def timed(request: Any, on_event: Callable[[Any], None] | None = None, **kw: Any) -> Any:
        produced = 0
        rows: list[tuple[float, int]] = []

        def record(event: Any) -> None:
            nonlocal produced
            if event.text:
                produced += len(event.text)
                rows.append((time.monotonic(), produced))
            if on_event is not None:
                on_event(event)

        try:
            return generate(request, on_event=record, **kw)
        finally:
            with out.open("a", encoding="utf-8") as f:
                f.write(json.dumps(rows) + "\n")

    engine.generate = timed  # type: ignore[method-assign,assignment]
    return engine


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", required=True)
    p.add_argument("--replies", type=int, default=5)
    p.add_argument("--max-tokens", type=int, default=160)
    args = p.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parent))  # the engine process imports this module
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    work = Path(tempfile.mkdtemp(prefix="localchat-latency-"))
    engine_rows = work / "engine.jsonl"
    os.environ[PROBE_ENV] = str(engine_rows)

    from PySide6.QtWidgets import QApplication

    from localchat.app import build_main_window
    from localchat.services import EngineClient
    from localchat.ui.chat_view import ChatView

    app = QApplication.instance() or QApplication([])
    drawn: list[list[tuple[float, int]]] = []
    original_redraw = ChatView.redraw

    def redraw(self: ChatView) -> None:
        original_redraw(self)
        if self.streaming_text:
            if not drawn or (drawn[-1] and drawn[-1][-1][1] > len(self.streaming_text)):
                drawn.append([])
            drawn[-1].append((time.monotonic(), len(self.streaming_text)))

    ChatView.redraw = redraw  # type: ignore[method-assign]
    client = EngineClient(engine_factory="ui_latency:probe_engine")
    parts = build_main_window(work / "config", work / "data", engine=client, max_tokens=args.max_tokens,
                              autoload=False)
    window = parts.window
    window.show()

    def wait(condition: Callable[[], bool], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            if time.monotonic() > deadline:
                raise SystemExit("timed out")
            app.processEvents()
            time.sleep(0.002)

    window.load_model(args.model)
    wait(lambda: window.engine.state.info is not None, 300)
    for i in range(args.replies):
        drawn.append([])
        window.new_conversation()
        window.send_message(PROMPTS[i % len(PROMPTS)])
        wait(lambda: window.session.generating, 30)
        wait(lambda: not window.session.generating, 600)
    client.shutdown()

    produced = [json.loads(line) for line in engine_rows.read_text().splitlines()]
    replies = [d for d in drawn if d]
    first: list[float] = []
    batches: list[float] = []
    for rows, draws in zip(produced, replies, strict=False):
        if not rows or not draws:
            continue
        for k, (t, shown) in enumerate(draws):
            made = next((tm for tm, n in rows if n >= shown), rows[-1][0])
            latency = (t - made) * 1000
            batches.append(latency)
            if k == 0:
                first.append((t - rows[0][0]) * 1000)
    print(f"replies: {len(first)}, drawings: {len(batches)}")
    print(f"first text on screen after the engine produced it: median {statistics.median(first):.1f} ms")
    q = statistics.quantiles(batches, n=10)
    print(f"every drawing: median {statistics.median(batches):.1f} ms, 90th percentile {q[-1]:.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
