"""engine.grammar and engine.constrained on the real Qwen2.5 vocabulary (loaded vocabulary-only): what
each kind of constraint accepts and refuses, the one-sentence errors, strictness, the cache and the
compile time limit, lazy grammars after a trigger, forced tokens, masks."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from localchat.bench.prompts import builtin_prompts
from localchat.engine.backend import Model
from localchat.engine.constrained import ConstrainedReply
from localchat.engine.errors import GrammarError
from localchat.engine.grammar import GrammarCompiler, closed_objects, constraint_key, sentence
from localchat.engine.types import ConstraintKind, OutputConstraint, SamplingParams

PERSON = {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
          "required": ["name", "age"]}
TOOL_BODY = ('start: "\\n" call "\\n" </tool_call>\n'
             'call: %json {"type": "object", "properties": {"city": {"type": "string"}}, '
             '"required": ["city"], "additionalProperties": false}')


@pytest.fixture(scope="module")
def vocab(qwen_target_path: Path) -> Iterator[Model]:
    model = Model(qwen_target_path, gpu_layers=0, vocab_only=True)
    yield model
    model.close()


@pytest.fixture(scope="module")
def compiler(vocab: Model) -> GrammarCompiler:
    return GrammarCompiler(vocab)


def schema(obj: object, strict: bool = True) -> OutputConstraint:
    return OutputConstraint(ConstraintKind.JSON_SCHEMA, json.dumps(obj), strict=strict)


def reply(compiler: GrammarCompiler, c: OutputConstraint) -> ConstrainedReply:
    return ConstrainedReply(compiler.compile(c).matcher(), compiler.n_vocab, compiler.tokenizer.eos_tokens)


def accepts(compiler: GrammarCompiler, c: OutputConstraint, text: str) -> bool:
    """Whether the whole of ``text`` (as the model would tokenise it) is allowed and may end there."""
    r = reply(compiler, c)
    ids = compiler.model.tokenize(text, add_special=False, parse_special=True)
    if r.valid_prefix(ids) < len(ids):
        return False
    r.consume(ids)
    return bool(r.matcher.is_accepting())


def one_sentence(message: str) -> None:
    assert "\n" not in message and message.endswith(".") and message[0].isupper(), message
    assert message.count(". ") == 0, message


# -- errors ----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("c", "words"),
    [
        (OutputConstraint(ConstraintKind.JSON_SCHEMA, "{not json"), "not valid JSON"),
        (OutputConstraint(ConstraintKind.JSON_SCHEMA, "[1, 2]"), "must be a JSON object"),
        (schema({"type": "strng"}), "Invalid type: strng"),
        (schema({"type": "integer", "minimum": 5, "maximum": 1}), "Unsatisfiable schema"),
        (schema({"allOf": [{"type": "string"}, {"type": "integer"}]}), "Unsatisfiable schema"),
        (schema({"type": "string", "format": "no-such-format"}), "Unknown format"),
        (OutputConstraint(ConstraintKind.GBNF, 'root ::= "a" missing'), "could not be converted"),
        (OutputConstraint(ConstraintKind.GBNF, 'root ::= "a" ("b"'), "could not be converted"),
        (OutputConstraint(ConstraintKind.LARK, "start: foo"), 'unknown name: "foo" (line 1, column 8)'),
        (OutputConstraint(ConstraintKind.LARK, 'start: <no_such_token> "x"'), "unknown special token"),
        (OutputConstraint(ConstraintKind.REGEX, "a(b"), "invalid regex"),
        (OutputConstraint(ConstraintKind.LARK, "   "), "is empty"),
        (OutputConstraint(ConstraintKind.REGEX, "[a-z]+", trigger="<x>"), "only supported with a Lark"),
    ],
)
def test_a_constraint_that_cannot_be_used_is_a_grammar_error_in_one_sentence(
    compiler: GrammarCompiler, c: OutputConstraint, words: str
) -> None:
    with pytest.raises(GrammarError) as err:
        compiler.compile(c)
    message = str(err.value)
    assert words in message
    one_sentence(message)
    kind = {"json_schema": "JSON schema", "gbnf": "GBNF", "lark": "Lark", "regex": "regular expression"}
    assert kind[c.kind.value] in message


def test_llguidance_messages_become_one_sentence() -> None:
    raw = 'at 3(12): unknown name: "x"\n   3 | start: x\n         ^\n'
    said = 'The Lark grammar cannot be used: unknown name: "x" (line 3, column 12).'
    assert sentence("Lark grammar", raw) == said
    regex = "regex parse error:\n    (?<=x)a\n    ^^^^\nerror: look-around is not supported\n"
    said = "The JSON schema cannot be used: regex parse error: look-around is not supported."
    assert sentence("JSON schema", regex) == said
    long = "Unsatisfiable schema: " + "a" * 400
    assert len(sentence("JSON schema", long)) < 300


def test_a_compile_past_the_time_limit_is_refused_and_not_tried_again(vocab: Model) -> None:
    slow = GrammarCompiler(vocab, timeout_s=1e-4)
    big = {"type": "object", "properties": {f"field_{i}": {"type": "string", "pattern": "[a-z]{2,40}"}
                                            for i in range(300)}}
    with pytest.raises(GrammarError, match=r"takes longer than 0.0001 s to compile; simplify it\.") as first:
        slow.compile(schema(big))
    one_sentence(str(first.value))
    assert slow._too_slow  # remembered: the same constraint is refused at once
    with pytest.raises(GrammarError, match="takes longer than"):
        slow.compile(schema(big))


# -- what each kind accepts ------------------------------------------------------------------------
def test_a_schema_accepts_matching_json_and_refuses_the_rest(compiler: GrammarCompiler) -> None:
    c = schema(PERSON)
    assert accepts(compiler, c, '{"name": "Ada", "age": 36}')
    assert accepts(compiler, c, '{\n  "name": "Ada",\n  "age": 36\n}')
    assert not accepts(compiler, c, '{"name": "Ada", "age": "36"}')  # a string where an integer goes
    assert not accepts(compiler, c, '{"name": "Ada"}')  # a required property missing
    assert not accepts(compiler, c, '```json\n{"name": "Ada", "age": 36}\n```')


def test_strict_refuses_properties_the_schema_does_not_list_and_not_strict_allows_them(
    compiler: GrammarCompiler,
) -> None:
    extra = '{"name": "Ada", "age": 36, "email": "ada@example.com"}'
    assert not accepts(compiler, schema(PERSON, strict=True), extra)
    assert accepts(compiler, schema(PERSON, strict=False), extra)
    # Not strict, an unimplemented format is ignored rather than refused.
    compiler.compile(schema({"type": "string", "format": "no-such-format"}, strict=False))


def test_json_whitespace_is_bounded(compiler: GrammarCompiler) -> None:
    c = schema(PERSON)
    assert accepts(compiler, c, '{\n\n    "name": "Ada", "age": 36}')
    assert not accepts(compiler, c, '{\n\n\n\n\n\n"name": "Ada", "age": 36}')


def test_closed_objects_closes_listed_properties_and_leaves_compositions_open() -> None:
    s = {"type": "object", "properties": {
        "properties": {"type": "object", "properties": {"a": {"type": "string"}}},  # a property named so
        "open": {"type": "object", "properties": {}, "additionalProperties": True},
        "items": {"type": "array", "items": {"type": "object", "properties": {"b": {"type": "integer"}}}},
    }, "$defs": {"d": {"properties": {"c": {"type": "string"}}}},
        "anyOf": [{"properties": {"x": {}}}], "allOf": [{"properties": {"y": {}}}]}
    out = closed_objects(s)
    assert "additionalProperties" not in out  # it has an allOf: its members are merged
    props = out["properties"]
    assert set(props) == {"properties", "open", "items"}  # the map itself is not a schema
    assert props["properties"]["additionalProperties"] is False
    assert props["open"]["additionalProperties"] is True  # what the schema says stays
    assert props["items"]["items"]["additionalProperties"] is False
    assert out["$defs"]["d"]["additionalProperties"] is False
    assert out["anyOf"][0]["additionalProperties"] is False
    assert "additionalProperties" not in out["allOf"][0]
    assert "additionalProperties" not in s  # the caller's schema is not changed


def test_json_object_lark_gbnf_and_regex(compiler: GrammarCompiler) -> None:
    obj = OutputConstraint(ConstraintKind.JSON_OBJECT)
    assert accepts(compiler, obj, '{"anything": [1, 2, {"x": null}]}')
    assert not accepts(compiler, obj, "[1, 2]")
    lark = OutputConstraint(ConstraintKind.LARK, 'start: "Answer: " ANSWER\nANSWER: "yes" | "no"')
    assert accepts(compiler, lark, "Answer: yes")
    assert not accepts(compiler, lark, "Answer: maybe")
    gbnf = OutputConstraint(ConstraintKind.GBNF, 'root ::= "Answer: " ("yes" | "no")')
    assert accepts(compiler, gbnf, "Answer: no")
    assert not accepts(compiler, gbnf, "Answer: perhaps")
    regex = OutputConstraint(ConstraintKind.REGEX, r"\d{3}-\d{4}")
    assert accepts(compiler, regex, "555-1234")
    assert not accepts(compiler, regex, "555-12345")


def test_the_built_in_json_prompts_schemas_compile(compiler: GrammarCompiler) -> None:
    json_prompts = [p for p in builtin_prompts() if p.category == "json"]
    assert len(json_prompts) >= 4 and all(p.schema for p in json_prompts)
    for p in json_prompts:
        compiler.compile(schema(json.loads(p.schema)))


def test_compiled_grammars_are_cached_by_kind_text_and_strictness(compiler: GrammarCompiler) -> None:
    c = schema({"type": "object", "properties": {"cached": {"type": "boolean"}}})
    first = compiler.compile(c)
    again = compiler.compile(c)
    assert again.compile_seconds == 0.0 and first.compile_seconds > 0.0
    assert constraint_key(c) != constraint_key(OutputConstraint(c.kind, c.text, strict=False))
    assert constraint_key(c) != constraint_key(OutputConstraint(ConstraintKind.LARK, c.text))
    # Each reply gets its own matcher: one reply's progress does not move another's.
    a, b = reply(compiler, c), reply(compiler, c)
    ids = compiler.model.tokenize('{"cached"', add_special=False)
    a.consume(ids)
    assert b.valid_prefix(ids) == len(ids) and a.valid_prefix(ids) == 0


# -- lazy grammars ---------------------------------------------------------------------------------
def test_literal_writes_a_special_token_as_the_token(compiler: GrammarCompiler) -> None:
    assert compiler.literal("<tool_call>") == "<tool_call>"
    assert compiler.literal("</tool_call>") == "</tool_call>"
    assert compiler.literal("<call>") == '"<call>"'
    assert compiler.literal('say "hi"') == '"say \\"hi\\""'


def test_a_lazy_grammar_lets_free_text_through_and_constrains_what_follows_the_trigger(
    compiler: GrammarCompiler,
) -> None:
    c = OutputConstraint(ConstraintKind.LARK, TOOL_BODY, trigger="<tool_call>")
    assert accepts(compiler, c, "Paris is the capital of France; no tool needed.")
    assert accepts(compiler, c, 'Let me check.<tool_call>\n{"city": "Paris"}\n</tool_call>')
    assert not accepts(compiler, c, 'Let me check.<tool_call>\n{"town": "Paris"}\n</tool_call>')
    # The call ends the reply: nothing may follow its grammar.
    r = reply(compiler, c)
    r.consume(compiler.model.tokenize('<tool_call>\n{"city": "Oslo"}\n</tool_call>', add_special=False))
    assert r.done
    # The trigger is Qwen's special token; written as plain text it leads to the same grammar.
    r = reply(compiler, c)
    for piece in ("<", "tool", "_call", ">"):
        ids = compiler.model.tokenize(piece, add_special=False, parse_special=False)
        assert r.valid_prefix(ids) == len(ids)
        r.consume(ids)
    assert r.valid_prefix(compiler.model.tokenize("Hello", add_special=False)) == 0


def test_a_lazy_grammar_with_a_text_trigger_starts_whatever_the_token_boundaries(
    compiler: GrammarCompiler,
) -> None:
    body = 'start: " " %json {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}'
    c = OutputConstraint(ConstraintKind.LARK, body, trigger="CALL:")
    assert accepts(compiler, c, "Sure. CALL: {\"n\": 3}")
    assert accepts(compiler, c, "CALL: {\"n\": 12}")
    assert accepts(compiler, c, "No call here, just CALL-like words.")
    assert not accepts(compiler, c, "Sure. CALL: {\"n\": \"three\"}")


# -- the reply's state -----------------------------------------------------------------------------
def test_forced_tokens_the_mask_and_the_end(compiler: GrammarCompiler) -> None:
    c = schema({"type": "object", "properties": {"answer": {"type": "boolean"}}, "required": ["answer"],
                "x-guidance": {"whitespace_flexible": False}})
    r = reply(compiler, c)
    forced = r.forced()
    text = compiler.tokenizer.decode_str(forced)
    # '{"answer":' is forced; llguidance holds back the last bytes a longer token could span.
    assert forced and '{"answer":'.startswith(text) and len(text) >= 3
    r.consume(forced)
    allowed = r.allowed()
    assert allowed.dtype == np.bool_ and allowed.shape == (compiler.n_vocab,)
    for tok in np.nonzero(allowed)[0][:50]:
        assert r.valid_prefix([int(tok)]) == 1
    rest = compiler.model.tokenize('{"answer":true}', add_special=False)
    done = compiler.tokenizer.decode_str(forced)
    r.consume(compiler.model.tokenize('{"answer":true}'[len(done):], add_special=False))
    assert r.done and rest
    allowed = r.allowed()
    assert set(np.nonzero(allowed)[0].tolist()) == set(compiler.tokenizer.eos_tokens)  # only the end
    r.consume([compiler.model.eos()])  # the end after a complete grammar is no error


def test_greedy_and_sampling_choose_only_allowed_tokens(compiler: GrammarCompiler) -> None:
    c = OutputConstraint(ConstraintKind.REGEX, "[0-9]+")
    r = reply(compiler, c)
    rng = np.random.default_rng(5)
    logits = rng.normal(size=compiler.n_vocab).astype(np.float32)
    letter = compiler.model.tokenize("hello", add_special=False)[0]
    logits[letter] = 100.0  # the first choice is forbidden
    tok = r.greedy(logits, (), SamplingParams())
    assert compiler.tokenizer.decode_str([tok]).isdigit() and r.masked_tokens == 1
    digits = [t for t in range(compiler.n_vocab) if r.valid_prefix([t]) == 1]
    best = max(digits, key=lambda t: float(logits[t]))
    assert tok == best
    dist = r.distribution(logits, (), SamplingParams(temperature=1.0, top_k=5, top_p=1.0, min_p=0.0))
    assert set(dist.ids.tolist()) <= set(digits) and len(dist.ids) == 5
    assert abs(float(dist.probs.sum()) - 1.0) < 1e-9
