"""What the draft model's short batches cost here, and what reading two tokens the faster way saves.

    python tools/drafter_batches.py --model T.gguf --draft D.gguf [--threads 1,2]
    python tools/drafter_batches.py --model T.gguf --draft D.gguf --threads 1 --ab PROMPTS
        [--max-tokens 96] [--limit 4]
    python tools/drafter_batches.py --model T.gguf --draft D.gguf --rows

Without ``--ab``: the drafter's decode of 1, 2, 3 and 4 tokens after a 150-token context, median of
15 passes each, per thread count. On a CPU a quantized drafter leaves its one-token kernel from two
tokens on, and a batch of two can cost more than two single passes; the drafter then reads two tokens
it is behind one by one (engine/draft_sources.py, ``ModelDrafter._catch_up_two``).

With ``--rows``: a catch-up batch of 16, 32 and 64 tokens read with logits for its last row (a
catch-up) and for its last 16 rows, each row's greedy choice and confidence taken as a look back takes
them (``ModelDrafter.look_back``), median of 7; printed with the cost of one such row against a single
drafter pass (the figure ``tools/adaptive_replay.py`` charges, ``ROW_COST``).

With ``--ab``: each prompt of ``PROMPTS`` (a shipped set's name or a JSON Lines file) runs in one
engine as plain decoding, then adaptive speculation and ``auto:4``, each with the drafter reading two
tokens behind as now (``new``) and as before (``old``: always one batch, timed as a single pass),
the two alternating which goes first. Printed: each run's speed over plain decoding (measured), per
prompt and per category, and any text that differs from plain decoding.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from collections.abc import Callable, Sequence
from typing import Any


def batches(model: str, draft: str, threads: int) -> dict[int, float]:
    """Median milliseconds of the drafter's decode of 1-4 tokens."""
    from adaptive_replay import medians_ms  # a sibling: the tools' one interleaved-median timer

    from localchat.engine.engine import Engine
    from localchat.engine.types import EngineConfig

    cfg = EngineConfig(model, draft_path=draft, n_ctx=2048, use_profile=False, calibrate=False,
                       state_memory_bytes=0, n_threads=threads)
    with Engine(cfg) as eng:
        assert eng.model_drafter is not None, eng.draft_problem
        ctx = eng.model_drafter.ctx
        text = ("def fibonacci(n):\n    if n < 2:\n        return n\n"
                "    return fibonacci(n - 1) + fibonacci(n - 2)\n")
        toks = eng.target_model.tokenize(text * 6, add_special=False)
        base = 150
        ctx.truncate(0)
        ctx.decode(toks[:base], logits_for="last")

        def run(b: int) -> Callable[[], object]:
            return lambda: ctx.decode(toks[base:base + b], logits_for="last")
        return medians_ms({b: run(b) for b in (1, 2, 3, 4)}, 15, lambda: ctx.truncate(base))


def look_back_rows(model: str, draft: str, threads: int, rows: int = 16) -> dict[tuple[int, int], float]:
    """Median milliseconds of a catch-up batch of (tokens, rows with logits), and of one token (1, 1)."""
    from adaptive_replay import medians_ms

    from localchat.engine import sampling
    from localchat.engine.engine import Engine
    from localchat.engine.profile import CALIBRATION_TEXT
    from localchat.engine.types import EngineConfig, SamplingParams

    cfg = EngineConfig(model, draft_path=draft, n_ctx=1024, use_profile=False, calibrate=False,
                       state_memory_bytes=0, n_threads=threads)
    params = SamplingParams(temperature=0.0)
    with Engine(cfg) as eng:
        assert eng.model_drafter is not None, eng.draft_problem
        ctx = eng.model_drafter.ctx
        toks = eng.target_model.tokenize(CALIBRATION_TEXT * 6, add_special=True)
        base = 64
        ctx.truncate(0)
        ctx.decode(toks[:base], logits_for="last")

        def run(n: int, k: int) -> Callable[[], object]:
            def read() -> None:
                ctx.decode(toks[base:base + n], logits_for=k)
                for r in range(k - 1):
                    logits = ctx.logits(r)
                    sampling.greedy_token(logits, toks[: base + n - k + r + 1], params)
                    sampling.top_probability(logits)
            return read
        runs = [(1, 1)] + [(n, k) for n in (16, 32, 64) for k in (1, rows)]
        return medians_ms({r: run(*r) for r in runs}, 7, lambda: ctx.truncate(base))


def side_by_side(model: str, draft: str, threads: int, prompts: Sequence[Any], max_tokens: int) -> None:
    from localchat.bench.modes import bench_mode
    from localchat.engine import draft_sources as ds
    from localchat.engine.engine import Engine
    from localchat.engine.types import ChatMessage, EngineConfig, GenerationRequest, SamplingParams

    new = ds.ModelDrafter._catch_up_two

    def old(self: ds.ModelDrafter, tokens: Sequence[int]) -> float:  # the reading before
        self._timed(lambda: ds.sync_context(self.ctx, tokens))
        return 0.0

    cfg = EngineConfig(model, draft_path=draft, n_ctx=2048, use_profile=False, calibrate=True,
                       state_memory_bytes=0, n_threads=threads)
    modes = {"adaptive": bench_mode("adaptive", 4).speculation, "auto:4": bench_mode("auto", 4).speculation,
             "off": bench_mode("off").speculation}
    totals: dict[tuple[str, str], list[float]] = {}
    with Engine(cfg) as eng:
        def run(prompt: str, mode: str, session: str) -> tuple[int, float, list[int]]:
            eng.reset()
            req = GenerationRequest(messages=(ChatMessage("user", prompt),), max_tokens=max_tokens,
                                    sampling=SamplingParams(temperature=0.0), speculation=modes[mode],
                                    session=session)
            res = eng.generate(req)
            n = res.stats.generated_tokens
            return n, n / res.stats.tokens_per_s, list(res.token_ids)

        run(prompts[0].prompt, "auto:4", "warm")  # page the weights in
        for i, p in enumerate(prompts):
            arms: list[tuple[str, Callable[..., float]]] = [("old", old), ("new", new)]
            if i % 2:
                arms.reverse()
            n, s, plain_ids = run(p.prompt, "off", f"{i}")
            row = {"off": (n, s)}
            for mode in ("adaptive", "auto:4"):
                for arm, reading in arms:
                    ds.ModelDrafter._catch_up_two = reading  # type: ignore[method-assign]
                    n, s, ids = run(p.prompt, mode, f"{i}")
                    if ids != plain_ids:
                        print(f"  text differs from plain decoding: {p.id} {mode} {arm}")
                    row[f"{mode}/{arm}"] = (n, s)
            ds.ModelDrafter._catch_up_two = new  # type: ignore[method-assign]
            for key, (n, s) in row.items():
                for cat in (p.category, "all"):
                    t = totals.setdefault((cat, key), [0.0, 0.0])
                    t[0] += n
                    t[1] += s
            plain = row["off"][0] / row["off"][1]
            ratios = " ".join(f"{k} {n / s / plain:.3f}" for k, (n, s) in row.items() if k != "off")
            print(f"{p.category:8s} {p.id[:26]:26s} {ratios}", flush=True)
    print("\nper category, x plain (measured)")
    for cat in sorted({c for c, _ in totals}):
        plain = totals[(cat, "off")][0] / totals[(cat, "off")][1]
        print(f"{cat:8s} " + " ".join(f"{k} {n / s / plain:.3f}" for (c, k), (n, s) in sorted(totals.items())
                                      if c == cat and k != "off"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--draft", required=True)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--ab", default=None, help="prompts (a shipped set's name or a JSON Lines file)")
    ap.add_argument("--category", action="append")
    ap.add_argument("--limit", type=int, default=0, help="prompts per category (0: all)")
    ap.add_argument("--max-tokens", type=int, default=96)
    ap.add_argument("--rows", action="store_true", help="what a look back's rows of logits cost")
    args = ap.parse_args()
    os.environ.setdefault("LOCALCHAT_PROFILES_DIR", tempfile.mkdtemp())  # never the user's profiles
    threads = [int(t) for t in args.threads.split(",")]
    if args.ab:
        from localchat.bench.prompts import prompts_from, select

        prompts = [p for p in select(prompts_from(args.ab), args.category, args.limit) if not p.schema]
        for n in threads:
            side_by_side(args.model, args.draft, n, prompts, args.max_tokens)
        return
    if args.rows:
        for n in threads:
            timed = look_back_rows(args.model, args.draft, n)
            single = timed[(1, 1)]
            for size in (16, 32, 64):
                last, rows = timed[(size, 1)], timed[(size, 16)]
                print(f"threads {n}: {size} tokens {last:.1f} ms, with 16 rows of logits {rows:.1f} ms: "
                      f"a row {(rows - last) / 15 / single:.3f} single passes ({single:.1f} ms)")
        return
    for n in threads:
        ms = batches(args.model, args.draft, n)
        by_batch = ", ".join(f"{b}: {m:.1f}" for b, m in ms.items())
        print(f"threads {n}: drafter ms by batch (median of 15) {by_batch}; "
              f"a batch of 2 = {ms[2] / ms[1]:.2f} single passes")


if __name__ == "__main__":
    main()
