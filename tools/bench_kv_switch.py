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
import statistics
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path

import psutil

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


FOLLOW_UPS = ("Now add type hints.", "Now add a docstring example.", "Now handle an empty list.")


@dataclass(frozen=True)
class Turn:
    reply: str
    first_text: float  # seconds to the first streamed text (held back while it may be a stop string)
    prompt: float  # seconds to the first token (the prompt read, and the drafter's)
    total: int  # prompt tokens
    read: int  # prompt tokens evaluated
    cached: int  # prompt tokens not read again


def timed(engine: Engine, turns: list[tuple[str, str]]) -> Turn:
    req = request(turns)
    t0 = time.perf_counter()
    first: list[float] = []

    def on_event(_event: TokenEvent) -> None:
        if not first:
            first.append(time.perf_counter() - t0)

    res = engine.generate(req, on_event=on_event)
    s = res.stats
    return Turn(res.text, first[0] if first else float("nan"), s.prompt_seconds,
                s.prompt_tokens + s.cached_prompt_tokens, s.prompt_tokens, s.cached_prompt_tokens)


def switch_backs(engine: Engine, a: list[tuple[str, str]], b: list[tuple[str, str]], n: int) -> list[Turn]:
    """A, then ``n`` times: B, A with a new follow-up (each one a switch back to A)."""
    engine.generate(request(a))
    out = []
    for follow_up in FOLLOW_UPS[:n]:
        engine.generate(request(b))
        out.append(timed(engine, [*a, ("user", follow_up)]))
    return out


def drafter_figures(engine: Engine, prompt: list[int]) -> str:
    md = engine.model_drafter
    if md is None:
        return "no draft model"
    ctx = md.ctx
    engine.states.remember(ctx, engine.state_key(ctx))
    ctx.clear()
    t0 = time.perf_counter()
    sync_context(ctx, prompt)
    reread = time.perf_counter() - t0
    ctx.clear()
    t0 = time.perf_counter()
    engine.states.restore(ctx, engine.state_key(ctx), prompt)
    restore = time.perf_counter() - t0
    return f"drafter alone, {len(prompt)} tokens: read again {reread:.2f} s, restored {restore * 1000:.0f} ms"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--draft")
    ap.add_argument("--tokens", type=int, default=1000)
    ap.add_argument("--ctx", type=int, default=4096)
    ap.add_argument("--repeat", type=int, default=3, help="switches back with the cache (median shown)")
    args = ap.parse_args()
    folder = tempfile.mkdtemp(prefix="kv-states-")
    base = EngineConfig(args.model, draft_path=args.draft, n_ctx=args.ctx)
    b = [("system", "You answer questions about geography in one sentence."), ("user", "Where is Lima?")]
    rows: list[tuple[str, list[Turn]]] = []
    with Engine(replace(base, state_memory_bytes=0)) as eng:
        a = history(args.tokens, eng)
        rows.append(("no saved states", switch_backs(eng, a, b, 1)))
    with Engine(replace(base, state_folder=folder)) as eng:
        turns = switch_backs(eng, a, b, args.repeat)
        rows.append(("states in memory", turns))
        last = [*a, ("user", FOLLOW_UPS[args.repeat - 1]), ("assistant", turns[-1].reply)]
        drafter = drafter_figures(eng, eng.prompt_tokens(request(a))[0])
    state_bytes = sum(p.stat().st_size for p in Path(folder).glob("*.kvstate"))
    with Engine(replace(base, state_folder=folder)) as eng:
        rows.append(("after a restart (from disk)", [timed(eng, [*last, ("user", "Thanks. And tests?")])]))
    print(f"load average {psutil.getloadavg()[0]:.1f}; {drafter}; state files {state_bytes / 1e6:.0f} MB")
    print("| set-up | prompt tokens | read | cached | first token | first text |")
    print("|---|---|---|---|---|---|")
    for name, got in rows:
        mid = sorted(got, key=lambda t: t.first_text)[len(got) // 2]
        prompt_s = statistics.median(t.prompt for t in got)
        print(f"| {name} | {mid.total} | {mid.read} | {mid.cached} | {prompt_s:.2f} s "
              f"| {mid.first_text:.2f} s |")


if __name__ == "__main__":
    main()
