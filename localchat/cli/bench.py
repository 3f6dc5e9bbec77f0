"""``localchat bench``: speculation measured on real prompts, each mode side by side in one run."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from localchat.cli.common import add_engine_options, engine_config, fail, speculation_for_mode


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
    p.add_argument("--prompts", type=Path, help='JSON Lines file: {"id":..., "category":..., "prompt":...}')
    p.add_argument("--category", action="append", help="only prompts of this category (repeatable)")
    p.add_argument("--limit", type=int, default=None, help="at most this many prompts per category")
    p.add_argument("--modes", default="off,draft,ngram",
                   help="comma-separated: off, draft, ngram, auto, adaptive; NAME:N fixes the draft "
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
    p.set_defaults(func=run)


def parse_modes(spec: str, args: argparse.Namespace) -> list[Any]:
    from localchat.bench.modes import BenchMode

    lengths = [int(x) for x in str(args.draft_tokens).split(",") if x.strip()]
    if not lengths:
        raise ValueError("--draft-tokens needs at least one length")
    modes = []
    for item in [m.strip() for m in spec.split(",") if m.strip()]:
        name, _, n = item.partition(":")
        base = name.removesuffix("+ff").removesuffix("-ff")
        sweep = [int(n)] if n else ([lengths[0]] if base in ("off", "adaptive") else lengths)
        for length in sweep:
            ns = argparse.Namespace(**{**vars(args), "draft_tokens": length})
            label = item if n or len(sweep) == 1 else f"{name}:{length}"
            modes.append(BenchMode(label, speculation_for_mode(name, ns)))
    if not modes:
        raise ValueError("no modes given")
    return modes


def run(args: argparse.Namespace) -> int:
    from localchat.bench.oracle import oracle_summary
    from localchat.bench.prompts import BenchError, builtin_prompts, load_prompts, select
    from localchat.bench.report import report_json, run_meta
    from localchat.bench.runner import run_bench
    from localchat.engine.engine import Engine
    from localchat.engine.errors import EngineError

    if args.oracle:
        args.modes = ",".join(["off", *(f"auto:{n}" for n in range(1, 9)), "adaptive"])
    try:
        modes = parse_modes(args.modes, args)
        prompts = load_prompts(args.prompts) if args.prompts else builtin_prompts()
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

    def show(rec: Any, done: int, total: int) -> None:
        match = "" if rec.matches_off is None else ("same text" if rec.matches_off
                                                   else f"differs from token {rec.first_mismatch}")
        acc = (f"  acc.len {rec.acceptance_length:4.2f}  acc.rate {rec.acceptance_rate:4.2f}"
               if rec.stats.drafted else "")
        if rec.stats.grammar_seconds:
            acc += f"  forced {rec.stats.forced_tokens}  grammar {rec.stats.grammar_share * 100:.1f}%"
        print(f"[{done:3d}/{total}] {rec.category:9s} {rec.id:22s} {rec.mode:10s} {rec.tokens:4d} tok "
              f"{rec.tokens_per_s:7.2f} tok/s{acc}  {match}", flush=True)
        if args.show_text:
            print("    " + rec.text.replace("\n", "\n    "))

    try:
        config = replace(engine_config(args), use_profile=not args.fresh)
    except ValueError as exc:
        return fail(str(exc))
    try:
        with Engine(config) as engine:
            info = engine.info
            where = f" ({info.placement})" if info.placement != "local" else ""
            print(f"target {Path(args.model).name} on {info.backend}{where}, {info.n_threads} threads; "
                  f"drafter: {info.draft.name if info.draft else 'none'}"
                  f"{' (' + engine.draft_problem + ')' if engine.draft_problem else ''}", flush=True)
            report = run_bench(engine, prompts, modes, args.max_tokens, on_record=show, repeat=args.repeat)
            meta = run_meta(target=config.target_path, draft=config.draft_path, max_tokens=args.max_tokens,
                            draft_tokens=int(str(args.draft_tokens).split(",")[0]), modes=modes,
                            prompts=prompts, backend=info.backend, threads=info.n_threads)
    except EngineError as exc:
        return fail(str(exc))
    except KeyboardInterrupt:
        return 130

    print()
    grammar = any(r.stats.grammar_seconds > 0 for r in report.records)
    extra = f" {'forced':>7s} {'grammar':>8s}" if grammar else ""
    print(f"{'category':10s} {'mode':10s} {'tok/s':>8s} {'vs off':>7s} {'acc.len':>8s} {'acc.rate':>8s} "
          f"{'same as off':>11s}{extra}")
    for row in report.summary():
        sp = f"{row.speedup_vs_off:6.2f}x" if row.speedup_vs_off is not None else "      -"
        shares = f" {row.forced_share * 100:6.1f}% {row.grammar_share * 100:7.2f}%" if grammar else ""
        print(f"{row.category:10s} {row.mode:10s} {row.tokens_per_s:8.2f} {sp} {row.acceptance_length:8.2f} "
              f"{row.acceptance_rate:8.2f} {row.matches_off:>11s}{shares}")
    oracle = oracle_summary(report.records)
    if oracle:
        print()
        print(f"{'category':10s} {'adaptive/oracle':>15s} {'best fixed':>10s} {'beats every fixed':>18s}")
        for o in oracle:
            beats = "yes" if o.beats_every_fixed else "no"
            print(f"{o.category:10s} {o.ratio:14.3f}x {o.best_fixed_mode:>10s} {beats:>18s}")
    if report.peak_rss_mb is not None:
        print(f"peak RSS {report.peak_rss_mb:.0f} MiB")
    for prompt_id, why in report.skipped:
        print(f"skipped prompt {prompt_id}: {why}", file=sys.stderr)
    if args.json_path:
        try:
            args.json_path.write_text(json.dumps(report_json(report, meta), indent=2), encoding="utf-8")
        except OSError as exc:
            return fail(f"could not write {args.json_path} ({exc.strerror or exc})")
        print(f"wrote {args.json_path}", file=sys.stderr)
    return 0
