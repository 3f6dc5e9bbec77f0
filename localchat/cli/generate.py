"""``localchat generate``: one reply on the terminal, streamed, then one statistics line.

The engine runs in a child process (host/supervisor.py's EngineSupervisor, as in the app and
``serve``): a worker of ``--rpc`` that dies mid-reply makes llama.cpp abort the process it runs in,
which is then the child; this one says which worker was lost and keeps what was written."""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from localchat.cli.common import (
    add_engine_options,
    drafter_name,
    engine_config,
    engine_failure,
    engine_log,
    fail,
    number,
    whole,
)
from localchat.engine.speculation_modes import speculation_for_mode
from localchat.engine.types import ConstraintKind, EngineConfig, GenerationRequest, OutputConstraint
from localchat.host.events import Failed, Tokens
from localchat.host.failure_words import Audience


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
    from localchat.engine.types import ChatMessage, SamplingParams

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
    return run_in_child(config, request)


def run_in_child(config: EngineConfig, request: GenerationRequest) -> int:
    """Generate in an engine process of its own, as the app and ``serve`` do: llama.cpp aborts the
    process it runs in when a worker vanishes mid-reply, and that must not be this one. The reply is
    printed as it comes, so what was written stays on the terminal whatever ends it."""
    from localchat.host.supervisor import EngineSupervisor, EngineUnavailable

    log_path = engine_log()
    supervisor = EngineSupervisor(config, max_queue=1, restart_eagerly=False, log_path=log_path)
    supervisor.start()
    written = False
    try:
        try:
            info = supervisor.wait_ready()
        except EngineUnavailable as exc:
            return fail(engine_failure(exc.failure, Audience.CLI, log_path))
        job = supervisor.submit(request, source="cli")
        assert job.events is not None
        announced = False
        while True:
            event = job.events.get()
            if isinstance(event, Tokens):
                if not announced:
                    announced = True
                    state = event.event.speculation
                    if not state.active or state.reason:
                        why = f" - {state.reason}" if state.reason else ""
                        print(f"[speculation: {drafter_name(state.drafter, info)}{why}]", file=sys.stderr)
                if event.event.text:
                    written = True
                    print(event.event.text, end="", flush=True)
            elif isinstance(event, Failed):
                if written:
                    print()  # what was written stays, on a line of its own
                return fail(engine_failure(event.failure, Audience.CLI, log_path))
            else:
                result = event.result
                break
    except KeyboardInterrupt:
        if written:
            print()
        return 130
    finally:
        supervisor.close()
    print()
    if result.notice:
        print(result.notice, file=sys.stderr)
    placement = info.placement
    where = f", target: {placement}" if placement != "local" else ""
    finish = result.finish_reason.value
    drafter = drafter_name(result.speculation.drafter, info)
    print(f"[{drafter}] {result.stats.summary()}, finish: {finish}{where}", file=sys.stderr)
    return 0
