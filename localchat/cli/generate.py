"""``localchat generate``: one reply on the terminal, streamed, then one statistics line."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from localchat.cli.common import add_engine_options, drafter_name, engine_config, fail, number, whole
from localchat.engine.speculation_modes import speculation_for_mode


def register(sub: Any) -> None:
    p = sub.add_parser("generate", help="generate one reply from a prompt (headless)")
    add_engine_options(p)
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--ngram", action="store_true", help="draft by prompt lookup (no draft model)")
    mode.add_argument("--no-spec", action="store_true", help="plain decoding, no speculation")
    mode.add_argument("--adaptive", action="store_true",
                      help="adaptive draft length, n-gram lookup when the context repeats, auto-off")
    p.add_argument("--temp", type=number(0.0), default=0.0, help="temperature (0: greedy, the default)")
    p.add_argument("--top-k", type=whole(0), default=40, help="0 turns it off (default 40)")
    p.add_argument("--top-p", type=number(0.0, 1.0), default=0.95, help="1 turns it off (default 0.95)")
    p.add_argument("--min-p", type=number(0.0, 1.0), default=0.05, help="0 turns it off (default 0.05)")
    p.add_argument("--repeat-penalty", type=number(0.0, above=True), default=1.0,
                   help="above 0; 1 turns it off (the default)")
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--system", default=None, help="system prompt")
    p.add_argument("--raw", action="store_true", help="raw text, no chat template")
    p.add_argument("prompt")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from localchat.engine.engine import Engine
    from localchat.engine.errors import EngineError
    from localchat.engine.types import ChatMessage, GenerationRequest, SamplingParams

    if args.no_spec:
        mode = "off"
    elif args.ngram:
        mode = "ngram"
    elif args.adaptive:
        mode = "adaptive"
    else:
        mode = "draft" if args.draft else "ngram"
    try:
        spec = speculation_for_mode(mode, args.draft_tokens, args.p_min)
        sampling = SamplingParams(
            temperature=args.temp, top_k=args.top_k, top_p=args.top_p, min_p=args.min_p,
            repeat_penalty=args.repeat_penalty, seed=args.seed,
        )
    except ValueError as exc:
        return fail(str(exc))
    for name, text in (("prompt", args.prompt), ("--system", args.system or "")):
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            return fail(f"the {name} text is not valid UTF-8 (check the terminal's encoding)")
    messages = []
    if args.system:
        messages.append(ChatMessage("system", args.system))
    messages.append(ChatMessage("user", args.prompt))
    request = GenerationRequest(
        messages=() if args.raw else tuple(messages),
        prompt=args.prompt if args.raw else None,
        max_tokens=args.max_tokens,
        sampling=sampling,
        speculation=spec,
    )
    try:
        config = engine_config(args)
    except ValueError as exc:
        return fail(str(exc))
    try:
        with Engine(config) as engine:
            info = engine.info
            state = engine.speculation_state(spec)
            if not state.active or state.reason:
                drafter = drafter_name(state.drafter, info)
                why = f" - {state.reason}" if state.reason else ""
                print(f"[speculation: {drafter}{why}]", file=sys.stderr)
            placement = info.placement
            result = engine.generate(request, on_event=lambda e: print(e.text, end="", flush=True))
    except EngineError as exc:
        return fail(str(exc))
    except KeyboardInterrupt:
        return 130
    print()
    if result.notice:
        print(result.notice, file=sys.stderr)
    where = f", target: {placement}" if placement != "local" else ""
    finish = result.finish_reason.value
    drafter = drafter_name(result.speculation.drafter, info)
    print(f"[{drafter}] {result.stats.summary()}, finish: {finish}{where}", file=sys.stderr)
    return 0
