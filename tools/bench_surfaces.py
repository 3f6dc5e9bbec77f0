"""Benchmark each API surface against the engine directly, in one run, on the same engine process.

    PYTHONPATH=. python tools/bench_surfaces.py --model TARGET.gguf [--draft DRAFT.gguf]
        [--max-tokens 96] [--limit 3] [--rounds 2] [--modes off,ngram]

The same prompts, greedy, go to the engine's supervisor directly (no HTTP) and through each surface's
streaming route (OpenAI chat, OpenAI Responses, Anthropic Messages, Ollama chat), interleaved prompt
by prompt with the order rotated each round, so a busy machine slows every path alike. Each path is
timed as its client sees it: generation tokens/s between the first and the last piece of text
(tokens counted by the engine's own figures), and the engine's own ``predicted_per_second``. Prints
each surface's median against the direct engine's, per speculation mode; the goal is >= 0.95x.

Every path asks the engine for the same work (the same tokens, greedy), so on a busy machine the
engine's own figure moves with the load, not the path. The last columns pair the two figures of
each request: client-seen over the engine's own, which is what the surface's delivery costs on that
very request, whatever the load; a surface that costs nothing has the direct path's ratio.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx

from localchat.bench.prompts import builtin_prompts
from localchat.engine.speculation_modes import speculation_for_mode
from localchat.engine.types import ChatMessage, EngineConfig, GenerationRequest
from localchat.host.events import Failed, Finished, Tokens
from localchat.host.supervisor import EngineSupervisor
from localchat.server import ServerSettings, ServerThread, bind_socket, create_app

Timing = tuple[float, float]  # (client-seen generation tok/s, engine-reported tok/s)


def seen(times: list[float], tokens: int) -> float:
    """Tokens after the first, over the time from the first piece of text to the last."""
    span = times[-1] - times[0] if len(times) > 1 else 0.0
    return (tokens - 1) / span if span > 0 else 0.0


def direct(supervisor: EngineSupervisor, prompt: str, n: int, mode: str) -> Timing:
    request = GenerationRequest(
        messages=(ChatMessage("user", prompt),),
        max_tokens=n,
        speculation=speculation_for_mode(mode),
        session="bench",
    )
    handle = supervisor.submit(request, source="bench:direct")
    assert handle.events is not None
    times: list[float] = []
    while True:
        event = handle.events.get()
        if isinstance(event, Tokens) and event.event.text:
            times.append(time.perf_counter())
        elif isinstance(event, Finished):
            stats = event.result.stats
            return seen(times, stats.generated_tokens), stats.tokens_per_s
        elif isinstance(event, Failed):
            raise RuntimeError(str(event.failure))


def lines(http: httpx.Client, path: str, body: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The stream's JSON objects (server-sent events or NDJSON), as they arrive."""
    with http.stream("POST", path, json=body) as r:
        r.raise_for_status()
        for line in r.iter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                yield json.loads(line[6:])
            elif line.startswith("{"):
                yield json.loads(line)


def through(
    http: httpx.Client, path: str, body: dict[str, Any], text_of: Callable[[dict[str, Any]], str]
) -> Timing:
    times: list[float] = []
    timings: dict[str, Any] = {}
    for obj in lines(http, path, body):
        if text_of(obj):
            times.append(time.perf_counter())
        found = obj.get("timings")
        if found is None and isinstance(obj.get("response"), dict):  # the Responses API's last event
            found = obj["response"].get("timings")
        if found:
            timings = found
    return seen(times, int(timings["predicted_n"])), float(timings["predicted_per_second"])


def surfaces(
    prompt: str, n: int, mode: str
) -> dict[str, tuple[str, dict[str, Any], Callable[[dict[str, Any]], str]]]:
    user = [{"role": "user", "content": prompt}]
    spec = {"speculative": {"mode": mode}}
    return {
        "openai chat": (
            "/v1/chat/completions",
            {"messages": user, "max_tokens": n, "stream": True, **spec},
            lambda o: (o.get("choices") or [{}])[0].get("delta", {}).get("content") or "",
        ),
        "responses": (
            "/v1/responses",
            {"input": prompt, "max_output_tokens": n, "stream": True, **spec},
            lambda o: o.get("delta", "") if o.get("type") == "response.output_text.delta" else "",
        ),
        "anthropic": (
            "/v1/messages",
            {"messages": user, "max_tokens": n, "stream": True, **spec},
            lambda o: o.get("delta", {}).get("text", "") if o.get("type") == "content_block_delta" else "",
        ),
        "ollama": (
            "/api/chat",
            {"messages": user, "options": {"num_predict": n}, **spec},
            lambda o: o.get("message", {}).get("content", ""),
        ),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--draft")
    ap.add_argument("--max-tokens", type=int, default=96)
    ap.add_argument("--limit", type=int, default=3, help="prompts of the built-in code category")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--modes", default="off,ngram")
    args = ap.parse_args()
    prompts = [p.prompt for p in builtin_prompts() if p.category == "code"][: args.limit]
    supervisor = EngineSupervisor(EngineConfig(args.model, args.draft, n_ctx=4096), max_queue=4)
    supervisor.start()
    thread = ServerThread(
        create_app(supervisor, ServerSettings(model_id="m", max_tokens=2048)), bind_socket("127.0.0.1", 0)
    )
    thread.start()
    supervisor.wait_ready()
    paths = ["direct", "openai chat", "responses", "anthropic", "ollama"]
    results: dict[tuple[str, str], list[Timing]] = {}
    try:
        with httpx.Client(base_url=thread.url, timeout=600) as http:
            for mode in args.modes.split(","):
                direct(supervisor, prompts[0], 8, mode)  # warm-up: the first read of a prompt costs more
                for r in range(args.rounds):
                    for i, prompt in enumerate(prompts):
                        shift = (r * len(prompts) + i) % len(paths)
                        for path in paths[shift:] + paths[:shift]:
                            if path == "direct":
                                timing = direct(supervisor, prompt, args.max_tokens, mode)
                            else:
                                route, body, text_of = surfaces(prompt, args.max_tokens, mode)[path]
                                timing = through(http, route, body, text_of)
                            results.setdefault((mode, path), []).append(timing)
    finally:
        thread.stop()
        supervisor.close()
    print(f"{len(prompts)} code prompts x {args.rounds} rounds, {args.max_tokens} tokens, greedy; medians")
    print(
        f"{'mode':6} {'path':12} {'client-seen tok/s':>18} {'vs direct':>10} "
        f"{'engine tok/s':>13} {'vs direct':>10} {'seen/engine':>12} {'vs direct':>10}"
    )
    for mode in args.modes.split(","):
        base_seen = statistics.median(t[0] for t in results[(mode, "direct")])
        base_engine = statistics.median(t[1] for t in results[(mode, "direct")])
        base_paired = statistics.median(t[0] / t[1] for t in results[(mode, "direct")])
        for path in paths:
            s = statistics.median(t[0] for t in results[(mode, path)])
            e = statistics.median(t[1] for t in results[(mode, path)])
            paired = statistics.median(t[0] / t[1] for t in results[(mode, path)])
            print(
                f"{mode:6} {path:12} {s:18.2f} {s / base_seen:9.3f}x {e:13.2f} {e / base_engine:9.3f}x "
                f"{paired:12.3f} {paired / base_paired:9.3f}x"
            )


if __name__ == "__main__":
    main()
