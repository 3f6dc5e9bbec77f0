"""Turn chat messages (Markdown) into the rich text a QTextBrowser shows.

Qt's own Markdown reader does the prose; fenced code blocks are cut out first
and drawn as a shaded box with a "Copy" link, because QTextDocument has no
widgets inside it and an anchor is the one clickable thing it offers. The link
is ``copy:<n>`` and ``n`` indexes the list of code blocks the caller keeps.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass

from PySide6.QtGui import QTextDocument

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})\s*([\w+#.-]*)")
_BODY = re.compile(r"<body[^>]*>(.*)</body>", re.DOTALL)


@dataclass(frozen=True)
class Segment:
    """A piece of a message: prose (Markdown) or one fenced code block."""

    kind: str  # "text" | "code"
    text: str
    language: str = ""


def split_fences(markdown: str) -> list[Segment]:
    """Split Markdown into prose and fenced code; an unclosed fence (still streaming) runs to the end."""
    segments: list[Segment] = []
    prose: list[str] = []
    code: list[str] = []
    fence = ""
    language = ""
    for line in markdown.split("\n"):
        if not fence:
            match = _FENCE.match(line)
            if match:
                if prose:
                    segments.append(Segment("text", "\n".join(prose)))
                    prose = []
                fence, language = match.group(1), match.group(2)
                continue
            prose.append(line)
        elif line.strip().startswith(fence[0] * len(fence)) and not line.strip().strip(fence[0]):
            segments.append(Segment("code", "\n".join(code), language))
            code, fence, language = [], "", ""
        else:
            code.append(line)
    if fence:
        segments.append(Segment("code", "\n".join(code), language))
    elif prose:
        segments.append(Segment("text", "\n".join(prose)))
    return [s for s in segments if s.kind == "code" or s.text.strip()]


def markdown_to_html(markdown: str) -> str:
    """Qt's Markdown reader, returning only the body so fragments can be joined."""
    doc = QTextDocument()
    doc.setMarkdown(markdown)
    match = _BODY.search(doc.toHtml())
    return match.group(1).strip() if match else html.escape(markdown)


@dataclass(frozen=True)
class Colors:
    """The few colours the chat needs, taken from the widget's palette (light or dark)."""

    text: str
    muted: str
    code_background: str
    code_border: str
    link: str
    user_background: str


def render_message(markdown: str, colors: Colors, code_blocks: list[str], *, plain: bool = False) -> str:
    """HTML for one message body. Code blocks are appended to ``code_blocks`` for the copy links.

    ``plain`` keeps the text literal (user messages are shown as typed).
    """
    if plain:
        escaped = html.escape(markdown).replace("\n", "<br/>")
        return f'<p style="white-space: pre-wrap;">{escaped}</p>'
    parts: list[str] = []
    for segment in split_fences(markdown):
        if segment.kind == "text":
            parts.append(markdown_to_html(segment.text))
            continue
        index = len(code_blocks)
        code_blocks.append(segment.text)
        label = html.escape(segment.language or "code")
        body = html.escape(segment.text) or "&nbsp;"
        parts.append(
            f'<table width="100%" cellspacing="0" cellpadding="6" '
            f'style="margin-top:4px; margin-bottom:4px; border-collapse:collapse; '
            f'border: 1px solid {colors.code_border};" bgcolor="{colors.code_background}">'
            f'<tr><td><span style="color:{colors.muted};">{label}</span></td>'
            f'<td align="right"><a href="copy:{index}" style="color:{colors.link};">Copy</a></td></tr>'
            f'<tr><td colspan="2"><pre style="font-family: monospace; margin:0;">{body}</pre></td></tr>'
            f"</table>"
        )
    return "\n".join(parts)
