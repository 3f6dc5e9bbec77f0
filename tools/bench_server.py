"""Benchmark the local API against the engine directly, in one run.

    python tools/bench_server.py --model TARGET.gguf --draft DRAFT.gguf [--max-tokens 64] [--limit 2]

Prints: generation tokens/s through the server (seen by an OpenAI client, streaming, and as the
server's own ``timings`` report it) vs the engine in this process on the same prompts (speculation off,
greedy), interleaved prompt by prompt so a busy machine slows both alike; time to first token of a first
and a follow-up turn; and the adaptive vs off speed-up an API client sees on the built-in edit prompts.
"""

from __future__ import annotations

import argparse
import time

import openai

from localchat.bench.prompts import builtin_prompts
from localchat.engine.engine import Engine
from localchat.engine.types import ChatMessage, EngineConfig, GenerationRequest, SpeculationConfig
from localchat.host.supervisor import EngineSupervisor
from localchat.server import ServerSettings, ServerThread, bind_socket, create_app


def stream_chat(
    client: openai.OpenAI, messages: list[dict[str, str]], n: int, mode: str
) -> tuple[float, float, float]:
    """(time to first token, generation tok/s the client saw after it, tok/s the server's timings give)."""
    t0 = time.perf_counter()
    first = last = 0.0
    tokens = 0
    reported = 0.0
    for c in client.chat.completions.create(model="m", messages=messages, max_tokens=n, temperature=0,
                                            stream=True, stream_options={"include_usage": True},
                                            extra_body={"speculative": {"mode": mode}}):
        now = time.perf_counter()
        if c.choices and c.choices[0].delta.content:
            first = first or now
            last = now
        if c.usage is not None:
            tokens = c.usage.completion_tokens
        timings = (c.model_extra or {}).get("timings")
        if timings:
            reported = float(timings.get("predicted_per_second") or 0.0)
    gen = last - first
    return first - t0, (tokens - 1) / gen if gen > 0 else 0.0, reported


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--draft")
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--limit", type=int, default=2)
    args = ap.parse_args()
    prompts = builtin_prompts()
    code = [p for p in prompts if p.category == "code"][: args.limit]
    edits = [p for p in prompts if p.category == "edit"][: args.limit]
    config = EngineConfig(args.model, args.draft, n_ctx=4096)
    supervisor = EngineSupervisor(config)
    supervisor.start()
    thread = ServerThread(create_app(supervisor, ServerSettings(model_id="m", max_tokens=1024)),
                          bind_socket("127.0.0.1", 0))
    thread.start()
    supervisor.wait_ready()
    client = openai.OpenAI(base_url=thread.url + "/v1", api_key="none", timeout=600)
    engine = Engine(config)  # a second copy in this process, run turn about with the server's
    server_tps, server_reported, engine_tps = [], [], []
    for p in code:
        user = [{"role": "user", "content": p.prompt}]
        _, seen, reported = stream_chat(client, user, args.max_tokens, "off")
        server_tps.append(seen)
        server_reported.append(reported)
        engine.reset()
        r = engine.generate(GenerationRequest(messages=(ChatMessage("user", p.prompt),),
                                              max_tokens=args.max_tokens,
                                              speculation=SpeculationConfig(enabled=False)))
        engine_tps.append(r.stats.tokens_per_s)
    engine.close()
    history = [{"role": "system", "content": "You are a careful Python reviewer. " * 30},
               {"role": "user", "content": code[0].prompt}]
    ttft1, _, _ = stream_chat(client, history, 32, "off")
    reply = client.chat.completions.create(model="m", messages=history, max_tokens=32, temperature=0)
    history += [{"role": "assistant", "content": reply.choices[0].message.content or ""},
                {"role": "user", "content": "Now add a docstring."}]
    # The previous request left exactly this conversation in the cache; the follow-up pays for its new turn.
    ttft2, _, _ = stream_chat(client, history, 32, "off")
    speed = {}
    for mode in ("off", "adaptive"):
        speed[mode] = [stream_chat(client, [{"role": "user", "content": p.prompt}], args.max_tokens, mode)[1]
                       for p in edits]
    thread.stop()
    supervisor.close()
    mean = lambda xs: sum(xs) / len(xs)  # noqa: E731
    print(f"tokens/s (off, {len(code)} code prompts, interleaved): client-seen through the server "
          f"{mean(server_tps):.2f}, server's own timings {mean(server_reported):.2f}, engine directly "
          f"{mean(engine_tps):.2f}; ratio client-seen/engine {mean(server_tps) / mean(engine_tps):.3f}, "
          f"server timings/engine {mean(server_reported) / mean(engine_tps):.3f}")
    print(f"time to first token: first turn {ttft1 * 1000:.0f} ms, follow-up turn {ttft2 * 1000:.0f} ms")
    off, adaptive = mean(speed["off"]), mean(speed["adaptive"])
    print(f"edit prompts ({len(edits)}): off {off:.2f} tok/s, adaptive {adaptive:.2f} tok/s, "
          f"speed-up {adaptive / off:.2f}x")


if __name__ == "__main__":
    main()
