"""What the window says when the local API switched the model: an API request named another local
model and loaded it (Settings → Server → "Let API requests load other models"), or asked for one that
failed to load, and the model before came back.

The engine's state says who asked for the model (``EngineState.requested_by``: an API job's source,
"" for the window) and what a failed request's load was (``refused_path``, ``refused_failure``); this
module turns that into the sentence under the chat. ``name`` gives a file's name as the window shows it
(``catalog.names.model_name``).
"""

from __future__ import annotations

from collections.abc import Callable

from localchat.host.events import EngineState, Phase
from localchat.host.failure_words import Audience, sentence
from localchat.host.sources import surface_of


def requester(state: EngineState) -> str:
    """ "an OpenAI request": who asked for the model in words; "" when the window (or nobody) did."""
    surface = surface_of(state.requested_by) if state.requested_by else None
    if surface is None:
        return ""
    title = surface.title
    return f"an {title} request" if title[0] in "AEIOU" else f"a {title} request"


def switch_sentence(state: EngineState, name: Callable[[str], str]) -> str:
    """The sentence under the chat for an API switch in ``state`` ("" when there is nothing to say)."""
    config = state.config
    if config is None:
        return ""
    model = name(config.target_path)
    if state.refused_path:
        asked = requester(state) or "An API request"
        why = sentence(state.refused_failure, Audience.WINDOW) if state.refused_failure is not None else ""
        back = f"{model} is loaded again." if state.phase is Phase.READY else f"Loading {model} again."
        return (f"{asked[0].upper()}{asked[1:]} asked for {name(state.refused_path)}, which could not be "
                f"loaded{': ' + why.rstrip('.') if why else ''}. {back}")
    who = requester(state)
    if not who:
        return ""
    if state.phase is Phase.LOADING:
        return f"Loading {model} for {who} (the API asked for it; your reply goes after it)."
    if state.phase is Phase.READY:
        return (f"{model} loaded by {who}: the API switched the model. Settings → Server → “Let API "
                "requests load other models” turns this off.")
    return ""


def switch_headline(state: EngineState, name: Callable[[str], str]) -> str:
    """The status bar's short word for a model an API request loaded ("" when none did)."""
    who = requester(state)
    if state.config is None or state.refused_path or not who or state.phase is not Phase.READY:
        return ""
    return f"{name(state.config.target_path)} loaded by {who}"
