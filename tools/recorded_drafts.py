"""Record the draft model's drafts on bench prompts: what tools/calibration_curve.py and
tools/draft_positions.py read.

Every step the draft model drafts the same number of tokens whatever their confidence (greedy),
and each step's confidences and accepted count are kept. Profiles go to a temporary folder, never
the user's.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import tempfile
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:
    from localchat.bench.prompts import BenchPrompt
    from localchat.engine.adaptive import DraftPolicy
    from localchat.engine.engine import Engine

Step = tuple[list[float], int]  # (confidence of each drafted token, accepted count)


class FirstN:
    """A stop rule that keeps the first ``length`` draft tokens, whatever their confidence."""

    def __init__(self, length: int) -> None:
        self.length = length

    def take(self, position: int, confidence: float) -> bool:
        return position < self.length

    def look_further(self, position: int, decode_seconds: float) -> bool:
        return position + 1 < self.length


class Recorder:
    """A draft policy: ``length`` tokens every step; records each step's confidences and accepted count."""

    paused = False
    reason = ""
    paused_speedup = None

    def __init__(self, length: int) -> None:
        self.length = length
        self.steps: list[Step] = []

    def draft_length(self) -> int:
        return self.length

    def stop_rule(self) -> FirstN:
        return FirstN(self.length)

    def observe(self, drafted: int, accepted: int, draft_s: float, verify_s: float, source: str,
                confidence: Sequence[float] = (), catch_up_s: float = 0.0, passes: int | None = None) -> None:
        if drafted and confidence:
            self.steps.append((list(confidence), accepted))

    def observe_declined(self, source: str, confidence: float, hit: float) -> None:
        pass

    listens = False

    def observe_target(self, confidence: float, source: str, first_accepted: bool | None) -> None:
        pass

    def look_back_rows(self) -> int:
        return 0

    def observe_look_back(self, looked: Sequence[tuple[float, bool]]) -> None:
        pass


def add_arguments(ap: argparse.ArgumentParser, max_tokens: int) -> None:
    ap.add_argument("--model", required=True)
    ap.add_argument("--draft", required=True)
    ap.add_argument("--prompts", help="also the prompts of this bench set (heldout) or file (JSON Lines)")
    ap.add_argument("--max-tokens", type=int, default=max_tokens)


def chosen_prompts(args: argparse.Namespace) -> list[BenchPrompt]:
    """The built-in bench prompts, and those of ``--prompts`` (a set's name or a file); not those answered
    under a schema (the ``json`` category), whose drafts only make sense under their grammar, which
    recording does not apply."""
    from localchat.bench.prompts import builtin_prompts, prompts_from

    prompts = list(builtin_prompts()) + (list(prompts_from(args.prompts)) if args.prompts else [])
    return [p for p in prompts if not p.schema]


@contextlib.contextmanager
def drafting_engine(args: argparse.Namespace, calibrate: bool) -> Iterator[Engine]:
    """The target and its draft model, without a saved profile (``calibrate``: measure the costs at
    load); exits with a sentence when the draft model does not load."""
    os.environ.setdefault("LOCALCHAT_PROFILES_DIR", tempfile.mkdtemp())  # never the user's profiles
    from localchat.engine.engine import Engine
    from localchat.engine.types import EngineConfig

    cfg = EngineConfig(args.model, draft_path=args.draft, n_ctx=2048, use_profile=False, calibrate=calibrate,
                       state_memory_bytes=0)
    with Engine(cfg) as eng:
        if eng.model_drafter is None:
            raise SystemExit(f"the draft model did not load: {eng.draft_problem}")
        yield eng


def record(eng: Engine, prompt: BenchPrompt, length: int, max_tokens: int) -> list[Step]:
    """Answer ``prompt`` (a new conversation), drafting ``length`` tokens every step."""
    from localchat.engine.speculative import DecodeLoop
    from localchat.engine.stats import StatsRecorder
    from localchat.engine.types import ChatMessage, SamplingParams

    eng.reset()
    tokens, _ = eng.formatter.tokens_for((ChatMessage("user", prompt.prompt),))
    rec = Recorder(length)
    # The loop asks its policy for a StopRule; the drafter needs only take/look_further.
    policy = cast("DraftPolicy", rec)
    loop = DecodeLoop(eng.target, eng.model_drafter, policy, SamplingParams(temperature=0.0), StatsRecorder(),
                      lambda: False, max_tokens)
    for _ in loop.run(tokens):
        pass
    return rec.steps
