"""Structured output on the real Qwen2.5-Coder pair: replies under a JSON schema, any JSON object, a
Lark grammar and a lazy grammar after a trigger are what they must be; greedy text under a grammar is
the same with speculation off, a fixed draft model, n-gram lookup and adaptive speculation, with
fast-forward off and on; seeded sampling under a grammar always gives valid output.

The target is Q4_K_M with ``exact=True`` (its stored weight layout, one kernel for every pass: see
docs/SPECULATION.md, "Identical text"), so speculation's batched passes choose as plain decoding does.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import jsonschema
import pytest

from localchat.bench.prompts import builtin_prompts
from localchat.engine.engine import Engine
from localchat.engine.errors import GrammarError
from localchat.engine.types import (
    ChatMessage,
    ConstraintKind,
    DrafterKind,
    EngineConfig,
    FinishReason,
    GenerationRequest,
    GenerationResult,
    OutputConstraint,
    SamplingParams,
    SpeculationConfig,
)

pytestmark = pytest.mark.slow

GREEDY = SamplingParams(temperature=0.0)
OFF = SpeculationConfig(enabled=False)
DRAFT = SpeculationConfig(drafter=DrafterKind.MODEL, draft_tokens=4, adaptive=False)
NGRAM = SpeculationConfig(drafter=DrafterKind.NGRAM, draft_tokens=4, adaptive=False)
ADAPTIVE = SpeculationConfig(drafter=DrafterKind.AUTO, adaptive=True)


@pytest.fixture(scope="module")
def engine(qwen_target_path: Path, qwen_draft_path: Path) -> Iterator[Engine]:
    cfg = EngineConfig(str(qwen_target_path), draft_path=str(qwen_draft_path), n_ctx=1024, exact=True,
                       use_profile=False, calibrate=False, state_memory_bytes=0)
    with Engine(cfg) as eng:
        yield eng


def bench_json(pid: str) -> tuple[str, dict[str, object]]:
    prompt = next(p for p in builtin_prompts() if p.id == pid)
    return prompt.prompt, json.loads(prompt.schema)


def ask(eng: Engine, prompt: str, constraint: OutputConstraint | None, spec: SpeculationConfig = OFF,
        max_tokens: int = 160, sampling: SamplingParams = GREEDY, raw: bool = False) -> GenerationResult:
    eng.reset()
    return eng.generate(GenerationRequest(
        messages=() if raw else (ChatMessage("user", prompt),), prompt=prompt if raw else None,
        max_tokens=max_tokens, sampling=sampling, speculation=spec, constraint=constraint,
        session=f"test:{prompt[:20]}:{spec}"))


def schema_constraint(schema: dict[str, object]) -> OutputConstraint:
    return OutputConstraint(ConstraintKind.JSON_SCHEMA, json.dumps(schema))


def test_replies_under_a_schema_are_valid_for_it(engine: Engine) -> None:
    for pid, spec in (("json-engineer", OFF), ("json-api-error", ADAPTIVE)):
        prompt, schema = bench_json(pid)
        r = ask(engine, prompt, schema_constraint(schema), spec)
        assert r.finish_reason is FinishReason.STOP, (pid, r.text)
        jsonschema.validate(json.loads(r.text), schema)
        assert 0 < r.stats.grammar_seconds < r.stats.generation_seconds
        if spec is OFF:
            # Fast-forward is on by default: plain decoding meets every forced block (a key after its
            # quote) and writes it without the target. Not asserted under speculation: a forced token
            # the drafter drafted is counted as an accepted draft token (test_constrained_loop.py), and
            # whether a forced block falls at a step's start there depends on where adaptive drafts end,
            # which follows the timings it measures.
            assert r.stats.forced_tokens > 0


def test_json_object_lark_and_regex_replies(engine: Engine) -> None:
    paris = "Describe Paris as a JSON object with its name, its country and its best-known monument."
    obj = ask(engine, paris, OutputConstraint(ConstraintKind.JSON_OBJECT), max_tokens=96)
    assert obj.finish_reason is FinishReason.STOP and isinstance(json.loads(obj.text), dict)
    lark = OutputConstraint(ConstraintKind.LARK, 'start: "The answer is " ANSWER "."\nANSWER: "yes" | "no"')
    yes_no = ask(engine, "Is water wet? Answer yes or no.", lark, DRAFT, max_tokens=32)
    assert re.fullmatch(r"The answer is (yes|no)\.", yes_no.text)
    assert yes_no.finish_reason is FinishReason.STOP
    date = ask(engine, "When did the Berlin Wall fall? Give the date.",
               OutputConstraint(ConstraintKind.REGEX, r"\d{4}-\d{2}-\d{2}"), max_tokens=16)
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", date.text) and date.finish_reason is FinishReason.STOP


# A lazy grammar that starts at a text trigger the model writes of itself: after a sentence of free
# text, Qwen2.5-Coder opens a ```json block for this prompt. (Its special <tool_call> token is covered
# by tests/engine/test_grammar.py: the 1.5B model does not write tool calls.)
CONFIG_PROMPT = "Give me an example JSON configuration file for a web server, with a short explanation."
SERVER = {"type": "object", "properties": {"server": {
    "type": "object", "properties": {"listen": {"type": "integer"}, "server_name": {"type": "string"}},
    "required": ["listen", "server_name"], "additionalProperties": False}},
    "required": ["server"], "additionalProperties": False}
BLOCK = f'start: "\\n" %json {json.dumps(SERVER)} "\\n```"'
TOOL_BODY = ('start: "\\n" call "\\n" </tool_call>\n'
             'call: %json {"type": "object", "properties": {"city": {"type": "string"}}}')


def test_a_lazy_grammar_constrains_what_follows_its_trigger_and_ends_the_reply(engine: Engine) -> None:
    # Past the block's opening fence: 48 tokens ended just before "json" on one CPU, whose wording ran longer.
    free = ask(engine, CONFIG_PROMPT, None, max_tokens=64)
    lazy = ask(engine, CONFIG_PROMPT, OutputConstraint(ConstraintKind.LARK, BLOCK, trigger="```json"), DRAFT,
               max_tokens=100)
    before, trigger, after = lazy.text.partition("```json")
    assert trigger, lazy.text
    assert free.text.startswith(before + "```json")  # the free text before the trigger is the model's own
    assert after.endswith("\n```") and lazy.finish_reason is FinishReason.STOP, lazy.text
    jsonschema.validate(json.loads(after.removesuffix("```")), SERVER)


def test_a_lazy_grammar_whose_trigger_never_comes_leaves_the_reply_as_it_was(engine: Engine) -> None:
    lazy = OutputConstraint(ConstraintKind.LARK, TOOL_BODY, trigger="<tool_call>")
    free = ask(engine, "Name three rivers in Europe.", None, max_tokens=40)
    under = ask(engine, "Name three rivers in Europe.", lazy, DRAFT, max_tokens=40)
    assert "<tool_call>" not in free.text
    assert under.text == free.text and under.token_ids == free.token_ids


def test_constraints_that_cannot_be_used_fail_before_any_work(engine: Engine) -> None:
    for c, words in [
        (OutputConstraint(ConstraintKind.JSON_SCHEMA, '{"type": "object", "properties": 3}'), "JSON schema"),
        (OutputConstraint(ConstraintKind.JSON_SCHEMA, '{"type": "integer", "minimum": 3, "maximum": 1}'),
         "Unsatisfiable schema"),
        (OutputConstraint(ConstraintKind.GBNF, "root ::= item+"), "GBNF grammar"),
    ]:
        with pytest.raises(GrammarError, match=words) as err:
            ask(engine, "Hello", c)
        assert "\n" not in str(err.value) and str(err.value).endswith(".")
        with pytest.raises(GrammarError):
            engine.check_constraint(c)


def test_max_tokens_mid_json_gives_length_and_the_text_as_written(engine: Engine) -> None:
    prompt, schema = bench_json("json-recipe")
    c = schema_constraint(schema)
    short = ask(engine, prompt, c, max_tokens=20)
    longer = ask(engine, prompt, c, max_tokens=40)
    assert short.finish_reason is FinishReason.LENGTH and short.stats.generated_tokens == 20
    assert longer.text.startswith(short.text) and short.text.startswith("{")
    with pytest.raises(json.JSONDecodeError):
        json.loads(short.text)


@pytest.mark.parametrize("fast_forward", [False, True])
def test_greedy_text_under_a_grammar_is_the_same_with_and_without_speculation(
    engine: Engine, fast_forward: bool
) -> None:
    prompt, schema = bench_json("json-books")
    c = schema_constraint(schema)
    upper = OutputConstraint(ConstraintKind.LARK, 'start: /[A-Z ,.]+/ "."')
    runs = {}
    for name, spec in (("off", OFF), ("draft", DRAFT), ("ngram", NGRAM), ("adaptive", ADAPTIVE)):
        spec = replace(spec, fast_forward=fast_forward)
        runs[name] = ask(engine, prompt, c, spec, max_tokens=64)
    plain = runs["off"]
    assert plain.stats.generated_tokens == 64
    for name, r in runs.items():
        assert r.token_ids == plain.token_ids, name
        assert r.text == plain.text, name
    assert runs["draft"].stats.drafted > 10 and runs["draft"].stats.verify_passes < plain.stats.verify_passes
    assert (plain.stats.forced_tokens > 0) == fast_forward
    # A grammar the drafter does not know: its drafts are cut at a forbidden token, the text stays.
    cat = "Describe a cat in one sentence."
    shout_plain = ask(engine, cat, upper, replace(OFF, fast_forward=fast_forward), max_tokens=24)
    shout = ask(engine, cat, upper, replace(DRAFT, fast_forward=fast_forward), max_tokens=24)
    assert shout.text == shout_plain.text and re.fullmatch(r"[A-Z ,.]+", shout.text)
    assert shout_plain.stats.grammar_masked_tokens > 0 and shout.stats.grammar_cut_drafts > 0


def test_seeded_sampling_under_a_grammar_gives_valid_output(engine: Engine) -> None:
    prompt, schema = bench_json("json-api-error")
    c = schema_constraint(schema)
    texts = set()
    for seed in (1, 2):
        sampling = SamplingParams(temperature=0.9, seed=seed)
        r = ask(engine, prompt, c, DRAFT, max_tokens=128, sampling=sampling)
        assert r.finish_reason is FinishReason.STOP, r.text
        jsonschema.validate(json.loads(r.text), schema)
        again = ask(engine, prompt, c, DRAFT, max_tokens=128, sampling=sampling) if seed == 1 else r
        assert again.text == r.text
        texts.add(r.text)
    assert len(texts) > 1
