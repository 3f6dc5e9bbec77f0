"""What a request with tools (or a thinking model) asks of one reply: the prompt's tools, which calls
are read, and the reader the engine feeds the reply's text to.

The engine asks ``plan_reply`` once per request; it validates the request's tools
(ToolRequestError with a sentence) before anything is rendered.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from localchat.engine.tooluse.formats import ToolSupport
from localchat.engine.tooluse.parser import PassThrough, ReplyParser, ReplyReader, new_call_id
from localchat.engine.tooluse.render import ToolPrompt
from localchat.engine.tooluse.validate import check_tools
from localchat.engine.types import GenerationRequest, ToolChoiceMode


@dataclass(frozen=True)
class ReplyPlan:
    prompt: ToolPrompt | None  # the tools the prompt describes (None: none offered)
    names: frozenset[str]  # the tools whose calls are read from the reply (empty: no call is read)
    parallel: bool  # more than one call may be read (else the engine stops after the first)
    reasoning: bool  # the thinking goes to ``reasoning``, apart from the content
    stops: tuple[str, ...]  # extra stop strings (a result the model starts to make up)

    def reader(
        self, support: ToolSupport, opens_thinking: bool, new_id: Callable[[], str] = new_call_id
    ) -> ReplyReader:
        if not self.names and not self.reasoning:
            return PassThrough()
        thinking = support.thinking if self.reasoning else None
        opens = opens_thinking and thinking is not None
        return ReplyParser(support.format, self.names, thinking, opens, new_id)


def plan_reply(request: GenerationRequest, support: ToolSupport) -> ReplyPlan:
    """The plan for ``request`` on a model with ``support``; ToolRequestError for bad tools."""
    check_tools(
        request.tools, request.tool_choice, raw_prompt=request.prompt is not None, templated=support.templated
    )
    if not request.tools:
        thinks = request.separate_reasoning and support.thinking is not None
        return ReplyPlan(None, frozenset(), True, thinks, ())
    choice = request.tool_choice
    prompt = ToolPrompt(request.tools, choice, request.parallel_tool_calls)
    if choice.mode is ToolChoiceMode.NONE:
        names: frozenset[str] = frozenset()
    elif choice.mode is ToolChoiceMode.FUNCTION:
        names = frozenset({choice.name})
    else:
        names = frozenset(t.name for t in request.tools)
    parallel = request.parallel_tool_calls and choice.mode is not ToolChoiceMode.FUNCTION
    stops = support.format.stops if names else ()
    return ReplyPlan(prompt, names, parallel, support.thinking is not None, stops)
