"""Time to first token when a conversation is taken up again, with and without saved KV caches.

Two conversations, A (about ``--tokens`` tokens of history) and B (a short one),
alternate: A, B, then A's next turn. Measured for that turn, in three set-ups:

- no saved states (``state_memory_bytes=0``): A's history is read again;
- states kept in memory: A's cache is restored, only the new message is read;
- after a restart: a new Engine continues A from the state saved on disk.

It also times the drafter alone: reading A's history from scratch against
restoring its saved state (to say whether keeping the drafter's state is worth it).

    python tools/bench_kv_switch.py --model T.gguf --draft D.gguf [--tokens 1000]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from localchat.engine.draft_sources import sync_context
from localchat.engine.engine import Engine
from localchat.engine.types import (
    ChatMessage,
    EngineConfig,
    GenerationRequest,
    SamplingParams,
    TokenEvent,
)

CODE = '''def merge_intervals(intervals):
    """Merge overlapping [start, end] intervals and return them sorted."""
    intervals = sorted(intervals, key=lambda iv: iv[0])
    merged = []
    for start, end in intervals:
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return merged
'''


def history(target_tokens: int, engine: Engine) -> list[tuple[str, str]]:
    """A code review conversation grown turn by turn until its prompt holds ``target_tokens``."""
    turns = [("system", "You are a careful Python reviewer. Answer briefly and precisely.")]
    k = 0
    while True:
        k += 1
        turns += [("user", f"Review version {k} of this function:\n```python\n{CODE}```"),
                  ("assistant", f"Version {k} is correct; sorting first makes it O(n log n). "
                                "Consider type hints and a docstring example.")]
        if len(engine.prompt_tokens(request(turns))[0]) >= target_tokens:
            return turns


def request(turns: list[tuple[str, str]], max_tokens: int = 4) -> GenerationRequest:
    return GenerationRequest(messages=tuple(ChatMessage(r, c) for r, c in turns), max_tokens=max_tokens,
                             sampling=SamplingParams(temperature=0.0))


def first_token(engine: Engine, req: GenerationRequest) -> tuple[str, float, int, int]:
    """(the reply, seconds to its first streamed text, prompt tokens read, prompt tokens cached)."""
    t0 = time.perf_counter()
    first: list[float] = []

    def on_event(_event: TokenEvent) -> None:
        if not first:
            first.append(time.perf_counter() - t0)

    res = engine.generate(req, on_event=on_event)
    ttft = first[0] if first else float("nan")
    return res.text, ttft, res.stats.prompt_tokens, res.stats.cached_prompt_tokens


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--draft")
    ap.add_argument("--tokens", type=int, default=1000)
    ap.add_argument("--ctx", type=int, default=4096)
    args = ap.parse_args()
    folder = tempfile.mkdtemp(prefix="kv-states-")
    base = EngineConfig(args.model, draft_path=args.draft, n_ctx=args.ctx)
    b = [("system", "You answer questions about geography in one sentence."), ("user", "Where is Lima?")]
    rows: list[tuple[str, int, float, int, int]] = []
    reply = ""
    a_next: list[tuple[str, str]] = []
    for name, config in (("no saved states", replace(base, state_memory_bytes=0)),
                         ("states in memory", replace(base, state_folder=folder))):
        with Engine(config) as eng:
            a = history(args.tokens, eng)
            eng.generate(request(a))
            eng.generate(request(b))
            a_next = [*a, ("user", "Now add type hints.")]
            reply, ttft, read, cached = first_token(eng, request(a_next))
            rows.append((name, len(eng.prompt_tokens(request(a_next))[0]), ttft, read, cached))
            if name == "states in memory" and eng.model_drafter is not None:
                prompt = eng.prompt_tokens(request(a_next))[0]
                dctx = eng.model_drafter.ctx
                dctx.clear()
                t0 = time.perf_counter()
                sync_context(dctx, prompt)
                reread = time.perf_counter() - t0
                dctx.clear()
                t0 = time.perf_counter()
                eng.states.restore(dctx, eng._state_keys[id(dctx)], prompt)
                restore = time.perf_counter() - t0
                print(f"drafter alone, {len(prompt)} prompt tokens: read again {reread:.2f} s, "
                      f"restored {restore * 1000:.0f} ms")
    state_bytes = sum(p.stat().st_size for p in Path(folder).glob("*.kvstate"))
    a_later = [*a_next, ("assistant", reply), ("user", "And a docstring example.")]
    t0 = time.perf_counter()
    with Engine(replace(base, state_folder=folder)) as eng:
        load = time.perf_counter() - t0
        _, ttft, read, cached = first_token(eng, request(a_later))
        rows.append(("after a restart (from disk)", len(eng.prompt_tokens(request(a_later))[0]), ttft, read,
                     cached))
    print(f"engine load before the restart row: {load:.1f} s")
    print("| set-up | prompt tokens | time to first token | read | cached |")
    print("|---|---|---|---|---|")
    for name, total, ttft, read, cached in rows:
        print(f"| {name} | {total} | {ttft:.2f} s | {read} | {cached} |")
    print(f"saved state files: {state_bytes / 1e6:.1f} MB in {folder}")


if __name__ == "__main__":
    main()
