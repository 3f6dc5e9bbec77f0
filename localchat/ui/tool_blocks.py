"""A reply's tool calls and thinking as folded blocks in the chat (HTML for the QTextBrowser).

Each call is one shaded block: a header line that folds and unfolds it (the tool, its server, how
long it took, what became of it) and, unfolded, its arguments and its result as the model read them
(the result shown up to ``SHOWN_CHARS``). A call's sentence (an error, a time-out, a result cut short,
a refusal) is shown under its header folded or not: every fault is said in the chat. The model's
thinking folds the same way ("Thinking, 120 words"). A QTextDocument holds no widgets, so the fold is
a link (``fold:<key>``) and the view keeps which keys are open.
"""

from __future__ import annotations

import html
from collections.abc import Container

from localchat.chat.rounds import ReplyTools, ToolCallRecord, call_time
from localchat.services.shown import read_stats
from localchat.ui import formatting
from localchat.ui.markdown_render import Colors, render_message

SHOWN_CHARS = 4000

STATUS_WORDS = {
    "done": "", "error": "returned an error", "failed": "failed", "timed_out": "timed out",
    "cancelled": "stopped", "denied": "declined", "not_run": "not run",
    "asking": "waiting for your answer", "waiting": "waiting", "running": "running…",
}


def _fold_link(key: str, open_: bool, label: str, colors: Colors) -> str:
    arrow = "▾" if open_ else "▸"
    return (f'<a href="fold:{html.escape(key)}" style="color:{colors.text}; text-decoration:none;">'
            f"{arrow} {label}</a>")


def _pre(text: str, colors: Colors) -> str:
    shown = text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS]
    more = (f'<br/><span style="color:{colors.muted};">… {len(text) - SHOWN_CHARS:,} more characters</span>'
            if len(text) > SHOWN_CHARS else "")
    return (f'<pre style="font-family: monospace; margin:0; white-space: pre-wrap;">'
            f"{html.escape(shown) or '&nbsp;'}</pre>{more}")


def _box(inner: str, colors: Colors) -> str:
    return (f'<table width="100%" cellspacing="0" cellpadding="6" style="margin-top:4px; margin-bottom:4px; '
            f'border-collapse:collapse; border: 1px solid {colors.code_border};" '
            f'bgcolor="{colors.code_background}"><tr><td>{inner}</td></tr></table>')


def call_block(call: ToolCallRecord, key: str, open_: bool, colors: Colors) -> str:
    words = STATUS_WORDS.get(call.status, call.status)
    facts = [call.server] if call.server else []
    if call.seconds > 0 and call.status not in ("asking", "waiting", "running"):
        facts.append(call_time(call.seconds))
    if words:
        facts.append(words)
    label = f"<b>{html.escape(call.name)}</b>"
    head = _fold_link(key, open_, f"Tool call: {label}", colors)
    if facts:
        head += f' <span style="color:{colors.muted};">· {html.escape(" · ".join(facts))}</span>'
    parts = [head]
    if call.note:
        parts.append(f'<br/><span style="color:{colors.muted};"><i>{html.escape(call.note)}</i></span>')
    if open_:
        label_style = f'style="color:{colors.muted}; font-size:small;"'
        parts.append(f"<p {label_style}>Arguments</p>{_pre(call.arguments or '{}', colors)}")
        if call.status not in ("asking", "waiting", "running"):
            parts.append(f"<p {label_style}>Result</p>{_pre(call.result, colors)}")
    return _box("".join(parts), colors)


def thinking_block(text: str, key: str, open_: bool, colors: Colors) -> str:
    words = len(text.split())
    count = f"{words:,} word{'s' if words != 1 else ''}"
    label = f'Thinking <span style="color:{colors.muted};">· {count}</span>'
    inner = _fold_link(key, open_, label, colors)
    if open_:
        body = html.escape(text.strip()).replace("\n", "<br/>")
        inner += f'<p style="color:{colors.muted};">{body}</p>'
    return _box(inner, colors)


def tools_html(tools: ReplyTools, owner: str, expanded: Container[str], colors: Colors,
               code_blocks: list[str]) -> str:
    """The rounds of one reply (``owner`` keys its folds: its stored id, or "live" while it is written)."""
    parts: list[str] = []
    for r, round_ in enumerate(tools.rounds):
        if round_.reasoning.strip():
            key = f"{owner}:{r}:t"
            parts.append(thinking_block(round_.reasoning, key, key in expanded, colors))
        if round_.text.strip():
            parts.append(render_message(round_.text, colors, code_blocks))
        for c, call in enumerate(round_.calls):
            key = f"{owner}:{r}:{c}"
            parts.append(call_block(call, key, key in expanded, colors))
        stats = read_stats(round_.stats) if round_.stats else None
        if stats is not None and stats.generated_tokens:
            parts.append(f'<p style="color:{colors.muted}; font-size:small;">Round {r + 1}: '
                         f"{html.escape(formatting.reply_footer(stats))}</p>")
    for note in tools.notes:
        parts.append(f'<p style="color:{colors.muted};"><i>{html.escape(note)}</i></p>')
    return "".join(parts)
