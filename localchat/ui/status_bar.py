"""The speculation status bar: what is loaded, how fast it runs, and a one-click speculation toggle.

Token batches arrive up to ~30 times a second; the labels are redrawn from the
newest batch by a 200 ms timer instead, so the bar refreshes five times a
second while generating whatever the batch rate is, and never more.

The bar never makes the window wider: its labels elide (ui.elided) and, when
the window is narrow, the least needed ones are hidden (``HIDE_FIRST``), so
the model's name and the toggle stay in view. A short-lived message ("Code
copied") has its own label instead of QStatusBar's message, which would hide
them.

A reply that uses tools is written in rounds, each its own engine job: the
figures are the round's, the last-reply label names the round ("Round 2:
…"), and the tool label says what the tools are doing ("Running add (calc)…").
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QResizeEvent
from PySide6.QtWidgets import QLabel, QStatusBar, QWidget

from localchat.engine.stats import GenerationStats
from localchat.engine.types import EngineInfo, FinishReason, GenerationResult, SpeculationState, TokenEvent
from localchat.host.events import EngineState, Finished, JobEvent, Phase, Tokens
from localchat.host.sources import Surface, surface_of
from localchat.services.qt_signals import emit
from localchat.ui import formatting
from localchat.ui.elided import ElidedLabel, ElidedToolButton

log = logging.getLogger(__name__)

REFRESH_MS = 200
MEMORY_EVERY = 5  # refreshes between memory probes (once a second)
SPECULATION_WIDTH = 340  # pixels; longer texts are shortened and shown whole in the tooltip
TARGET_WIDTH = 300
FLASH_MS = 2000
TOGGLE_TIP = "Click to turn speculative decoding on or off for the next reply"
# Hidden in this order when the bar is narrower than what its labels ask for.
HIDE_FIRST = ("last_reply", "memory", "backend", "context", "acceptance_rate", "acceptance_length", "rate")


class SpeculationStatusBar(QStatusBar):
    """Target, drafter, backend, live tokens/s, acceptance, context, engine memory, last reply."""

    speculation_toggled = Signal(bool)  # the user's choice for the next reply

    def __init__(
        self, memory_probe: Callable[[], int | None] | None = None, parent: QWidget | None = None
    ) -> None:
        super().__init__(parent)
        self.setObjectName("status_bar")
        self._memory_probe = memory_probe
        self._speculation_enabled = True
        self._speculation: SpeculationState | None = None
        self._info: EngineInfo | None = None
        self._stats: GenerationStats | None = None
        self._generating = False
        self._refreshes = 0
        self._memory: int | None = None
        self._server_url: str | None = None
        self._api_busy = False  # an API request is generating (the figures are its own)
        self._api_surface: Surface | None = None  # the API it came through (OpenAI, Anthropic...)
        self._reading: tuple[int, int, float] | None = None  # the prompt being read, before the reply
        self._round = 0  # the round of the reply being written (0: not a reply with tools yet)

        self._target_name = ""
        self._draft_name = ""
        self._resuming = False  # turned back on by the user; the next reply tries again
        self.target_label = self._label("target", "The model that writes the reply")
        self.target_label.setMaximumWidth(TARGET_WIDTH)
        self.speculation_button = ElidedToolButton(self, SPECULATION_WIDTH)
        self.speculation_button.setObjectName("speculation")
        # A framed, checkable button (pressed in while speculation is on): it looks like what it is.
        self.speculation_button.setAutoRaise(False)
        self.speculation_button.setCheckable(True)
        self.speculation_button.setChecked(True)
        self.speculation_button.setCursor(Qt.CursorShape.PointingHandCursor)
        self.speculation_button.setMaximumWidth(SPECULATION_WIDTH)
        self.speculation_text = ""
        self.speculation_button.setToolTip(TOGGLE_TIP)
        self.backend_label = self._label("backend", "Where the model runs")
        self.flash_label = QLabel(self)
        self.flash_label.setObjectName("flash")
        self.flash_label.hide()
        self.rate_label = self._label("rate", "Tokens per second of the reply being written")
        self.acceptance_length_label = self._label("acceptance_length", formatting.ACCEPTANCE_LENGTH_TIP)
        self.acceptance_rate_label = self._label("acceptance_rate", formatting.ACCEPTANCE_RATE_TIP)
        self.context_label = self._label("context", "Tokens in the context window / its size")
        self.memory_label = self._label("memory", "Memory used by the engine process")
        self.last_reply_label = self._label("last_reply", "Speed of the last finished reply")
        self.server_label = self._label("server", "The local API for other apps (Settings → Server)")
        self.server_label.hide()
        self.tool_label = self._label("tool", "What the tools are doing for this reply")
        self.tool_label.setMaximumWidth(TARGET_WIDTH)
        self.tool_label.hide()
        self._hideable: dict[str, QWidget] = {
            "last_reply": self.last_reply_label,
            "memory": self.memory_label,
            "backend": self.backend_label,
            "context": self.context_label,
            "rate": self.rate_label,
            "acceptance_rate": self.acceptance_rate_label,
            "acceptance_length": self.acceptance_length_label,
        }
        self.compact = False  # some labels are hidden for want of room

        self.addWidget(self.target_label)
        self.addWidget(self.speculation_button)
        self.addWidget(self.backend_label)
        self.addWidget(self.flash_label)
        self.addWidget(self.tool_label)
        self.addPermanentWidget(self.rate_label)
        self.addPermanentWidget(self.acceptance_length_label)
        self.addPermanentWidget(self.acceptance_rate_label)
        self.addPermanentWidget(self.context_label)
        self.addPermanentWidget(self.memory_label)
        self.addPermanentWidget(self.last_reply_label)
        self.addPermanentWidget(self.server_label)

        self.timer = QTimer(self)
        self.timer.setInterval(REFRESH_MS)
        self.flash_timer = QTimer(self)
        self.flash_timer.setSingleShot(True)
        self._connect_signals()
        self.show_no_model()

    def _label(self, name: str, tip: str) -> ElidedLabel:
        label = ElidedLabel(self, tip)
        label.setObjectName(name)
        return label

    def _connect_signals(self) -> None:
        self.speculation_button.clicked.connect(self._on_speculation_button_clicked)
        self.timer.timeout.connect(self._on_timer_timeout)
        self.flash_timer.timeout.connect(self._on_flash_timer_timeout)

    # -- what the window tells the bar ------------------------------------------------

    @property
    def speculation_enabled(self) -> bool:
        return self._speculation_enabled

    def set_speculation_enabled(self, enabled: bool) -> None:
        if enabled and not self._speculation_enabled:
            self._resuming = True
        self._speculation_enabled = enabled
        self._refresh_speculation()

    def flash(self, text: str, timeout_ms: int = FLASH_MS) -> None:
        """Say ``text`` for a moment next to the model's name and the toggle, hiding neither."""
        self.flash_label.setText(text)
        self.flash_label.setVisible(bool(text))
        if text:
            self.flash_timer.start(timeout_ms)
        self._fit()

    def showMessage(self, text: str, timeout: int = 0) -> None:  # type: ignore[override]
        """QStatusBar's message would hide the model's name and the toggle: it is a flash here."""
        self.flash(text, timeout or FLASH_MS)

    def show_state(self, state: EngineState, target_name: str = "", draft_name: str = "") -> None:
        """The engine's state: loading NAME, what is loaded, or nothing (stopped, failed, none)."""
        if state.phase is Phase.LOADING:
            self.show_loading(target_name)
        elif state.ready:
            assert state.info is not None
            self.show_engine_info(state.info, target_name, draft_name)
        elif state.phase is Phase.STOPPED:
            self.engine_stopped()
        else:
            self.show_no_model()

    def show_job_event(self, event: JobEvent, window_source: str = "window") -> None:
        """Any job's event (the window's reply or an API request): the figures of the one running."""
        if event.source == window_source:
            if isinstance(event, Tokens):
                self.show_progress(event.event)
            elif self._generating:
                self.generation_finished(event.result if isinstance(event, Finished) else None)
        elif isinstance(event, Tokens):
            self.show_api_progress(event.event, surface_of(event.source))
        else:
            self.api_finished()

    def show_no_model(self) -> None:
        self._info = None
        self.target_label.setText("No model loaded")
        self.backend_label.setText("")
        self._stats = None
        self._refresh()

    def show_loading(self, name: str) -> None:
        self.target_label.setText(f"Loading {name}…")

    def show_engine_info(self, info: EngineInfo, target_name: str = "", draft_name: str = "") -> None:
        """``target_name`` and ``draft_name`` are the catalog's names (services.ChatSession's)."""
        self._info = info
        self._speculation = info.speculation
        self._resuming = False
        self._target_name = target_name or info.target.name
        self._draft_name = draft_name
        self.target_label.setText(self._target_name)
        self.target_label.set_explanation(f"The model that writes the reply\n{info.target.path}")
        where = "" if info.placement == "local" else f" · target: {info.placement}"
        self.backend_label.setText(info.backend + where)
        self._refresh()

    def set_round(self, number: int) -> None:
        """The reply's round ``number`` (1, 2, …) starts: its own figures from here."""
        if number > 1 and not self._generating:
            self.generation_started()
        self._round = number
        if number > 1:
            self.show_tool_activity(f"Round {number}: the model reads the tools' results")

    def show_tool_activity(self, text: str) -> None:
        """What the tools are doing ("Running add (calc)…"); empty hides it."""
        self.tool_label.setText(text)
        self.tool_label.set_explanation(text or "What the tools are doing for this reply")
        self.tool_label.setVisible(bool(text))
        self._fit()

    def generation_started(self) -> None:
        self._round = 0
        self._generating = True
        self._reading = None
        self._api_busy = False
        self._refresh_server()
        self._stats = None
        self._resuming = False
        self.timer.start()
        self._refresh()

    def show_progress(self, event: TokenEvent) -> None:
        """Keep the newest statistics; the timer draws them."""
        self._stats = event.stats
        self._speculation = event.speculation
        self._reading = event.prompt_progress

    def generation_finished(self, result: GenerationResult | None) -> None:
        self._generating = False
        self.timer.stop()
        if result is not None:
            self._stats = result.stats
            self._speculation = result.speculation
            if self._round > 1 or result.finish_reason is FinishReason.TOOL_CALLS:
                figures = formatting.reply_footer(result.stats)
                self.last_reply_label.setText(f"Round {self._round or 1}: {figures}")
            else:
                self.last_reply_label.setText(formatting.reply_summary(result.stats))
        self._memory = self._probe_memory()
        self._refresh()

    def engine_stopped(self) -> None:
        self._generating = False
        self.timer.stop()
        self._memory = None
        self._refresh()

    def set_server(self, url: str | None) -> None:
        """The local API is on at ``url`` (None: off)."""
        self._server_url = url
        self.server_label.setVisible(url is not None)
        self._refresh_server()

    def show_api_progress(self, event: TokenEvent, surface: Surface | None = None) -> None:
        """An API request is generating: the bar shows its figures, and says whose they are (the API
        ``surface`` it came through)."""
        if self._generating:
            return  # the window's own reply has the bar; the API's waits its turn
        if not self._api_busy or surface is not self._api_surface:
            self._api_busy = True
            self._api_surface = surface
            self.timer.start()
            self._refresh_server()
        self._stats = event.stats
        self._speculation = event.speculation

    def api_finished(self) -> None:
        if not self._api_busy:
            return
        self._api_busy = False
        if not self._generating:
            self.timer.stop()
        self._refresh_server()
        self._refresh()

    def _refresh_server(self) -> None:
        if self._server_url is None:
            return
        port = self._server_url.rsplit(":", 1)[-1]
        api = self._api_surface.title if self._api_surface is not None else "API"
        self.server_label.setText(f"{api} request · :{port}" if self._api_busy else f"API on :{port}")
        whose = f" The figures shown are a request's through the {api} API." if self._api_busy else ""
        self.server_label.set_explanation(
            f"The local API answers at {self._server_url} (OpenAI's and Anthropic's under /v1, Ollama's "
            f"under /api; Settings → Server).{whose}"
        )
        self._fit()

    # -- drawing ----------------------------------------------------------------------

    def _probe_memory(self) -> int | None:
        if self._memory_probe is None:
            return None
        try:
            return self._memory_probe()
        except Exception:  # the engine may be gone between two probes
            log.debug("memory probe failed", exc_info=True)
            return None

    def _drafter_name(self) -> str:
        """The catalog's name for the draft model when the engine drafts with it."""
        state, info = self._speculation, self._info
        draft = info.draft if info is not None else None
        if state is not None and draft is not None and state.drafter == draft.name:
            return self._draft_name
        return ""

    def _refresh_speculation(self) -> None:
        args = (self._speculation, self._speculation_enabled, self._drafter_name(), self._resuming)
        text = formatting.speculation_text(*args)
        self.speculation_button.set_texts(text, formatting.speculation_short(*args))
        state = self._speculation
        why = state.reason if state is not None and state.active and not state.paused else ""
        self.speculation_button.setToolTip("\n".join(t for t in (text, why, TOGGLE_TIP) if t))
        self.speculation_button.setChecked(self._speculation_enabled)
        self.speculation_text = text

    def _refresh(self) -> None:
        stats = self._stats or GenerationStats()
        reading = self._reading if self._generating and not stats.generated_tokens else None
        if reading is not None:
            self.rate_label.setText(formatting.reading_short(reading[0], reading[1]))
        elif stats.generated_tokens:
            self.rate_label.setText(formatting.format_rate(stats.tokens_per_s))
        else:  # nothing written yet: no speed to show, as the acceptance labels say
            self.rate_label.setText("\u2013 tok/s")
        self.acceptance_length_label.setText(
            f"{formatting.ACCEPTANCE_LENGTH} {formatting.format_acceptance_length(stats)}"
        )
        self.acceptance_rate_label.setText(
            f"{formatting.ACCEPTANCE_RATE} {formatting.format_acceptance_rate(stats)}"
        )
        limit = self._info.n_ctx if self._info else 0
        used = stats.prompt_tokens + stats.cached_prompt_tokens + stats.generated_tokens
        self.context_label.setText(formatting.context_text(used, limit))
        self.memory_label.setText(
            f"Engine {formatting.format_bytes(self._memory)}" if self._memory else "Engine –"
        )
        self._refresh_speculation()
        self._fit()

    # -- room -------------------------------------------------------------------------

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self._fit()

    def _fit(self) -> None:
        """Hide the least needed labels while what the bar's widgets ask for exceeds its width."""
        wanted = [self.target_label, self.speculation_button, self.flash_label, *self._hideable.values()]
        if self.tool_label.text():
            wanted.append(self.tool_label)
        if self._server_url is not None:
            wanted.append(self.server_label)
        spacing = 12  # the layout's gaps and the size grip, roughly
        # What the layout will give each: its size hint, within its maximum. Hiding until these fit
        # keeps the figures whole; only the name and the toggle elide, and only in a very narrow window.
        asked = {w: min(w.sizeHint().width(), w.maximumWidth()) + spacing for w in wanted}
        total = sum(asked[w] for w in wanted if w is not self.flash_label or self.flash_label.text())
        room = self.width() - 24
        hidden: set[str] = set()
        for name in HIDE_FIRST:
            if total <= room:
                break
            hidden.add(name)
            total -= asked[self._hideable[name]]
        for name, widget in self._hideable.items():
            widget.setVisible(name not in hidden)
        self.compact = bool(hidden)

    def _on_flash_timer_timeout(self) -> None:
        self.flash_label.clear()
        self.flash_label.hide()
        self._fit()

    def _on_timer_timeout(self) -> None:
        self._refreshes += 1
        if self._refreshes % MEMORY_EVERY == 1:
            self._memory = self._probe_memory()
        self._refresh()

    def _on_speculation_button_clicked(self) -> None:
        self._speculation_enabled = not self._speculation_enabled
        self._resuming = self._speculation_enabled
        log.info("speculation %s for the next reply", "on" if self._speculation_enabled else "off")
        self._refresh_speculation()
        emit(self.speculation_toggled, self._speculation_enabled)
