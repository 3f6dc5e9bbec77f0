"""Whether a restored conversation state changes the greedy reply (engine/state_cache.py).

    python tools/state_replies.py --model T.gguf [--draft D.gguf] [--exact] [--conversations 8]

Each conversation C is a system prompt, a question, the reply and a follow-up. Every
history below is answered three ways, greedy, and compared with the first:

- ``fresh``: an engine without saved states that reads each history from scratch;
- ``memory``: one engine with states in memory, which answered every C's first turn
  first and starts each history from an empty context (so only a saved state helps);
- ``disk``: a new engine continuing from the states another engine saved on disk
  (C's first turns), memory states off.

The histories, by what they share with a saved state:

- ``all``: C's next turn (its own state: the prompt and the reply it wrote);
- ``branch``: C's first exchange, then another follow-up (another conversation's
  state, reply cells included);
- ``opening``: C's system prompt, then another question (the shared opening only);
- ``none``: a system prompt no state shares (nothing to restore).

For each it counts replies that differ from ``fresh``, and prompts whose read
differs from a fresh read of the same tokens: the logits the first reply token
is chosen from, compared bit for bit (a difference there is a difference in the
KV cells the prompt left, whether or not a near-tie turns it into another word).
Speculation is off unless ``--draft`` names a draft model, which then drafts a
fixed 4 tokens (adaptive lengths follow the machine's timing, and would compare
two things at once). The ``disk`` engine runs in this Python process, as a new
engine process would: nothing but the files passes from the saving engine to it.
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, replace

import numpy as np
import numpy.typing as npt

from localchat.engine.engine import Engine
from localchat.engine.types import (
    ChatMessage,
    DrafterKind,
    EngineConfig,
    GenerationRequest,
    SamplingParams,
    SpeculationConfig,
)

Turns = tuple[tuple[str, str], ...]

RULES = (
    "Answer the question that was asked, not a nearby one, and say so when you are unsure. Keep answers "
    "short: a few sentences, or a short list, unless the user asks for more. Show code only when it helps, "
    "in a fenced block with the language named, and keep each example under fifteen lines. Name every "
    "assumption you make about the user's setup. When the question is ambiguous, say how you read it "
    "before you answer. Do not repeat the question back, do not apologise, and do not end with an offer "
    "to help further."
)
SYSTEMS = tuple(f"{role} {RULES}" for role in (
    "You are a careful Python reviewer: point out bugs first, then style, and prefer the standard library.",
    "You are a patient teacher of computer science who explains each idea in plain words before any "
    "formula.",
    "You help people write clear English: keep their meaning, fix grammar and spelling, prefer short "
    "sentences.",
    "You are a terse assistant for shell users on Linux; give the command first, and warn before any "
    "command that can destroy data.",
    "You are a friendly cooking assistant who suggests simple recipes with ingredients most kitchens have.",
    "You review SQL queries for correctness and speed: missing indexes, accidental cross joins, NULL "
    "handling.",
))
QUESTIONS = (
    "Write a function that reverses a linked list.",
    "What is the difference between a process and a thread?",
    "Fix this sentence: their going to the park tomorow, weather or not it rains.",
    "How do I find the ten largest files in a folder tree?",
    "What can I cook with eggs, spinach and some old bread?",
    "SELECT * FROM orders o, customers c WHERE o.total > 100;",
    "Explain what a Python generator is.",
    "Why is binary search O(log n)?",
    "How do I count the lines of every .py file in a repository?",
    "Write a function that checks whether a string is a palindrome.",
    "Is it 'fewer' or 'less' with countable nouns?",
    "Suggest a quick vegetarian dinner for two.",
)
FOLLOW_UPS = (
    "Now make it shorter.",
    "Can you give a second example?",
    "Why does that work?",
    "What would change in Python 2?",
    "Please explain it to a beginner.",
    "Are there any edge cases?",
)


@dataclass(frozen=True)
class Conversation:
    system: str
    question: str
    follow_up: str
    other_follow_up: str
    other_question: str

    def first(self) -> Turns:
        return (("system", self.system), ("user", self.question))


def conversations(n: int) -> list[Conversation]:
    return [
        Conversation(
            SYSTEMS[i % len(SYSTEMS)],
            QUESTIONS[i % len(QUESTIONS)],
            FOLLOW_UPS[i % len(FOLLOW_UPS)],
            FOLLOW_UPS[(i + 3) % len(FOLLOW_UPS)],
            QUESTIONS[(i + 5) % len(QUESTIONS)],
        )
        for i in range(n)
    ]


def histories(c: Conversation, reply: str, i: int) -> dict[str, Turns]:
    exchange = (*c.first(), ("assistant", reply))
    return {
        "all": (*exchange, ("user", c.follow_up)),
        "branch": (*exchange, ("user", c.other_follow_up)),
        "opening": (("system", c.system), ("user", c.other_question)),
        "none": (("system", f"Poem {i + 1}: you are a weather poet. Describe today's weather in a haiku."),
                 ("user", c.question)),
    }


@dataclass(frozen=True)
class Answer:
    tokens: tuple[int, ...]
    logits: str  # digest of the logits the first reply token was chosen from
    cached: int  # prompt tokens not read again
    prompt: int


class Asker:
    def __init__(self, engine: Engine, max_tokens: int, speculation: SpeculationConfig) -> None:
        self.engine = engine
        self.max_tokens = max_tokens
        self.speculation = speculation

    def ask(self, turns: Turns, empty: bool = True) -> tuple[Answer, str]:
        eng = self.engine
        if empty:  # nothing left in the contexts from the previous history: only saved states help
            eng.target.clear()
            if eng.model_drafter is not None:
                eng.model_drafter.ctx.clear()
        req = GenerationRequest(messages=tuple(ChatMessage(r, t) for r, t in turns),
                                max_tokens=self.max_tokens, sampling=SamplingParams(temperature=0.0),
                                speculation=self.speculation)
        first: list[str] = []
        target = eng.target
        read = type(target).logits

        def logits(row: int) -> npt.NDArray[np.float32]:
            out = read(target, row)
            if not first:  # the first read after the prompt: the first reply token's logits
                first.append(hashlib.sha256(out.tobytes()).hexdigest())
            return out

        target.logits = logits  # type: ignore[method-assign]
        try:
            res = eng.generate(req)
        finally:
            del target.logits
        n = res.stats.prompt_tokens + res.stats.cached_prompt_tokens
        return Answer(res.token_ids, first[0] if first else "", res.stats.cached_prompt_tokens, n), res.text


def run(args: argparse.Namespace) -> None:
    spec = (SpeculationConfig(drafter=DrafterKind.MODEL, draft_tokens=4, adaptive=False) if args.draft
            else SpeculationConfig(enabled=False))
    base = EngineConfig(args.model, draft_path=args.draft, n_ctx=2048, use_profile=False, calibrate=False,
                        exact=args.exact, state_memory_bytes=0)
    convs = conversations(args.conversations)
    t0 = time.perf_counter()
    with Engine(base) as eng:
        fresh = Asker(eng, args.max_tokens, spec)
        firsts = [fresh.ask(c.first()) for c in convs]
        todo = {(i, kind): turns for i, c in enumerate(convs)
                for kind, turns in histories(c, firsts[i][1], i).items()}
        reference = {key: fresh.ask(turns)[0] for key, turns in todo.items()}
    print(f"fresh reads: {time.perf_counter() - t0:.0f} s", flush=True)
    results: dict[str, dict[tuple[int, str], Answer]] = {}
    if "memory" in args.where:
        with Engine(replace(base, state_memory_bytes=2_000_000_000)) as eng:
            mem = Asker(eng, args.max_tokens, spec)
            for c in convs:
                mem.ask(c.first())
            results["memory"] = {key: mem.ask(turns)[0] for key, turns in todo.items()}
        print(f"memory: {time.perf_counter() - t0:.0f} s", flush=True)
    if "disk" in args.where:
        disk_run(args, base, spec, convs, todo, results)
        print(f"disk: {time.perf_counter() - t0:.0f} s\n", flush=True)
    report(reference, results)


def disk_run(args: argparse.Namespace, base: EngineConfig, spec: SpeculationConfig, convs: list[Conversation],
             todo: dict[tuple[int, str], Turns], results: dict[str, dict[tuple[int, str], Answer]]) -> None:
    folder = tempfile.mkdtemp(prefix="kv-states-")
    try:
        with Engine(replace(base, state_folder=folder)) as eng:
            saver = Asker(eng, args.max_tokens, spec)
            for c in convs:
                saver.ask(c.first())
        with Engine(replace(base, state_folder=folder)) as eng:
            disk = Asker(eng, args.max_tokens, spec)
            results["disk"] = {key: disk.ask(turns)[0] for key, turns in todo.items()}
    finally:
        shutil.rmtree(folder, ignore_errors=True)


Results = dict[tuple[int, str], Answer]


def report(reference: Results, results: dict[str, Results]) -> None:
    print("| states | history | n | restored of prompt (mean) | first logits differ | replies differ |")
    print("|---|---|---|---|---|---|")
    for where, answers in results.items():
        rows: dict[str, list[tuple[Answer, Answer]]] = defaultdict(list)
        for key, got in answers.items():
            rows[key[1]].append((got, reference[key]))
        for kind, pairs in rows.items():
            n = len(pairs)
            cached = sum(g.cached for g, _ in pairs) / n
            prompt = sum(g.prompt for g, _ in pairs) / n
            logits = sum(g.logits != r.logits for g, r in pairs)
            replies = sum(g.tokens != r.tokens for g, r in pairs)
            print(f"| {where} | {kind} | {n} | {cached:.0f} of {prompt:.0f} | {logits} | {replies} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--draft", help="draft model: speculation with a fixed 4-token draft (default: off)")
    ap.add_argument("--exact", action="store_true")
    ap.add_argument("--conversations", type=int, default=8)
    ap.add_argument("--max-tokens", type=int, default=24)
    ap.add_argument("--where", default="memory,disk", help="where the states are kept: memory, disk or both")
    run(ap.parse_args())


if __name__ == "__main__":
    main()
