"""Output constraints compiled for one model's vocabulary, through llguidance.

Owns: the llguidance tokenizer of a loaded model (built from the GGUF's vocabulary once, on the first
constrained reply: about a second for a 150k-token vocabulary), the translation of an
``OutputConstraint`` into llguidance's grammar text, compiling it with a time limit, the cache of
compiled grammars, and the one-sentence ``GrammarError``s the API answers 400 with. How the decode
loop applies a compiled grammar is engine/constrained.py.

The kinds:
- JSON_SCHEMA: the schema, with bounded whitespace (``JSON_WHITESPACE``: a model cannot pad a reply
  with endless blank lines). ``strict`` (OpenAI's meaning): an object that lists its properties
  accepts no others (``additionalProperties: false`` wherever the schema leaves it open, outside
  ``allOf`` compositions, whose members must stay open to be merged), and a keyword or ``format``
  llguidance does not implement is an error; not strict, the schema is taken as JSON Schema says
  (other properties allowed) and unimplemented keywords are ignored.
- JSON_OBJECT: any JSON object.
- LARK: llguidance's Lark dialect (``%json {...}`` embeds a schema; ``<name>`` is a special token of
  the vocabulary, see ``GrammarCompiler.literal``).
- GBNF: llama.cpp's GBNF, converted to Lark by llguidance's converter.
- REGEX: the whole reply matches the regular expression.

A LARK constraint with a ``trigger`` is lazy: the reply is free text until the trigger appears, and
the grammar's ``start`` rule matches what follows the trigger (the trigger itself excluded: the
engine writes it as this vocabulary has it, as its special token where it is one, and also accepts
its plain text); free text never contains the trigger except as the start of the grammar, and a reply
without it is free text, ended by the model. See ``_lazy_grammar``.

A compiled grammar is a fresh llguidance matcher kept as a prototype; each reply decodes with a
copy of it. llguidance compiles with the GIL released, so a compile that runs past
``COMPILE_TIMEOUT_S`` is abandoned (its thread finishes on its own; the same constraint is then
refused at once) and the request gets a GrammarError instead of a hung engine.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import threading
import time
import warnings
from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import llguidance

from localchat.engine.backend import Model
from localchat.engine.errors import GrammarError
from localchat.engine.types import ConstraintKind, OutputConstraint

if TYPE_CHECKING:
    from llguidance._lib import JsonCompileOptions

log = logging.getLogger("localchat.engine.grammar")

COMPILE_TIMEOUT_S = 2.0
CACHE_SIZE = 32  # compiled grammars kept per model
# JSON whitespace: a few spaces or tabs, or one or two line breaks and an indent (as llama.cpp's own
# schema converter allows). llguidance's default (any run of whitespace) lets a model that lost its
# way write blank lines until max_tokens.
JSON_WHITESPACE = r"(?:[ \t]{1,8}|\n{1,2}[ \t]{0,40})"

_WHAT = {
    ConstraintKind.JSON_SCHEMA: "JSON schema",
    ConstraintKind.JSON_OBJECT: "JSON object constraint",
    ConstraintKind.LARK: "Lark grammar",
    ConstraintKind.GBNF: "GBNF grammar",
    ConstraintKind.REGEX: "regular expression",
}
_BODY = "lc_body"  # the lazy wrapper's name for the caller's grammar


def constraint_key(c: OutputConstraint) -> str:
    """The cache key of a constraint: a hash of everything that changes what it compiles to."""
    raw = json.dumps([c.kind.value, c.strict, c.trigger, c.text], ensure_ascii=False)
    return hashlib.sha256(raw.encode("utf-8")).hexdigest()


def sentence(what: str, detail: str) -> str:
    """llguidance's message (often several lines with a caret under the grammar) as one sentence."""
    lines = [line.strip() for line in detail.strip().splitlines() if line.strip()]
    first = lines[0] if lines else "unknown error"
    if first.endswith(":"):  # a regex's error: "regex parse error:", the pattern, a caret, "error: why"
        why = next((line[6:].strip() for line in lines[1:] if line.startswith("error:")), "")
        first = f"{first} {why}" if why else first.rstrip(":")
    m = re.match(r"at (\d+)\((\d+)\): (.*)", first)
    if m:
        first = f"{m.group(3)} (line {m.group(1)}, column {m.group(2)})"
    first = first.split("; following special tokens are available")[0]
    if len(first) > 240:
        first = first[:237] + "..."
    return f"The {what} cannot be used: {first.rstrip('.')}."


# -- JSON schema -------------------------------------------------------------------------------------
_SCHEMA_KEYS = ("items", "additionalItems", "additionalProperties", "not", "if", "then", "else",
                "contains", "propertyNames", "unevaluatedItems", "unevaluatedProperties")
_SCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
_SCHEMA_LISTS = ("anyOf", "oneOf", "prefixItems", "items")


def closed_objects(schema: Any, in_all_of: bool = False) -> Any:
    """A copy of ``schema`` where every object that lists its properties accepts no others (strict).

    Only where the schema says nothing of other properties, and not on the members of an ``allOf``
    (nor on a schema that has one): closing those would make their merge refuse each other's
    properties.
    """
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key in _SCHEMA_MAPS and isinstance(value, dict):
            out[key] = {k: closed_objects(v) for k, v in value.items()}
        elif key in _SCHEMA_LISTS and isinstance(value, list):
            out[key] = [closed_objects(v) for v in value]
        elif key == "allOf" and isinstance(value, list):
            out[key] = [closed_objects(v, in_all_of=True) for v in value]
        elif key in _SCHEMA_KEYS:
            out[key] = closed_objects(value)
        else:
            out[key] = value
    typ = schema.get("type")
    is_object = typ == "object" or (isinstance(typ, list) and "object" in typ) or "properties" in schema
    if is_object and not in_all_of and "allOf" not in schema and "additionalProperties" not in schema:
        out["additionalProperties"] = False
    return out


def json_schema_grammar(text: str, strict: bool) -> str:
    """llguidance's grammar for a JSON schema; GrammarError when the text is not a JSON schema."""
    try:
        schema = json.loads(text)
    except json.JSONDecodeError as exc:
        raise GrammarError(sentence(_WHAT[ConstraintKind.JSON_SCHEMA],
                                    f"it is not valid JSON ({exc.msg} at line {exc.lineno}, "
                                    f"column {exc.colno})")) from None
    if not isinstance(schema, dict | bool):
        raise GrammarError(sentence(_WHAT[ConstraintKind.JSON_SCHEMA],
                                    "it must be a JSON object (or true or false)"))
    if strict:
        schema = closed_objects(schema)
    options: JsonCompileOptions = {"lenient": not strict}
    own = schema.get("x-guidance") if isinstance(schema, dict) else None
    if not (isinstance(own, dict) and {"whitespace_flexible", "whitespace_pattern"} & set(own)):
        options["whitespace_pattern"] = JSON_WHITESPACE  # unless the schema says how (llguidance's key)
    try:
        return str(llguidance.LLMatcher.grammar_from_json_schema(json.dumps(schema), defaults=options))
    except ValueError as exc:
        raise GrammarError(sentence(_WHAT[ConstraintKind.JSON_SCHEMA], str(exc))) from None


# -- lazy grammars -----------------------------------------------------------------------------------
def regex_literal(text: str) -> str:
    """``text`` as a regular expression matching exactly it (llguidance's Rust syntax, inside /.../)."""
    return "".join(ch if ch.isalnum() or ch in " _" else f"\\x{{{ord(ch):x}}}" for ch in text)


def _lazy_grammar(trigger_syntax: str, trigger: str, body: str) -> str:
    """llguidance's grammar for "free text, then ``trigger``, then ``body``" (or free text alone).

    ``LC_TEXT`` is any text without the trigger, so the moment the trigger is written the body's
    grammar takes over; the lazy ``lc_head`` ends at the trigger's first occurrence whatever the
    token boundaries (a token may hold the trigger's last characters and the body's first ones).
    Where the trigger is a special token, the token itself is the usual way in; its plain text
    (written piece by piece) leads to the same grammar.
    """
    quoted = json.dumps(trigger)
    lines = [
        f"start: LC_TEXT | lc_head @{_BODY}" + (f" | LC_TEXT {trigger_syntax} @{_BODY}"
                                                  if trigger_syntax != quoted else ""),
        f"lc_head[lazy]: LC_TEXT {quoted}",
        f"LC_TEXT: /(?s:.*)/ & ~/(?s:.*){regex_literal(trigger)}(?s:.*)/",
    ]
    return json.dumps({"grammars": [{"lark_grammar": "\n".join(lines)},
                                    {"name": _BODY, "lark_grammar": body}]})


# -- compiling -----------------------------------------------------------------------------------------
def _compile_with_timeout(tokenizer: llguidance.LLTokenizer, grammar: str,
                          timeout_s: float) -> llguidance.LLMatcher | None:
    """The matcher, or None when compiling takes longer than ``timeout_s`` (the thread is left to end)."""
    box: list[llguidance.LLMatcher] = []
    failure: list[BaseException] = []

    def work() -> None:
        try:
            box.append(llguidance.LLMatcher(tokenizer, grammar, log_level=0))
        except BaseException as exc:  # llguidance raises only on API misuse; carried to the caller
            failure.append(exc)

    thread = threading.Thread(target=work, name="grammar-compile", daemon=True)
    thread.start()
    thread.join(timeout_s)
    if thread.is_alive():
        return None
    if failure:
        raise failure[0]
    return box[0]


class CompiledGrammar:
    """A compiled constraint: ``matcher()`` gives each reply its own matcher at the start state."""

    def __init__(self, prototype: llguidance.LLMatcher, compile_seconds: float) -> None:
        self._prototype = prototype
        self.compile_seconds = compile_seconds

    def matcher(self) -> llguidance.LLMatcher:
        return self._prototype.deep_copy()


class GrammarCompiler:
    """Compiles output constraints for one model; built on a model's first constrained reply and kept."""

    def __init__(self, model: Model, timeout_s: float = COMPILE_TIMEOUT_S, cache_size: int = CACHE_SIZE,
                 tokenizer: Callable[[Model], llguidance.LLTokenizer] | None = None) -> None:
        self.model = model
        self.timeout_s = timeout_s
        self.cache_size = cache_size
        t0 = time.perf_counter()
        self.tokenizer = (tokenizer or build_tokenizer)(model)
        self.tokenizer_seconds = time.perf_counter() - t0
        self.n_vocab = model.n_vocab
        self._cache: OrderedDict[str, CompiledGrammar] = OrderedDict()
        self._too_slow: set[str] = set()
        log.info("grammar tokenizer for %s built in %.2f s", model.path.name, self.tokenizer_seconds)

    def literal(self, text: str) -> str:
        """``text`` in Lark as this model writes it: ``<text>`` where it is one special token of the
        vocabulary (Qwen's ``<tool_call>``), else a quoted string. A quoted string never matches a
        special token, so a grammar that spells a special token as text forbids the token the model
        was trained to write."""
        ids = self.model.tokenize(text, add_special=False, parse_special=True)
        if len(ids) == 1 and self.tokenizer.is_special_token(ids[0]):
            return text if text.startswith("<") and text.endswith(">") else f"<[{ids[0]}]>"
        return json.dumps(text)

    def grammar_text(self, c: OutputConstraint) -> str:
        """llguidance's grammar for a constraint (not yet compiled); GrammarError for a bad one."""
        what = _WHAT[c.kind]
        if c.trigger and c.kind is not ConstraintKind.LARK:
            raise GrammarError(f"A trigger is only supported with a Lark grammar, not with a {what}.")
        if c.kind is ConstraintKind.JSON_SCHEMA:
            return json_schema_grammar(c.text, c.strict)
        if c.kind is ConstraintKind.JSON_OBJECT:
            return json_schema_grammar('{"type": "object"}', strict=False)
        if not c.text.strip():
            raise GrammarError(f"The {what} is empty.")
        if c.kind is ConstraintKind.REGEX:
            return str(llguidance.LLMatcher.grammar_from_regex(c.text))
        text = c.text
        if c.kind is ConstraintKind.GBNF:
            from llguidance.gbnf_to_lark import any_to_lark

            try:
                text = any_to_lark(text)
            except Exception as exc:  # the converter raises plain Exceptions for unknown rules
                raise GrammarError(sentence(what, f"it could not be converted ({exc})")) from None
        if c.trigger:
            return _lazy_grammar(self.literal(c.trigger), c.trigger, text)
        return str(llguidance.LLMatcher.grammar_from_lark(text))

    def compile(self, c: OutputConstraint) -> CompiledGrammar:
        """The compiled constraint, from the cache when this exact one was compiled before."""
        key = constraint_key(c)
        hit = self._cache.get(key)
        if hit is not None:
            self._cache.move_to_end(key)
            return CompiledGrammar(hit._prototype, 0.0)
        what = _WHAT[c.kind]
        if key in self._too_slow:
            raise GrammarError(f"The {what} takes longer than {self.timeout_s:g} s to compile; "
                               "simplify it.")
        t0 = time.perf_counter()
        grammar = self.grammar_text(c)
        matcher = _compile_with_timeout(self.tokenizer, grammar, self.timeout_s)
        seconds = time.perf_counter() - t0
        if matcher is None:
            self._too_slow.add(key)
            log.warning("a %s took longer than %.1f s to compile; refused", what, self.timeout_s)
            raise GrammarError(f"The {what} takes longer than {self.timeout_s:g} s to compile; "
                               "simplify it.")
        if matcher.is_error():
            raise GrammarError(sentence(what, matcher.get_error()))
        if matcher.is_stopped() and not matcher.is_accepting():
            raise GrammarError(sentence(what, "no text matches it"))
        compiled = CompiledGrammar(matcher, seconds)
        self._cache[key] = compiled
        while len(self._cache) > self.cache_size:
            self._cache.popitem(last=False)
        log.debug("compiled a %s in %.1f ms", what, seconds * 1000)
        return compiled


def build_tokenizer(model: Model) -> llguidance.LLTokenizer:
    """llguidance's view of the model's vocabulary, with every end-of-generation token as an end."""
    from llguidance.llamacpp import lltokenizer_from_vocab

    eog = [t for t in range(model.n_vocab) if model.is_eog(t)] or [model.eos()]
    with warnings.catch_warnings():
        # The bridge asks each token's attributes through a name llama-cpp-python marks deprecated:
        # one warning per token, 150k of them, would be most of the build's time.
        warnings.simplefilter("ignore", DeprecationWarning)
        return lltokenizer_from_vocab(model.vocab, n_vocab=model.n_vocab, eos_token=eog)
