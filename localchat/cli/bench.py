"""``localchat bench``: speculation measured on real prompts, each mode side by side in one run.

``--through-api`` and ``--link-latency`` measure the same prompts in a second place as well, in the
same run (cli/bench_routes.py): through the local API with the OpenAI client, or with the target
split over workers behind an added link latency.

Every engine runs in a child process (cli/bench_process.py): the bench's own and a split target's in
the benchmark process, the API's in the engine process behind the server; this one only prints."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from localchat.cli.common import add_engine_options, engine_config, fail, model_name, whole
from localchat.engine.speculation_modes import MODE_NAMES


def register(sub: Any) -> None:
    p = sub.add_parser("bench", help="measure speculation on built-in or your own prompts")
    add_engine_options(p)
    p.set_defaults(max_tokens=128)
    # bench takes a list here: --draft-tokens 2,4,8 runs each fixed-length mode at each length.
    for action in p._actions:
        if action.dest == "draft_tokens":
            action.type = str
            action.default = "4"
            action.help = ("draft length, or a comma-separated sweep (2,4,8): each fixed-length mode runs "
                           "at each length; adaptive starts from the first")
    p.add_argument("--prompts", default="builtin", metavar="SET|FILE",
                   help='the prompts: "builtin" (default), "heldout" (written to check adaptive '
                        'speculation, never used to tune it), or a JSON Lines file: '
                        '{"id":..., "category":..., "prompt":...}, optionally with "schema" (a JSON '
                        'Schema the reply follows) or "tools" and "tool_choice" (the reply follows '
                        'the tool grammar)')
    p.add_argument("--category", action="append", help="only prompts of this category (repeatable)")
    p.add_argument("--limit", type=whole(1), default=None, help="at most this many prompts per category")
    p.add_argument("--modes", default="off,draft,ngram",
                   help=f"comma-separated: {', '.join(MODE_NAMES)}; NAME:N fixes the draft "
                        "length (draft:8), e.g. off,draft:2,draft:4,draft:8,adaptive; NAME+ff / NAME-ff: "
                        "grammar-forced tokens fast-forwarded or not (prompts with a schema, e.g. "
                        "--category json --modes off,off-ff,adaptive,adaptive-ff)")
    p.add_argument("--repeat", type=int, default=1,
                   help="run every prompt in every mode this many times (averages out a busy machine)")
    p.add_argument("--oracle", action="store_true",
                   help="measure off, auto:1..8 and adaptive, and print how close adaptive came to the best "
                        "fixed choice per prompt in hindsight (adaptive / oracle); replaces --modes")
    p.add_argument("--json", type=Path, dest="json_path", help="write records and summary as JSON here")
    p.add_argument("--show-text", action="store_true", help="print each reply")
    p.add_argument("--fresh", action="store_true",
                   help="as on a first run: ignore the pair's saved speculation profile and do not save one")
    p.add_argument("--through-api", action="store_true",
                   help="also run every mode through the local API (127.0.0.1, the OpenAI client, streaming) "
                        "and set the tokens/s the client sees beside the engine's (MODE@api); needs openai")
    p.add_argument("--link-latency", default="", metavar="MS[,MS...]",
                   help="with --rpc: run the target here alone, and split over the workers through a relay "
                        "that adds MS ms each way (MODE@rpc+MSms), e.g. 0,1,5")
    p.set_defaults(func=run)


def _whole_number(text: str, what: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"{what} must be a whole number, not {text!r}") from None


def parse_modes(spec: str, args: argparse.Namespace) -> list[Any]:
    """``--modes`` (NAME or NAME:N, comma-separated) at each ``--draft-tokens`` length; ValueError with a
    sentence for an unknown name or a length that is not a whole number in bounds."""
    from localchat.bench.modes import bench_mode

    lengths = [_whole_number(x.strip(), "--draft-tokens") for x in str(args.draft_tokens).split(",")
               if x.strip()]
    if not lengths:
        raise ValueError("--draft-tokens needs at least one length")
    modes = []
    for item in [m.strip() for m in spec.split(",") if m.strip()]:
        name, _, n = item.partition(":")
        base = name.removesuffix("+ff").removesuffix("-ff")
        fixed = [_whole_number(n, f"the draft length in {item!r}")] if n else []
        sweep = fixed or ([lengths[0]] if base in ("off", "adaptive") else lengths)
        for length in sweep:
            label = item if n or len(sweep) == 1 else f"{name}:{length}"
            modes.append(bench_mode(name, length, args.p_min, label))
    if not modes:
        raise ValueError("no modes given")
    return modes


def run(args: argparse.Namespace) -> int:
    from localchat.bench.modelled import modelled_records
    from localchat.bench.oracle import oracle_summary
    from localchat.bench.prompts import BenchError, prompts_from, select
    from localchat.bench.report import report_json
    from localchat.cli import bench_routes
    from localchat.engine.errors import EngineError
    from localchat.host.supervisor import EngineUnavailable

    if args.oracle:
        if args.through_api or args.link_latency:
            return fail("--oracle compares fixed lengths on one engine: run it without --through-api "
                        "and --link-latency")
        args.modes = ",".join(["off", *(f"auto:{n}" for n in range(1, 9)), "adaptive"])
    if args.through_api and args.link_latency:
        return fail("choose one of --through-api and --link-latency")
    if args.through_api and args.rpc:
        # The API's engine process would need the workers too, and a worker serves one engine at a time.
        return fail("--through-api loads the models a second time, for the API: run it without --rpc")
    if args.link_latency and not args.rpc:
        return fail("--link-latency needs --rpc HOST:PORT: it delays the link to the workers")
    try:
        modes = parse_modes(args.modes, args)
        prompts = prompts_from(args.prompts)
        delays = bench_routes.parse_delays(args.link_latency) if args.link_latency else []
    except (ValueError, BenchError) as exc:
        return fail(str(exc))
    prompts = select(prompts, args.category, args.limit or 0)
    if not prompts:
        return fail("no prompts selected")
    if args.repeat < 1:
        return fail("--repeat must be 1 or more")
    if args.json_path and not args.json_path.parent.is_dir():
        # Checked now, not after a run of many minutes.
        return fail(f"the folder {args.json_path.parent} for --json does not exist; create it first")

    width = [10]  # of the mode column: the longest label (MODE@ROUTE), once the routes are known

    def show(rec: Any, done: int, total: int) -> None:
        differs = "differs" + (f" from token {rec.first_mismatch}" if rec.first_mismatch is not None else "")
        match = "" if rec.matches_off is None else ("same text" if rec.matches_off else differs)
        acc = (f"  acc.len {rec.acceptance_length:4.2f}  acc.rate {rec.acceptance_rate:4.2f}"
               if rec.stats.drafted else "")
        if rec.stats.grammar_seconds:
            acc += f"  forced {rec.stats.forced_tokens}  grammar {rec.stats.grammar_share * 100:.1f}%"
        mode = f"{rec.mode:{width[0]}s}"
        print(f"[{done:3d}/{total}] {rec.category:9s} {rec.id:22s} {mode} {rec.tokens:4d} tok "
              f"{rec.tokens_per_s:7.2f} tok/s{acc}  {match}", flush=True)
        if args.show_text:
            print("    " + rec.text.replace("\n", "\n    "))

    try:
        config = replace(engine_config(args), use_profile=not args.fresh)
    except ValueError as exc:
        return fail(str(exc))
    failure: str | None = None  # the run ended early: why, in one sentence (what was done is kept)
    try:
        done = _bench_in_child(args, config, prompts, modes, delays, show, width)
        if isinstance(done, str):
            return fail(done)
        report, meta, failure, routes = done
    except (EngineError, EngineUnavailable) as exc:
        return fail(str(exc))
    except KeyboardInterrupt:
        fail("stopped (Ctrl+C); the benchmark's processes were ended and nothing was written.")
        return 130

    print()
    w = width[0]
    grammar = any(r.stats.grammar_seconds > 0 for r in report.records)
    extra = f" {'forced':>7s} {'grammar':>8s}" if grammar else ""
    print(f"{'category':10s} {'mode':{w}s} {'tok/s':>8s} {'vs off':>7s} {'acc.len':>8s} {'acc.rate':>8s} "
          f"{'same as off':>11s}{extra}")
    for row in report.summary():
        sp = f"{row.speedup_vs_off:6.2f}x" if row.speedup_vs_off is not None else "      -"
        shares = f" {row.forced_share * 100:6.1f}% {row.grammar_share * 100:7.2f}%" if grammar else ""
        print(f"{row.category:10s} {row.mode:{w}s} {row.tokens_per_s:8.2f} {sp} {row.acceptance_length:8.2f} "
              f"{row.acceptance_rate:8.2f} {row.matches_off:>11s}{shares}")
    _print_oracle(oracle_summary(report.records), "measured")
    if report.costs is not None:
        curve = report.costs
        t1 = curve.t(1)
        print(f"\ncosts measured in the run: plain pass {t1 * 1000:.1f} ms, drafter pass "
              f"{curve.pass_s / t1:.2f}x, verification t(k)/t(1) "
              + " ".join(f"{b}:{s / t1:.2f}" for b, s in sorted(curve.verify_s.items()) if b > 1))
        _print_oracle(oracle_summary(modelled_records(report.records, curve)),
                      "modelled on those costs (each run's steps; bench/modelled.py)")
    bench_routes.print_routes(report, modes, routes)
    if report.peak_rss_mb is not None:
        print(f"peak RSS {report.peak_rss_mb:.0f} MiB")
    for prompt_id, why in report.skipped:
        print(f"skipped prompt {prompt_id}: {why}", file=sys.stderr)
    if args.json_path:
        data = report_json(report, meta, complete=failure is None)
        try:
            args.json_path.write_text(json.dumps(data, indent=2), encoding="utf-8")
        except OSError as exc:
            return fail(f"could not write {args.json_path} ({exc.strerror or exc})")
        print(f"wrote {args.json_path}", file=sys.stderr)
    if failure is not None:
        return fail(failure)
    return 0


def _print_oracle(oracle: list[Any], what: str) -> None:
    if not oracle:
        return
    print(f"\n{'category':10s} {'adaptive/oracle':>15s} {'best fixed':>10s} {'beats every fixed':>18s}"
          f"  ({what})")
    for o in oracle:
        beats = "yes" if o.beats_every_fixed else "no"
        print(f"{o.category:10s} {o.ratio:14.3f}x {o.best_fixed_mode:>10s} {beats:>18s}")


def _loaded_line(config: Any, info: Any, draft_problem: str) -> str:
    where = f" ({info.placement})" if info.placement != "local" else ""
    return (f"target {model_name(config.target_path)} on {info.backend}{where}, {info.n_threads} threads; "
            f"drafter: {model_name(info.draft.path) if info.draft else 'none'}"
            f"{' (' + draft_problem + ')' if draft_problem else ''}")


def _meta(args: argparse.Namespace, config: Any, modes: list[Any], prompts: list[Any],
          info: Any) -> dict[str, Any]:
    from localchat.bench.report import run_meta

    return run_meta(target=config.target_path, draft=config.draft_path, max_tokens=args.max_tokens,
                    draft_tokens=int(str(args.draft_tokens).split(",")[0]), modes=modes,
                    prompts=prompts, backend=info.backend, threads=info.n_threads)


def _bench_in_child(
    args: argparse.Namespace, config: Any, prompts: list[Any], modes: list[Any], delays: list[float],
    show: Callable[..., None], width: list[int],
) -> tuple[Any, dict[str, Any], str | None, Any] | str:
    """The benchmark in a process of its own (cli/bench_process.py), with its routes: (report, meta,
    failure, route facts), or the sentence why it did not start. With --through-api the API's server
    runs here over an engine process of its own, and the benchmark process is its client."""
    from localchat.bench.route_facts import route_names
    from localchat.cli import bench_routes
    from localchat.cli.bench_process import bench_in_child
    from localchat.cli.common import engine_failure, engine_log
    from localchat.host.failure_words import Audience
    from localchat.host.supervisor import EngineUnavailable

    every = bench_routes.with_routes(modes, route_names(args.through_api, delays))
    width[0] = max(10, *(len(m.name) for m in every))
    with contextlib.ExitStack() as stack:
        api_url = ""
        if args.through_api:
            bench_routes.require_openai()
            log_path = engine_log()
            try:
                api_url = bench_routes.start_api(stack, config, args.max_tokens, log_path)
            except EngineUnavailable as exc:
                return engine_failure(exc.failure, Audience.BENCH, log_path)
        done = bench_in_child(config, prompts, every, args.max_tokens, args.repeat,
                              lambda loaded: print(_loaded_line(config, loaded.info, loaded.draft_problem),
                                                   flush=True), show, api_url=api_url, link_delays=delays)
    if done.info is None:
        return done.failure or "the benchmark ended before its models were loaded"
    meta = _meta(args, config, every, prompts, done.info)
    if done.routes is not None:
        meta["routes"] = bench_routes.route_facts(modes, done.routes)
    return done.report, meta, done.failure, done.routes
