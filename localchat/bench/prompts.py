"""Benchmark prompts: the built-in set, the held-out set, a JSON Lines file, or prompts typed by the user.

Three sets ship in localchat/data: ``bench_prompts.jsonl``, the built-in set the benchmark runs by
default, and two held-out sets written to check adaptive speculation and never used to tune anything
(a policy tuned on the built-in set is judged on these; keep it so: never tune against them, and add
new prompts rather than edit these):

- ``heldout_prompts.jsonl`` (``--prompts heldout``): 4 prompts per category (code, edit, chat,
  creative).
- ``heldout2_prompts.jsonl`` (``--prompts heldout2``): 8 prompts per category, replies of about
  50-300 tokens, written and committed before any measurement of the policy change it judges
  (issue 27), so that no figure could have shaped it. Diagnosis (tools/adaptive_trace.py) runs on
  ``heldout``; ``heldout2`` is only ever benchmarked.

A prompt may carry a ``schema`` (the ``json`` category: the reply is constrained to it) or ``tools``
with a ``tool_choice`` (the ``tools`` category: the tools are offered as OpenAI's API offers them,
``{"name", "description", "parameters"}``, and the reply follows the tool grammar: the whole reply
with ``"required"`` or a function's name, from the model's call marker on with ``"auto"``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Protocol, TypeVar

from localchat.engine.types import Tool, ToolChoice, ToolChoiceMode


class BenchError(ValueError):
    """Prompts that cannot be read; the message names the file (or "the typed prompts") and line."""


@dataclass(frozen=True)
class BenchPrompt:
    id: str
    category: str
    prompt: str
    schema: str = ""  # JSON text of a JSON Schema the reply must match ("": none)
    tools: tuple[Tool, ...] = ()  # tools offered to the model (the ``tools`` category)
    tool_choice: ToolChoice = field(default_factory=ToolChoice)


# The prompt sets shipped in localchat/data, by the name ``--prompts`` takes.
SHIPPED_SETS = {"builtin": ("bench_prompts.jsonl", "built-in prompts"),
                "heldout": ("heldout_prompts.jsonl", "held-out prompts"),
                "heldout2": ("heldout2_prompts.jsonl", "second held-out prompts")}


def builtin_prompts() -> list[BenchPrompt]:
    return shipped_prompts("builtin")


def heldout_prompts() -> list[BenchPrompt]:
    """The held-out set: never used to tune anything (see the module docstring)."""
    return shipped_prompts("heldout")


def heldout2_prompts() -> list[BenchPrompt]:
    """The second held-out set: never used to tune anything (see the module docstring)."""
    return shipped_prompts("heldout2")


def shipped_prompts(name: str) -> list[BenchPrompt]:
    filename, label = SHIPPED_SETS[name]
    text = resources.files("localchat.data").joinpath(filename).read_text("utf-8")
    return parse_prompts(text, label)


def prompts_from(spec: str | Path) -> list[BenchPrompt]:
    """A shipped set by name (``builtin``, ``heldout``, ``heldout2``), else the JSON Lines file at ``spec``
    (``./heldout`` for a file of that name); BenchError with a sentence when it cannot be read."""
    if isinstance(spec, str) and spec in SHIPPED_SETS:
        return shipped_prompts(spec)
    return load_prompts(Path(spec))


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
        schema = obj.get("schema")
        if schema is not None and not isinstance(schema, dict):
            raise BenchError(f'{source}, line {n}: "schema" must be a JSON object (a JSON Schema).')
        tools, choice = _tools(obj, f"{source}, line {n}")
        out.append(BenchPrompt(pid, str(obj.get("category", "default")), obj["prompt"],
                               json.dumps(schema) if schema is not None else "", tools, choice))
    if not out:
        raise BenchError(f"{source} holds no prompts.")
    return out


def _tools(obj: dict[str, Any], where: str) -> tuple[tuple[Tool, ...], ToolChoice]:
    """A prompt's ``tools`` and ``tool_choice``; BenchError naming ``where`` when they are malformed."""
    raw = obj.get("tools", [])
    if not isinstance(raw, list) or not all(
            isinstance(t, dict) and isinstance(t.get("name"), str) and t["name"] for t in raw):
        raise BenchError(f'{where}: "tools" must be a list of objects, each with a "name".')
    tools = []
    for t in raw:
        params = t.get("parameters", {"type": "object", "properties": {}})
        if not isinstance(params, dict):
            raise BenchError(f'{where}: the "parameters" of the tool "{t["name"]}" must be a JSON Schema.')
        tools.append(Tool(t["name"], str(t.get("description", "")), json.dumps(params)))
    choice = obj.get("tool_choice", "auto")
    if not isinstance(choice, str):
        raise BenchError(f'{where}: "tool_choice" must be "auto", "none", "required" or a tool\'s name.')
    modes = {m.value: m for m in ToolChoiceMode if m is not ToolChoiceMode.FUNCTION}
    if choice in modes:
        return tuple(tools), ToolChoice(modes[choice])
    if choice not in {t.name for t in tools}:
        raise BenchError(f'{where}: "tool_choice" names "{choice}", which is not one of its tools.')
    return tuple(tools), ToolChoice(ToolChoiceMode.FUNCTION, choice)


def typed_prompts(text: str) -> list[BenchPrompt]:
    """Prompts typed or pasted by the user: JSON Lines if every line is an object, else one per line."""
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        raise BenchError("Type at least one prompt, one per line.")
    if all(line.lstrip().startswith("{") for line in lines):
        return parse_prompts(text, "The typed prompts")
    return [BenchPrompt(f"typed-{i}", "typed", line.strip()) for i, line in enumerate(lines, start=1)]


class _Categorised(Protocol):
    @property
    def category(self) -> str: ...


_P = TypeVar("_P", bound=_Categorised)


def select(prompts: Sequence[_P], categories: Sequence[str] | None = None, limit: int = 0) -> list[_P]:
    """Only the given categories (all when None or empty), at most ``limit`` per category (0: all);
    prompts, or anything else with a category (a recorded reply, tools/adaptive_replay.py)."""
    chosen = [p for p in prompts if not categories or p.category in categories]
    if limit <= 0:
        return chosen
    kept: dict[str, int] = {}
    out: list[_P] = []
    for p in chosen:
        if kept.get(p.category, 0) < limit:
            kept[p.category] = kept.get(p.category, 0) + 1
            out.append(p)
    return out


def limit_per_category(prompts: Sequence[BenchPrompt], limit: int) -> list[BenchPrompt]:
    return select(prompts, None, limit)
