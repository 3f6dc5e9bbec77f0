"""The engine: load a target (and a drafter), turn requests into replies, stream events.

One ``Engine`` owns the llama.cpp models and contexts of one process. It is
not thread-safe: the host process calls it from one thread and cancels
through ``should_cancel``, which the loop checks between steps (within about
one target step, and between prompt batches).
"""

from __future__ import annotations

import codecs
import logging
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from localchat.catalog.gguf import read_metadata
from localchat.engine.adaptive import (
    TAKES_OVER,
    AdaptivePolicy,
    DrafterChoice,
    DraftPolicy,
    FixedPolicy,
    SwitchingPolicy,
    lookup_instead,
    plan_drafting,
)
from localchat.engine.backend import Context, Model, backend_name, init_backend, physical_cores
from localchat.engine.chat_format import (
    ChatFormatter,
    FitCancelled,
    FormattedPrompt,
    marker_tokens,
    model_tool_support,
)
from localchat.engine.compat import check_compatible
from localchat.engine.constrained import ConstrainedReply
from localchat.engine.costs import CostModel
from localchat.engine.decision_trace import DecisionTrace
from localchat.engine.devices import add_worker, has_local_accelerator, local_accelerators
from localchat.engine.draft_sources import (
    PROGRESS_CHUNK,
    CombinedDrafter,
    DraftSource,
    ModelDrafter,
    NgramDrafter,
    SwitchingDrafter,
)
from localchat.engine.errors import (
    ContextOverflowError,
    IncompatibleDraftError,
    InvalidRequestError,
    ModelLoadError,
)
from localchat.engine.grammar import GrammarCompiler
from localchat.engine.placement import Placement, split_target
from localchat.engine.profile import CalibrationReport, PairProfile, calibrate, profile_for
from localchat.engine.rpc_wire import WorkerAddressError, parse_endpoint
from localchat.engine.speculative import DecodeLoop
from localchat.engine.state_cache import DiskStates, StateCache, model_key
from localchat.engine.stats import GenerationStats, StatsRecorder
from localchat.engine.textruns import runs_from_flags
from localchat.engine.tooluse.grammar import ToolGrammar, tool_grammar
from localchat.engine.tooluse.parser import ParseDelta, thinking_spans, tokens_within
from localchat.engine.tooluse.plan import ReplyPlan, plan_reply
from localchat.engine.types import (
    AdaptiveVariant,
    ConstraintKind,
    DrafterKind,
    EngineConfig,
    EngineInfo,
    FinishReason,
    GenerationRequest,
    GenerationResult,
    MeasuredCosts,
    ModelInfo,
    OutputConstraint,
    SpeculationConfig,
    SpeculationState,
    TokenEvent,
)

log = logging.getLogger("localchat.engine")


def _model_info(m: Model) -> ModelInfo:
    support = model_tool_support(m)
    return ModelInfo(
        path=str(m.path),
        name=m.name,
        architecture=m.architecture,
        n_params=m.n_params,
        size_bytes=m.size_bytes,
        n_ctx_train=m.n_ctx_train,
        n_vocab=m.n_vocab,
        has_chat_template=m.chat_template is not None,
        fim=m.fim_tokens(),
        tool_format=support.format.name,
        tool_use=support.native,
        reasoning=support.thinking is not None,
    )


def _placements(config: EngineConfig) -> tuple[Placement | None, Placement | None]:
    """Target and drafter placements: None (llama.cpp's default) unless workers are named.

    With workers, the target spreads over this machine and the workers; the
    drafter stays on this machine (its accelerators, or the CPU): it runs a
    step per draft token, and a network round trip each would cost more than it saves.
    """
    if not config.rpc_servers:
        return None, None
    try:
        endpoints = [parse_endpoint(s) for s in config.rpc_servers]
    except WorkerAddressError as exc:
        raise ModelLoadError(str(exc)) from exc
    workers = [add_worker(e) for e in endpoints]
    local = local_accelerators()
    try:
        n_layer = read_metadata(config.target_path).block_count or 32
    except Exception as exc:  # the load itself reports a bad file in words; here only the split needs it
        log.warning("could not read the layer count of %s: %s", config.target_path, exc)
        n_layer = 32
    target = split_target(local, workers, n_layer, config.tensor_split)
    drafter = Placement(list(local), (), 999 if local else 0, "local")
    log.info("target placement: %s (%d layers offloaded)", target.description, target.gpu_layers)
    return target, drafter


def _never() -> bool:
    return False


class Engine:
    def __init__(self, config: EngineConfig) -> None:
        init_backend()
        self.config = config
        threads = config.n_threads or physical_cores()
        target_placement, self._draft_placement = _placements(config)
        self.placement = target_placement.description if target_placement else "local"
        self.target_model = Model(Path(config.target_path), config.gpu_layers, placement=target_placement,
                                  repack=not config.exact)
        try:
            n_ctx = config.n_ctx
            if self.target_model.n_ctx_train > 0:
                n_ctx = min(n_ctx, self.target_model.n_ctx_train)
            self.target = Context(self.target_model, n_ctx, threads, config.n_batch)
            self.formatter = ChatFormatter(self.target_model)
        except Exception:
            self.target_model.close()
            raise
        self.tool_support = self.formatter.support
        # The format's markers that are single tokens: shown in the reply's text (a control token's
        # text is hidden by default), and, where llguidance counts them special, named as tokens
        # in the tool grammar.
        markers = marker_tokens(self.target_model, self.tool_support)
        self._marker_ids = frozenset(markers.values())
        self._special_markers = {t: i for t, i in markers.items() if self.target_model.is_special(i)}
        self.ngram = NgramDrafter()
        # Lookup on its own where the draft model cannot pay on this machine: only longer matches
        # (a reply that copies), since every wrong lookup draft costs a longer verification.
        self.lookup = NgramDrafter(min_ngram=CombinedDrafter.MIN_MATCH)
        self.draft_model: Model | None = None
        self.model_drafter: ModelDrafter | None = None
        self.combined: CombinedDrafter | None = None  # kept across replies: it learns which source wins
        self.draft_problem = ""  # why the draft model is not in use, in words
        # (session, drafter, the adaptive variant's settings) -> policy
        self._policies: dict[tuple[str, str, AdaptiveVariant], AdaptivePolicy] = {}
        # Opt-in: every adaptive policy records its decisions here (tools/adaptive_trace.py).
        self.decision_trace: DecisionTrace | None = None
        self.cost = CostModel()  # timings of this hardware, shared by every conversation
        self.drafter_choice = DrafterChoice()  # the draft model or lookup alone (adaptive speculation)
        self.trace_hook: Callable[[list[int], list[int], int], None] | None = None  # see DecodeLoop.trace
        self._grammars: GrammarCompiler | None = None  # built on the first constrained reply
        if config.draft_path:
            self._load_drafter(Path(config.draft_path), n_ctx, threads)
        on_gpu = self.target_model.gpu_layers > 0 and has_local_accelerator()
        self.backend = backend_name() if on_gpu else "CPU"
        if config.exact:
            for ctx in self._contexts():
                ctx.read_grid = min(PROGRESS_CHUNK, ctx.n_batch)
        self.states = self._state_cache(config, threads)
        self.profile = self._start_profile(threads)
        self.info = EngineInfo(
            backend=self.backend,
            target=_model_info(self.target_model),
            draft=_model_info(self.draft_model) if self.draft_model else None,
            n_ctx=self.target.n_ctx,
            n_threads=threads,
            gpu_layers=self.target_model.gpu_layers,
            speculation=self.speculation_state(SpeculationConfig()),
            placement=self.placement,
            measured=self._measured_costs(),
        )
        log.info(
            "loaded %s (%s, %d threads, ctx %d); drafter: %s",
            self.target_model.path.name, self.backend, threads, self.target.n_ctx,
            self.info.speculation.drafter if self.info.speculation.active else self.info.speculation.reason,
        )

    def _load_drafter(self, path: Path, n_ctx: int, threads: int) -> None:
        if self.target_model.is_recurrent:
            self.draft_problem = (
                "Speculative decoding with a draft model is not supported for recurrent or hybrid "
                "models, whose cache cannot roll back rejected tokens."
            )
            return
        try:
            draft = Model(path, self.config.gpu_layers, placement=self._draft_placement,
                          repack=not self.config.exact)
        except ModelLoadError as exc:
            self.draft_problem = f"The draft model could not be loaded: {exc}"
            return
        try:
            check_compatible(self.target_model, draft)
            ctx = Context(draft, n_ctx, threads, self.config.n_batch)
        except (IncompatibleDraftError, ModelLoadError) as exc:
            draft.close()
            self.draft_problem = str(exc)
            return
        self.draft_model = draft
        self.model_drafter = ModelDrafter(ctx, draft.name)

    def _contexts(self) -> list[Context]:
        """The target's context and the draft model's, when one is loaded."""
        return [self.target] + ([self.model_drafter.ctx] if self.model_drafter is not None else [])

    def _state_cache(self, config: EngineConfig, threads: int) -> StateCache:
        disk = None
        if config.state_folder and config.state_disk_bytes > 0:
            disk = DiskStates(Path(config.state_folder), config.state_disk_bytes)
        cache = StateCache(config.state_memory_bytes, disk)
        self._state_keys: dict[int, str] = {}  # id(context) -> its model file's key
        if cache.enabled:
            for ctx in self._contexts():
                # Cells read as from scratch are that only for the same weights' layout, grid, threads
                # and devices: such states are kept apart (and other states are never used for them).
                recipe = (f"exact, grid {ctx.read_grid}, {threads} threads, {self.backend}, "
                          f"{ctx.model.gpu_layers} layers on {self.placement}") if ctx.read_grid else ""
                self._state_keys[id(ctx)] = model_key(ctx.model.path, recipe)
        return cache

    def _cached_contexts(self, drafter: DraftSource | None) -> list[Context]:
        """The contexts whose caches this reply reads: the target's, and the draft model's if it drafts."""
        contexts = [self.target]
        md = self.model_drafter
        if md is not None and drafter is not None and drafter is not self.ngram:
            contexts.append(md.ctx)
        return contexts

    def state_key(self, ctx: Context) -> str:
        """The key of ``ctx``'s model among saved states (the target's or the draft model's context)."""
        return self._state_keys[id(ctx)]

    def _restore_states(self, tokens: list[int], drafter: DraftSource | None) -> None:
        if not self.states.enabled:
            return
        for ctx in self._cached_contexts(drafter):
            whole_only = ctx is self.target and self.target_model.is_recurrent
            self.states.restore(ctx, self.state_key(ctx), tokens, whole_only)

    def _remember_states(self) -> None:
        if not self.states.enabled:
            return
        for ctx in self._contexts():
            if ctx.read_grid:
                # Read as from scratch: the reply's own cells (and the prompt's last, shorter chunk) are
                # never used again, so neither kept in the context nor saved.
                ctx.truncate(ctx.fresh)
            self.states.remember(ctx, self.state_key(ctx))

    def _start_profile(self, threads: int) -> PairProfile | None:
        """This pair's measured costs: from its saved profile, else a short calibration."""
        md, cfg = self.model_drafter, self.config
        if md is None or cfg.draft_path is None or not (cfg.use_profile or cfg.calibrate):
            return None
        try:
            profile = profile_for(self.target_model.path, Path(cfg.draft_path), self.backend, threads,
                                  self.target_model.gpu_layers, self.placement, md.name, cfg.use_profile,
                                  exact=cfg.exact)
            cpu = threads if self.backend == "CPU" and not cfg.rpc_servers else None
            pass_s = profile.start(self.cost, self.target, md.ctx, cfg.calibrate, cpu)
        except Exception:  # measuring is an optimisation: the engine works without it
            log.exception("the speculation profile could not be started; learning costs as it goes")
            self.reset()
            return None
        if pass_s is not None:
            md.decode_seconds = pass_s
        return profile

    def _measured_costs(self) -> MeasuredCosts | None:
        """The pair's calibrated costs on this machine, when the calibration or profile gave them."""
        md = self.model_drafter
        if md is None or not self.cost.calibrated:
            return None
        curve = tuple((size, avg) for size, (avg, _n) in sorted(self.cost.verify.points.items()))
        gpus = sum(d.total for d in local_accelerators()) if self.backend != "CPU" else 0
        return MeasuredCosts(curve, self.cost.draft_token_s.get(md.name), gpus or None)

    def measure_costs(self, sizes: tuple[int, ...], budget_s: float) -> CalibrationReport | None:
        """Time verification passes of ``sizes`` tokens and the draft model's passes now, as the
        calibration at load does, into a scratch cost model (the engine's own is untouched): what a
        benchmark models each run's time from (bench/modelled.py). Both caches are empty afterwards.
        None without a draft model or in a context too small to measure in."""
        md, cfg = self.model_drafter, self.config
        if md is None:
            return None
        cpu = self.info.n_threads if self.backend == "CPU" and not cfg.rpc_servers else None
        try:
            return calibrate(self.target, md.ctx, CostModel(), md.name, cpu, budget_s, sizes)
        finally:
            self.reset()

    # -- speculation choice -------------------------------------------------------
    def _choose_drafter(self, spec: SpeculationConfig) -> tuple[DraftSource | None, SpeculationState]:
        if not spec.enabled:
            return None, SpeculationState(False, "off", "Speculation is turned off.")
        kind = spec.drafter
        if kind is DrafterKind.NONE:
            return None, SpeculationState(False, "off", "No drafter is selected.")
        if kind is DrafterKind.NGRAM:
            return self.ngram, SpeculationState(True, "n-gram", draft_tokens=spec.draft_tokens)
        md = self.model_drafter
        if md is not None:
            md.p_min = spec.p_min
        if kind is DrafterKind.MODEL:
            if md is None:
                return None, SpeculationState(False, "off", self.draft_problem or "No draft model is loaded.")
            return md, SpeculationState(True, md.name, draft_tokens=spec.draft_tokens)
        # AUTO: the draft model with n-gram lookup where the context repeats itself.
        if md is None:
            reason = self.draft_problem or "No draft model is paired with this model."
            return self.ngram, SpeculationState(True, "n-gram", reason, spec.draft_tokens)
        if self.combined is None:
            self.combined = CombinedDrafter(md, self.ngram)
        if spec.adaptive:
            plan = plan_drafting(self.cost, self.drafter_choice, md.name, spec.adaptive_variant)
            if plan.lookup_first:
                assert plan.best is not None
                reason = lookup_instead(plan.best) + (TAKES_OVER if plan.switching else "")
                state = SpeculationState(True, "n-gram", reason, spec.draft_tokens)
                if not plan.switching:
                    return self.lookup, state
                return SwitchingDrafter(self.combined, self.lookup, lookup_first=True), state
            if plan.switching:
                state = SpeculationState(True, md.name, draft_tokens=spec.draft_tokens)
                return SwitchingDrafter(self.combined, self.lookup, lookup_first=False), state
        return self.combined, SpeculationState(True, md.name, draft_tokens=spec.draft_tokens)

    def speculation_state(self, spec: SpeculationConfig) -> SpeculationState:
        return self._choose_drafter(spec)[1]

    def _policy(self, request: GenerationRequest, drafter: DraftSource | None,
                lookup_reason: str = "") -> DraftPolicy:
        spec = request.speculation
        if drafter is None or not spec.adaptive:
            return FixedPolicy(spec.draft_tokens)
        md = self.model_drafter
        if isinstance(drafter, SwitchingDrafter) and md is not None:  # both, handing over within the reply
            return SwitchingPolicy(self._adaptive(request, drafter.combined.name, md.name),
                                   self._adaptive(request, self.lookup.name, self.lookup.name),
                                   drafter.use_lookup, drafter.lookup_first, md.name, lookup_reason)
        # The draft model and lookup on its own report a confidence per token (the stop rule drafts
        # from it); n-gram lookup chosen by the user drafts a doubling length.
        confident = md is not None and drafter is not self.ngram
        if drafter is self.lookup:
            source = self.lookup.name
        elif confident and md is not None:
            source = md.name
        else:
            source = self.ngram.name
        return self._adaptive(request, drafter.name, source, confident)

    def _adaptive(self, request: GenerationRequest, drafter: str, source: str,
                  confident: bool = True) -> AdaptivePolicy:
        """The conversation's adaptive policy for ``drafter`` (kept across its replies)."""
        spec = request.speculation
        key = (request.session, drafter, spec.adaptive_variant)
        policy = self._policies.get(key)
        if policy is None:
            if len(self._policies) >= 64:  # forget the oldest conversation
                self._policies.pop(next(iter(self._policies)))
            policy = AdaptivePolicy.for_variant(spec.adaptive_variant, self.cost, start=spec.draft_tokens,
                                                source=source, confident=confident)
            self._policies[key] = policy
        policy.trace = self.decision_trace
        if spec.resume:
            policy.resume()
        return policy

    # -- output constraints ----------------------------------------------------------------
    @property
    def grammars(self) -> GrammarCompiler:
        """The target's grammar compiler (its llguidance tokenizer is built on first use, about 1 s)."""
        if self._grammars is None:
            self._grammars = GrammarCompiler(self.target_model)
        return self._grammars

    def check_constraint(self, constraint: OutputConstraint) -> None:
        """Compile ``constraint`` now (kept for the reply that uses it); GrammarError when it cannot
        be used, so a server can refuse the request before it queues."""
        self.grammars.compile(constraint)

    def _constrained(self, constraint: OutputConstraint | None) -> tuple[ConstrainedReply | None, float]:
        if constraint is None:
            return None, 0.0
        grammars = self.grammars
        compiled = grammars.compile(constraint)
        reply = ConstrainedReply(compiled.matcher(), self.target_model.n_vocab, grammars.tokenizer.eos_tokens)
        return reply, compiled.compile_seconds

    # -- generation -------------------------------------------------------------------
    def prompt_tokens(
        self, request: GenerationRequest, should_cancel: Callable[[], bool] | None = None
    ) -> tuple[list[int], int, tuple[str, ...]]:
        """(tokens, dropped messages, template stop strings) for a request; FitCancelled on cancel."""
        fitted = self._fit(request, plan_reply(request, self.tool_support), should_cancel)
        return fitted.tokens, fitted.dropped_messages, fitted.stop

    def _fit(
        self, request: GenerationRequest, plan: ReplyPlan, should_cancel: Callable[[], bool] | None
    ) -> FormattedPrompt:
        reserve = max(1, min(request.max_tokens, self.target.n_ctx // 4))
        if request.prompt is not None:
            tokens = self.target_model.tokenize(request.prompt, add_special=self.target_model.add_bos())
            if len(tokens) > self.target.n_ctx - reserve:
                raise ContextOverflowError(
                    f"The prompt needs {len(tokens)} tokens but the context window holds "
                    f"{self.target.n_ctx}, with {reserve} kept free for the reply.",
                    needed=len(tokens), n_ctx=self.target.n_ctx, reserve=reserve,
                )
            return FormattedPrompt(tokens, 0, ())
        return self.formatter.fit(request.messages, self.target.n_ctx, reserve, should_cancel, plan.prompt)

    def tool_grammar(self, request: GenerationRequest, opens_thinking: bool = False) -> ToolGrammar | None:
        """The grammar the request's tool calls must follow on this model (None: no call allowed);
        ``opens_thinking``: the prompt ended inside a thinking block (``FormattedPrompt``)."""
        plan = plan_reply(request, self.tool_support)
        if plan.prompt is None:
            return None
        fmt = self.tool_support.format
        return tool_grammar(fmt, request.tools, request.tool_choice, plan.parallel, self._special_markers,
                            self.tool_support.thinking, opens_thinking)

    def tool_constraint(self, request: GenerationRequest, opens_thinking: bool) -> OutputConstraint | None:
        """The tool grammar's reply grammar as an output constraint; None where calls are not forced.
        A server can pass it to ``check_constraint`` to refuse tools llguidance cannot compile (400)
        before the request queues."""
        if not request.tools or request.prompt is not None:
            return None
        tg = self.tool_grammar(request, opens_thinking)
        if tg is not None and tg.reply is not None:
            return OutputConstraint(ConstraintKind.LARK, tg.reply)
        if tg is not None and tg.after_trigger is not None:  # a text trigger: lazy from its first occurrence
            return OutputConstraint(ConstraintKind.LARK, tg.after_trigger, trigger=tg.triggers[0].text)
        return None

    def generate(
        self,
        request: GenerationRequest,
        on_event: Callable[[TokenEvent], None] | None = None,
        should_cancel: Callable[[], bool] | None = None,
    ) -> GenerationResult:
        """One reply, streamed through ``on_event``.

        With tools (or ``separate_reasoning`` on a thinking model) the produced text goes through
        the reply's reader (engine/tooluse/parser.py): events carry the content in ``text``, the
        thinking in ``reasoning`` and the calls in ``tool_deltas``, and ``drafted_runs`` mark the
        content's characters (text held back or taken as a call is not content). The calls follow
        ``self.tool_grammar(request, fitted.opens_thinking)``: its ``reply`` grammar constrains the
        decode loop as an output constraint does (lazy under tool_choice auto: free text until the
        model's call marker), unless the request brings its own ``constraint``, which then wins.
        """
        cancel = should_cancel or _never
        plan = plan_reply(request, self.tool_support)
        if request.count_only:
            return self._count(request, plan)
        grammar, compile_s = self._constrained(request.constraint)  # GrammarError before any work
        try:
            fitted = self._fit(request, plan, cancel)
        except FitCancelled:
            off = SpeculationState(active=False, drafter="off", reason="stopped before the reply began")
            return GenerationResult("", FinishReason.CANCELLED, StatsRecorder().snapshot(), off)
        tokens, dropped = fitted.tokens, fitted.dropped_messages
        if grammar is None:
            grammar, compile_s = self._constrained(self.tool_constraint(request, fitted.opens_thinking))
        reader = plan.reader(self.tool_support, fitted.opens_thinking)
        drafter, spec_state = self._choose_drafter(request.speculation)
        policy = self._policy(request, drafter, spec_state.reason)
        self._restore_states(tokens, drafter)
        rec = StatsRecorder(grammar_compile_seconds=compile_s)
        loop = DecodeLoop(self.target, drafter, policy, request.sampling, rec, cancel, request.max_tokens,
                          grammar, request.speculation.fast_forward)
        loop.trace = self.trace_hook
        if isinstance(policy, AdaptivePolicy | SwitchingPolicy) and not self.target_model.is_recurrent:
            loop.cost = self.cost  # a batch padded to a size this machine runs faster, as priced
        if on_event is not None:
            read_start = time.perf_counter()

            def prompt_progress(done: int, total: int) -> None:
                elapsed = time.perf_counter() - read_start
                on_event(TokenEvent("", 0, 0, rec.snapshot(), self._live_state(spec_state, policy),
                                    prompt_progress=(done, total, elapsed)))

            loop.on_prompt_progress = prompt_progress
        stops = tuple(s for s in (*request.stop, *fitted.stop, *plan.stops) if s)
        hold = max((len(s) for s in stops), default=1) - 1
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        text = ""  # the text produced, after stop strings
        fed = 0  # how much of ``text`` the reader has read
        content = ""  # the reply's content, as the reader gave it
        content_flags: list[bool] = []  # per character of ``content``: from an accepted draft token
        reasoning = ""
        out_tokens: list[int] = []
        finish: FinishReason | None = None
        stop_sequence = ""
        unsent_tokens = unsent_accepted = 0  # counts of steps whose text is still held back
        drafted: list[bool] = []  # per character of ``text``: from an accepted draft token
        token_starts: list[int] = []  # per token of ``out_tokens``: where its text starts in ``text``
        shown = self._marker_ids

        def deliver(delta: ParseDelta, last: bool = False) -> None:
            nonlocal content, reasoning, unsent_tokens, unsent_accepted
            flags = [f for at, piece in delta.content_pieces for f in drafted[at : at + len(piece)]]
            content += delta.content
            content_flags.extend(flags)
            reasoning += delta.reasoning
            if on_event is not None and (not delta.empty or (last and unsent_tokens)):
                on_event(
                    TokenEvent(
                        text=delta.content,
                        n_tokens=unsent_tokens,
                        drafted_accepted=unsent_accepted,
                        stats=rec.snapshot(),
                        speculation=self._live_state(spec_state, policy),
                        drafted_runs=runs_from_flags(flags),
                        reasoning=delta.reasoning,
                        tool_deltas=delta.tool_deltas,
                    )
                )
                unsent_tokens = unsent_accepted = 0

        for step in loop.run(tokens):
            out_tokens.extend(step.tokens)
            unsent_tokens += len(step.tokens)
            unsent_accepted += step.accepted_draft
            for i, tok in enumerate(step.tokens):
                token_starts.append(len(text))
                piece = decoder.decode(self.target_model.piece(tok, special=tok in shown))
                text += piece
                drafted.extend([step.forced <= i < step.forced + step.accepted_draft] * len(piece))
            if stops:
                cut, hit = min(((text.find(s), s) for s in stops if s in text), default=(-1, ""))
                if cut >= 0:
                    text = text[:cut]
                    del drafted[cut:]
                    finish = FinishReason.STOP
                    stop_sequence = hit if hit in request.stop else ""
            visible = len(text) if finish else max(fed, len(text) - hold)
            if visible > fed:
                deliver(reader.feed(text[fed:visible]))
                fed = visible
            if reader.calls_done and not plan.parallel:
                finish = FinishReason.TOOL_CALLS  # one call asked for, and it is complete
            if finish:
                break
        tail = decoder.decode(b"", final=True)
        text += tail
        drafted.extend([False] * len(tail))
        if finish is None:
            finish = loop.finish_reason
        rest = reader.feed(text[fed:])
        final = reader.finish()
        deliver(ParseDelta(rest.content_pieces + final.content_pieces, rest.reasoning + final.reasoning,
                           rest.tool_deltas + final.tool_deltas), last=True)
        calls = reader.calls
        spans = reader.thinking_spans
        if not plan.reasoning and self.tool_support.thinking is not None:  # the thinking stays in the content
            spans = thinking_spans(text, self.tool_support.thinking, fitted.opens_thinking)
        stats = replace(rec.snapshot(), reasoning_tokens=tokens_within(token_starts, spans))
        if calls and finish is FinishReason.STOP:
            finish = FinishReason.TOOL_CALLS
        self._remember_states()
        notice = ""
        if dropped:
            notice = (
                f"The {dropped} oldest message{'s' if dropped != 1 else ''} of this chat did not fit "
                "in the context window and were left out of this reply."
            )
        return GenerationResult(
            text=content,
            finish_reason=finish,
            stats=stats,
            speculation=self._live_state(spec_state, policy),
            token_ids=tuple(out_tokens),
            dropped_messages=dropped,
            notice=notice,
            drafted_runs=runs_from_flags(content_flags),
            tool_calls=calls,
            reasoning=reasoning,
            stop_sequence=stop_sequence,
        )

    def _count(self, request: GenerationRequest, plan: ReplyPlan) -> GenerationResult:
        """``count_only``: the whole prompt's length, as rendered for this model (no model pass)."""
        if request.prompt is not None:
            tokens = self.target_model.tokenize(request.prompt, add_special=self.target_model.add_bos())
        else:
            if not request.messages:
                raise InvalidRequestError("There is no message to count.")
            tokens, _ = self.formatter.tokens_for(request.messages, plan.prompt)
        off = SpeculationState(active=False, drafter="off", reason="only the prompt was counted")
        return GenerationResult("", FinishReason.STOP, GenerationStats(prompt_tokens=len(tokens)), off)

    @staticmethod
    def _live_state(state: SpeculationState, policy: DraftPolicy) -> SpeculationState:
        if not state.active:
            return state
        if isinstance(policy, SwitchingPolicy):  # the drafter, and why, change within the reply
            drafter, reason = policy.drafter, policy.reason
        else:
            drafter, reason = state.drafter, policy.reason or state.reason
        return SpeculationState(
            active=not policy.paused,
            drafter=drafter,
            reason=reason,
            draft_tokens=policy.draft_length(),
            paused=policy.paused,
            speedup=(policy.paused_speedup or 0.0) if policy.paused else 0.0,
        )

    def reset(self) -> None:
        """Forget both caches and the states kept in memory (the next prompt is evaluated from scratch)."""
        self.states.forget_memory()
        self.target.clear()
        if self.model_drafter is not None:
            self.model_drafter.ctx.clear()

    def close(self) -> None:
        self.states.close()  # the last states reach the disk before the process may end
        if self.profile is not None:
            profile, self.profile = self.profile, None
            try:
                profile.save(self.cost, self.model_drafter.decode_seconds if self.model_drafter else None)
            except Exception:
                log.exception("saving the speculation profile failed")
        if self.model_drafter is not None:
            self.model_drafter.close()
            self.model_drafter = None
        if self.draft_model is not None:
            self.draft_model.close()
            self.draft_model = None
        self.target.close()  # idempotent, like the models' close
        self.target_model.close()

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
