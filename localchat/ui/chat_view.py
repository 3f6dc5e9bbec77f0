"""The conversation: messages rendered from Markdown, a streaming reply, copy links on code.

One QTextBrowser holds the whole conversation. Finished messages are converted
once and cached; while a reply streams only its own HTML is rebuilt, and the
document is redrawn at most ten times a second.

Each message's header carries "Copy" and "Delete" links (and "Edit" on the user's) (a QTextDocument holds
no buttons), and a right-click on a message offers the same in a menu: the
header is a named anchor, so the click's document position finds its message.
A reply that was regenerated shows "‹ 2/3 ›" there, to switch between the
answers kept. The view only asks: deleting and switching are the window's and
the session's business.

A reply that used tools shows its rounds above its answer, each call a folded
block, and a thinking model's thinking folds the same way (ui/tool_blocks.py);
while a reply is written, its rounds so far and the calls being asked about or
run are shown as they change (``set_live_tools``).

The view follows the newest text (a streaming reply, its reading progress) until
the user scrolls up; then a "Jump to newest" button floats over its foot, and
clicking it (or scrolling back to the end) follows again. A message added (the
user's own) always brings the end into view. Following is a state, not a look
at the scroll bar when text arrives: QTextDocument lays a long document out
lazily, a slice at a time after ``setHtml``, so the scroll bar's end keeps
moving for a while, and QTextEdit's first show scrolls to its text cursor (the
start): a chat loaded before the window appeared was shown from its top, with
the new message and the reply out of sight.
"""

from __future__ import annotations

import html
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field

from PySide6.QtCore import QEvent, QPoint, Qt, QTimer, QUrl, Signal
from PySide6.QtGui import (
    QContextMenuEvent,
    QDesktopServices,
    QGuiApplication,
    QPalette,
    QResizeEvent,
    QShowEvent,
)
from PySide6.QtWidgets import QMenu, QTextBrowser, QToolButton, QWidget

from localchat.chat.rounds import ReplyTools
from localchat.engine.textruns import concat_runs, flags_from_runs
from localchat.services.qt_signals import emit
from localchat.services.shown import ShownMessage
from localchat.ui import formatting
from localchat.ui.markdown_render import Colors, mark_drafted, render_message
from localchat.ui.tool_blocks import thinking_block, tools_html

log = logging.getLogger(__name__)

REDRAW_MS = 100
AT_END_PX = 4  # this close to the scroll bar's end counts as at the end


@dataclass(frozen=True)
class DisplayMessage:
    role: str  # "user" | "assistant" | "notice"
    content: str
    footer: str = ""  # e.g. the reply's speed, or why it stopped
    drafted: tuple[int, ...] = ()  # which characters came from accepted drafts (engine.textruns)
    label: str = ""  # who wrote a reply: the model's name ("" shows "Assistant")
    message_id: int | None = None  # the stored row; None for a notice or a reply the store did not keep
    variant: tuple[int, int] = (1, 1)  # a reply: which of the answers to its message, of how many
    tools: ReplyTools = field(default_factory=ReplyTools)  # a reply's tool rounds before its answer
    reasoning: str = ""  # a reply's thinking before its answer


def display_message(message: ShownMessage) -> DisplayMessage:
    """A stored message as the view shows it, with its footer (a reply cut short says so)."""
    footer = formatting.ended_footer(message.stats, message.finish_reason)
    if message.role == "assistant" and not message.complete and message.stats is None:
        footer = "Interrupted."
    return DisplayMessage(message.role, message.content, footer, message.drafted_runs, message.model,
                          message.id, message.variant, message.tools, message.reasoning)


def palette_colors(palette: QPalette) -> Colors:
    base = palette.color(QPalette.ColorRole.Base)
    text = palette.color(QPalette.ColorRole.Text)
    dark = base.lightness() < 128
    code_bg = base.lighter(135) if dark else base.darker(106)
    user_bg = base.lighter(120) if dark else base.darker(103)
    muted = palette.color(QPalette.ColorRole.PlaceholderText)
    return Colors(
        text=text.name(),
        muted=muted.name(),
        code_background=code_bg.name(),
        code_border=code_bg.darker(120).name() if not dark else code_bg.lighter(130).name(),
        link=palette.color(QPalette.ColorRole.Link).name(),
        user_background=user_bg.name(),
        drafted="#7ee787" if dark else "#1a7f37",
        dark=dark,
    )


class ChatView(QTextBrowser):
    """Read-only view of one conversation."""

    code_copied = Signal(str)
    message_copied = Signal(str)  # the whole text of one message, now on the clipboard
    delete_requested = Signal(int)  # the stored id of the message the user wants deleted
    edit_requested = Signal(int)  # the stored id of one of the user's messages to edit and send again
    variant_requested = Signal(int, int)  # a reply's id, and -1 (the answer before) or +1 (after)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("chat_view")
        self.setOpenLinks(False)
        self.setOpenExternalLinks(False)
        self._messages: list[DisplayMessage] = []
        self._cache: dict[int, tuple[DisplayMessage, str, list[str]]] = {}
        self._streaming: str | None = None
        self._streaming_runs: tuple[int, ...] = ()
        self._streaming_label = ""
        self._colour_drafted = False
        self._code_blocks: list[str] = []
        self._starts: list[tuple[int, int]] = []  # (document position, message index) of each header
        self._colors = palette_colors(self.palette())
        self._redraw_timer = QTimer(self)
        self._redraw_timer.setSingleShot(True)
        self._redraw_timer.setInterval(REDRAW_MS)
        self._placeholder = ""
        self._reading = ""  # shown in the streaming reply until its first text arrives
        self._live_tools = ReplyTools()  # the streaming reply's tool rounds so far
        self._live_reasoning = ""
        self.expanded: set[str] = set()  # the folds that are open ("<message id>:<round>:<call>")
        self._follow = True  # keep the newest text in view (until the user scrolls up)
        self._hold: int | None = None  # where a reader who scrolled up stays while the layout grows
        self._quiet = 0  # > 0 while the view itself moves the scroll bar (not the user)
        self.jump_button = QToolButton(self)
        self.jump_button.setObjectName("jump_newest")
        self.jump_button.setText("\u2193 Jump to newest")
        self.jump_button.setToolTip("Scroll to the newest message and follow the reply")
        self.jump_button.setCursor(Qt.CursorShape.PointingHandCursor)
        self.jump_button.setAutoRaise(False)
        self.jump_button.hide()
        self._connect_signals()

    def _connect_signals(self) -> None:
        self.anchorClicked.connect(self._on_chat_view_anchor_clicked)
        self._redraw_timer.timeout.connect(self._on_redraw_timer_timeout)
        bar = self.verticalScrollBar()
        bar.valueChanged.connect(self._on_scroll_value_changed)
        bar.rangeChanged.connect(self._on_scroll_range_changed)
        self.jump_button.clicked.connect(self.follow_newest)

    # -- content ----------------------------------------------------------------------

    @property
    def code_blocks(self) -> list[str]:
        return list(self._code_blocks)

    @property
    def streaming_text(self) -> str | None:
        return self._streaming

    @property
    def colour_drafted(self) -> bool:
        return self._colour_drafted

    def set_colour_drafted(self, on: bool) -> None:
        """Show text from accepted draft tokens in the draft colour (off by default)."""
        if on != self._colour_drafted:
            self._colour_drafted = on
            self._cache.clear()
            self.redraw()

    @property
    def streaming_runs(self) -> tuple[int, ...]:
        return self._streaming_runs

    def set_placeholder(self, text: str) -> None:
        self._placeholder = text
        self.redraw()

    def set_messages(self, messages: Sequence[DisplayMessage]) -> None:
        self._messages = list(messages)
        # Entries are checked against their message, so the same chat shown again (after a reply,
        # a delete or a switch of answers) is converted again only where it changed.
        for index in [i for i in self._cache if i >= len(self._messages)]:
            del self._cache[index]
        self._streaming = None
        self._follow = True  # a chat opens at its newest message
        self.redraw()

    def add_message(self, message: DisplayMessage) -> None:
        """Add a finished message (the user's own, just sent): it always scrolls into view."""
        self._messages.append(message)
        self._follow = True
        self.redraw()

    def set_reading(self, text: str) -> None:
        """What the reply's place says while the prompt is read (before any text)."""
        self._reading = text
        if self._streaming == "" and not self._redraw_timer.isActive():
            self._redraw_timer.start()

    def begin_reply(self, label: str = "") -> None:
        self._reading = ""
        self._streaming = ""
        self._streaming_runs = ()
        self._streaming_label = label
        self._live_tools = ReplyTools()
        self._live_reasoning = ""
        self.expanded = {k for k in self.expanded if not k.startswith("live:")}
        self._follow = True  # a reply starts where the user just sent (or asked for it again)
        self.redraw()

    @property
    def live_tools(self) -> ReplyTools:
        return self._live_tools

    def set_live_tools(self, tools: ReplyTools) -> None:
        """The streaming reply's rounds as they stand; a round that just ended takes the text so far."""
        if self._streaming is None:
            return
        if len(tools.rounds) > len(self._live_tools.rounds):
            self._streaming, self._streaming_runs, self._live_reasoning = "", (), ""
        self._live_tools = tools
        self.redraw()

    def append_reasoning(self, text: str) -> None:
        """Thinking streamed before the reply's text (shown folded)."""
        if self._streaming is None or not text:
            return
        self._live_reasoning += text
        if not self._redraw_timer.isActive():
            self._redraw_timer.start()

    def append_reply(self, text: str, drafted: tuple[int, ...] = ()) -> None:
        """Add streamed text; ``drafted`` marks which of its characters came from accepted drafts."""
        if self._streaming is None:
            self.begin_reply()
        runs = drafted if sum(drafted) == len(text) else ()
        self._streaming_runs = concat_runs(self._streaming_runs, runs or ((len(text),) if text else ()))
        self._streaming = (self._streaming or "") + text
        if not self._redraw_timer.isActive():
            self._redraw_timer.start()

    def end_reply(
        self, footer: str = "", text: str | None = None, drafted: tuple[int, ...] = (),
        message_id: int | None = None, variant: tuple[int, int] = (1, 1),
        tools: ReplyTools | None = None, reasoning: str | None = None,
    ) -> str:
        """Turn the streaming reply into a finished message and return its text.

        ``text`` and ``drafted`` replace what streamed in when the engine's final word differs;
        ``message_id`` and ``variant`` are the stored reply's (delete, copy, switch between answers).
        """
        runs = self._streaming_runs
        if text is None:
            text = self._streaming or ""
        else:
            runs = drafted
        if sum(runs) != len(text):
            runs = ()
        tools = self._live_tools if tools is None else tools
        reasoning = self._live_reasoning if reasoning is None else reasoning
        self._streaming = None
        self._streaming_runs = ()
        self._live_tools, self._live_reasoning = ReplyTools(), ""
        self._redraw_timer.stop()
        if message_id is not None:  # the folds opened while it was written stay open
            self.expanded |= {k.replace("live:", f"{message_id}:", 1) for k in self.expanded
                              if k.startswith("live:")}
        if text or footer or tools:
            self._messages.append(DisplayMessage("assistant", text, footer, runs, self._streaming_label,
                                                 message_id, variant, tools, reasoning))
        self.redraw()  # at the end only for a reader who followed it
        return text

    # -- drawing ----------------------------------------------------------------------

    def _message_html(self, index: int, message: DisplayMessage) -> str:
        cached = self._cache.get(index)
        if cached is not None and cached[0] == message:
            self._code_blocks.extend(cached[2])
            return cached[1]
        blocks: list[str] = []
        html_text = self._render(message, blocks, index=index)
        self._cache[index] = (message, html_text, blocks)
        self._code_blocks.extend(blocks)
        return html_text

    def _render(
        self, message: DisplayMessage, blocks: list[str], label: str = "", index: int | None = None
    ) -> str:
        c = self._colors
        if message.role == "notice":
            return f'<p style="color:{c.muted};"><i>{html.escape(message.content)}</i></p>'
        who = "You" if message.role == "user" else (label or message.label or "Assistant")
        content = message.content
        if self._colour_drafted and message.role == "assistant" and any(message.drafted[1::2]):
            content = mark_drafted(content, flags_from_runs(message.drafted))
        body = render_message(content, c, blocks, plain=message.role == "user") if content.strip() else ""
        if message.role == "assistant":
            body = self._tools_html(message, blocks, index) + body
        footer = (
            f'<p style="color:{c.muted}; font-size:small;">{html.escape(message.footer)}</p>'
            if message.footer
            else ""
        )
        name = f"<b>{html.escape(who)}</b>"
        actions = ""
        if index is not None:
            # Named so a right-click finds its message; links because a QTextDocument holds no buttons.
            name = f'<a name="msg-{index}">{name}</a>'
            link = f'style="color:{c.muted}; text-decoration:none; font-size:small;"'
            actions = f'&nbsp;&nbsp;&nbsp;<a href="msgcopy:{index}" {link}>Copy</a>'
            if message.message_id is not None and message.role == "user":
                actions += f'&nbsp;&nbsp;<a href="msgedit:{message.message_id}" {link}>Edit</a>'
            if message.message_id is not None:
                actions += f'&nbsp;&nbsp;<a href="msgdelete:{message.message_id}" {link}>Delete</a>'
            if message.message_id is not None and message.variant[1] > 1:
                actions = self._switcher(message.message_id, message.variant) + actions
        head = f'<p style="margin-top:14px; margin-bottom:2px;">{name}{actions}</p>'
        if message.role == "user":
            return (
                f'{head}<table width="100%" cellpadding="8" cellspacing="0" '
                f'bgcolor="{c.user_background}"><tr><td>{body}</td></tr></table>{footer}'
            )
        return f"{head}{body}{footer}"

    def _tools_html(self, message: DisplayMessage, blocks: list[str], index: int | None) -> str:
        """The reply's thinking and tool rounds, folded, above its answer."""
        owner = str(message.message_id) if message.message_id is not None and index is not None else (
            "live" if index is None else f"m{index}")
        parts = []
        if message.tools:
            parts.append(tools_html(message.tools, owner, self.expanded, self._colors, blocks))
        if message.reasoning.strip():
            key = f"{owner}:t"
            parts.append(thinking_block(message.reasoning, key, key in self.expanded, self._colors))
        return "".join(parts)

    def _switcher(self, message_id: int, variant: tuple[int, int]) -> str:
        """"‹ 2/3 ›" after a reply's name: the earlier and later answers regenerate kept."""
        c = self._colors
        index, count = variant
        style = f'style="color:{c.link}; text-decoration:none; font-weight:bold;"'
        dim = f'<span style="color:{c.muted};">'
        before = f"{dim}&lsaquo;</span>"
        after = f"{dim}&rsaquo;</span>"
        if index > 1:
            before = f'<a href="variant:{message_id}:-1" {style}>&lsaquo;</a>'
        if index < count:
            after = f'<a href="variant:{message_id}:1" {style}>&rsaquo;</a>'
        # The first and last answers grey out the way that leads nowhere.
        return f"&nbsp;&nbsp;&nbsp;{before}&nbsp;{dim}{index}/{count}</span>&nbsp;{after}"

    def redraw(self) -> None:
        self._code_blocks = []
        parts = [self._message_html(i, m) for i, m in enumerate(self._messages)]
        if self._streaming is not None:
            waiting = not self._live_tools and not self._live_reasoning
            shown = self._streaming or (f"*{self._reading}…*" if self._reading else "…" if waiting else "")
            runs = self._streaming_runs if self._streaming else ()
            live = DisplayMessage("assistant", shown, drafted=runs, tools=self._live_tools,
                                  reasoning=self._live_reasoning)
            parts.append(self._render(live, self._code_blocks, self._streaming_label))
        if not parts and self._placeholder:
            parts.append(
                f'<p align="center" style="color:{self._colors.muted};">{html.escape(self._placeholder)}</p>'
            )
        bar = self.verticalScrollBar()
        scroll = bar.value() if self._hold is None else self._hold
        self._quiet += 1
        try:
            self.setHtml(f'<div style="color:{self._colors.text};">{"".join(parts)}</div>')
        finally:
            self._quiet -= 1
        self._starts = self._message_starts()
        if self._follow:
            self._scroll_to_end()
        else:
            self._hold = scroll  # kept as the lazy layout grows back past it
            self._set_scroll(scroll)
        self._update_jump_button()

    def _message_starts(self) -> list[tuple[int, int]]:
        """Where each message's header begins in the document, from the anchors ``_render`` names."""
        starts: list[tuple[int, int]] = []
        block = self.document().begin()
        while block.isValid():
            it = block.begin()
            while not it.atEnd():
                fragment = it.fragment()
                for name in fragment.charFormat().anchorNames():
                    if name.startswith("msg-") and name[4:].isdigit():
                        starts.append((fragment.position(), int(name[4:])))
                it += 1
            block = block.next()
        return starts

    def message_at(self, pos: QPoint) -> int | None:
        """The index of the message under ``pos`` (viewport coordinates); None above the first."""
        position = self.cursorForPosition(pos).position()
        found: int | None = None
        for start, index in self._starts:
            if start > position:
                break
            found = index
        return found

    @property
    def messages(self) -> list[DisplayMessage]:
        return list(self._messages)

    def copy_message(self, index: int) -> None:
        """Put one whole message on the clipboard, as written (Markdown for a reply)."""
        text = self._messages[index].content
        QGuiApplication.clipboard().setText(text)
        emit(self.message_copied, text)

    def message_menu(self, index: int | None) -> QMenu:
        """The right-click menu: the selection's copy, then the message's own actions."""
        menu = self.createStandardContextMenu()
        if index is None or not 0 <= index < len(self._messages):
            return menu
        message = self._messages[index]
        menu.addSeparator()
        copy = menu.addAction("Copy message")
        copy.setObjectName("copy_message")
        copy.triggered.connect(lambda: self.copy_message(index))
        if message.message_id is not None and message.role == "user":
            edit_id = message.message_id
            edit = menu.addAction("Edit and send again")
            edit.setObjectName("edit_message")
            edit.triggered.connect(lambda: emit(self.edit_requested, edit_id))
        if message.message_id is not None:
            message_id = message.message_id
            delete = menu.addAction("Delete message…" if message.role == "user" else "Delete reply")
            delete.setObjectName("delete_message")
            delete.triggered.connect(lambda: emit(self.delete_requested, message_id))
        return menu

    def contextMenuEvent(self, event: QContextMenuEvent) -> None:
        menu = self.message_menu(self.message_at(event.pos()))
        menu.exec(event.globalPos())
        menu.deleteLater()

    # -- following the newest text ----------------------------------------------------

    @property
    def following(self) -> bool:
        """Whether the view keeps the newest text in view (False once the user scrolled up)."""
        return self._follow

    def follow_newest(self) -> None:
        """Scroll to the end and follow what arrives (the "Jump to newest" button)."""
        self._follow = True
        self._scroll_to_end()
        self._update_jump_button()

    def _at_end(self) -> bool:
        bar = self.verticalScrollBar()
        return bar.value() >= bar.maximum() - AT_END_PX

    def _scroll_to_end(self) -> None:
        self._hold = None
        self._set_scroll(self.verticalScrollBar().maximum())

    def _set_scroll(self, value: int) -> None:
        self._quiet += 1
        try:
            self.verticalScrollBar().setValue(value)
        finally:
            self._quiet -= 1

    def _on_scroll_value_changed(self, _value: int) -> None:
        if self._quiet:
            return
        # The user moved it (wheel, keys, the bar): follow again only at the end.
        self._hold = None
        self._follow = self._at_end()
        self._update_jump_button()

    def _on_scroll_range_changed(self, _minimum: int, maximum: int) -> None:
        # The document grew (a lazy layout step, new text) or the view was resized.
        if self._follow:
            self._set_scroll(maximum)
        elif self._hold is not None and self.verticalScrollBar().value() < self._hold:
            self._set_scroll(min(self._hold, maximum))
        self._update_jump_button()

    def _update_jump_button(self) -> None:
        show = not self._follow and not self._at_end()
        if show:
            self._place_jump_button()
            self.jump_button.raise_()
        self.jump_button.setVisible(show)

    def _place_jump_button(self) -> None:
        button = self.jump_button
        button.adjustSize()
        area = self.viewport().geometry()
        button.move(area.x() + (area.width() - button.width()) // 2,
                    area.y() + area.height() - button.height() - 12)

    def showEvent(self, event: QShowEvent) -> None:
        # QTextEdit's first show scrolls its text cursor (at the start) into view: a chat loaded before
        # the window appeared (the last chat, at start-up) was shown from its top, the new message and
        # the reply far below. The view keeps its own place instead.
        self._quiet += 1
        try:
            super().showEvent(event)
        finally:
            self._quiet -= 1
        if self._follow:
            self._scroll_to_end()
        elif self._hold is not None:
            self._set_scroll(self._hold)
        self._update_jump_button()

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self._place_jump_button()

    def changeEvent(self, event: QEvent) -> None:
        if event.type() == QEvent.Type.PaletteChange:
            self._colors = palette_colors(self.palette())
            self._cache.clear()
            self.redraw()
        super().changeEvent(event)

    # -- slots ------------------------------------------------------------------------

    def _on_redraw_timer_timeout(self) -> None:
        self.redraw()

    def _on_chat_view_anchor_clicked(self, url: QUrl) -> None:
        if url.scheme() == "copy":
            try:
                code = self._code_blocks[int(url.path())]
            except (ValueError, IndexError):
                log.warning("unknown code block link %s", url.toString())
                return
            QGuiApplication.clipboard().setText(code)
            emit(self.code_copied, code)
        elif url.scheme() == "msgcopy" and url.path().isdigit() and int(url.path()) < len(self._messages):
            self.copy_message(int(url.path()))
        elif url.scheme() == "msgedit" and url.path().isdigit():
            emit(self.edit_requested, int(url.path()))
        elif url.scheme() == "msgdelete" and url.path().isdigit():
            emit(self.delete_requested, int(url.path()))
        elif url.scheme() == "variant":
            message_id, _, step = url.path().partition(":")
            if message_id.isdigit() and step in ("-1", "1"):
                emit(self.variant_requested, int(message_id), int(step))
        elif url.scheme() == "fold":
            self.toggle_fold(url.path())
        elif url.scheme() in ("http", "https"):
            QDesktopServices.openUrl(url)

    def toggle_fold(self, key: str) -> None:
        """Open or close one folded block (a tool call, a thinking block)."""
        self.expanded ^= {key}
        self._cache.clear()
        # The reader stays at the fold (at the end, the view goes on following).
        self._follow = self._at_end()
        self.redraw()
