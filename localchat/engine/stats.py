"""The one definition of every speculation statistic.

The status bar, the CLI and the benchmark all read these properties, so a
number means the same thing everywhere:

- generation tokens/s: emitted tokens / generation time (prompt processing excluded);
- prompt tokens/s: prompt tokens evaluated / prompt time;
- acceptance length: tokens emitted per target verification pass
  (1 + accepted draft tokens / passes; 1.0 means speculation did nothing);
- acceptance rate: accepted draft tokens / drafted tokens, also per draft position;
- draft share: the part of generation time spent drafting;
- grammar share: the part of generation time spent on an output constraint's work (masks, checks,
  forced tokens), the per-token cost of a grammar.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class GenerationStats:
    prompt_tokens: int = 0  # tokens actually evaluated for the prompt (after cache reuse)
    cached_prompt_tokens: int = 0  # prompt tokens not read again: kept in the context or a saved state
    prompt_seconds: float = 0.0
    generated_tokens: int = 0
    generation_seconds: float = 0.0
    draft_seconds: float = 0.0
    # Of draft_seconds: catching the drafter up on a stretch it sat out (one batched pass).
    catch_up_seconds: float = 0.0
    draft_passes: int = 0  # single-token drafter passes (one per look at a next token)
    verify_passes: int = 0  # target decode calls during generation
    drafted: int = 0  # draft tokens proposed and verified
    accepted: int = 0  # draft tokens accepted
    drafted_per_position: tuple[int, ...] = ()
    accepted_per_position: tuple[int, ...] = ()
    # Verification passes by the batch the target ran: [i] passes of i + 1 tokens, a draft's batch padded
    # to a size this machine runs faster counted at that size (engine/costs.py ``CostModel.padded``);
    # () in statistics kept before it was recorded.
    verify_batches: tuple[int, ...] = ()
    # Under an output constraint (engine/constrained.py); all 0 without one.
    forced_tokens: int = 0  # emitted because the grammar forced them (fast-forward), never drafted
    grammar_cut_drafts: int = 0  # drafts ended early at a token the grammar forbids
    grammar_masked_tokens: int = 0  # positions where the target's first choice was forbidden
    grammar_seconds: float = 0.0  # grammar work during generation (part of generation_seconds)
    grammar_compile_seconds: float = 0.0  # compiling the constraint (0 when it was cached)
    # Of generated_tokens, those inside the model's thinking (<think>...</think>, tags included); set once the
    # reply is read (0 while it streams, and for models that do not think).
    reasoning_tokens: int = 0

    @property
    def tokens_per_s(self) -> float:
        return self.generated_tokens / self.generation_seconds if self.generation_seconds > 0 else 0.0

    @property
    def prompt_tokens_per_s(self) -> float:
        return self.prompt_tokens / self.prompt_seconds if self.prompt_seconds > 0 else 0.0

    @property
    def acceptance_length(self) -> float:
        return 1.0 + self.accepted / self.verify_passes if self.verify_passes else 0.0

    @property
    def acceptance_rate(self) -> float:
        return self.accepted / self.drafted if self.drafted else 0.0

    @property
    def acceptance_rate_by_position(self) -> tuple[float, ...]:
        return tuple(
            a / d if d else 0.0
            for a, d in zip(self.accepted_per_position, self.drafted_per_position, strict=True)
        )

    @property
    def draft_share(self) -> float:
        return self.draft_seconds / self.generation_seconds if self.generation_seconds > 0 else 0.0

    @property
    def grammar_share(self) -> float:
        return self.grammar_seconds / self.generation_seconds if self.generation_seconds > 0 else 0.0

    @property
    def forced_share(self) -> float:
        """The part of the generated tokens that the grammar forced."""
        return self.forced_tokens / self.generated_tokens if self.generated_tokens else 0.0

    def summary(self) -> str:
        """One line for the CLI and logs."""
        parts = [
            f"{self.generated_tokens} tokens",
            f"{self.tokens_per_s:.2f} tok/s",
            f"prompt {self.prompt_tokens} tok at {self.prompt_tokens_per_s:.1f} tok/s",
        ]
        if self.drafted:
            parts += [
                f"acceptance length {self.acceptance_length:.2f}",
                f"acceptance rate {self.acceptance_rate:.2f}",
                f"drafting {self.draft_share * 100:.0f}% of time",
            ]
        if self.grammar_seconds or self.forced_tokens:
            parts.append(f"grammar {self.grammar_share * 100:.1f}% of time")
            if self.forced_tokens:
                parts.append(f"{self.forced_tokens} tokens forced")
        return ", ".join(parts)


@dataclass
class StatsRecorder:
    """Mutable counters the engine updates while generating; ``snapshot()`` freezes them."""

    prompt_tokens: int = 0
    cached_prompt_tokens: int = 0
    prompt_seconds: float = 0.0
    generated_tokens: int = 0
    generation_seconds: float = 0.0
    draft_seconds: float = 0.0
    catch_up_seconds: float = 0.0
    draft_passes: int = 0
    verify_passes: int = 0
    drafted: int = 0
    accepted: int = 0
    drafted_per_position: list[int] = field(default_factory=list)
    accepted_per_position: list[int] = field(default_factory=list)
    verify_batches: list[int] = field(default_factory=list)
    forced_tokens: int = 0
    grammar_cut_drafts: int = 0
    grammar_masked_tokens: int = 0
    grammar_seconds: float = 0.0
    grammar_compile_seconds: float = 0.0

    def record_draft(self, n_drafted: int, n_accepted: int) -> None:
        """Count one verification of ``n_drafted`` draft tokens of which the first ``n_accepted`` held."""
        self.drafted += n_drafted
        self.accepted += n_accepted
        grow = n_drafted - len(self.drafted_per_position)
        if grow > 0:
            self.drafted_per_position.extend([0] * grow)
            self.accepted_per_position.extend([0] * grow)
        for i in range(n_drafted):
            self.drafted_per_position[i] += 1
            if i < n_accepted:
                self.accepted_per_position[i] += 1

    def record_pass(self, batch: int) -> None:
        """Count one verification pass that ran ``batch`` tokens (``verify_passes`` counts it apart)."""
        if batch > len(self.verify_batches):
            self.verify_batches.extend([0] * (batch - len(self.verify_batches)))
        self.verify_batches[batch - 1] += 1

    def snapshot(self) -> GenerationStats:
        return GenerationStats(
            prompt_tokens=self.prompt_tokens,
            cached_prompt_tokens=self.cached_prompt_tokens,
            prompt_seconds=self.prompt_seconds,
            generated_tokens=self.generated_tokens,
            generation_seconds=self.generation_seconds,
            draft_seconds=self.draft_seconds,
            catch_up_seconds=self.catch_up_seconds,
            draft_passes=self.draft_passes,
            verify_passes=self.verify_passes,
            drafted=self.drafted,
            accepted=self.accepted,
            drafted_per_position=tuple(self.drafted_per_position),
            accepted_per_position=tuple(self.accepted_per_position),
            verify_batches=tuple(self.verify_batches),
            forced_tokens=self.forced_tokens,
            grammar_cut_drafts=self.grammar_cut_drafts,
            grammar_masked_tokens=self.grammar_masked_tokens,
            grammar_seconds=self.grammar_seconds,
            grammar_compile_seconds=self.grammar_compile_seconds,
        )


def combine(stats: list[GenerationStats]) -> GenerationStats:
    """Sum several replies' statistics (for benchmark categories)."""

    def col(name: str) -> tuple[int, ...]:
        out = [0] * max((len(getattr(s, name)) for s in stats), default=0)
        for s in stats:
            for i, v in enumerate(getattr(s, name)):
                out[i] += v
        return tuple(out)

    return GenerationStats(
        prompt_tokens=sum(s.prompt_tokens for s in stats),
        cached_prompt_tokens=sum(s.cached_prompt_tokens for s in stats),
        prompt_seconds=sum(s.prompt_seconds for s in stats),
        generated_tokens=sum(s.generated_tokens for s in stats),
        generation_seconds=sum(s.generation_seconds for s in stats),
        draft_seconds=sum(s.draft_seconds for s in stats),
        catch_up_seconds=sum(s.catch_up_seconds for s in stats),
        draft_passes=sum(s.draft_passes for s in stats),
        verify_passes=sum(s.verify_passes for s in stats),
        drafted=sum(s.drafted for s in stats),
        accepted=sum(s.accepted for s in stats),
        drafted_per_position=col("drafted_per_position"),
        accepted_per_position=col("accepted_per_position"),
        verify_batches=col("verify_batches"),
        forced_tokens=sum(s.forced_tokens for s in stats),
        grammar_cut_drafts=sum(s.grammar_cut_drafts for s in stats),
        grammar_masked_tokens=sum(s.grammar_masked_tokens for s in stats),
        grammar_seconds=sum(s.grammar_seconds for s in stats),
        grammar_compile_seconds=sum(s.grammar_compile_seconds for s in stats),
    )
