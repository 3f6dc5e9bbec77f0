"""Turn chat messages (Markdown) into the rich text a QTextBrowser shows.

Qt's own Markdown reader does the prose; fenced code blocks are cut out first
and drawn as a shaded box with a "Copy" link, because QTextDocument has no
widgets inside it and an anchor is the one clickable thing it offers. The link
is ``copy:<n>`` and ``n`` indexes the list of code blocks the caller keeps.

A single line break in prose stays a line break (a poem's lines, an address),
as the model wrote it: CommonMark would join such lines into one paragraph,
so each is made a hard break (two trailing spaces) before Qt reads it; blank
lines still part paragraphs, and list items, headings, tables and code keep
their own syntax.

A block whose fence names a language Pygments knows is coloured by it, with
inline styles (QTextDocument reads no style sheet classes) in a light or a dark
Pygments style after the palette. A block with accepted-draft colouring keeps
that colouring instead: the two would fight over every character.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from functools import lru_cache

from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexer import Lexer
from pygments.lexers import get_lexer_by_name
from pygments.util import ClassNotFound
from PySide6.QtGui import QTextDocument

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})\s*([\w+#.-]*)")
_BODY = re.compile(r"<body[^>]*>(.*)</body>", re.DOTALL)

# Accepted draft text is bracketed by two private-use characters before the
# Markdown is read, and the brackets become coloured spans in the HTML after.
DRAFT_OPEN = "\ue000"
DRAFT_CLOSE = "\ue001"
# Block syntax at the start of a line (indent, heading, quote, list item) stays
# outside the brackets, or the Markdown reader would no longer see it.
_BLOCK_PREFIX = re.compile(r"^(?:\s*(?:#{1,6}\s+|>\s?|[-*+]\s+|\d{1,9}[.)]\s+))*\s*")
# Lines of syntax only (fences, rules, setext underlines, table delimiters) get no brackets.
_SYNTAX_LINE = re.compile(r"^[\s|:\-=*_#`~]*$")
LINE_SEPARATOR = "\u2028"
# A line that starts a block of its own (or is indented code), so it is never joined to the line above.
_STARTS_BLOCK = re.compile(
    r"^(?: {4}|\t| {0,3}(?:[-*+](?:\s|$)|\d{1,9}[.)](?:\s|$)|#{1,6}(?:\s|$)|>|`{3,}|~{3,}|<"
    r"|(?:[-*_=]\s*){3,}$|=+\s*$|-+\s*$))"
)
# A line after which the next starts a new block: a heading, indented code.
_ENDS_BLOCK = re.compile(r"^(?: {4}|\t| {0,3}#{1,6}(?:\s|$))")
_PAINT_TOKENS = re.compile("(<[^>]*>|\ue000|\ue001)")
_DELIMITER_RUN = re.compile(r"[*_~`]{2,}")  # one delimiter, never split by a bracket
_LINK_TARGET = re.compile(r"\]\([^)]*\)")  # brackets would end up in the address


def strip_draft_marks(text: str) -> str:
    return text.replace(DRAFT_OPEN, "").replace(DRAFT_CLOSE, "")


def mark_drafted(markdown: str, flags: list[bool]) -> str:
    """Bracket the characters flagged True (from accepted drafts), one line at a time.

    ``flags`` has one entry per character of ``markdown``; a shorter list leaves the rest unmarked.
    """
    out: list[str] = []
    pos = 0
    for line in markdown.split("\n"):
        line_flags = flags[pos : pos + len(line)]
        pos += len(line) + 1
        if _SYNTAX_LINE.match(line) or _FENCE.match(line):
            out.append(line)
            continue
        start = _BLOCK_PREFIX.match(line).end()  # type: ignore[union-attr]
        line_flags = list(line_flags)
        for match in _DELIMITER_RUN.finditer(line, start):
            first = match.start()
            if first < len(line_flags):
                for j in range(first, min(match.end(), len(line_flags))):
                    line_flags[j] = line_flags[first]
        for j, ch in enumerate(line[: len(line_flags)]):
            if ch.isspace() or ch == "|":  # spaces have no colour; table cells trim them
                line_flags[j] = False
        for match in _LINK_TARGET.finditer(line, start):
            for j in range(match.start(), min(match.end(), len(line_flags))):
                line_flags[j] = False
        parts = [line[:start]]
        inside = False
        for ch, flag in zip(line[start:], line_flags[start:], strict=False):
            if flag != inside:
                parts.append(DRAFT_OPEN if flag else DRAFT_CLOSE)
                inside = flag
            parts.append(ch)
        parts.append(line[start + len(line_flags[start:]) :])
        if inside:
            parts.append(DRAFT_CLOSE)
        out.append("".join(parts))
    return "\n".join(out)


def paint_drafted(html_text: str, color: str) -> str:
    """Turn the brackets into coloured spans that hold text only, so tags always nest."""
    open_tag = f'<span style="color:{color};">'
    out: list[str] = []
    inside = False
    for token in _PAINT_TOKENS.split(html_text):
        if token == DRAFT_OPEN:
            if not inside:
                out.append(open_tag)
            inside = True
        elif token == DRAFT_CLOSE:
            if inside:
                out.append("</span>")
            inside = False
        elif token.startswith("<") and token.endswith(">"):
            tag = strip_draft_marks(token)
            out.append(f"</span>{tag}{open_tag}" if inside else tag)
        else:
            out.append(token)
    if inside:
        out.append("</span>")
    return "".join(out).replace(f"{open_tag}</span>", "")


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


def keep_line_breaks(markdown: str) -> str:
    """Join each line of prose to the next one with a line separator (U+2028) where Markdown would
    have joined them with a space, so the break shows.

    Only where the next line continues the paragraph: a line that starts a block (a list item, a
    heading, a quote, a rule or setext underline, a fence, HTML, indented code) or a table row stays on
    its own line for the Markdown reader, and a blank line still ends a paragraph. The separator, and
    not a hard break (two trailing spaces), because Qt's reader makes a hard break a new paragraph,
    spaced as one, and in a list a new bullet; a line separator stays inside its paragraph.
    """
    lines = markdown.split("\n")
    out: list[str] = []
    for line in lines:
        previous = out[-1] if out else ""
        if (out and previous.strip() and line.strip() and not _STARTS_BLOCK.match(line)
                and not _ENDS_BLOCK.match(previous) and "|" not in line and "|" not in previous
                and not previous.endswith(("  ", "\\"))):
            out[-1] = previous + LINE_SEPARATOR + line.lstrip()
        else:
            out.append(line)
    return "\n".join(out)


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
    drafted: str = "#1a7f37"  # text from accepted draft tokens, when that is switched on
    dark: bool = False  # the palette is dark: code is coloured in a dark Pygments style


LIGHT_CODE_STYLE = "default"
DARK_CODE_STYLE = "github-dark"


@lru_cache(maxsize=64)
def _lexer(language: str) -> Lexer | None:
    try:
        return get_lexer_by_name(language, stripnl=False, ensurenl=False)
    except ClassNotFound:
        return None


@lru_cache(maxsize=2)
def _formatter(style: str) -> HtmlFormatter:
    return HtmlFormatter(style=style, nowrap=True, noclasses=True)


def highlight_code(code: str, language: str, *, dark: bool) -> str | None:
    """``code`` as HTML coloured for ``language``; None when Pygments does not know the language."""
    lexer = _lexer(language.lower()) if language else None
    if lexer is None:
        return None
    formatter = _formatter(DARK_CODE_STYLE if dark else LIGHT_CODE_STYLE)
    return str(highlight(code, lexer, formatter)).rstrip("\n")


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
            parts.append(markdown_to_html(keep_line_breaks(segment.text)))
            continue
        index = len(code_blocks)
        code_blocks.append(strip_draft_marks(segment.text))
        label = html.escape(segment.language or "code")
        coloured = None if DRAFT_OPEN in segment.text else highlight_code(
            segment.text, segment.language, dark=colors.dark
        )
        body = (coloured if coloured is not None else html.escape(segment.text)) or "&nbsp;"
        parts.append(
            f'<table width="100%" cellspacing="0" cellpadding="6" '
            f'style="margin-top:4px; margin-bottom:4px; border-collapse:collapse; '
            f'border: 1px solid {colors.code_border};" bgcolor="{colors.code_background}">'
            f'<tr><td><span style="color:{colors.muted};">{label}</span></td>'
            f'<td align="right"><a href="copy:{index}" style="color:{colors.link};">Copy</a></td></tr>'
            f'<tr><td colspan="2"><pre style="font-family: monospace; margin:0; white-space: pre-wrap;">'
            f"{body}</pre></td></tr>"
            f"</table>"
        )
    joined = "\n".join(parts)
    if DRAFT_OPEN in markdown:
        joined = paint_drafted(joined, colors.drafted)
    return joined
