"""Measure speculation on real prompts: every prompt in every mode, interleaved, in one run.

Speed-ups are ratios measured side by side (the same prompt in each mode, one
after the other, the mode order rotated from prompt to prompt), so a busy
machine slows all modes alike. Every run starts from empty caches and is
greedy, so each mode's text can be compared with plain decoding (with the same
fast-forward setting: forced tokens are tokenised by the grammar, so with and
without it the tokens, and then the text, may differ). A prompt with a schema
(the ``json`` category) is answered under it; a prompt with tools (the ``tools`` category) offers
them, and the reply follows the tool grammar (engine/tooluse/grammar.py).

The engine is reached through the ``BenchEngine`` Protocol: this module runs in
the benchmark process, which makes the engine; nothing here imports it.
A mode with a route (bench/modes.py) runs on ``routes[mode.route]`` instead, another
BenchEngine (the local API, the target split over workers behind a slow link),
interleaved with the others prompt by prompt, and compared with plain decoding on
its own route. Where a route gives no token ids (the API), "same text" compares the
texts.

An engine that can measure its costs (``MeasuresCosts``: the bench's own, with a draft model) does so
after the warm-up and again after the last run; the report's ``costs`` then model every run's time
on one curve (bench/modelled.py), which tells the policies' decisions apart from the machine's noise.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from localchat.bench.memory import peak_rss_mb
from localchat.bench.modelled import MEASURE_BUDGET_S, MEASURED_SIZES, CostCurve, merged
from localchat.bench.modes import BenchMode, is_off, off_labels
from localchat.bench.prompts import BenchPrompt
from localchat.bench.report import BenchRecord, BenchReport, first_mismatch
from localchat.engine.costs import repeated
from localchat.engine.errors import EngineError
from localchat.engine.types import (
    ChatMessage,
    ConstraintKind,
    FinishReason,
    GenerationRequest,
    GenerationResult,
    OutputConstraint,
    SamplingParams,
    SpeculationConfig,
    TokenEvent,
)

if TYPE_CHECKING:
    from localchat.engine.profile import CalibrationReport


class BenchEngine(Protocol):
    """What the runner needs from localchat.engine.engine.Engine."""

    def reset(self) -> None: ...

    def generate(
        self,
        request: GenerationRequest,
        on_event: Callable[[TokenEvent], None] | None = None,
        should_cancel: Callable[[], bool] | None = None,
    ) -> GenerationResult: ...


@runtime_checkable
class MeasuresCosts(Protocol):
    """An engine that can time its verification curve and drafter (``Engine.measure_costs``)."""

    def measure_costs(self, sizes: tuple[int, ...], budget_s: float) -> CalibrationReport | None: ...


# Measured on a Q8_0 target, 2 threads: the run's two measurements of 20 sizes agreed within 14%.
RUN_REPEAT_TOLERANCE = 0.2


def measure_costs(engine: object) -> CalibrationReport | None:
    """Measure ``engine``'s costs now; None where it cannot (an engine without the method, or an error)."""
    if not isinstance(engine, MeasuresCosts):
        return None
    try:
        return engine.measure_costs(MEASURED_SIZES, MEASURE_BUDGET_S)
    except EngineError:
        return None


def cost_curve(reports: Sequence[CalibrationReport | None]) -> CostCurve | None:
    """The curve of the undisturbed measurements among ``reports`` (their fastest passes). Where none
    is, measurements declined only for their shape count when they repeat each other
    (``costs.repeated``: the run's start and end measured the same curve, the machine's own, as
    on a Q8_0 target, whose one round of every draft batch fills the budget). The two are minutes
    apart, so within ``RUN_REPEAT_TOLERANCE``, not the calibration's tenth between back-to-back rounds."""
    whole = [r for r in reports if r is not None and not r.disturbed]
    if not whole:
        shaped = [r for r in reports if r is not None and r.draft_token_s is not None
                  and set(r.verify_s) == set(MEASURED_SIZES)]  # every size measured: declined for its shape
        if repeated([r.verify_s for r in shaped], RUN_REPEAT_TOLERANCE):
            whole = shaped
    return merged([(r.verify_s, r.draft_token_s) for r in whole])


def constraint_of(prompt: BenchPrompt) -> OutputConstraint | None:
    return OutputConstraint(ConstraintKind.JSON_SCHEMA, prompt.schema) if prompt.schema else None


def request_of(prompt: BenchPrompt, max_tokens: int, speculation: SpeculationConfig,
               session: str = "") -> GenerationRequest:
    """The greedy request a benchmark sends for ``prompt``: its schema or its tools with it."""
    return GenerationRequest(messages=(ChatMessage("user", prompt.prompt),), max_tokens=max_tokens,
                             sampling=SamplingParams(temperature=0.0), speculation=speculation,
                             session=session, constraint=constraint_of(prompt), tools=prompt.tools,
                             tool_choice=prompt.tool_choice)


def run_bench(
    engine: BenchEngine,
    prompts: Sequence[BenchPrompt],
    modes: Sequence[BenchMode],
    max_tokens: int = 128,
    on_record: Callable[[BenchRecord, int, int], None] | None = None,
    should_cancel: Callable[[], bool] | None = None,
    warmup: bool = True,
    repeat: int = 1,
    routes: Mapping[str, BenchEngine] | None = None,
) -> BenchReport:
    """Run each prompt in each mode, ``repeat`` times over; ``on_record(record, done, total)``
    after each run. Repeating averages out a busy machine: a category's figures pool every run.
    A mode with a route runs on ``routes[mode.route]``. The report's peak memory is this
    process's, which holds the models (a route's own process is not counted)."""
    missing = sorted({m.route for m in modes if m.route and m.route not in (routes or {})})
    if missing:
        raise ValueError(f"no engine for the route(s) {', '.join(missing)}")
    route_of = {m.name: (routes or {})[m.route] if m.route else engine for m in modes}
    # Measured only with modes to compare on the bench's own engine and a warm-up (a short test run
    # needs none of it).
    measure = warmup and any(not m.route for m in modes) and len(modes) > 1
    before = measure_costs(engine) if measure else None
    report = _run(route_of, prompts, modes, max_tokens, on_record, should_cancel, warmup, repeat)
    if measure and report.records:
        report.costs = cost_curve([before, measure_costs(engine)])
    report.peak_rss_mb = peak_rss_mb()
    return report


def _same_as(off: BenchRecord, rec: BenchRecord) -> BenchRecord:
    """``rec`` with whether its reply is plain decoding's: by token ids where both have them, else by
    text (``first_mismatch`` then unknown)."""
    if off.token_ids and rec.token_ids:
        mm = first_mismatch(off.token_ids, rec.token_ids)
        return replace(rec, matches_off=mm is None, first_mismatch=mm)
    return replace(rec, matches_off=off.text == rec.text, first_mismatch=None)


def _run(
    engine_of: Mapping[str, BenchEngine],
    prompts: Sequence[BenchPrompt],
    modes: Sequence[BenchMode],
    max_tokens: int,
    on_record: Callable[[BenchRecord, int, int], None] | None,
    should_cancel: Callable[[], bool] | None,
    warmup: bool,
    repeat: int,
) -> BenchReport:
    cancel = should_cancel or (lambda: False)
    report = BenchReport()
    if warmup and prompts:
        # Page the weights in and settle the caches before anything is timed.
        for mode in modes:
            engine = engine_of[mode.name]
            engine.reset()
            try:
                engine.generate(request_of(prompts[0], 8, mode.speculation))
            except EngineError:
                break  # that prompt cannot run; the timed loop below says so and goes on
    total = len(prompts) * len(modes) * max(1, repeat)
    done = 0
    order_of = [m.name for m in modes]
    rounds = [(r, i, bp) for r in range(max(1, repeat)) for i, bp in enumerate(prompts)]
    for r, i, bp in rounds:
        shift = (i + r) % len(modes)  # each repetition starts a prompt from another mode
        order = list(modes[shift:]) + list(modes[:shift])
        pending: list[BenchRecord] = []
        failed: str | None = None
        for mode in order:
            if cancel():
                return report
            engine = engine_of[mode.name]
            engine.reset()
            # Each prompt is a new conversation: adaptive state does not carry from one to the next.
            req = request_of(bp, max_tokens, mode.speculation, f"bench:{bp.id}:{mode.name}:{r}")
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
            pending.append(rec)
        if failed is not None:
            if (bp.id, failed) not in report.skipped:
                report.skipped.append((bp.id, failed))
            total -= len(modes)
            continue
        offs = {rec.mode: rec for rec in pending if is_off(rec.mode)}
        spec_of = {m.name: m.speculation for m in modes}
        for rec in sorted(pending, key=lambda rec: order_of.index(rec.mode)):
            # Plain decoding on the same route, at the same fast-forward setting (forced tokens are the
            # grammar's tokenisation, so the tokens may differ with it and without).
            off = next((offs[o] for o in off_labels(rec.mode) if o in offs
                        and spec_of[o].fast_forward == spec_of[rec.mode].fast_forward), None)
            if off is not None and off is not rec:
                rec = _same_as(off, rec)
            report.records.append(rec)
            done += 1
            if on_record is not None:
                on_record(rec, done, total)
    return report
