"""``localchat generate``: one reply on the terminal, streamed, then one statistics line."""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from localchat.cli.common import add_engine_options, drafter_name, engine_config, fail, number, whole
from localchat.engine.speculation_modes import speculation_for_mode
from localchat.engine.types import ConstraintKind, OutputConstraint


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
    shape = p.add_mutually_exclusive_group()
    shape.add_argument("--json-schema", metavar="FILE|JSON", help="the reply is JSON matching this schema")
    shape.add_argument("--json-object", action="store_true", help="the reply is a JSON object")
    shape.add_argument("--grammar", metavar="FILE", type=Path,
                       help="the reply matches this Lark grammar (llguidance's dialect)")
    shape.add_argument("--gbnf", metavar="FILE", type=Path, help="the reply matches this GBNF grammar")
    shape.add_argument("--regex", help="the reply matches this regular expression")
    p.add_argument("--trigger", default="",
                   help="with --grammar: free text until this text, then the grammar (what follows it)")
    p.add_argument("--no-strict", action="store_true",
                   help="with --json-schema: allow properties the schema does not list")
    p.add_argument("--no-fast-forward", action="store_true",
                   help="under a grammar, let the model choose the tokens the grammar forces")
    p.add_argument("prompt")
    p.set_defaults(func=run)


def output_constraint(args: argparse.Namespace) -> OutputConstraint | None:
    """The reply's constraint from the options; ValueError with a sentence for an unreadable file."""

    def read(path: Path, what: str) -> str:
        try:
            return path.read_text("utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            why = exc.strerror if isinstance(exc, OSError) and exc.strerror else "not UTF-8 text"
            raise ValueError(f"cannot read the {what} file {path} ({why})") from None

    if args.trigger and args.grammar is None:
        raise ValueError("--trigger needs --grammar: the grammar applies from the trigger on")
    if args.json_schema is not None:
        text = args.json_schema
        if not text.lstrip().startswith(("{", "true", "false")):  # a file name, not the schema itself
            text = read(Path(text), "schema")
        return OutputConstraint(ConstraintKind.JSON_SCHEMA, text, strict=not args.no_strict)
    if args.json_object:
        return OutputConstraint(ConstraintKind.JSON_OBJECT)
    if args.grammar is not None:
        return OutputConstraint(ConstraintKind.LARK, read(args.grammar, "grammar"), trigger=args.trigger)
    if args.gbnf is not None:
        return OutputConstraint(ConstraintKind.GBNF, read(args.gbnf, "grammar"))
    if args.regex is not None:
        return OutputConstraint(ConstraintKind.REGEX, args.regex)
    return None


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
        spec = replace(speculation_for_mode(mode, args.draft_tokens, args.p_min),
                       fast_forward=not args.no_fast_forward)
        constraint = output_constraint(args)
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
        constraint=constraint,
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
