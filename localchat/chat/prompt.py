"""The turns a conversation sends to the model: system prompt first, then user and assistant messages.

The chat layer does not import the engine (import-linter keeps engine and chat
independent), so this returns plain ``PromptTurn`` pairs; services turn them
into the engine's ``ChatMessage`` tuple for a ``GenerationRequest``. Fitting
the turns into the context window is the engine's job (it drops the oldest
turns, never the system prompt, and says so).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

from localchat.chat.rounds import ToolCallRecord
from localchat.chat.store import Message


class PromptTurn(NamedTuple):
    role: str  # "system" | "user" | "assistant" | "tool"
    content: str
    tool_calls: tuple[ToolCallRecord, ...] = ()  # assistant: the calls it made
    tool_call_id: str = ""  # tool: the call this is the result of
    name: str = ""  # tool: the tool's name


def prompt_turns(system_prompt: str, messages: Iterable[Message]) -> tuple[PromptTurn, ...]:
    """The turns for the next reply.

    - the conversation's system prompt comes first when it is not blank;
    - system messages stored in the history are left out (the conversation's
      system prompt is the one that counts);
    - an assistant message with no text (a reply that was stopped or cut off
      before its first token) is left out; a partial reply with text is kept,
      because the user saw it and may refer to it;
    - a reply that used tools unfolds into the turns the model saw: for each round, the
      assistant's text with its calls, then one tool turn per call with what went back
      to the model; then its answer. (Its thinking is not sent again.)
    """
    turns: list[PromptTurn] = []
    if system_prompt.strip():
        turns.append(PromptTurn("system", system_prompt))
    for message in messages:
        if message.role == "system":
            continue
        if message.role == "assistant":
            for round_ in message.tools.rounds:
                if not round_.calls:
                    continue
                turns.append(PromptTurn("assistant", round_.text, round_.calls))
                turns += [PromptTurn("tool", c.result, tool_call_id=c.id, name=c.name) for c in round_.calls]
            if not message.content.strip():
                continue
        turns.append(PromptTurn(message.role, message.content))
    return tuple(turns)
