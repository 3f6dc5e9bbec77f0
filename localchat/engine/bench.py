"""Measure speculation on real prompts: every prompt in every mode, interleaved, in one run.

Speed-ups are ratios measured side by side (the same prompt in each mode, one
after the other, the mode order rotated from prompt to prompt), so a busy
machine slows all modes alike. Every run starts from empty caches and is
greedy, so each mode's text can be compared with plain decoding.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

import psutil

from localchat.engine.engine import Engine
from localchat.engine.errors import EngineError
from localchat.engine.stats import GenerationStats, combine
from localchat.engine.types import (
    ChatMessage,
    DrafterKind,
    FinishReason,
    GenerationRequest,
    SamplingParams,
    SpeculationConfig,
)


class BenchError(ValueError):
    """A prompts file that cannot be read; the message names the file and line."""


@dataclass(frozen=True)
class BenchPrompt:
    id: str
    category: str
    prompt: str


@dataclass(frozen=True)
class BenchMode:
    name: str  # "off", "draft", "ngram", "auto", "adaptive", "draft:8", ...
    speculation: SpeculationConfig


MODE_NAMES = ("off", "draft", "ngram", "auto", "adaptive")


def bench_mode(
    name: str, draft_tokens: int = 4, p_min: float | None = None, label: str | None = None
) -> BenchMode:
    """The one meaning of each mode name (CLI, app and benchmark worker alike).

    off: plain decoding; draft: the draft model, fixed length; ngram: prompt
    lookup, fixed length; auto: the draft model plus n-gram lookup where the
    context repeats, fixed length; adaptive: auto with the adaptive policy
    (draft length from measured acceptance and cost, auto-off when it loses).
    """
    p = SpeculationConfig().p_min if p_min is None else p_min
    label = label or name
    if name == "off":
        return BenchMode(label, SpeculationConfig(enabled=False, draft_tokens=draft_tokens))
    if name == "adaptive":
        return BenchMode(
            label,
            SpeculationConfig(drafter=DrafterKind.AUTO, draft_tokens=draft_tokens, adaptive=True, p_min=p),
        )
    kinds = {"draft": DrafterKind.MODEL, "ngram": DrafterKind.NGRAM, "auto": DrafterKind.AUTO}
    if name not in kinds:
        raise ValueError(f"unknown benchmark mode {name!r} (use {', '.join(MODE_NAMES)})")
    return BenchMode(
        label, SpeculationConfig(drafter=kinds[name], draft_tokens=draft_tokens, adaptive=False, p_min=p)
    )


@dataclass(frozen=True)
class BenchRecord:
    id: str
    category: str
    mode: str
    tokens: int
    seconds: float
    tokens_per_s: float
    acceptance_length: float
    acceptance_rate: float
    matches_off: bool | None
    first_mismatch: int | None  # index of the first token that differs from the off run
    stats: GenerationStats
    text: str
    token_ids: tuple[int, ...] = ()

    def as_json(self) -> dict[str, object]:
        return {
            "id": self.id,
            "category": self.category,
            "mode": self.mode,
            "tokens": self.tokens,
            "seconds": round(self.seconds, 4),
            "tokens_per_s": round(self.tokens_per_s, 3),
            "acceptance_length": round(self.acceptance_length, 3),
            "acceptance_rate": round(self.acceptance_rate, 3),
            "acceptance_rate_by_position": [round(x, 3) for x in self.stats.acceptance_rate_by_position],
            "matches_off": self.matches_off,
            "first_mismatch": self.first_mismatch,
        }


@dataclass(frozen=True)
class SummaryRow:
    category: str
    mode: str
    tokens_per_s: float
    speedup_vs_off: float | None
    acceptance_length: float
    acceptance_rate: float
    matches_off: str  # "5/5"

    def as_json(self) -> dict[str, object]:
        return {
            "category": self.category,
            "mode": self.mode,
            "tokens_per_s": round(self.tokens_per_s, 3),
            "speedup_vs_off": None if self.speedup_vs_off is None else round(self.speedup_vs_off, 3),
            "acceptance_length": round(self.acceptance_length, 3),
            "acceptance_rate": round(self.acceptance_rate, 3),
            "matches_off": self.matches_off,
        }


@dataclass
class BenchReport:
    records: list[BenchRecord] = field(default_factory=list)
    # (prompt id, why): prompts the engine could not run (longer than the context...); the rest go on.
    skipped: list[tuple[str, str]] = field(default_factory=list)

    def summary(self) -> list[SummaryRow]:
        rows: list[SummaryRow] = []
        cats = sorted({r.category for r in self.records})
        modes = list(dict.fromkeys(r.mode for r in self.records))
        for cat in [*cats, "all"]:
            off_tps: float | None = None
            for mode in modes:
                recs = [r for r in self.records if r.mode == mode and (cat == "all" or r.category == cat)]
                if not recs:
                    continue
                s = combine([r.stats for r in recs])
                if mode == "off":
                    off_tps = s.tokens_per_s
                compared = [r for r in recs if r.matches_off is not None]
                rows.append(
                    SummaryRow(
                        category=cat,
                        mode=mode,
                        tokens_per_s=s.tokens_per_s,
                        speedup_vs_off=None,
                        acceptance_length=s.acceptance_length,
                        acceptance_rate=s.acceptance_rate,
                        matches_off=f"{sum(1 for r in compared if r.matches_off)}/{len(compared)}"
                        if compared else "-",
                    )
                )
            # Speed-up against plain decoding of the same category, same run.
            for i, row in enumerate(rows):
                if row.category == cat and off_tps:
                    rows[i] = SummaryRow(row.category, row.mode, row.tokens_per_s,
                                         row.tokens_per_s / off_tps, row.acceptance_length,
                                         row.acceptance_rate, row.matches_off)
        return rows

    def as_json(self) -> dict[str, object]:
        return {
            "records": [r.as_json() for r in self.records],
            "summary": [s.as_json() for s in self.summary()],
            "skipped": [{"id": pid, "reason": why} for pid, why in self.skipped],
            "peak_rss_mb": round(peak_rss_mb(), 1),
        }


def peak_rss_mb() -> float:
    """Peak resident memory of this process, in MiB.

    psutil has the peak only on Windows (``peak_wset``); on Linux and macOS it comes from
    getrusage, imported here and not at the top: ``resource`` does not exist on Windows.
    """
    if sys.platform.startswith("linux") or sys.platform == "darwin":
        import resource

        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return peak / 1024.0 if sys.platform.startswith("linux") else peak / (1024.0 * 1024.0)
    info = psutil.Process().memory_info()
    return float(getattr(info, "peak_wset", info.rss)) / (1024.0 * 1024.0)


def builtin_prompts() -> list[BenchPrompt]:
    text = resources.files("localchat.data").joinpath("bench_prompts.jsonl").read_text("utf-8")
    return parse_prompts(text, "built-in prompts")


def load_prompts(path: Path) -> list[BenchPrompt]:
    try:
        text = path.read_text("utf-8")
    except OSError as exc:
        raise BenchError(f"Cannot read the prompts file {path}: {exc.strerror or exc}.") from exc
    except UnicodeDecodeError as exc:
        raise BenchError(f"The prompts file {path} is not UTF-8 text.") from exc
    return parse_prompts(text, str(path))


def parse_prompts(text: str, source: str) -> list[BenchPrompt]:
    out: list[BenchPrompt] = []
    seen: set[str] = set()
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise BenchError(f"{source}, line {n}: not valid JSON ({exc.msg}).") from exc
        if not isinstance(obj, dict) or not isinstance(obj.get("prompt"), str) or not obj["prompt"].strip():
            raise BenchError(f'{source}, line {n}: expected an object with a non-empty "prompt" string.')
        pid = str(obj.get("id", f"prompt-{n}"))
        if pid in seen:
            raise BenchError(f'{source}, line {n}: the id "{pid}" is used twice.')
        seen.add(pid)
        out.append(BenchPrompt(pid, str(obj.get("category", "default")), obj["prompt"]))
    if not out:
        raise BenchError(f"{source} holds no prompts.")
    return out


def first_mismatch(a: Sequence[int], b: Sequence[int]) -> int | None:
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def run_bench(
    engine: Engine,
    prompts: Sequence[BenchPrompt],
    modes: Sequence[BenchMode],
    max_tokens: int = 128,
    on_record: Callable[[BenchRecord, int, int], None] | None = None,
    should_cancel: Callable[[], bool] | None = None,
    warmup: bool = True,
    repeat: int = 1,
) -> BenchReport:
    """Run each prompt in each mode, ``repeat`` times over; ``on_record(record, done, total)``
    after each run. Repeating averages out a busy machine: a category's figures pool every run."""
    cancel = should_cancel or (lambda: False)
    report = BenchReport()
    greedy = SamplingParams(temperature=0.0)
    if warmup and prompts:
        # Page the weights in and settle the caches before anything is timed.
        for mode in modes:
            engine.reset()
            try:
                first = GenerationRequest(messages=(ChatMessage("user", prompts[0].prompt),),
                                          max_tokens=8, sampling=greedy, speculation=mode.speculation)
                engine.generate(first)
            except EngineError:
                break  # that prompt cannot run; the timed loop below says so and goes on
    total = len(prompts) * len(modes) * max(1, repeat)
    done = 0
    rounds = [(r, i, bp) for r in range(max(1, repeat)) for i, bp in enumerate(prompts)]
    for r, i, bp in rounds:
        shift = (i + r) % len(modes)  # each repetition starts a prompt from another mode
        order = list(modes[shift:]) + list(modes[:shift])
        off_ids: tuple[int, ...] | None = None
        pending: list[BenchRecord] = []
        failed: str | None = None
        for mode in order:
            if cancel():
                return report
            engine.reset()
            # Each prompt is a new conversation: adaptive state does not carry from one to the next.
            req = GenerationRequest(messages=(ChatMessage("user", bp.prompt),), max_tokens=max_tokens,
                                    sampling=greedy, speculation=mode.speculation,
                                    session=f"bench:{bp.id}:{mode.name}:{r}")
            try:
                res = engine.generate(req, should_cancel=cancel)
            except EngineError as exc:  # one prompt the engine cannot run must not end the whole run
                failed = str(exc)
                break
            if res.finish_reason is FinishReason.CANCELLED:
                return report
            s = res.stats
            rec = BenchRecord(bp.id, bp.category, mode.name, s.generated_tokens, s.generation_seconds,
                              s.tokens_per_s, s.acceptance_length, s.acceptance_rate, None, None, s,
                              res.text, res.token_ids)
            if mode.name == "off":
                off_ids = res.token_ids
            pending.append(rec)
        if failed is not None:
            if (bp.id, failed) not in report.skipped:
                report.skipped.append((bp.id, failed))
            total -= len(modes)
            continue
        for rec in sorted(pending, key=lambda r: [m.name for m in modes].index(r.mode)):
            if off_ids is not None and rec.mode != "off":
                mm = first_mismatch(off_ids, rec.token_ids)
                rec = BenchRecord(**{**rec.__dict__, "matches_off": mm is None, "first_mismatch": mm})
            report.records.append(rec)
            done += 1
            if on_record is not None:
                on_record(rec, done, total)
    return report
