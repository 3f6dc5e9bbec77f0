"""The speculation status bar: what is loaded, how fast it runs, and a one-click speculation toggle.

Token batches arrive up to ~30 times a second; the labels are redrawn from the
newest batch by a 200 ms timer instead, so the bar refreshes five times a
second while generating whatever the batch rate is, and never more.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtWidgets import QLabel, QStatusBar, QToolButton, QWidget

from localchat.engine.stats import GenerationStats
from localchat.engine.types import EngineInfo, GenerationResult, SpeculationState, TokenEvent
from localchat.services.qt_signals import emit
from localchat.ui import formatting

log = logging.getLogger(__name__)

REFRESH_MS = 200
MEMORY_EVERY = 5  # refreshes between memory probes (once a second)
SPECULATION_WIDTH = 340  # pixels; longer reasons are elided and shown whole in the tooltip


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

        self.target_label = self._label("target", "The model that writes the reply")
        self.target_label.setMaximumWidth(260)
        self.speculation_button = QToolButton(self)
        self.speculation_button.setObjectName("speculation")
        self.speculation_button.setAutoRaise(True)
        self.speculation_button.setMaximumWidth(SPECULATION_WIDTH)
        self.speculation_text = ""
        self.speculation_button.setToolTip("Click to turn speculative decoding on or off for the next reply")
        self.backend_label = self._label("backend", "Where the model runs")
        self.rate_label = self._label("rate", "Tokens per second of the reply being written")
        self.acceptance_length_label = self._label(
            "acceptance_length", "Tokens per target pass (1.0 means drafting did not help)"
        )
        self.acceptance_rate_label = self._label("acceptance_rate", "Share of draft tokens the target kept")
        self.context_label = self._label("context", "Tokens in the context window / its size")
        self.memory_label = self._label("memory", "Memory used by the engine process")
        self.last_reply_label = self._label("last_reply", "Speed of the last finished reply")
        self.server_label = self._label("server", "The local API for other apps (Settings → Server)")
        self.server_label.hide()

        self.addWidget(self.target_label)
        self.addWidget(self.speculation_button)
        self.addWidget(self.backend_label)
        self.addPermanentWidget(self.rate_label)
        self.addPermanentWidget(self.acceptance_length_label)
        self.addPermanentWidget(self.acceptance_rate_label)
        self.addPermanentWidget(self.context_label)
        self.addPermanentWidget(self.memory_label)
        self.addPermanentWidget(self.last_reply_label)
        self.addPermanentWidget(self.server_label)

        self.timer = QTimer(self)
        self.timer.setInterval(REFRESH_MS)
        self._connect_signals()
        self.show_no_model()

    def _label(self, name: str, tip: str) -> QLabel:
        label = QLabel(self)
        label.setObjectName(name)
        label.setToolTip(tip)
        return label

    def _connect_signals(self) -> None:
        self.speculation_button.clicked.connect(self._on_speculation_button_clicked)
        self.timer.timeout.connect(self._on_timer_timeout)

    # -- what the window tells the bar ------------------------------------------------

    @property
    def speculation_enabled(self) -> bool:
        return self._speculation_enabled

    def set_speculation_enabled(self, enabled: bool) -> None:
        self._speculation_enabled = enabled
        self._refresh_speculation()

    def show_no_model(self) -> None:
        self._info = None
        self.target_label.setText("No model loaded")
        self.backend_label.setText("")
        self._stats = None
        self._refresh()

    def show_loading(self, name: str) -> None:
        self.target_label.setText(f"Loading {name}…")

    def show_engine_info(self, info: EngineInfo) -> None:
        self._info = info
        self._speculation = info.speculation
        self.target_label.setText(info.target.name)
        self.target_label.setToolTip(info.target.path)
        where = "" if info.placement == "local" else f" · target: {info.placement}"
        self.backend_label.setText(info.backend + where)
        self._refresh()

    def generation_started(self) -> None:
        self._generating = True
        self._api_busy = False
        self._refresh_server()
        self._stats = None
        self.timer.start()
        self._refresh()

    def show_progress(self, event: TokenEvent) -> None:
        """Keep the newest statistics; the timer draws them."""
        self._stats = event.stats
        self._speculation = event.speculation

    def generation_finished(self, result: GenerationResult | None) -> None:
        self._generating = False
        self.timer.stop()
        if result is not None:
            self._stats = result.stats
            self._speculation = result.speculation
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

    def show_api_progress(self, event: TokenEvent) -> None:
        """An API request is generating: the bar shows its figures, and says whose they are."""
        if self._generating:
            return  # the window's own reply has the bar; the API's waits its turn
        if not self._api_busy:
            self._api_busy = True
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
        self.server_label.setText(f"API request · :{port}" if self._api_busy else f"API on :{port}")
        self.server_label.setToolTip(
            f"The local API answers at {self._server_url}/v1 (Settings → Server)."
            + (" The figures shown are an API request's." if self._api_busy else "")
        )

    # -- drawing ----------------------------------------------------------------------

    def _probe_memory(self) -> int | None:
        if self._memory_probe is None:
            return None
        try:
            return self._memory_probe()
        except Exception:  # the engine may be gone between two probes
            log.debug("memory probe failed", exc_info=True)
            return None

    def _refresh_speculation(self) -> None:
        # The reason can be long ("paused: 0.83x at acceptance 0.27; retrying in 128 tokens");
        # the field is elided so the bar never pushes the window wider than the screen.
        text = formatting.speculation_text(self._speculation, self._speculation_enabled)
        metrics = self.speculation_button.fontMetrics()
        shown = metrics.elidedText(text, Qt.TextElideMode.ElideRight, SPECULATION_WIDTH - 16)
        self.speculation_button.setText(shown)
        self.speculation_button.setToolTip(
            f"{text}\nClick to turn speculative decoding on or off for the next reply"
        )
        self.speculation_text = text

    def _refresh(self) -> None:
        stats = self._stats or GenerationStats()
        self.rate_label.setText(formatting.format_rate(stats.tokens_per_s))
        self.acceptance_length_label.setText(f"Accept. length {formatting.format_acceptance_length(stats)}")
        self.acceptance_rate_label.setText(f"Accepted {formatting.format_acceptance_rate(stats)}")
        limit = self._info.n_ctx if self._info else 0
        used = stats.prompt_tokens + stats.cached_prompt_tokens + stats.generated_tokens
        self.context_label.setText(formatting.context_text(used, limit))
        self.memory_label.setText(
            f"Engine {formatting.format_bytes(self._memory)}" if self._memory else "Engine –"
        )
        self._refresh_speculation()

    def _on_timer_timeout(self) -> None:
        self._refreshes += 1
        if self._refreshes % MEMORY_EVERY == 1:
            self._memory = self._probe_memory()
        self._refresh()

    def _on_speculation_button_clicked(self) -> None:
        self._speculation_enabled = not self._speculation_enabled
        log.info("speculation %s for the next reply", "on" if self._speculation_enabled else "off")
        self._refresh_speculation()
        emit(self.speculation_toggled, self._speculation_enabled)
