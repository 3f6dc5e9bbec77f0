"""The tool-call formats the catalog's families write, and which one a model uses.

A format is told from the model's chat template: the text a template renders for
an assistant's tool calls is the text the model was trained to write.

- ``hermes``: ``<tool_call>{"name": .., "arguments": ..}</tool_call>``, one block per call
  (Qwen2.5, Qwen2.5-Coder, Qwen3, Hermes, Falcon3).
- ``llama3``: a bare JSON object ``{"name": .., "parameters": ..}`` as the whole reply, or after
  ``<|python_tag|>`` (Llama 3.1-3.3).
- ``mistral``: ``[TOOL_CALLS][{"name": .., "arguments": ..}, ...]`` (Mistral Small 3.1).
- ``granite``: ``<|tool_call|>[{"name": .., "arguments": ..}, ...]`` (Granite 3.x).
- ``generic``: templates that do not render tools (Gemma 3, SmolLM2, Phi-4, DeepSeek-R1 distills,
  Gemma 4's own syntax, which is not JSON) and GGUFs without a template: the tools are described
  in a system message that asks for the hermes form, which small models know best.

Reasoning (``<think>…</think>``) is separate from the call format: Qwen3 and the DeepSeek-R1
distills think before they answer or call, and some templates open the block in the prompt.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class ToolFormat:
    """How one family writes tool calls."""

    name: str
    openers: tuple[str, ...]  # texts that open a block of calls (the grammar's triggers)
    closer: str = ""  # text that closes a block ("": the JSON's end closes it)
    array: bool = False  # a block holds a JSON array of calls (else one object per block)
    args_key: str = "arguments"  # the key the family writes the arguments under
    stops: tuple[str, ...] = ()  # text that ends the reply once tools are offered (a made-up result)


@dataclass(frozen=True)
class ThinkingTags:
    open: str = "<think>"
    close: str = "</think>"


HERMES = ToolFormat("hermes", ("<tool_call>",), "</tool_call>", stops=("<tool_response>",))
LLAMA3 = ToolFormat("llama3", ("<|python_tag|>",), args_key="parameters")
MISTRAL = ToolFormat("mistral", ("[TOOL_CALLS]",), array=True)
GRANITE = ToolFormat("granite", ("<|tool_call|>",), array=True)
GENERIC = ToolFormat("generic", ("<tool_call>",), "</tool_call>", stops=("<tool_response>",))

FORMATS = {f.name: f for f in (HERMES, LLAMA3, MISTRAL, GRANITE, GENERIC)}

THINK = ThinkingTags()

_USES_TOOLS = re.compile(r"\btools\b")


@dataclass(frozen=True)
class ToolSupport:
    """What a loaded model does with tools and thinking."""

    format: ToolFormat
    native: bool  # its template renders tools and calls in ``format`` (else the generic prompt)
    thinking: ThinkingTags | None  # it thinks in these tags before answering
    templated: bool = True  # the model has a chat template (tools need one: tooluse/validate.py)

    @property
    def markers(self) -> tuple[str, ...]:
        """Texts of the format and thinking that may be single (special) tokens of the vocabulary."""
        tags = (self.thinking.open, self.thinking.close) if self.thinking else ()
        closer = (self.format.closer,) if self.format.closer else ()
        return (*self.format.openers, *closer, *tags)


def native_format(template: str) -> ToolFormat | None:
    """The format a template renders tool calls in, or None when it renders none we read."""
    if not _USES_TOOLS.search(template):
        return None  # no tool definitions reach the model: it was not trained on them through this template
    if "[TOOL_CALLS]" in template:
        return MISTRAL
    if "<|tool_call|>" in template:
        return GRANITE
    if "<tool_call>" in template:
        return HERMES
    if "<|python_tag|>" in template or ("<|start_header_id|>" in template and "ipython" in template):
        return LLAMA3
    return None


def detect_support(template: str | None, has_token: Callable[[str], bool]) -> ToolSupport:
    """The format and thinking of a model, from its chat template and vocabulary.

    ``has_token(text)``: whether ``text`` is one token of the vocabulary. A model thinks when its
    template mentions ``<think>`` (Qwen3, the R1 distills, Granite 3.3) or ``<think>`` and
    ``</think>`` are tokens of their own (a GGUF whose template was replaced).
    """
    fmt = native_format(template) if template else None
    thinks = bool(template and THINK.open in template) or (has_token(THINK.open) and has_token(THINK.close))
    return ToolSupport(fmt or GENERIC, fmt is not None, THINK if thinks else None, template is not None)
