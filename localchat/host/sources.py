"""Who asked for a job: its ``source`` string, and which API surface a request came through.

A job's source is "window" for the window's own replies, and "SURFACE:SESSION" for a request
of the local API: the surface is the API it spoke (OpenAI's chat and completions, OpenAI's
Responses, Anthropic's Messages, Ollama's), the session one conversation. The queue is fair
between sources (host/jobs.py), and the status bar says which surface the running request came
through; both read the source through this module, never by splitting the string themselves.
"""

from __future__ import annotations

import enum

WINDOW = "window"


class Surface(enum.Enum):
    OPENAI = "openai"  # /v1/chat/completions, /v1/completions, llama.cpp's /completion and /infill
    RESPONSES = "responses"  # OpenAI's /v1/responses
    ANTHROPIC = "anthropic"  # Anthropic's /v1/messages
    OLLAMA = "ollama"  # Ollama's /api/*

    @property
    def title(self) -> str:
        """The API's name as its users know it."""
        return _TITLES[self]


_TITLES = {
    Surface.OPENAI: "OpenAI",
    Surface.RESPONSES: "OpenAI Responses",
    Surface.ANTHROPIC: "Anthropic",
    Surface.OLLAMA: "Ollama",
}


def job_source(surface: Surface, session: str) -> str:
    """The source of a job an API request asked for: "anthropic:1f2e3d..."."""
    return f"{surface.value}:{session}"


def surface_of(source: str) -> Surface | None:
    """The API surface a job came through (None: the window's own, or a source of no surface)."""
    prefix, sep, _ = source.partition(":")
    if not sep:
        return None
    if prefix == "api":  # the sources of earlier versions (and of tests that name one)
        return Surface.OPENAI
    try:
        return Surface(prefix)
    except ValueError:
        return None
